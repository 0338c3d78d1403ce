#!/usr/bin/env bash
# bench/compressed.sh BUILD [OLD_BUILD] [MiB] - the cold epoch (source read,
# decompression, cache write) of a gzip-compressed source (shuffle +
# deflate 4, chunks of 1024 samples = the shard size), one rank, 1, 2 and 4
# producers, side by side in one run with: the same file read through
# H5Dread under the HDF5 lock (OLD_BUILD: a build from before chunks were
# decoded outside the lock, e.g. 8e34cf6), the uncompressed file, and h5py
# reading the compressed file whole chunk by whole chunk in one process.
# Samples are 3x64x64 uint8 with little noise (--noise 8: they compress).
set -euo pipefail
build=${1:?usage: bench/compressed.sh BUILD [OLD_BUILD] [MiB]}
old=${2:-} mib=${3:-256}
dir=$(mktemp -d /tmp/sc-compressed.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
n=$(( (mib << 20) / (3 * 64 * 64 + 8) ))
mk() { "$build/bin/shardcache" make-dataset --samples "$n" --shape 3x64x64 --noise 8 --seed 1 "$@" \
    >/dev/null 2>&1; }
mk --out "$dir/raw.h5"
mk --out "$dir/gz.h5" --compress gzip --chunk 1024
cold() { # BUILD FILE PRODUCERS -> samples/s of one cold epoch
    rm -rf "$dir/cache"
    env SC_SOURCE="$2" SC_CACHE_DIR="$dir/cache" SC_SHARD_SIZE=1024 SC_BATCH_SIZE=256 \
        SC_PRODUCERS="$3" SC_LOG=0 mpirun -np 1 "$1/bin/bench_deliver" --epochs 1 --warmup 0 2>&1 |
        sed -n 's/^deliver: .*: \([0-9.]*\) samples\/s.*/\1/p'
}
h5py_chunks() {
    /usr/bin/python3 - "$1" <<'PY'
import sys, time, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    x, y = f["images"], f["labels"]
    n, t = len(y), time.perf_counter()
    order = np.random.default_rng(1).permutation((n + 1023) // 1024)
    for c in order:  # whole chunks, shuffled chunk order
        x[c * 1024:(c + 1) * 1024]; y[c * 1024:(c + 1) * 1024]
    print(f"{n / (time.perf_counter() - t):.0f}")
PY
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
raw=$(du -m "$dir/raw.h5" | cut -f1) gz=$(du -m "$dir/gz.h5" | cut -f1)
echo "\`bench/compressed.sh BUILD OLD_BUILD $mib\` ($n samples of 3x64x64 uint8 + int64 label: $raw MiB raw, $gz MiB gzip; one rank, cold cache, batch 256, shard 1024 = the chunk; median of 3 interleaved rounds; $(nproc) cores online)"
echo
echo "| source, reader | samples/s |"
echo "| --- | ---: |"
declare -A got
for _ in 1 2 3; do
    for p in 1 2 4; do got[new$p]+="$(cold "$build" "$dir/gz.h5" "$p") "; done
    [ -z "$old" ] || for p in 1 2 4; do got[old$p]+="$(cold "$old" "$dir/gz.h5" "$p") "; done
    got[raw]+="$(cold "$build" "$dir/raw.h5" 4) "
    got[h5py]+="$(h5py_chunks "$dir/gz.h5") "
done
for p in 1 2 4; do
    echo "| gzip, shardcache, chunks decoded by the producers, $p producer(s) | $(tr ' ' '\n' <<<"${got[new$p]}" | grep . | median) |"
done
[ -z "$old" ] || for p in 1 2 4; do
    echo "| gzip, shardcache before (H5Dread under the HDF5 lock), $p producer(s) | $(tr ' ' '\n' <<<"${got[old$p]}" | grep . | median) |"
done
echo "| uncompressed, shardcache, 4 producers | $(tr ' ' '\n' <<<"${got[raw]}" | grep . | median) |"
echo "| gzip, h5py whole chunks in shuffled order, one process | $(tr ' ' '\n' <<<"${got[h5py]}" | grep . | median) |"
