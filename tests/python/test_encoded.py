"""Variable-length fields and SC_DECODE under mpiexec -n 1, 2 and 4.

Variable-length fields (h5py's vlen_dtype) arrive as offsets and values:
every sample's bytes h5py's for its id, lengths from 0 to 300,000, both
layouts, contiguous and chunked storage, from the source and then from the
cache, exactly once.  JPEG fields decoded every epoch (SC_DECODE=jpeg) get
the same bytes for any producer count and differ between epochs; decoded
once (jpeg-once) they are cached as images and flipped at random; a corrupt
image stops the loader naming the sample (with bad_sample="skip" it is
replaced by another image of its shard, flagged in batch.replaced and
counted in the verdict apart); a job stopped mid-epoch and
resumed decodes every image as the uninterrupted job did.
"""
import io
import os
import subprocess

import h5py
import numpy as np
import pytest
import torch
from mpi4py import MPI

import shardcache
from conftest import COMM

RANK, SIZE = COMM.Get_rank(), COMM.Get_size()


def counts_of(ids, n):
    counts = np.zeros(n, dtype=np.int64)
    np.add.at(counts, np.asarray(ids, dtype=np.int64), 1)
    COMM.Allreduce(MPI.IN_PLACE, counts, op=MPI.SUM)
    return counts


