"""shardcache's Python package under mpiexec -n 1, 2 and 4 (tests/python).

Zero-copy (a tensor's data pointer is the loader's buffer), the bytes of
every sample equal the source's for its id, equal batch counts on every
rank, the exactly-once verdict and an independent count of the ids, the
held batches (never overwritten: tests/python/test_habits.py), errors as exceptions with the library's
message, and checkpoint/resume: mid-epoch on the same ranks, after an
epoch on a different number of ranks, and mid-epoch again inside an epoch
resumed on fewer ranks, every sample exactly once.
"""
import os
import re

import h5py
import numpy as np
import pytest
import torch
from mpi4py import MPI

import shardcache
from conftest import COMM, SAMPLES

RANK, SIZE = COMM.Get_rank(), COMM.Get_size()


def source(path):
    with h5py.File(path, "r") as f:
        return f["images"][...], f["labels"][...]


def open_loader(dataset, cache_dir, comm=None, **kw):
    settings = dict(source=dataset, cache_dir=cache_dir, batch_size=16, shard_size=50,
                    shuffle="global", seed=11, log=0)
    settings.update(kw)
    return shardcache.Loader(comm=comm, **settings)


def all_ids(local, comm=COMM):
    """Every rank's delivered ids, counted: [SAMPLES] deliveries per id."""
    counts = np.zeros(SAMPLES, dtype=np.int64)
    np.add.at(counts, np.asarray(local, dtype=np.int64), 1)
    comm.Allreduce(MPI.IN_PLACE, counts, op=MPI.SUM)
    return counts


