#!/usr/bin/env bash
# bench/startup.sh BUILD [COUNTS] - a job's start-up over a layout-B
# directory of many files: open to the first batch (bench_deliver
# --first-batch, 2 ranks), for 10^3, 10^4 and 10^5 files of 4 samples
# (3x16x16 uint8) each, the first job (no manifest: rank 0 opens every
# file with HDF5) against the second (the manifest make-dataset saved:
# rank 0 stats each file), with the files in the page cache and, as root,
# with it dropped; beside them layout A, the same samples in one file.
set -euo pipefail
build=${1:?usage: bench/startup.sh BUILD [COUNTS]}
counts=${2:-1000 10000 100000}
dir=$(mktemp -d /var/tmp/sc-startup.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
drop() { [ "$(id -u)" = 0 ] && sync && echo 3 >/proc/sys/vm/drop_caches; }
first() { # SOURCE -> "open-to-first-batch seconds"
    rm -rf "$dir/cache"
    mpirun -np 2 --oversubscribe env SC_SOURCE="$1" SC_CACHE_DIR="$dir/cache" SC_SHARD_SIZE=4 \
        SC_BATCH_SIZE=64 SC_LOG=0 "$build/bin/bench_deliver" --first-batch |
        sed -n 's/^first batch: \([0-9.]*\) s.*/\1/p'
}
echo "\`bench/startup.sh BUILD\` (2 ranks, open to the first batch, seconds; $(nproc) cores online, local disk)"
echo
echo "| files | first job, page cache warm | second job (manifest), warm | first job, cold | second job, cold | layout A, one file, warm |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
for n in $counts; do
    "$build/bin/shardcache" make-dataset --out "$dir/b$n" --layout B --shard-size 4 \
        --samples $((4 * n)) --shape 3x16x16 >/dev/null 2>&1
    "$build/bin/shardcache" make-dataset --out "$dir/a$n.h5" --samples $((4 * n)) \
        --shape 3x16x16 >/dev/null 2>&1
    mv "$dir/b$n/.shardcache-manifest" "$dir/m$n"
    scan_w=$(first "$dir/b$n")
    mv "$dir/m$n" "$dir/b$n/.shardcache-manifest"
    man_w=$(first "$dir/b$n")
    mv "$dir/b$n/.shardcache-manifest" "$dir/m$n"
    scan_c=- man_c=-
    if drop; then
        scan_c=$(first "$dir/b$n")
        mv "$dir/m$n" "$dir/b$n/.shardcache-manifest"
        drop && man_c=$(first "$dir/b$n")
    fi
    echo "| $n | $scan_w | $man_w | $scan_c | $man_c | $(first "$dir/a$n.h5") |"
    rm -rf "$dir/b$n" "$dir/a$n.h5" "$dir/m$n"
done
