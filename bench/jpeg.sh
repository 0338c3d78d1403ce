#!/usr/bin/env bash
# bench/jpeg.sh BUILD [SAMPLES] [PRODUCERS] - the CPU transformation wall
# on one JPEG set, side by side: make-dataset --encode jpeg (SAMPLES,
# default 2000, 3x256x256 photo-like images at quality 90), then
#
#   limit  libjpeg-turbo's own single-thread decode, and shardcache's crop
#          decode to 224 (bench_jpeg --file: the per-core limit)
#   (b)    shardcache decoding every epoch (SC_DECODE=jpeg, 224): samples/s
#          delivered to a C loop (bench_deliver), the cache warm, with each
#          producer count in PRODUCERS (default 1,2)
#   (c)    shardcache decoding once into the cache (SC_DECODE=jpeg-once)
#          plus a flip per delivery, the same way
#   (a)    PyTorch's DataLoader with PIL and torchvision's
#          RandomResizedCrop(224) + flip (bench/jpeg_loader.py, as many
#          workers: the baseline users run), when python3-torchvision is
#          installed (it is not among the test packages)
set -euo pipefail
build=${1:?usage: bench/jpeg.sh BUILD [SAMPLES] [PRODUCERS]}
n=${2:-2000}
producers=${3:-1,2}
dir=$(mktemp -d /var/tmp/sc-jpeg.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$build/bin/shardcache" make-dataset --out "$dir/j.h5" --samples "$n" --shape 3x256x256 \
    --smooth --noise 8 --encode jpeg --quality 90 >/dev/null
echo "\`bench/jpeg.sh BUILD $n\` ($(nproc) cores online)"
"$build/bin/bench_jpeg" --file "$dir/j.h5" --images "$n" --crop 224 --rounds 3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for mode in jpeg jpeg-once; do
    for p in ${producers//,/ }; do
        printf '%-9s %2d producers: ' "$mode" "$p"
        SC_SOURCE=$dir/j.h5 SC_DECODE=$mode SC_DECODE_SIZE=224 SC_PRODUCERS=$p \
            SC_BATCH_SIZE=64 SC_SHARD_SIZE=64 SC_SHUFFLE=global SC_CACHE_DIR=$dir/cache-$mode-$p \
            SC_LOG=0 mpirun -np 1 --oversubscribe --bind-to none "$build/bin/bench_deliver" \
            --epochs 2 --warmup 1 | sed -n 's/.*step 0 ms: \([0-9]*\) samples\/s.*/\1 samples\/s/p'
    done
done
if /usr/bin/python3 -c "import torchvision, PIL" 2>/dev/null; then
    /usr/bin/python3 "$(dirname "$0")/jpeg_loader.py" "$dir/j.h5" --workers "$producers" --crop 224
else
    echo "dataloader: not run (it needs Debian's python3-torchvision and python3-pil)"
fi