def ragged(n, seed, dtype):
    """n samples of random lengths: some empty, one very long."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 2000, n)
    lengths[rng.choice(n, n // 10, replace=False)] = 0
    lengths[n // 2] = 300_000
    info = np.iinfo(dtype)
    return [rng.integers(info.min, info.max, k, dtype=dtype, endpoint=True) for k in lengths]


def write_vlen(f, name, samples, dtype, **kw):
    d = f.create_dataset(name, (len(samples),), dtype=h5py.vlen_dtype(dtype), **kw)
    for i, s in enumerate(samples):
        d[i] = s


# B with shards of 7: files of more samples are cut, pieces start mid-file (vlen and chunked)
@pytest.mark.parametrize("layout,shard_size", [("A", 40), ("B", 40), ("B", 7)])
def test_variable_length_fields(shared_dir, cache_dir, layout, shard_size):
    n = 300
    raw = ragged(n, 5, np.uint8)
    tokens = ragged(n, 6, np.int16)
    labels = np.arange(n, dtype=np.int64) * 7
    path = os.path.join(shared_dir, f"vlen-{layout}{shard_size}" + (".h5" if layout == "A" else ""))
    if RANK == 0:
        # B: files of 1 to 40 samples; A: one file, one field chunked (read whole at open).
        cuts = [0] + sorted(np.random.default_rng(2).choice(np.arange(1, n), 12, replace=False)) + [n]
        if layout == "B":
            os.makedirs(path)
        for k, (lo, hi) in enumerate(zip(cuts, cuts[1:]) if layout == "B" else [(0, n)]):
            name = os.path.join(path, f"part-{k:03d}.h5") if layout == "B" else path
            with h5py.File(name, "w") as f:
                write_vlen(f, "raw", raw[lo:hi], np.uint8)
                write_vlen(f, "tokens", tokens[lo:hi], np.int16, chunks=(min(16, hi - lo),))
                f["labels"] = labels[lo:hi]
    COMM.Barrier()
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=8,
                           shard_size=shard_size, shuffle="global", seed=3, remainder="pad",
                           log=0) as loader:
        assert [(f[0], f[1]) for f in loader.fields] == [
            ("labels", "int64"), ("raw", "uint8"), ("tokens", "int16")]
        for epoch in range(2):  # from the source, then from the cache
            ids = []
            for batch in loader.epoch(epoch):
                got = batch.ids.numpy().copy()
                np.testing.assert_array_equal(batch["labels"].numpy(), labels[got])
                for name, want in (("raw", raw), ("tokens", tokens)):
                    off = batch.offsets(name)
                    assert off[0] == 0 and len(off) == batch.size + 1
                    samples = batch[name]
                    assert len(samples) == batch.size
                    for k, i in enumerate(got):
                        np.testing.assert_array_equal(samples[k].numpy(), want[i], err_msg=name)
                ids.extend(got[:batch.size - batch.padded])
            v = loader.verdict(epoch)
            assert v.ok, str(v)
            assert (counts_of(ids, n) == 1).all()


def test_a_file_rewritten_in_place_is_not_read_by_its_cached_offsets(shared_dir, cache_dir):
    """The same file size and mtime, other lengths: the cache entry made
    from the old file is repaired, never used to place the new samples."""
    path = os.path.join(shared_dir, "inplace.h5")
    old = [np.full(20000, 1, np.uint8), np.full(8, 2, np.uint8)] * 4
    new = [np.full(10000, 3, np.uint8), np.full(10008, 4, np.uint8)] * 4
    def write(samples):  # padded to one size: HDF5 ignores bytes past its end
        with h5py.File(path, "w") as f:
            write_vlen(f, "v", samples, np.uint8)
        os.truncate(path, 1 << 18)
    if RANK == 0:
        write(old)
    COMM.Barrier()

    def read_all():
        got = {}
        with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=1, shard_size=2,
                               shuffle="global", seed=1, log=0) as loader:
            for batch in loader.epoch(0):
                got[int(batch.ids[0])] = batch["v"][0].numpy().copy()
            assert loader.verdict(0).ok
        return got
    for i, v in read_all().items():
        np.testing.assert_array_equal(v, old[i])
    COMM.Barrier()
    if RANK == 0:
        st = os.stat(path)
        write(new)
        assert os.stat(path).st_size == st.st_size  # the premise: only the stamp keys the cache
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    COMM.Barrier()
    for i, v in read_all().items():
        np.testing.assert_array_equal(v, new[i])


def rewrite_keeping_the_stamp(path, write, how):
    """Rewrites `path` with write(p) to the same size, its mtime kept, as
    cp -p (in place), rsync -a (a new file renamed over it) or touch -r do."""
    st = os.stat(path)
    tmp = path + ".new"
    write(tmp)
    os.truncate(tmp, st.st_size)  # HDF5 ignores bytes past its end
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    if how == "cp -p":
        subprocess.run(["cp", "-p", tmp, path], check=True)
        os.unlink(tmp)
    elif how == "rsync -a":
        os.replace(tmp, path)  # what rsync does: a new inode, the old times
    else:
        with open(tmp, "rb") as f, open(path, "r+b") as g:
            g.write(f.read())
        subprocess.run(["touch", "-r", tmp, path], check=True)
        os.unlink(tmp)
    now = os.stat(path)
    assert (now.st_size, now.st_mtime_ns) == (st.st_size, st.st_mtime_ns)  # the premise


@pytest.mark.parametrize("how", ["cp -p", "rsync -a", "touch -r"])
@pytest.mark.parametrize("layout", ["A", "B"])
def test_a_source_rewritten_with_size_and_mtime_kept_is_read_anew(shared_dir, cache_dir,
                                                                  layout, how):
    """The next job with the same cache delivers the new bytes, not the
    cache's: the stamp has the file's inode and change time, which a copy
    cannot keep."""
    n, per_file = 80, 20
    path = os.path.join(shared_dir, f"rewrite-{layout}-{how[:2]}" + (".h5" if layout == "A" else ""))
    files = ([os.path.join(path, f"part-{k}.h5") for k in range(n // per_file)]
             if layout == "B" else [path])

    def values(version):
        x = (np.arange(n * 16, dtype=np.uint8).reshape(n, 16) + 7 * version).astype(np.uint8)
        return x, np.arange(n, dtype=np.int64) * (version + 1)

    def write(version, k, to):
        x, y = values(version)
        lo, hi = (k * per_file, (k + 1) * per_file) if layout == "B" else (0, n)
        with h5py.File(to, "w") as f:
            f["x"], f["y"] = x[lo:hi], y[lo:hi]
        os.truncate(to, 1 << 16)

    if RANK == 0:
        if layout == "B":
            os.makedirs(path)
        for k, name in enumerate(files):
            write(0, k, name)
    COMM.Barrier()

    def check(version):
        x, y = values(version)
        ids = []
        with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=5, shard_size=per_file,
                               shuffle="global", seed=1, log=0) as loader:
            for batch in loader.epoch(0):
                for j, i in enumerate(batch.ids):
                    np.testing.assert_array_equal(batch["x"][j].numpy(), x[i])
                    np.testing.assert_array_equal(batch["y"][j].numpy(), y[i])
                    ids.append(int(i))
            assert loader.verdict(0).ok
        assert (counts_of(ids, n) == 1).all()

    check(0)  # the source, then cached
    COMM.Barrier()
    if RANK == 0:  # the second file (layout B) or the file (A)
        k = 1 if layout == "B" else 0
        rewrite_keeping_the_stamp(files[k], lambda to: write(1, k, to), how)
        if layout == "B":  # the others too, so that every sample is new
            for j, name in enumerate(files):
                if j != k:
                    rewrite_keeping_the_stamp(name, lambda to, j=j: write(1, j, to), how)
    COMM.Barrier()
    check(1)


def jpeg_bytes(colour, size=48, split=False):
    """A JPEG of one colour, or of two halves (the right one the colour's complement)."""
    from PIL import Image

    img = np.empty((size, size, 3), np.uint8)
    img[:] = colour
    if split:
        img[:, size // 2:] = 255 - np.asarray(colour, np.uint8)
    out = io.BytesIO()
    Image.fromarray(img).save(out, format="JPEG", quality=95)
    return np.frombuffer(out.getvalue(), np.uint8)


@pytest.fixture(scope="module")
def jpegs(shared_dir):
    """200 JPEGs, each one colour (sample i's), halves split for decode-once's flip."""
    n = 200
    rng = np.random.default_rng(9)
    colours = rng.integers(40, 216, (n, 3)).astype(np.uint8)
    path = os.path.join(shared_dir, "jpegs.h5")
    if RANK == 0:
        with h5py.File(path, "w") as f:
            write_vlen(f, "jpeg", [jpeg_bytes(c, split=True) for c in colours], np.uint8)
            f["labels"] = np.arange(n, dtype=np.int64)
    COMM.Barrier()
    return path, colours


def decode_loader(path, cache_dir, producers=2, **kw):
    return shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=10, shard_size=25,
                             shuffle="global", seed=5, decode="jpeg", decode_size=16,
                             producers=producers, log=0, **kw)


def take(loader, epoch, out, stop_after=None):
    """This rank's images of `epoch` into out[(epoch, id)], up to stop_after batches."""
    for k, batch in enumerate(loader.epoch(epoch)):
        x = batch["jpeg"]
        assert x.shape == (10, 3, 16, 16) and x.dtype == torch.uint8
        np.testing.assert_array_equal(batch["labels"].numpy(), batch.ids)
        for j, i in enumerate(batch.ids):
            out[(epoch, int(i))] = x[j].numpy().copy()
        if stop_after is not None and k + 1 == stop_after:
            return loader.state_dict()
    return loader.state_dict()


def decoded(path, cache_dir, producers, epochs):
    """{(epoch, id): image} of every sample this rank was delivered."""
    out = {}
    with decode_loader(path, cache_dir, producers) as loader:
        assert loader.fields[0] == ("jpeg", "uint8", (3, 16, 16))
        for epoch in range(epochs):
            take(loader, epoch, out)
            assert loader.verdict(epoch).ok
    return out


def test_jpeg_decoded_every_epoch(jpegs, cache_dir):
    path, colours = jpegs
    one = decoded(path, cache_dir + "-1", 1, 2)
    three = decoded(path, cache_dir + "-3", 3, 2)
    assert one.keys() == three.keys() and len(one) == 2 * 200 // SIZE
    for key, img in one.items():
        np.testing.assert_array_equal(img, three[key])  # any producer count: the same bytes
        # Each pixel is the sample's colour or its complement (the two halves), crop and
        # flip wherever they fell: the image is this sample's.
        c = colours[key[1]].astype(int)[:, None, None]
        near = np.minimum(abs(img.astype(int) - c), abs(img.astype(int) - (255 - c)))
        assert np.median(near) <= 6, key
    # A new crop every epoch: of the samples this rank got in both epochs, most differ.
    both = [i for e, i in one if e == 0 and (1, i) in one]
    differ = COMM.allreduce(sum(not np.array_equal(one[(0, i)], one[(1, i)]) for i in both))
    assert differ > 0.8 * COMM.allreduce(len(both)) > 0


def test_jpeg_decode_resumes_to_the_same_bytes(jpegs, cache_dir):
    """Stopped after 3 batches of epoch 1 and resumed (with another producer
    count): every image is the one an uninterrupted job decoded."""
    path, _ = jpegs
    whole = decoded(path, cache_dir + "-whole", 2, 2)
    got = {}
    loader = decode_loader(path, cache_dir + "-cut", producers=1)
    take(loader, 0, got)
    state = take(loader, 1, got, stop_after=3)
    loader.close()
    with decode_loader(path, cache_dir + "-cut", producers=3,
                       resume=COMM.allgather(state)) as loader:
        assert loader.resumed_epoch == 1
        take(loader, 1, got)
        assert loader.verdict(1).ok
    assert got.keys() == whole.keys()
    for key, img in whole.items():
        np.testing.assert_array_equal(got[key], img, err_msg=str(key))


def test_jpeg_decoded_once_and_flipped(jpegs, cache_dir):
    path, colours = jpegs
    flips = []
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=10, shard_size=25,
                           shuffle="global", seed=5, decode="jpeg-once", decode_size=16,
                           log=0) as loader:
        assert loader.fields[0] == ("jpeg", "uint8", (3, 16, 16))
        for epoch in range(2):
            for batch in loader.epoch(epoch):
                x = batch["jpeg"].numpy().astype(int)
                for k, i in enumerate(batch.ids):
                    c = colours[i].astype(int)
                    left, right = x[k, :, :, :6].mean(axis=(1, 2)), x[k, :, :, -6:].mean(axis=(1, 2))
                    flipped = np.abs(left - (255 - c)).max() < 8 and np.abs(right - c).max() < 8
                    assert flipped or (np.abs(left - c).max() < 8 and np.abs(right - (255 - c)).max() < 8)
                    flips.append(flipped)
            assert loader.verdict(epoch).ok
    share = COMM.allreduce(sum(flips)) / COMM.allreduce(len(flips))
    assert 0.35 < share < 0.65, share


