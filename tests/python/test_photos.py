"""Real photographs decoded as PIL and torchvision deliver them (issue 36).

The corpus is staged by tests/photos/stage.py from Debian's gimp-help-en
(337 files as shipped: photos, screenshots, diagrams, grayscale,
progressive, ICC profiles, one PNG named .jpg) into $SC_PHOTOS_DIR (the
build tree's photos/, set by tests/CMakeLists.txt), plus variants made
from 4 of them (CMYK, YCCK, PNG, trailing bytes, progressive, grayscale,
restart markers) and a truncated one.

Every image is compared with PIL's on the same crop: decode-once
(`jpeg-once`: the centre square, resized; the flip recomputed from its
seed) with convert("RGB"), the centre square, resize BILINEAR (PIL's
antialiased filter, what torchvision's Resize does); every-epoch crops
(`jpeg`) with the crop rectangle and flip recomputed here from
(seed, epoch, field, sample) as runtime/codec/resample.c's sc__crop_draw
draws them, then PIL's crop and resize.  The bound: a mean difference of
at most 1 level per image.
"""
import io
import json
import math
import os
import sys

import h5py
import numpy as np
import pytest
from PIL import Image

import shardcache
from conftest import COMM

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "photos"))
import stage  # noqa: E402

RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
BOUND = 1.0  # levels: the mean |difference| per image, issue 36's bound
SEED = 11
M64 = (1 << 64) - 1
PURPOSE_AUGMENT, PURPOSE_DECODE = 0x6175676d656e74, 0x6465636f6465  # runtime/base/hash.h


@pytest.fixture(scope="module")
def photos(shared_dir):
    """The staged corpus's directory and manifest (rank 0 stages it)."""
    out = os.environ.get("SC_PHOTOS_DIR") or os.path.join(shared_dir, "photos")
    got = None
    if RANK == 0:
        try:
            got = stage.stage(out)
        except stage.Unavailable as e:
            got = str(e)
    got = COMM.bcast(got, root=0)
    if isinstance(got, str):
        pytest.skip(f"no real photographs: {got}")
    return out, got


# sc__rng (runtime/base/hash.h) and sc__crop_draw (runtime/codec/resample.c), in Python.
def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_key(seed, epoch, purpose, sub):
    k = mix64(seed ^ 0x5348415244434143)
    k = mix64(k ^ epoch)
    k = mix64(k ^ purpose)
    return mix64(k ^ sub)


class Rng:
    def __init__(self, key):
        self.key, self.ctr = key, 0

    def next(self):
        self.ctr += 1
        return mix64((self.key + self.ctr * 0x9E3779B97F4A7C15) & M64)

    def below(self, n):
        m = self.next() * n
        if (m & M64) < n:
            t = (-n % (1 << 64)) % n
            while (m & M64) < t:
                m = self.next() * n
        return m >> 64

    def uniform(self, lo, hi):
        return lo + (hi - lo) * (self.next() >> 11) * 2.0 ** -53


def c_round(x):  # C's round(): halves away from zero (x >= 0 here)
    r = math.floor(x)
    return r + 1 if x - r >= 0.5 else r


