#!/usr/bin/env bash
# bench/small_files.sh BUILD [FILES] [RUNS] - a directory of one sample
# per file (FILES, default 20,000, of one 3x64x64 float32 sample: 48 KiB),
# batch 256, one rank, side by side in one run: layout B with its files
# grouped into shards of 1024 samples (SC_SHARD_SIZE, the default), layout
# B with a shard per file (SC_SHARD_SIZE=1: how layout B ran before
# grouping), and layout A, the same samples in one file cut into shards of
# 1024.  For each: start-up (open to the first batch, bench_deliver
# --first-batch, fresh cache; the directory's manifest saved by
# make-dataset), the first epoch (every file read, the cache written) and
# warm epochs (from the cache), in samples/s.  Each figure is the median of
# RUNS (default 5) runs, the three sources interleaved: on a VM whose
# fresh memory is slow to touch, single runs vary several-fold.
set -euo pipefail
build=${1:?usage: bench/small_files.sh BUILD [FILES] [RUNS]}
n=${2:-20000}
runs=${3:-5}
dir=$(mktemp -d /var/tmp/sc-small.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sc=$build/bin/shardcache
"$sc" make-dataset --out "$dir/b" --layout B --shard-size 1 --samples "$n" --shape 3x64x64 \
    --dtype float32 >/dev/null 2>&1
"$sc" make-dataset --out "$dir/a.h5" --samples "$n" --shape 3x64x64 --dtype float32 >/dev/null 2>&1
run() { # SOURCE SHARD_SIZE ARGS... -> bench_deliver's line
    mpirun -np 1 env SC_SOURCE="$1" SC_SHARD_SIZE="$2" SC_CACHE_DIR="$dir/cache" \
        SC_BATCH_SIZE=256 SC_LOG=0 "$build/bin/bench_deliver" "${@:3}"
}
rate() { sed -n 's/.*: \([0-9.]*\) samples\/s.*/\1/p' | head -1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
names=("B grouped" "B a shard per file" "A, one file")
srcs=("$dir/b" "$dir/b" "$dir/a.h5")
sizes=(1024 1 1024)
declare -a up cold warm
for ((r = 0; r < runs; r++)); do
    for v in 0 1 2; do
        rm -rf "$dir/cache"
        up[v]+=" $(run "${srcs[v]}" "${sizes[v]}" --first-batch | sed -n 's/^first batch: \([0-9.]*\) s.*/\1/p')"
        rm -rf "$dir/cache"
        cold[v]+=" $(run "${srcs[v]}" "${sizes[v]}" --warmup 0 --epochs 1 | rate)"
        warm[v]+=" $(run "${srcs[v]}" "${sizes[v]}" --warmup 0 --epochs 3 | rate)"
    done
done
echo "\`bench/small_files.sh BUILD $n $runs\` ($n files of one 48 KiB float32 sample, batch 256, 1 rank, $(nproc) cores online; medians of $runs interleaved runs)"
echo
echo "| source | shards | start-up, s | first epoch, samples/s | warm epochs, samples/s |"
echo "| --- | ---: | ---: | ---: | ---: |"
for v in 0 1 2; do
    k=${sizes[v]}
    echo "| ${names[v]} | $(( (n + k - 1) / k )) | $(median <<<"${up[v]}") | $(median <<<"${cold[v]}") | $(median <<<"${warm[v]}") |"
done
for v in 0 1 2; do echo "  ${names[v]}: start-up${up[v]}; first epoch${cold[v]}; warm${warm[v]}"; done
