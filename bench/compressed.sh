#!/usr/bin/env bash
# bench/compressed.sh BUILD [OLD_BUILD] [MiB] - the cold epoch (source read,
# decompression, cache write) of a gzip-compressed source (shuffle +
# deflate 4, chunks of 1024 samples = the shard size), one rank, 1, 2 and 4
# producers, side by side in one run with: libdeflate's own single-thread
# rate on the same chunks (bench_inflate: the limit per core), h5py reading
# the compressed file whole chunk by whole chunk in one process, the
# uncompressed file, and (OLD_BUILD) the same file read through H5Dread
# under the HDF5 lock by a build from before chunks were decoded outside it
# (e.g. 8e34cf6).  Samples are 3x64x64 uint8, smooth with a noise of 2
# levels (make-dataset --smooth --noise 2): gzip halves them, as it does
# photos' pixels.
set -euo pipefail
build=${1:?usage: bench/compressed.sh BUILD [OLD_BUILD] [MiB]}
old=${2:-} mib=${3:-256}
dir=$(mktemp -d /tmp/sc-compressed.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
n=$(( (mib << 20) / (3 * 64 * 64 + 8) ))
mk() { "$build/bin/shardcache" make-dataset --samples "$n" --shape 3x64x64 --smooth --noise 2 \
    --seed 1 "$@" >/dev/null 2>&1; }
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
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# The median of got[KEY].
med() { median <<<"${got[$1]}"; }
raw=$(du -m "$dir/raw.h5" | cut -f1) gz=$(du -m "$dir/gz.h5" | cut -f1)
cores=$(nproc)
echo "\`bench/compressed.sh BUILD OLD_BUILD $mib\` ($n samples of 3x64x64 uint8, smooth, noise 2, + int64 label: $raw MiB raw, $gz MiB gzip; one rank, cold cache, batch 256, shard 1024 = the chunk; median of 3 interleaved rounds; $cores cores online)"
echo
declare -A got
for _ in 1 2 3; do
    for p in 1 2 4; do got[new$p]+="$(cold "$build" "$dir/gz.h5" "$p") "; done
    [ -z "$old" ] || for p in 1 2 4; do got[old$p]+="$(cold "$old" "$dir/gz.h5" "$p") "; done
    got[raw]+="$(cold "$build" "$dir/raw.h5" 4) "
    got[h5py]+="$(h5py_chunks "$dir/gz.h5") "
    got[limit]+="$("$build/bin/bench_inflate" "$dir/gz.h5" 1 | sed -n 's/^inflate: libdeflate \([0-9]*\) .*/\1/p') "
done
limit=$(med limit) h5py=$(med h5py)
echo "| source, reader | samples/s | against h5py | against producers x the limit |"
echo "| --- | ---: | ---: | ---: |"
for p in 1 2 4; do
    v=$(med new$p) k=$((p < cores ? p : cores))
    echo "| gzip, shardcache, chunks decoded by the producers, $p producer(s) | $v | $(awk -v a="$v" -v b="$h5py" 'BEGIN { printf "%.2f", a / b }') | $(awk -v a="$v" -v b="$limit" -v k="$k" 'BEGIN { printf "%.2f", a / (k * b) }') |"
done
[ -z "$old" ] || for p in 1 2 4; do
    v=$(med old$p)
    echo "| gzip, shardcache before (H5Dread under the HDF5 lock), $p producer(s) | $v | $(awk -v a="$v" -v b="$h5py" 'BEGIN { printf "%.2f", a / b }') | |"
done
echo "| uncompressed, shardcache, 4 producers | $(med raw) | | |"
echo "| gzip, h5py whole chunks in shuffled order, one process | $h5py | 1.00 | |"
echo "| gzip, libdeflate alone on the same chunks, one thread (the limit per core) | $limit | | 1.00 |"
echo
echo "(Against producers x the limit: the producers beyond the $cores cores count as none.)"