def crop_draw(W, H, key, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """RandomResizedCrop.get_params then the flip, as sc__crop_draw: (x, y, w, h, flip)."""
    r = Rng(key)
    area, lo, hi = W * H, math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * r.uniform(*scale)
        ar = math.exp(r.uniform(lo, hi))
        w, h = c_round(math.sqrt(target * ar)), c_round(math.sqrt(target / ar))
        if 1 <= w <= W and 1 <= h <= H:
            x, y = r.below(W - w + 1), r.below(H - h + 1)
            return x, y, w, h, r.next() & 1
    w, h = W, H
    if W / H < ratio[0]:
        h = c_round(w / ratio[0])
    elif W / H > ratio[1]:
        w = c_round(h * ratio[1])
    return (W - w) // 2, (H - h) // 2, w, h, r.next() & 1


def pil_image(blob):
    return Image.open(io.BytesIO(blob)).convert("RGB")


def expected_once(blob, n, epoch, i):
    """Decode-once's image: the centre square, resized, flipped on its seed's top bit."""
    img = pil_image(blob)
    W, H = img.size
    s = min(W, H)
    x, y = (W - s) // 2, (H - s) // 2
    out = np.asarray(img.crop((x, y, x + s, y + s)).resize((n, n), Image.BILINEAR))
    if rng_key(SEED, epoch, PURPOSE_AUGMENT, i) >> 63:
        out = out[:, ::-1]
    return out.transpose(2, 0, 1)


def expected_crop(blob, n, epoch, i, field):
    """The every-epoch crop: its rectangle and flip drawn as the stream draws them."""
    img = pil_image(blob)
    x, y, w, h, flip = crop_draw(*img.size, rng_key(SEED, epoch, PURPOSE_DECODE + field, i))
    out = np.asarray(img.crop((x, y, x + w, y + h)).resize((n, n), Image.BILINEAR))
    return (out[:, ::-1] if flip else out).transpose(2, 0, 1)


def differences(path, cache_dir, mode, n, epochs=(0,)):
    """{(epoch, id): mean |shardcache - PIL|} over every sample, all ranks'."""
    with h5py.File(path, "r") as f:
        blobs = [b.tobytes() for b in f["images"][:]]
    got = {}
    shard = max(1, min(16, len(blobs) // SIZE))  # every rank a shard, on any world size
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=4, shard_size=shard,
                           shuffle="global", seed=SEED, remainder="pad", decode=mode,
                           decode_size=n, log=0) as loader:
        field = [f[0] for f in loader.fields].index("images")
        assert loader.fields[field][2] == (3, n, n)
        for epoch in epochs:
            for batch in loader.epoch(epoch):
                x = batch["images"].numpy()
                for k, i in enumerate(batch.ids[:batch.size - batch.padded]):
                    i = int(i)
                    want = (expected_once(blobs[i], n, epoch, i) if mode == "jpeg-once"
                            else expected_crop(blobs[i], n, epoch, i, field))
                    got[(epoch, i)] = float(np.abs(x[k].astype(int) - want).mean())
            assert loader.verdict(epoch).ok
    got = {k: v for part in COMM.allgather(got) for k, v in part.items()}
    assert len(got) == len(blobs) * len(epochs), "every image delivered"
    return got


def verdict(diffs, names):
    """The bound, with the distribution and the worst images named."""
    d = np.array(list(diffs.values()))
    worst = sorted(diffs.items(), key=lambda kv: -kv[1])[:8]
    over = [k for k, v in diffs.items() if v > BOUND]
    return (f"mean |difference| per image: median {np.median(d):.2f}, p95 "
            f"{np.percentile(d, 95):.2f}, max {d.max():.2f}; {len(over)} of {len(d)} over "
            f"{BOUND}; worst: " + ", ".join(f"{names[i]} (epoch {e}) {v:.2f}"
                                            for (e, i), v in worst)), over


@pytest.mark.parametrize("n", [224, 64])
def test_every_photo_decoded_once_as_pil_resizes_it(photos, cache_dir, n):
    out, m = photos
    diffs = differences(os.path.join(out, "photos.h5"), cache_dir, "jpeg-once", n)
    msg, over = verdict(diffs, m["names"])
    assert not over, msg


NORM_MEAN, NORM_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def small_jpegs(shared_dir):
    """32 small JPEGs of several shapes (layout A: a vlen uint8 field), fast to decode."""
    path = os.path.join(shared_dir, "small-jpegs.h5")
    if RANK == 0:
        rng = np.random.default_rng(36)
        with h5py.File(path, "w") as f:
            d = f.create_dataset("images", (32,), dtype=h5py.vlen_dtype(np.uint8))
            for i in range(32):
                h, w = (40, 56) if i % 2 else (60, 44)
                y, x = np.mgrid[0:h, 0:w]
                rgb = np.stack([x * 255 // w, y * 255 // h, (x + y) * 127 // (w + h)], -1)
                rgb = rgb + rng.integers(0, 40, rgb.shape)
                buf = io.BytesIO()
                Image.fromarray(rgb.clip(0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
                d[i] = np.frombuffer(buf.getvalue(), np.uint8)
            f["labels"] = np.arange(32, dtype=np.int64)
    COMM.Barrier()
    return path


def once_batches(path, cache_dir, n, **kw):
    """{(epoch, id): decode-once's delivered image} over 2 epochs, all ranks'."""
    got = {}
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=8, shard_size=32 // SIZE,
                           shuffle="global", seed=SEED, decode="jpeg-once", decode_size=n,
                           log=0, **kw) as loader:
        for epoch in (0, 1):
            for batch in loader.epoch(epoch):
                x = batch["images"].numpy()
                for k, i in enumerate(batch.ids[:batch.size - batch.padded]):
                    got[(epoch, int(i))] = x[k].copy()
            assert loader.verdict(epoch).ok
    return {k: v for part in COMM.allgather(got) for k, v in part.items()}


def test_decode_once_flips_before_augments_normalize(small_jpegs, cache_dir):
    """SC_AUGMENT's normalize on decode-once's images: the flip is of the
    uint8 image (before the stages), so every image is torchvision's
    Normalize of decode-once's plain one, bit for bit, and of PIL's centre
    square (the flip recomputed) within the bound; NaN and 1e38 came from a
    flip of the float32 output as if its elements were bytes."""
    import torch
    import torchvision.transforms.functional as TF

    n = 32
    spec = "normalize(mean=%s, std=%s)" % (",".join(map(str, NORM_MEAN)),
                                          ",".join(map(str, NORM_STD)))
    plain = once_batches(small_jpegs, cache_dir + "-plain", n)
    normed = once_batches(small_jpegs, cache_dir + "-normed", n, augment=spec)
    assert sorted(plain) == sorted(normed) and len(plain) == 64, "every image, both epochs"
    with h5py.File(small_jpegs, "r") as f:
        blobs = [b.tobytes() for b in f["images"][:]]
    flips = set()
    for (epoch, i), got in normed.items():
        assert got.dtype == np.float32 and got.shape == (3, n, n)
        want = TF.normalize(torch.from_numpy(plain[(epoch, i)]).float().div(255), NORM_MEAN,
                            NORM_STD).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"epoch {epoch} sample {i}")
        pil = TF.normalize(torch.from_numpy(expected_once(blobs[i], n, epoch, i).copy())
                           .float().div(255), NORM_MEAN, NORM_STD).numpy()
        levels = np.abs(got - pil) * np.array(NORM_STD, np.float32)[:, None, None] * 255
        assert levels.mean() <= BOUND, f"epoch {epoch} sample {i}: {levels.mean():.2f} levels"
        flips.add(rng_key(SEED, epoch, PURPOSE_AUGMENT, i) >> 63)
    assert flips == {0, 1}, "flipped images and unflipped ones both checked"


@pytest.mark.parametrize("n", [224, 64])
def test_every_photo_cropped_every_epoch_as_torchvision_crops_it(photos, cache_dir, n):
    out, m = photos
    diffs = differences(os.path.join(out, "photos.h5"), cache_dir, "jpeg", n, epochs=(0, 1))
    msg, over = verdict(diffs, m["names"])
    assert not over, msg


@pytest.mark.parametrize("mode", ["jpeg-once", "jpeg"])
@pytest.mark.parametrize("kind", stage.KINDS)
def test_a_variant_decodes_as_pil_decodes_it(photos, shared_dir, cache_dir, kind, mode):
    """CMYK, YCCK, a PNG named as a JPEG, 2 KiB after the end marker,
    progressive, grayscale, restart markers: each decodes, as PIL's."""
    out, m = photos
    path = os.path.join(shared_dir, f"variant-{kind}.h5")
    picked = [i for i, (k, _) in enumerate(m["variants"]) if k == kind]
    if RANK == 0:
        with h5py.File(os.path.join(out, "variants.h5"), "r") as f, h5py.File(path, "w") as g:
            d = g.create_dataset("images", (len(picked),), dtype=h5py.vlen_dtype(np.uint8))
            for j, i in enumerate(picked):
                d[j] = f["images"][i]
            g["labels"] = np.array(picked, np.int64)
    COMM.Barrier()
    names = [f"{kind} of {m['variants'][i][1]}" for i in picked]
    diffs = differences(path, cache_dir, mode, 96, epochs=(0,))
    msg, over = verdict(diffs, names)
    assert not over, msg


@pytest.mark.skipif(SIZE != 1, reason="a decode error on one rank of several ends the job")
@pytest.mark.parametrize("mode", ["jpeg-once", "jpeg"])
def test_a_truncated_photo_is_refused_naming_it(photos, cache_dir, mode):
    out, m = photos
    path = os.path.join(out, "truncated.h5")
    with h5py.File(path, "r") as f:
        size = len(f["images"][m["truncated"]])
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=2, shard_size=4,
                           seed=SEED, decode=mode, decode_size=64, log=0) as loader:
        with pytest.raises(shardcache.Error, match=f"sample {m['truncated']}\\b.*"
                                                   f"field '/images' \\({size} bytes\\)"):
            for epoch in range(2):
                for _ in loader.epoch(epoch):
                    pass