def test_batches_are_zero_copy_and_the_source_bytes(dataset, cache_dir):
    images, labels = source(dataset)
    with open_loader(dataset, cache_dir, remainder="pad") as loader:
        assert [f[0] for f in loader.fields] == ["images", "labels"]
        for epoch in range(2):
            ids, nb, spread = [], 0, []
            for batch in loader.epoch(epoch):
                x, y = batch["images"], batch["labels"]
                assert isinstance(x, torch.Tensor) and x.dtype == torch.uint8
                assert x.shape == (16, 3, 6, 6) and y.shape == (16,)
                assert x.data_ptr() == batch.address("images")
                assert y.data_ptr() == batch.address("labels")
                got = batch.ids.numpy().copy()
                np.testing.assert_array_equal(x.numpy(), images[got])
                np.testing.assert_array_equal(y.numpy(), labels[got])
                ids.extend(got[:batch.size - batch.padded])
                if not batch.padded:  # distinct shards (of 50 samples) in a full batch
                    spread.append(len(set(got // 50)))
                nb += 1
            assert nb == loader.info["batches"]
            assert COMM.allreduce(nb, op=MPI.MIN) == COMM.allreduce(nb, op=MPI.MAX)
            v = loader.verdict(epoch)
            assert v.ok and v.verified, str(v)
            assert "exactly-once ok" in str(v)
            assert v["bytes_from_peers"] == 0  # one node: nothing from other nodes
            loaded = v["bytes_from_cache"] + v["bytes_from_source"]  # by origin, every byte once
            assert loaded > 0 and (v["cache_hits"] > 0) == (v["bytes_from_cache"] > 0), v
            assert abs(v["shards_per_batch"] - np.mean(spread)) < 1e-9, (v, spread)
            counts = all_ids(ids)
            assert counts.max() == 1 and counts.min() == 1  # pad: nothing dropped


def test_numpy_without_torch_views(dataset, cache_dir):
    images, _ = source(dataset)
    with open_loader(dataset, cache_dir) as loader:
        for batch in loader.epoch(0):
            a = batch.numpy("images")
            assert a.__array_interface__["data"][0] == batch.address("images")
            np.testing.assert_array_equal(a, images[batch.ids])


def test_a_held_batch_stays_readable_and_release_ends_it(dataset, cache_dir):
    images, labels = source(dataset)
    with open_loader(dataset, cache_dir) as loader:
        first = None
        for batch in loader.epoch(0):
            first = first or batch
        # Held past the epoch: still its own bytes (the ring did not reuse it).
        np.testing.assert_array_equal(first.numpy("images"), images[first.ids])
        first.release()
        with pytest.raises(ValueError, match="was released"):
            first.numpy("labels")


def test_errors_carry_the_library_message(dataset, cache_dir, shared_dir):
    with pytest.raises(shardcache.Error) as e:
        open_loader(shared_dir + "/missing.h5", cache_dir)
    assert e.value.status == "SC_EIO" and "missing.h5" in e.value.message
    with pytest.raises(shardcache.Error) as e:
        open_loader(dataset, cache_dir, batch_size="zero")
    assert e.value.status == "SC_EINVAL" and "SC_BATCH_SIZE" in e.value.message
    with pytest.raises(shardcache.Error, match="unknown setting SC_COLOUR"):
        open_loader(dataset, cache_dir, colour="blue")
    with open_loader(dataset, cache_dir) as loader:
        with pytest.raises(KeyError, match="no field 'pixels'"):
            for batch in loader.epoch(0):
                batch["pixels"]


def consume(loader, epoch, stop_after=None):
    """Ids this rank consumed in `epoch`, stopping after `stop_after` batches."""
    ids = []
    for k, batch in enumerate(loader.epoch(epoch)):
        ids.extend(batch.ids[:batch.size - batch.padded].tolist())
        if stop_after is not None and k + 1 == stop_after:
            return ids, loader.state_dict()
    return ids, loader.state_dict()


def test_resume_mid_epoch_on_the_same_ranks(dataset, cache_dir):
    loader = open_loader(dataset, cache_dir, remainder="pad")
    n = len(loader)
    first, state = consume(loader, 0, stop_after=2)
    loader.close()  # mid-epoch: allowed, collective
    states = COMM.allgather(state)
    with open_loader(dataset, cache_dir, remainder="pad", resume=states) as loader:
        assert loader.resumed_epoch == 0
        assert len(loader) == len(loader.epoch(0)) == n - 2  # the batches left
        rest, _ = consume(loader, 0)
        assert loader.verdict(0).ok
        for epoch in (1, 2):  # len() between epochs (it begins nothing), then a pass
            n = len(loader)
            assert sum(1 for _ in loader) == n == loader.info["batches"]
            assert loader.verdict(epoch).ok and loader.info["epoch"] == epoch
    counts = all_ids(first + rest)
    assert counts.min() == 1 and counts.max() == 1


def test_resume_after_an_epoch_on_fewer_ranks(dataset, cache_dir):
    if SIZE < 2:
        pytest.skip("needs 2 ranks or more")
    loader = open_loader(dataset, cache_dir, remainder="pad")
    consume(loader, 0)
    state = loader.state_dict()
    loader.close()
    states = COMM.allgather(state)
    half = COMM.Split(0 if RANK < SIZE // 2 else MPI.UNDEFINED, RANK)
    ids = []
    if half != MPI.COMM_NULL:
        with open_loader(dataset, cache_dir, comm=half, remainder="pad",
                         resume=states) as loader:
            assert loader.resumed_epoch == 1
            ids, _ = consume(loader, 1)
            assert loader.verdict(1).ok
        half.Free()
    counts = all_ids(ids)
    assert counts.min() == 1 and counts.max() == 1


def test_state_dict_inside_an_epoch_resumed_on_fewer_ranks(dataset, cache_dir):
    """Mid-epoch on every rank, then on half of them (a state_dict() there was
    SC_ENOTSUP), then on every rank again: every sample exactly once."""
    loader = open_loader(dataset, cache_dir, remainder="pad")
    first, state = consume(loader, 0, stop_after=1 + RANK % 2)
    loader.close()
    states = COMM.allgather(state)
    half = COMM.Split(0 if RANK < max(SIZE // 2, 1) else MPI.UNDEFINED, RANK)
    middle, again = [], None
    if half != MPI.COMM_NULL:
        with open_loader(dataset, cache_dir, comm=half, remainder="pad",
                         resume=states) as loader:
            assert loader.resumed_epoch == 0
            middle, again = consume(loader, 0, stop_after=1)
            assert len(again["record"]) > shardcache._core.CHECKPOINT_BYTES or SIZE == 1
        half.Free()
    states = [s for s in COMM.allgather(again) if s is not None]
    with open_loader(dataset, cache_dir, remainder="pad", resume=states) as loader:
        assert loader.resumed_epoch == 0
        rest, _ = consume(loader, 0)
        assert loader.verdict(0).ok
    counts = all_ids(first + middle + rest)
    assert counts.min() == 1 and counts.max() == 1


def test_a_c_transform_by_name(dataset, cache_dir):
    images, labels = source(dataset)
    lib = os.path.join(os.environ["SC_BUILD_DIR"], "lib", "libsc_example_transforms.so")
    with open_loader(dataset, cache_dir, transform=lib + ":ex_crop_factory",
                     transform_arg="1") as loader:
        assert loader.fields[0] == ("images", "float32", (3, 4, 4))
        for batch in loader.epoch(0):
            x = batch["images"]
            assert x.dtype == torch.float32 and x.shape == (16, 3, 4, 4)
            want = images[batch.ids][:, :, 1:5, 1:5].astype(np.float32) / np.float32(255)
            np.testing.assert_allclose(x.numpy(), want, rtol=0, atol=1e-7)
            np.testing.assert_array_equal(batch["labels"].numpy(), labels[batch.ids])
    with pytest.raises(shardcache.Error, match="name it LIBRARY.so:FUNCTION"):
        open_loader(dataset, cache_dir, transform=lib)
    with pytest.raises(shardcache.Error, match="undefined symbol: no_such_factory"):
        open_loader(dataset, cache_dir, transform=lib + ":no_such_factory")
    with pytest.raises(shardcache.Error, match="a margin of 3 leaves nothing of 6x6"):
        open_loader(dataset, cache_dir, transform=lib + ":ex_crop_factory", transform_arg="3")


def test_after_a_break_the_epoch_goes_on(dataset, cache_dir):
    with open_loader(dataset, cache_dir, remainder="pad") as loader:
        ids = []
        for k, batch in enumerate(loader.epoch(0)):
            ids.extend(batch.ids[:batch.size - batch.padded].tolist())
            if k == 1:
                break
        with pytest.raises(ValueError, match="epoch 0 still has batches"):
            loader.epoch(1)
        for batch in loader.epoch(0):  # goes on where the break left it
            ids.extend(batch.ids[:batch.size - batch.padded].tolist())
        assert loader.verdict(0).ok
        counts = all_ids(ids)
        assert counts.min() == 1 and counts.max() == 1
        for k, batch in enumerate(loader.epoch(1)):
            if k == 0:
                break
        loader.finish_epoch()  # the rest is skipped by the caller, not delivered
        assert not loader.verdict(1).ok and loader.verdict(1).caller_skipped > 0
        assert sum(1 for _ in loader.epoch(2)) == loader.info["batches"]


def test_a_batch_held_at_close_stays_readable(dataset, cache_dir):
    images, _ = source(dataset)
    loader = open_loader(dataset, cache_dir)
    kept = next(iter(loader.epoch(0)))
    with pytest.raises(TypeError, match="indexed by field name"):
        kept[0]
    loader.close()  # detaches it: its memory is its own now
    np.testing.assert_array_equal(kept["images"].numpy(), images[kept.ids.numpy()])


@pytest.mark.parametrize("codec", [dict(compression="lzf", shuffle=True),
                                   dict(compression="gzip", compression_opts=4, shuffle=True)])
def test_h5py_compressed_sources(dataset, shared_dir, cache_dir, codec):
    """What h5py writes compressed (its own LZF filter, gzip with the
    shuffle), in chunks of 30 rows that the shards of 50 split, delivers
    the bytes h5py reads back."""
    images, labels = source(dataset)
    path = os.path.join(shared_dir, f"h5py-{codec['compression']}.h5")
    if RANK == 0:
        with h5py.File(path, "w") as f:
            f.create_dataset("images", data=images, chunks=(30,) + images.shape[1:], **codec)
            f.create_dataset("labels", data=labels, chunks=(30,), **codec)
    COMM.Barrier()
    ids = []
    with open_loader(path, cache_dir) as loader:
        for batch in loader.epoch(0):
            got = batch.ids.numpy().copy()
            np.testing.assert_array_equal(batch["images"].numpy(), images[got])
            np.testing.assert_array_equal(batch["labels"].numpy(), labels[got])
            ids.extend(got[:batch.size - batch.padded])
        assert loader.verdict(0).ok
    counts = all_ids(ids)
    assert counts.max() <= 1


def test_the_types_users_store(shared_dir, cache_dir):
    """float16 (both byte orders, gzip+shuffle), bool (h5py's enum; LZF),
    fixed-length strings (as uint8 bytes of their width) and a field in a
    nested group, in chunks the shards split: every delivered sample is
    what h5py reads for its id, typed for torch."""
    n = 1000
    rng = np.random.default_rng(7)
    half = rng.normal(0, 100, (n, 3)).astype(np.float16)
    flag = rng.integers(0, 2, n).astype(bool)
    name = np.array([b"s%d" % (i * 7919) for i in range(n)], dtype="S7")
    cam = rng.integers(-500, 500, (n, 2, 2), dtype=np.int16)
    path = os.path.join(shared_dir, "types.h5")
    if RANK == 0:
        with h5py.File(path, "w") as f:
            gz = dict(chunks=True, compression="gzip", shuffle=True)
            f.create_dataset("half", data=half, **gz)
            f.create_dataset("half_be", data=half.astype(">f2"), **gz)
            f.create_dataset("flag", data=flag, chunks=(30,), compression="lzf")
            f.create_dataset("flag_plain", data=flag)
            f.create_dataset("name", data=name, chunks=(40,), **{k: gz[k] for k in gz if k != "chunks"})
            f.create_dataset("obs/images/cam0", data=cam)
    COMM.Barrier()
    fields = "half,half_be,flag,flag_plain,name,/obs/images/cam0"
    want = {"half": half, "half_be": half, "flag": flag, "flag_plain": flag,
            "name": np.frombuffer(name.tobytes(), np.uint8).reshape(n, 7),
            "obs/images/cam0": cam}
    types = {"half": torch.float16, "half_be": torch.float16, "flag": torch.bool,
             "flag_plain": torch.bool, "name": torch.uint8, "obs/images/cam0": torch.int16}
    ids = []
    with open_loader(path, cache_dir, fields=fields) as loader:
        assert [f[0] for f in loader.fields] == list(want)
        for epoch in range(2):  # from the source, then from the cache
            for batch in loader.epoch(epoch):
                got = batch.ids.numpy().copy()
                for key, values in want.items():
                    t = batch[key]
                    assert t.dtype == types[key], key
                    np.testing.assert_array_equal(t.numpy(), values[got], err_msg=key)
                if epoch == 0:
                    ids.extend(got[:batch.size - batch.padded])
            assert loader.verdict(epoch).ok
    assert all_ids(ids).max() <= 1


@pytest.mark.parametrize("axis", ["none", "first"])
def test_one_sample_files_grouped_into_shards(shared_dir, cache_dir, axis):
    """A directory of one sample per file (CosmoFlow's way), its datasets
    with no sample axis (SC_SAMPLE_AXIS=none: a scalar label too) or with
    one of length 1: files grouped into shards of 8 samples, every sample's
    bytes h5py's for its id, exactly once, from the source and the cache."""
    n = 61
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (n, 3, 4), dtype=np.uint8)
    lab = rng.integers(0, 1000, n, dtype=np.int64)
    d = os.path.join(shared_dir, f"one-{axis}")
    if RANK == 0:
        os.makedirs(d)
        for i in range(n):
            with h5py.File(os.path.join(d, f"s{i:04d}.h5"), "w") as f:
                f["img"] = img[i] if axis == "none" else img[i:i + 1]
                f["label"] = lab[i] if axis == "none" else lab[i:i + 1]
    COMM.Barrier()
    with open_loader(d, cache_dir, shard_size=8, sample_axis=axis, batch_size=4,
                     remainder="pad") as loader:
        assert [(f[0], f[2]) for f in loader.fields] == [("img", (3, 4)), ("label", ())]
        for epoch in range(2):
            ids = []
            for batch in loader.epoch(epoch):
                got = batch.ids.numpy().copy()
                np.testing.assert_array_equal(batch["img"].numpy(), img[got])
                np.testing.assert_array_equal(batch["label"].numpy(), lab[got])
                ids.extend(got[:batch.size - batch.padded])
            assert loader.verdict(epoch).ok
            counts = all_ids(ids)
            assert (counts[:n] == 1).all() and counts[n:].sum() == 0, epoch
    if axis == "none":  # read as if samples came first, the scalar label is refused, saying why
        with pytest.raises(shardcache.Error, match="'/label' is a scalar.*SC_FIELDS.*SC_SAMPLE_AXIS=none"):
            open_loader(d, cache_dir + "-first", shard_size=8)


def test_sample_axis_none_is_for_a_directory(dataset, cache_dir):
    with pytest.raises(shardcache.Error, match="one HDF5 file \\(layout A\\).*SC_SAMPLE_AXIS=none"):
        open_loader(dataset, cache_dir, sample_axis="none")


@pytest.mark.skipif(SIZE < 2, reason="needs 2 ranks or more")
def test_a_rank_0_closing_before_any_epoch_ends_the_others_wait(dataset, cache_dir):
    """Rank 0 opens and closes (an error caught before its loop) while the
    others begin epoch 0: they waited for its plan forever."""
    loader = open_loader(dataset, cache_dir, abort_on_error=False)
    if RANK == 0:
        loader.close()
        return
    with pytest.raises(shardcache.Error, match="rank 0 closed its loader before beginning "
                                               "any epoch"):
        for _ in loader.epoch(0):
            pass
    loader.close()


@pytest.mark.skipif(SIZE < 2, reason="needs 2 ranks or more")
@pytest.mark.parametrize("epochs", [0, 2])
def test_a_rank_closing_early_ends_the_others_wait(dataset, cache_dir, epochs):
    """Rank 0 closes in epoch 0 (as after an error it caught); the others go
    on and then wait for epoch 1's verdict, which rank 0 never joins: the
    wait fails, naming rank 0, instead of hanging.  Also where epoch 1 is
    the job's last (epochs=2): rank 0 says it closed in epoch 2's plan
    broadcast, which SC_EPOCHS holds back from the reads but still posts."""
    loader = open_loader(dataset, cache_dir, abort_on_error=False, epochs=epochs)
    if RANK == 0:
        next(iter(loader.epoch(0)))
        loader.close()
        return
    with pytest.raises(shardcache.Error, match="rank 0 closed its loader after beginning "
                                               "epoch 0, its last"):
        for epoch in range(3):
            for _ in loader.epoch(epoch):
                pass
            loader.verdict(epoch)
    loader.close()


@pytest.mark.skipif(SIZE != 1, reason="a read error on one rank of several ends the job")
def test_close_after_a_caught_error(shared_dir, cache_dir):
    """A file gone mid-epoch: the loader raises, naming it; the caller
    catches it and closes the loader, which does not raise it again."""
    d = os.path.join(shared_dir, "vanishing")
    os.makedirs(d)
    for k in range(4):
        with h5py.File(os.path.join(d, f"p{k}.h5"), "w") as f:
            f["x"] = np.full((10, 2), k, dtype=np.int32)
    loader = open_loader(d, cache_dir, shard_size=10, batch_size=5)
    os.remove(os.path.join(d, "p2.h5"))
    with pytest.raises(shardcache.Error, match="p2.h5"):
        for batch in loader.epoch(0):
            pass
    loader.close()  # quietly: the error was had


def test_default_shard_size_fits_the_small_set(dataset, cache_dir):
    """1,000 samples with SC_SHARD_SIZE's default: 334 auto shards of 3 (one
    1,024-sample shard before, which epoch 0 refused on 2 ranks); every
    sample once; with remainder=drop a batch that R ranks cannot fill from
    N samples (N < R x B) is refused by Loader(), not by the epoch, naming
    the sizes, and the largest batch they can fill (B = N // R: the
    remainder is cut at sample granularity, whatever the shards) opens and
    drops fewer than R x B samples."""
    settings = dict(source=dataset, cache_dir=cache_dir, batch_size=32, log=0)
    with shardcache.Loader(**settings) as loader:
        ids = []
        for batch in loader.epoch(0):
            ids.extend(batch.ids[:batch.size - batch.padded])
        assert loader.info["shards"] > 0
        counts = all_ids(ids)
        assert counts.max() <= 1 and loader.verdict(0)["ok"]
    big = SAMPLES // SIZE + 1
    with pytest.raises(shardcache.Error) as e:
        shardcache.Loader(**dict(settings, batch_size=big))
    assert e.value.status == "SC_EINVAL"
    assert (f"{SAMPLES} samples cannot give each of {SIZE} ranks a batch of {big} with "
            f"remainder=drop: that takes {SIZE * big} samples") in e.value.message
    fits = SAMPLES // SIZE
    with shardcache.Loader(**dict(settings, batch_size=fits)) as loader:
        ids = []
        for batch in loader.epoch(0):
            assert batch.size == fits and batch.padded == 0
            ids.extend(batch.ids[:batch.size])
        assert len(ids) == fits  # one batch on every rank
        counts = all_ids(ids)
        v = loader.verdict(0)
        assert v["ok"] and counts.max() == 1 and v["dropped"] == SAMPLES - SIZE * fits
        assert v["dropped"] < SIZE * fits


@pytest.mark.parametrize("samples,rows", [(100_000, 64), (1_000, 100)])
def test_default_shard_size_keeps_compressed_chunks_whole(shared_dir, cache_dir, capfd,
                                                          samples, rows):
    """SC_SHARD_SIZE=auto on an h5py gzip file in chunks of `rows` samples:
    a multiple of the chunk rows (384 of 64, 261 shards; one chunk of 100
    for 1,000 samples, 10 shards: the chunk wins over 256 shards), so no
    shard decompresses a chunk another shard also decompresses, and no
    warning of shards cutting through chunks."""
    path = os.path.join(shared_dir, f"chunked-{samples}.h5")
    if RANK == 0:
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=np.arange(samples * 4, dtype=np.int32).reshape(-1, 4),
                             chunks=(rows, 4), compression="gzip")
            f.create_dataset("y", data=np.arange(samples, dtype=np.int64), chunks=(rows,),
                             compression="gzip")
    COMM.Barrier()
    capfd.readouterr()
    with shardcache.Loader(source=path, cache_dir=cache_dir, batch_size=4, log=1):
        pass
    err = capfd.readouterr().err
    if RANK == 0:
        chosen = re.search(r"shard size (\d+) samples \(SC_SHARD_SIZE=auto", err)
        assert chosen, err
        size = int(chosen.group(1))
        assert size % rows == 0 and size >= rows, err
        assert size == (384 if samples == 100_000 else 100), err
        assert "cut through" not in err, err
