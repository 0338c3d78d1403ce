#!/usr/bin/python3
"""How far shardcache's JPEG crops are from torchvision's on PIL.

    bench/resample_vs_pil.py BENCH_JPEG PHOTO [PHOTO...] [--sizes 224,64,32] [--keep DIR]

Builds a JPEG set from the photographs (each as it is, and re-encoded at
quality 90 with its longer side 256, 500 and 800 pixels: ImageNet's are
mostly about 500), has `BENCH_JPEG --file SET --crop C --dump D` decode
each image's centre crop (decode-once's) and 4 random resized crops with
a flip (every epoch's), and does the same crops torchvision does on a PIL
image: img.crop((x, y, x + w, y + h)).resize((C, C), Image.BILINEAR),
mirrored when flipped.  Prints, for each output size and kind of crop,
the per-image mean absolute difference (in 8-bit levels) over the 3
channels: median, p95 and max.
"""
import io
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
from PIL import Image


def jpeg_set(photos):
    """The photos' JPEG bytes: each as it is, then at longer sides 256, 500 and 800."""
    out = []
    for p in photos:
        raw = open(p, "rb").read()
        out.append(raw)
        im = Image.open(io.BytesIO(raw)).convert("RGB")
        for side in (256, 500, 800):
            f = side / max(im.size)
            if f >= 1:
                continue
            small = im.resize((max(1, round(im.width * f)), max(1, round(im.height * f))),
                              Image.LANCZOS)
            b = io.BytesIO()
            small.save(b, "JPEG", quality=90)
            out.append(b.getvalue())
    return out


def records(path, c):
    """The dump's records: (image, k, flip, (x, y, w, h), C x C x 3 array)."""
    size = 16 + 32 + 3 * c * c
    data = open(path, "rb").read()
    for at in range(0, len(data), size):
        i, k, flip, _ = np.frombuffer(data, np.uint32, 4, at)
        rect = np.frombuffer(data, np.float64, 4, at + 16)
        px = np.frombuffer(data, np.uint8, 3 * c * c, at + 48).reshape(3, c, c)
        yield int(i), int(k), int(flip), [int(v) for v in rect], px.transpose(1, 2, 0)


def torchvision_crop(img, rect, flip, c):
    x, y, w, h = rect
    out = img.crop((x, y, x + w, y + h)).resize((c, c), Image.BILINEAR)
    return out.transpose(Image.FLIP_LEFT_RIGHT) if flip else out


def main(argv):
    sizes, keep, args = [224, 64, 32], None, []
    it = iter(argv[1:])
    for a in it:
        if a == "--sizes":
            sizes = [int(s) for s in next(it).split(",")]
        elif a == "--keep":
            keep = next(it)
        else:
            args.append(a)
    if len(args) < 2:
        sys.exit(__doc__)
    bench, photos = args[0], args[1:]
    blobs = jpeg_set(photos)
    tmp = keep or tempfile.mkdtemp()
    os.makedirs(tmp, exist_ok=True)
    h5 = os.path.join(tmp, "set.h5")
    with h5py.File(h5, "w") as f:
        d = f.create_dataset("images", (len(blobs),), dtype=h5py.vlen_dtype(np.uint8))
        for i, b in enumerate(blobs):
            d[i] = np.frombuffer(b, np.uint8)
    decoded = [Image.open(io.BytesIO(b)).convert("RGB") for b in blobs]
    print(f"{len(blobs)} JPEG images from {len(photos)} photographs, "
          f"{min(min(im.size) for im in decoded)}-{max(max(im.size) for im in decoded)} px")
    for c in sizes:
        dump = os.path.join(tmp, f"crops{c}.bin")
        subprocess.run([bench, "--file", h5, "--images", str(len(blobs)), "--crop", str(c),
                        "--dump", dump], check=True)
        diff = {0: [], 1: []}
        for i, k, flip, rect, px in records(dump, c):
            ref = np.asarray(torchvision_crop(decoded[i], rect, flip, c), np.int16)
            diff[min(k, 1)].append(float(np.abs(ref - px.astype(np.int16)).mean()))
        for k, name in ((0, "centre crop (decode-once)"), (1, "random crops (every epoch)")):
            d = np.array(diff[k])
            print(f"  {c:3d} px, {name:26s}: mean |diff| per image median {np.median(d):.2f}, "
                  f"p95 {np.percentile(d, 95):.2f}, max {d.max():.2f} ({len(d)} images)")


if __name__ == "__main__":
    main(sys.argv)
