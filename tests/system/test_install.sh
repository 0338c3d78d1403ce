#!/usr/bin/env bash
# Install shardcache into a fresh prefix and build a consumer against it,
# with find_package() and with pkg-config, linking shared and static.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}" "${SC_SOURCE_DIR:?}"
prefix=$SC_T_TMP/prefix
if cmake --install "$SC_BUILD_DIR" --prefix "$prefix" >"$SC_T_TMP/install.log" 2>&1; then
    pass "cmake --install"
else
    failed "cmake --install"; tail -20 "$SC_T_TMP/install.log"; finish; exit 1
fi
for f in include/shardcache.h include/shardcache_version.h include/shardcache/plan.h \
         include/shardcache/base.h include/shardcache/formats.h bin/shardcache \
         lib/libshardcache.a lib/cmake/shardcache/shardcacheConfig.cmake \
         lib/pkgconfig/shardcache.pc; do
    [ -e "$prefix/$f" ] && pass "installed $f" || failed "missing $prefix/$f"
done
ls "$prefix"/lib/libshardcache.so.* >/dev/null 2>&1 && pass "installed shared library" \
    || failed "no libshardcache.so.* in $prefix/lib"

# CMake package, both ways.
cm=$SC_T_TMP/cmake-consumer
if cmake -S "$SC_SOURCE_DIR/tests/system/consumer" -B "$cm" -DCMAKE_PREFIX_PATH="$prefix" \
       >"$SC_T_TMP/cm.log" 2>&1 && cmake --build "$cm" >>"$SC_T_TMP/cm.log" 2>&1; then
    pass "find_package(shardcache) consumer builds"
else
    failed "find_package consumer"; tail -30 "$SC_T_TMP/cm.log"
fi
# The installed command finds its library with no LD_LIBRARY_PATH (RUNPATH).
expect_ok "installed CLI runs as installed" "^plan check: ok$" \
    env -u LD_LIBRARY_PATH "$prefix/bin/shardcache" plan --shards 50 --ranks 2 --check
# A tool that only plans needs no MPI: the plan header compiles without mpi.h.
cat >"$SC_T_TMP/planner.c" <<'C'
#include <shardcache/plan.h>
int main(void)
{
    uint64_t sizes[4] = {10, 10, 10, 5};
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes, p.nshards = 4, p.world_size = 2;
    sc_plan *plan = NULL;
    int rc = sc_plan_create(&p, NULL, &plan, NULL);
    sc_plan_free(plan);
    return rc != SC_OK;
}
C
expect_ok "plan header without MPI: compiles" "" \
    cc -Wall -Wextra -Werror -I"$prefix/include" -c "$SC_T_TMP/planner.c" -o "$SC_T_TMP/planner.o"
expect_fail "shardcache.h does need MPI (the probe is real)" "mpi.h" \
    cc -I"$prefix/include" -x c -c - -o /dev/null <<<'#include <shardcache.h>'
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
expect_ok "cmake shared consumer runs" "consumer .*: ok, 25 batches" "$cm/consumer_shared"
expect_ok "cmake static consumer runs" "consumer .*: ok, 25 batches" "$cm/consumer_static"
if ldd "$cm/consumer_static" | grep -q libshardcache; then
    failed "static consumer links libshardcache dynamically"
else
    pass "static consumer has shardcache linked in"
fi

# pkg-config, both ways.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
src=$SC_SOURCE_DIR/tests/system/consumer/consumer.c
if cc -o "$SC_T_TMP/pc_shared" "$src" $(pkg-config --cflags --libs shardcache) 2>"$SC_T_TMP/pc.log"; then
    pass "pkg-config shared consumer builds"
else
    failed "pkg-config shared build"; cat "$SC_T_TMP/pc.log"
fi
if cc -o "$SC_T_TMP/pc_static" "$src" $(pkg-config --cflags shardcache) \
       "$prefix/lib/libshardcache.a" $(pkg-config --static --libs shardcache | sed 's/-lshardcache//') \
       2>"$SC_T_TMP/pcs.log"; then
    pass "pkg-config static consumer builds"
else
    failed "pkg-config static build"; cat "$SC_T_TMP/pcs.log"
fi
expect_ok "pkg-config shared consumer runs" "ok, 25 batches" "$SC_T_TMP/pc_shared"
expect_ok "pkg-config static consumer runs" "ok, 25 batches" "$SC_T_TMP/pc_static"
expect_ok "installed consumer under mpirun -np 2" "ok, 12 batches" \
    "$MPIEXEC" -n 2 --oversubscribe "$SC_T_TMP/pc_shared"
expect_ok "installed CLI runs" "^plan check: ok$" "$prefix/bin/shardcache" plan --shards 50 --ranks 2 --check

# A user's plain `cmake` build carries no test hooks (SC_FAULT): only the test presets do.
if cmake -S "$SC_SOURCE_DIR" -B "$SC_T_TMP/plain" -DBUILD_TESTING=OFF >"$SC_T_TMP/plain.log" 2>&1; then
    grep -q '^SC_TESTING:BOOL=OFF$' "$SC_T_TMP/plain/CMakeCache.txt" \
        && pass "a plain configure has no fault hooks" || failed "a plain configure turns SC_TESTING on"
else
    failed "plain configure"; tail -5 "$SC_T_TMP/plain.log"
fi
finish
