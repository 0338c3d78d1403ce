"""SC_DECODE against PIL itself under mpiexec -n 1, 2 and 4: every image
PIL opens decodes, whatever its format (the bytes' signature decides), to
the bytes PIL's convert("RGB") or convert("L") gives: CMYK JPEGs as PIL
writes them, PNGs of every mode PIL writes, a JPEG with 2 KiB after its end
marker; with decode_exif=True turned upright as ImageOps.exif_transpose
turns it, as stored without.  Images are S x S and decoded once at their
own size (the centre square, 1:1), so the pixels must be PIL's exactly.
"""
import io
import os

import h5py
import numpy as np
import pytest
from PIL import Image, ImageOps

import shardcache
from conftest import COMM

RANK = COMM.Get_rank()
S = 24


def photo(seed):
    """An S x S RGB image with edges and gradients (not one colour: a wrong
    conversion or orientation must show)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:S, 0:S]
    img = np.stack([x * 10 % 256, y * 9 % 256, (x * y) % 256], -1).astype(np.uint8)
    img[rng.integers(0, S, 40), rng.integers(0, S, 40)] = rng.integers(0, 256, (40, 3))
    return Image.fromarray(img)


def encoded(im, fmt, **kw):
    out = io.BytesIO()
    im.save(out, format=fmt, **kw)
    return out.getvalue()


def samples():
    """[(bytes, what)]: the images PIL opens that shardcache refused before."""
    base = photo(1)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 clockwise to show
    pngs = [base.convert(m) for m in ("1", "L", "LA", "RGB", "RGBA", "P")]
    pngs.append(Image.fromarray((np.asarray(base.convert("L"), np.uint16) * 3).astype(np.uint16)))
    out = [(encoded(base.convert("CMYK"), "JPEG", quality=95), "CMYK JPEG"),
           (encoded(photo(2).convert("CMYK"), "JPEG", quality=80), "CMYK JPEG 2"),
           (encoded(base, "JPEG", quality=90) + bytes(range(256)) * 8, "JPEG + 2 KiB"),
           (encoded(base, "JPEG", quality=90, exif=exif.tobytes()), "JPEG, EXIF 6"),
           (encoded(base, "PNG", exif=exif.tobytes()), "PNG, EXIF 6")]
    out += [(encoded(p, "PNG"), "PNG " + p.mode) for p in pngs]
    return out


@pytest.fixture(scope="module")
def images(shared_dir):
    path = os.path.join(shared_dir, "pil-images.h5")
    data = samples()
    if RANK == 0:
        with h5py.File(path, "w") as f:
            d = f.create_dataset("img", (len(data),), dtype=h5py.vlen_dtype(np.uint8))
            for i, (b, _) in enumerate(data):
                d[i] = np.frombuffer(b, np.uint8)
    COMM.Barrier()
    return path, data


def pil(b, mode, exif):
    im = Image.open(io.BytesIO(b))
    if exif:
        im = ImageOps.exif_transpose(im)
    return np.asarray(im.convert(mode))


@pytest.mark.parametrize("channels,exif", [(3, False), (1, False), (3, True)])
def test_decoded_as_pil_delivers(images, cache_dir, channels, exif):
    path, data = images
    seen = 0
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=1, shard_size=1,
                           decode="jpeg-once", decode_size=S, decode_channels=channels,
                           decode_exif=exif, remainder="pad", log=0) as loader:
        assert loader.fields[0] == ("img", "uint8", (channels, S, S))
        for epoch in range(2):  # decode-once flips at random: undo it to compare
            for batch in loader.epoch(epoch):
                if batch.padded:
                    continue
                i = int(batch.ids[0])
                got = batch["img"][0].numpy()
                want = pil(data[i][0], "RGB" if channels == 3 else "L", exif)
                want = want.transpose(2, 0, 1) if channels == 3 else want[None]
                ok = np.array_equal(got, want) or np.array_equal(got[:, :, ::-1], want)
                assert ok, (data[i][1], np.abs(got.astype(int) - want).max())
                seen += 1
            assert loader.verdict(epoch).ok
    assert COMM.allreduce(seen) == 2 * len(data)


def test_one_plane_every_epoch(images, cache_dir):
    path, data = images
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=1, shard_size=1,
                           decode="jpeg", decode_size=8, decode_channels=1, remainder="pad",
                           log=0) as loader:
        assert loader.fields[0] == ("img", "uint8", (1, 8, 8))
        for batch in loader.epoch(0):
            assert tuple(batch["img"].shape) == (1, 1, 8, 8)
    with pytest.raises(shardcache.Error, match="SC_DECODE_CHANNELS=2"):
        shardcache.Loader(source=path, cache_dir=cache_dir, decode="jpeg", decode_channels=2,
                          log=0)
