#!/usr/bin/env bash
# bench/jpeg.sh BUILD [SAMPLES] [PRODUCERS] [SETS] - the CPU transformation
# wall on JPEG sets, side by side.  SETS (default synthetic,real):
#
#   synthetic  make-dataset --encode jpeg: SAMPLES (default 2000) photo-like
#              images of ImageNet's typical size, 3x375x500, quality 90
#   real       the real photographs of tests/photos/stage.py (Debian's
#              gimp-help-en, installed or downloaded: 62 to 768 pixels on a
#              side, their own size distribution), repeated in order to
#              SAMPLES; the one PNG named .jpg is left out, as the limit
#              line (libjpeg-turbo alone) reads JPEGs only
#
# and on each:
#
#   limit  libjpeg-turbo's own single-thread decode of each whole image at
#          its own size, and shardcache's crop decode to 224 (bench_jpeg
#          --file: the per-core limit)
#   (b)    shardcache decoding every epoch (SC_DECODE=jpeg, 224): samples/s
#          delivered to a C loop (bench_deliver), the cache warm, with each
#          producer count in PRODUCERS (default 1,2)
#   (c)    shardcache decoding once into the cache (SC_DECODE=jpeg-once)
#          plus a flip per delivery, the same way
#   (a)    PyTorch's DataLoader with PIL and torchvision's
#          RandomResizedCrop(224) + flip (bench/jpeg_loader.py, as many
#          workers: the baseline users run), when python3-torchvision is
#          installed
set -euo pipefail
build=${1:?usage: bench/jpeg.sh BUILD [SAMPLES] [PRODUCERS] [SETS]}
n=${2:-2000}
producers=${3:-1,2}
sets=${4:-synthetic,real}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /var/tmp/sc-jpeg.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "\`bench/jpeg.sh BUILD $n $producers $sets\` ($(nproc) cores online)"

make_real() {  # the staged photos' JPEG files, repeated in order to $n samples
    /usr/bin/python3 "$here/../tests/photos/stage.py" "$dir/photos" >/dev/null
    /usr/bin/python3 - "$dir/photos/photos.h5" "$1" "$n" <<'PY'
import sys, h5py, numpy as np
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with h5py.File(src, "r") as f:
    jpegs = [b for b in f["images"][:] if bytes(b[:2]) == b"\xff\xd8"]
with h5py.File(out, "w") as g:
    d = g.create_dataset("images", (n,), dtype=h5py.vlen_dtype(np.uint8))
    for i in range(n):
        d[i] = jpegs[i % len(jpegs)]
    g["labels"] = np.arange(n, dtype=np.int64) % 1000
PY
}

for set in ${sets//,/ }; do
    f=$dir/$set.h5
    case $set in
        synthetic) "$build/bin/shardcache" make-dataset --out "$f" --samples "$n" \
                       --shape 3x375x500 --smooth --noise 8 --encode jpeg --quality 90 >/dev/null ;;
        real) make_real "$f" ;;
        *) echo "bench/jpeg.sh: unknown set '$set' (synthetic or real)" >&2; exit 2 ;;
    esac
    echo "== $set"
    "$build/bin/bench_jpeg" --file "$f" --images "$n" --crop 224 --rounds 3
    for mode in jpeg jpeg-once; do
        for p in ${producers//,/ }; do
            printf '%-9s %2d producers: ' "$mode" "$p"
            SC_SOURCE=$f SC_DECODE=$mode SC_DECODE_SIZE=224 SC_PRODUCERS=$p \
                SC_BATCH_SIZE=64 SC_SHARD_SIZE=64 SC_SHUFFLE=global \
                SC_CACHE_DIR=$dir/cache-$set-$mode-$p SC_LOG=0 \
                mpirun -np 1 --oversubscribe --bind-to none "$build/bin/bench_deliver" \
                --epochs 2 --warmup 1 | sed -n 's/.*step 0 ms: \([0-9]*\) samples\/s.*/\1 samples\/s/p'
        done
    done
    if /usr/bin/python3 -c "import torchvision, PIL" 2>/dev/null; then
        /usr/bin/python3 "$here/jpeg_loader.py" "$f" --workers "$producers" --crop 224
    else
        echo "dataloader: not run (it needs Debian's python3-torchvision and python3-pil)"
    fi
done
