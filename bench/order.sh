#!/usr/bin/env bash
# bench/order.sh BUILD_DIR [SEEDS] - what a loader's order does to what a
# model learns: the example trainer (4 ranks, global mode, 3 epochs, a high
# learning rate) on a hard class-sorted file, scored on held-out samples
# (train --eval), with the default window and with window 1, beside the
# same samples stored in random order and beside every sample its own shard
# (SC_SHARD_SIZE=1: the closest this loader comes to a uniform random
# permutation of the whole dataset).  Prints a markdown table of the
# held-out loss and accuracy, median over the seeds (default 1 2 3).
set -euo pipefail
build=${1:?usage: bench/order.sh BUILD_DIR [SEEDS]}
seeds=${2:-1 2 3}
sc=$build/bin/shardcache train=$build/bin/train
dir=$(mktemp -d /tmp/sc-order.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
make() { "$sc" make-dataset --samples 16384 --shape 1x4x4 --noise 255 --seed 3 "$@" >/dev/null 2>&1; }
make --out "$dir/sorted.h5" --sorted
make --out "$dir/random.h5"
make --out "$dir/held.h5" --samples 4096 --heldout
run() { # SOURCE WINDOW SHARD SEED -> "loss accuracy"
    env SC_SOURCE="$dir/$1" SC_SHUFFLE_WINDOW="$2" SC_SHARD_SIZE="$3" SC_SEED="$4" \
        SC_SHUFFLE=global SC_BATCH_SIZE=64 SC_CACHE_DIR="$dir/cache-$RANDOM" SC_LOG=0 \
        mpirun -np 4 --oversubscribe "$train" --epochs 3 --lr 0.5 --eval "$dir/held.h5" 2>&1 |
        sed -n 's/^held-out: loss \([0-9.]*\), accuracy \([0-9.]*\)%.*/\1 \2/p'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "\`bench/order.sh BUILD seeds $seeds\` (16384 samples 1x4x4, 10 overlapping classes, noise 255; 4 ranks, global, batch 64, lr 0.5, 3 epochs; held-out: 4096 new samples; median over seeds)"
echo
echo "| stored | order | held-out loss | held-out accuracy |"
echo "| --- | --- | ---: | ---: |"
for c in "sorted.h5 auto 256 class-sorted|default (auto window), shard 256" \
         "sorted.h5 1 256 class-sorted|window 1 (batches of one shard), shard 256" \
         "random.h5 auto 256 random|default (auto window), shard 256" \
         "sorted.h5 auto 1 class-sorted|every sample its own shard (SC_SHARD_SIZE=1)"; do
    read -r src win shard label <<<"${c%%|*}"
    res=$(for s in $seeds; do run "$src" "$win" "$shard" "$s"; done)
    loss=$(awk '{print $1}' <<<"$res" | median) acc=$(awk '{print $2}' <<<"$res" | median)
    echo "| $label | ${c#*|} | $loss | $acc% |"
done
