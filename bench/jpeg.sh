#!/usr/bin/env bash
# bench/jpeg.sh BUILD [SAMPLES] - the CPU transformation wall on one JPEG
# set, side by side: make-dataset --encode jpeg (SAMPLES, default 2000,
# 3x256x256 photo-like images at quality 90), then libjpeg-turbo's own
# single-thread decode and shardcache's crop decode to 224 (bench_jpeg
# --file: the per-core limit), and PyTorch's DataLoader with PIL and
# torchvision's RandomResizedCrop(224) + flip (bench/jpeg_loader.py, 1 and
# 2 workers: the baseline users run).
set -euo pipefail
build=${1:?usage: bench/jpeg.sh BUILD [SAMPLES]}
n=${2:-2000}
dir=$(mktemp -d /var/tmp/sc-jpeg.XXXXXX)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 -c "import torchvision, PIL" 2>/dev/null ||
    { echo "bench/jpeg.sh needs Debian's python3-torchvision and python3-pil" >&2; exit 1; }
"$build/bin/shardcache" make-dataset --out "$dir/j.h5" --samples "$n" --shape 3x256x256 \
    --smooth --noise 8 --encode jpeg --quality 90 >/dev/null
echo "\`bench/jpeg.sh BUILD $n\` ($(nproc) cores online)"
"$build/bin/bench_jpeg" --file "$dir/j.h5" --images "$n" --crop 224 --rounds 3
/usr/bin/python3 "$(dirname "$0")/jpeg_loader.py" "$dir/j.h5" --workers 1,2 --crop 224