def test_decode_once_beside_tokens_and_an_epoch_decode(shared_dir, cache_dir):
    """Captions beside images: a variable-length int32 field passes through
    decode-once's transform as it is; a second JPEG field decodes every epoch."""
    n = 60
    rng = np.random.default_rng(12)
    colours = rng.integers(40, 216, (n, 3)).astype(np.uint8)
    tokens = ragged(n, 13, np.int32)
    path = os.path.join(shared_dir, "captions.h5")
    if RANK == 0:
        with h5py.File(path, "w") as f:
            write_vlen(f, "a", [jpeg_bytes(c) for c in colours], np.uint8)
            write_vlen(f, "b", [jpeg_bytes(255 - c) for c in colours], np.uint8)
            write_vlen(f, "tokens", tokens, np.int32)
    COMM.Barrier()
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=4, shard_size=10,
                           decode="a=jpeg-once,b=jpeg", decode_size=8, log=0) as loader:
        assert [f[2] for f in loader.fields] == [(3, 8, 8), (3, 8, 8), (None,)]
        for epoch in range(2):
            for batch in loader.epoch(epoch):
                a, b, t = batch["a"].numpy(), batch["b"].numpy(), batch["tokens"]
                for k, i in enumerate(batch.ids):
                    np.testing.assert_array_equal(t[k].numpy(), tokens[i])
                    c = colours[i].astype(int)[:, None, None]
                    assert np.abs(a[k].astype(int) - c).max() <= 6
                    assert np.abs(b[k].astype(int) - (255 - c)).max() <= 6
            assert loader.verdict(epoch).ok


