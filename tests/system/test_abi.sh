#!/usr/bin/env bash
# The ABI of libshardcache.so (include/shardcache.h, "ABI"): its soname
# carries the major version, it exports exactly the SC_API functions of the
# public headers, each listed in runtime/shardcache.map and versioned with
# a node of that map, and nothing internal (sc__*) leaks.
. "$(dirname "$0")/lib.sh"
src=${SC_SOURCE_DIR:?}
lib=${SC_BUILD_DIR:?}/lib/libshardcache.so
map=$src/runtime/shardcache.map

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
major=$(sed -n 's/^#define SC_VERSION_MAJOR \([0-9]*\)/\1/p' "$SC_BUILD_DIR/include/shardcache_version.h")
[ "$soname" = "libshardcache.so.$major" ] && pass "soname $soname carries major version $major" \
    || failed "soname is '$soname', wanted libshardcache.so.$major"

exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort)
# Declarations only: no preprocessor lines, no comment lines.
declared=$(cat "$src"/include/shardcache.h "$src"/include/shardcache/*.h |
           grep -Ev '^ *(#|/?\*)' | tr '\n' ' ' | grep -o 'SC_API [^(;]*(' |
           sed 's/ *($//; s/.*[ *]//' | sort)
listed=$(sed -n 's/^ *\(sc_[a-z0-9_]*\);$/\1/p' "$map" | sort)
[ -n "$exported" ] && [ "$exported" = "$declared" ] && pass "exports exactly the SC_API functions ($(wc -w <<<"$exported"))" \
    || { failed "exported and declared differ"; diff <(echo "$exported") <(echo "$declared"); }
[ "$listed" = "$declared" ] && pass "shardcache.map lists every SC_API function" \
    || { failed "shardcache.map and the headers differ"; diff <(echo "$listed") <(echo "$declared"); }
nodes=$(sed -n 's/^\(SHARDCACHE_[0-9.]*\) *{.*/\1/p' "$map" | tr '\n' '|')
unversioned=$(objdump -T "$lib" | awk '$4 == ".text" && $NF ~ /^sc_/' | grep -Evc " (${nodes%|}) ")
[ "$unversioned" = 0 ] && pass "every exported function carries a version node" \
    || failed "$unversioned exported functions have no SHARDCACHE_ version"
leaks=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -c '^sc__')
[ "$leaks" = 0 ] && pass "no internal sc__ symbol is exported" || failed "$leaks sc__ symbols exported"
# An empty RUNPATH element is the current directory: a library planted in a
# shared working directory would run as whoever started the program there
# (CMake's padding for its built-in chrpath made one).
empty=""
for f in "$SC_BUILD_DIR"/bin/* "$SC_BUILD_DIR"/lib/*.so*; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    rp=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]/\1/p')
    [ -n "$rp" ] || continue
    case ":$rp:" in *::*) empty="$empty $(basename "$f")=[$rp]" ;; esac
done
[ -z "$empty" ] && pass "no RUNPATH has an empty element (the current directory)" \
    || failed "empty RUNPATH elements:$empty"
finish
