#!/usr/bin/env bash
# bench/jpeg_scaling.sh BIN [PRODUCERS] - issue 21's benchmark on a many-core
# machine (the lent GPU machine: BIN is the GPU bundle's bin, after
# `. .gpu/env.sh`; or build/release/bin).  On 8,000 JPEGs of 3x256x256:
# libjpeg-turbo's limit on 1 thread and on each count in PRODUCERS at once
# (bench_jpeg --threads), then (b) SC_DECODE=jpeg and (c) jpeg-once
# delivered to a C loop with each producer count (ring slots twice the
# producers: a producer builds one batch at a time into a free slot), and
# (a) the DataLoader with as many workers when this Python has torch, PIL,
# torchvision and h5py.  docs/benchmarks.md has the figures of one run.
set -uo pipefail
bin=${1:?usage: bench/jpeg_scaling.sh BIN [PRODUCERS]}
producers=${2:-1,2,4,8,16}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
w=$(mktemp -d "${TMPDIR:-/tmp}/sc-jpeg-scaling.XXXXXX")
trap 'rm -rf "$w"' EXIT
echo "\`bench/jpeg_scaling.sh\` on $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
"$bin/shardcache" make-dataset --out "$w/j.h5" --samples 8000 --shape 3x256x256 --smooth \
    --noise 8 --encode jpeg --quality 90 --labels 10 >/dev/null 2>&1 || exit 1
for t in 1 ${producers//,/ }; do
    "$bin/bench_jpeg" --file "$w/j.h5" --images 2000 --crop 224 --rounds 3 --threads "$t" | tail -1
done
for mode in jpeg jpeg-once; do
    for p in ${producers//,/ }; do
        printf '%-9s %2d producers, %2d slots: ' "$mode" "$p" $((2 * p))
        SC_SOURCE=$w/j.h5 SC_DECODE=$mode SC_DECODE_SIZE=224 SC_PRODUCERS=$p SC_BATCH_SIZE=64 \
            SC_SHARD_SIZE=64 SC_SHUFFLE=global SC_CACHE_DIR=$w/c-$mode-$p SC_LOG=0 \
            SC_PREFETCH_BATCHES=$((2 * p)) timeout 120 mpirun -np 1 --oversubscribe \
            --bind-to none "$bin/bench_deliver" --epochs 2 --warmup 1 2>&1 | tail -1
    done
done
if python3 -c "import torch, PIL, torchvision, h5py" 2>/dev/null; then
    python3 "$(dirname "$0")/jpeg_loader.py" "$w/j.h5" --workers "$producers" --crop 224
else
    echo "dataloader: not run (this python3 lacks torch, PIL, torchvision or h5py)"
fi