def test_decode_refuses_a_fixed_field(jpegs, cache_dir):
    assert shardcache.features()["jpeg"] == 1  # scripts/test builds with libjpeg-turbo
    path, _ = jpegs
    with pytest.raises(shardcache.Error, match="SC_DECODE names field '/labels'.*fixed-shape int64"):
        shardcache.Loader(source=path, cache_dir=cache_dir, decode="labels=jpeg", log=0)
    with pytest.raises(shardcache.Error, match="unknown decoder 'png'"):
        shardcache.Loader(source=path, cache_dir=cache_dir, decode="png", log=0)


@pytest.mark.skipif(SIZE != 1, reason="a decode error on one rank of several ends the job")
def test_a_corrupt_jpeg_is_named(shared_dir, cache_dir):
    path = os.path.join(shared_dir, "corrupt.h5")
    images = [jpeg_bytes((100, 150, 200)) for _ in range(30)]
    images[17] = images[17][:40]  # truncated
    with h5py.File(path, "w") as f:
        write_vlen(f, "jpeg", images, np.uint8)
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=5, shard_size=10,
                           decode="jpeg", decode_size=8, log=0) as loader:
        with pytest.raises(shardcache.Error, match="sample 17 \\(shard 1\\): field '/jpeg' "
                                                   "\\(40 bytes\\)"):
            for _ in loader.epoch(0):
                pass


def test_a_corrupt_jpeg_is_skipped_by_policy(shared_dir, cache_dir):
    path = os.path.join(shared_dir, "corrupt-skip.h5")
    images = [jpeg_bytes((100, 150, 200)) for _ in range(40)]  # 4 shards: one a rank on 4
    images[17] = images[17][:40]  # truncated
    if RANK == 0:
        with h5py.File(path, "w") as f:
            write_vlen(f, "jpeg", images, np.uint8)
    COMM.Barrier()
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=5, shard_size=10,
                           decode="jpeg", decode_size=8, log=0, bad_sample="skip",
                           remainder="pad") as loader:
        ids, stood = [], []
        for batch in loader.epoch(0):
            got = batch.ids.numpy().tolist()
            real = batch.size - batch.padded
            for k, was in zip(batch.replaced, batch.stands_for):
                assert was == 17 and got[k] != 17 and got[k] // 10 == 1  # its shard's
                if k < real:
                    stood.append(was)
            ids += [i for k, i in enumerate(got[:real]) if k not in batch.replaced]
        counts = counts_of(ids, 40)
        assert counts[17] == 0 and (np.delete(counts, 17) == 1).all()
        assert counts_of(stood, 40)[17] == 1
        v = loader.verdict(0)
        assert v.ok and v.skipped_bad == 1 and v.replacements == 1 and v.duplicated == 0, v
        assert v.delivered == 39 and "bad samples skipped" in str(v)
