"""A PyTorch user's habits, under mpiexec -n 1, 2 and 4 (tests/python).

What a user brings from DataLoader and DistributedSampler, each of which
went silently wrong or failed before: tensors kept across the epoch (the
ring slot was reused under them), len() of an epoch and of the loader,
set_epoch then `for batch in loader`, iterating an epoch twice, a batch
used as a dict, int64 ids, unsigned fields torch 1.13 has no type for,
finish_epoch() after a break (the batches never taken were counted as
delivered), and the loader through torch's own DataLoader.
"""
import sys
import time
import warnings

import h5py
import numpy as np
import pytest
import torch
from mpi4py import MPI

import shardcache
from conftest import COMM
from test_loader import all_ids, open_loader, source

RANK, SIZE = COMM.Get_rank(), COMM.Get_size()


def test_tensors_kept_across_the_epoch_are_never_overwritten(dataset, cache_dir):
    images, labels = source(dataset)
    with open_loader(dataset, cache_dir, prefetch_batches=4, remainder="pad") as loader:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            kept = []
            for batch in loader.epoch(0):
                kept.append((batch.ids, batch["labels"], batch["images"], batch.copied,
                             batch.padded))
        # Once kept tensors held all but one slot, batches came as copies, said once.
        assert len(kept) > 4 and any(k[3] for k in kept) and not kept[0][3]
        copies = [w for w in seen if "arrive as copies" in str(w.message)]
        assert len(copies) == 1 and "SC_PREFETCH_BATCHES" in str(copies[0].message)
        for ids, y, x, _, _ in kept:
            np.testing.assert_array_equal(y.numpy(), labels[ids.numpy()])
            np.testing.assert_array_equal(x.numpy(), images[ids.numpy()])
        got = []
        for i, _, _, _, pad in kept:
            got.extend(i.numpy()[:len(i) - pad].tolist())
        assert loader.verdict(0).ok
        counts = all_ids(got)
        assert counts.min() == 1 and counts.max() == 1
        del kept, batch
        # Dropped: the slots are back, and batches are zero-copy again.
        for batch in loader.epoch(1):
            assert not batch.copied


def test_len_set_epoch_and_iterating_twice(dataset, cache_dir):
    with open_loader(dataset, cache_dir) as loader:
        n = len(loader)  # planned here: epoch 0 is not begun
        it = loader.epoch(0)
        assert len(it) == n == loader.info["batches"]
        seen = 0
        for batch in it:
            seen += 1
            assert len(it) == n - seen and len(loader) == n  # DataLoader's len stays
        assert seen == n
        with pytest.raises(ValueError, match="were all taken"):
            for batch in it:
                pass
        loader.set_epoch(1)
        assert sum(1 for _ in loader) == n
        assert loader.verdict(1).ok
        # Without set_epoch, each iteration of the loader is the next epoch: after
        # set_epoch, said (DistributedSampler would repeat epoch 1; a new user's
        # second pass consumed epoch 2 unawares, then set_epoch(2) was refused).
        with pytest.warns(UserWarning, match=r"no set_epoch since the last begins epoch 2, "
                                             r"the next one \(DistributedSampler would "
                                             r"repeat epoch 1\): call set_epoch\(2\)"):
            assert sum(1 for _ in loader) == n
        assert loader.verdict(2).ok


def test_a_batch_is_a_mapping_with_int64_ids(dataset, cache_dir):
    with open_loader(dataset, cache_dir) as loader:
        for batch in loader.epoch(0):
            assert "images" in batch and "pixels" not in batch and 3 not in batch
            assert list(batch.keys()) == ["images", "labels"] and len(batch) == 2
            assert [k for k, v in batch.items()] == ["images", "labels"]
            assert dict(batch)["labels"].shape == (16,)
            assert batch.ids.dtype == torch.int64 and torch.as_tensor(batch.ids).shape == (16,)
            assert batch.get("pixels") is None
            assert batch == batch and len({batch}) == 1  # one batch: identity, hashable
            break
        loader.finish_epoch()


def test_finish_epoch_counts_what_was_never_taken_as_skipped(dataset, cache_dir):
    with open_loader(dataset, cache_dir, remainder="pad") as loader:
        taken = 0
        for batch in loader.epoch(0):
            taken += batch.size - batch.padded
            if batch.index == 1:
                break
        del batch
        loader.finish_epoch()
        v = loader.verdict(0)
        total = COMM.allreduce(taken)
        assert not v.ok and v.caller_skipped == 1000 - total
        assert v.delivered == total
        assert "skipped by the caller" in v.detail
        # The next epoch is whole again.
        for batch in loader.epoch(1):
            pass
        assert loader.verdict(1).ok


def test_unsigned_fields_are_widened_for_torch(shared_dir, cache_dir):
    path = shared_dir + "/unsigned.h5"
    if RANK == 0:
        rng = np.random.default_rng(3)
        with h5py.File(path, "w") as f:
            f["depth"] = rng.integers(0, 65536, (200, 4), dtype=np.uint16)
            f["count"] = rng.integers(0, 2**32, 200, dtype=np.uint32)
    COMM.Barrier()
    with h5py.File(path, "r") as f:
        depth, count = f["depth"][...], f["count"][...]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loader = open_loader(path, cache_dir, batch_size=8, shard_size=10)
    assert RANK != 0 or any("uint16 -> int32" in str(w.message) for w in seen)
    with loader:
        for batch in loader.epoch(0):
            d, c = batch["depth"], batch["count"]
            assert d.dtype == torch.int32 and c.dtype == torch.int64
            ids = batch.ids.numpy()
            np.testing.assert_array_equal(d.numpy(), depth[ids])
            np.testing.assert_array_equal(c.numpy(), count[ids])
            assert batch.numpy("depth").dtype == np.uint16


def test_through_torch_dataloader(dataset, cache_dir):
    from shardcache.torch import IterableDataset
    images, labels = source(dataset)
    with open_loader(dataset, cache_dir) as loader:
        ds = IterableDataset(loader)
        dl = torch.utils.data.DataLoader(ds, batch_size=None)
        n = len(dl)
        for epoch in range(2):
            ds.set_epoch(epoch)
            got = []
            for k, batch in enumerate(dl):
                assert set(batch) == {"images", "labels", "ids"}
                np.testing.assert_array_equal(batch["labels"].numpy(),
                                              labels[batch["ids"].numpy()])
                got.extend(batch["ids"].tolist())
            assert k + 1 == n
            assert loader.verdict(epoch).ok
        state = ds.state_dict()
        assert state["rank"] == RANK
        with pytest.raises(ValueError, match="num_workers=0"):
            next(iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1)))


@pytest.mark.parametrize("setting,values", [("batch_size", (16, 17)), ("seed", (7, 8)),
                                            ("shuffle", ("global", "sticky")),
                                            ("bad_sample", ("error", "skip"))])
def test_settings_that_differ_between_ranks_are_refused_at_open(dataset, cache_dir, setting,
                                                                values):
    """A seed or batch size computed per rank (from the time, or the rank) was
    refused only at the first epoch's begin, as a plan 'with seed 0'."""
    if SIZE < 2:
        pytest.skip("needs 2 ranks or more")
    mine = values[0] if RANK < SIZE - 1 else values[1]
    with pytest.raises(shardcache.Error) as e:
        open_loader(dataset, cache_dir, **{setting: mine})
    name = "SC_" + setting.upper()
    assert e.value.status == "SC_EINVAL"
    assert (f"{name} is '{values[1]}' on rank {SIZE - 1} and '{values[0]}' on rank 0"
            in e.value.message)

def test_resume_given_on_some_ranks_only_fails_every_rank(dataset, cache_dir):
    """resume=load(p) if os.path.exists(p) else None, the checkpoint on one
    node's disk: the ranks with records waited in the resume's collectives
    while the others went on into their loops."""
    if SIZE < 2:
        pytest.skip("needs 2 ranks or more")
    with open_loader(dataset, cache_dir) as loader:
        next(iter(loader.epoch(0)))
        state = loader.state_dict()
        loader.finish_epoch()
    states = COMM.allgather(state)
    with pytest.raises(shardcache.Error) as e:
        open_loader(dataset, cache_dir, resume=states if RANK == 0 else None)
    assert e.value.status == "SC_EINVAL"
    assert ("resume= is given on some ranks and not on others (%s here)"
            % ("given" if RANK == 0 else "not given")) in e.value.message


@pytest.mark.parametrize("where", ["environment", "keyword"])
def test_settings_refused_on_one_rank_fail_every_rank(dataset, cache_dir, monkeypatch, where):
    """A value refused on one rank alone (SC_EPOCHS=abc left in one node's
    environment, epochs=0.5 on one rank) raised there before the open, and
    the other ranks waited in the open's collectives forever."""
    if SIZE < 2:
        pytest.skip("needs 2 ranks or more")
    bad = RANK == SIZE - 1
    kw = {}
    if bad and where == "environment":
        monkeypatch.setenv("SC_EPOCHS", "abc")
    elif bad:
        kw["epochs"] = 0.5
    with pytest.raises(shardcache.Error) as e:
        open_loader(dataset, cache_dir, **kw)
    assert e.value.status == "SC_EINVAL"
    shown = "SC_EPOCHS='abc'" if where == "environment" else "SC_EPOCHS='0.5'"
    assert e.value.message.startswith(f"rank {SIZE - 1}: ") and shown in e.value.message
    monkeypatch.delenv("SC_EPOCHS", raising=False)
    with open_loader(dataset, cache_dir) as loader:  # and the ranks go on together
        n = sum(1 for _ in loader.epoch(0))
        assert n > 0 and loader.verdict(0).ok


@pytest.mark.parametrize("depth", [1, 2, 3, "auto"])
def test_kept_labels_with_a_small_ring(dataset, cache_dir, depth):
    """With 2 slots, keeping labels raised 'all 2 batch buffers are held'.
    auto: 8 slots for these small batches, as the loader resolved it."""
    images, labels = source(dataset)
    with open_loader(dataset, cache_dir, prefetch_batches=depth) as loader:
        assert loader._c.depth == (8 if depth == "auto" else depth)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kept = [(b.ids, b["labels"]) for b in loader.epoch(0)]
        for ids, y in kept:
            np.testing.assert_array_equal(y.numpy(), labels[ids.numpy()])


def test_ctrl_c_while_waiting_keeps_the_batch(dataset, cache_dir):
    """An interrupt while next() waited gave the batch back, yet the ledger
    had counted it delivered: the verdict said ok for samples never seen."""
    import os
    import signal
    import threading
    if not shardcache.features()["testing"]:
        pytest.skip("needs a testing build (a slow source)")
    real = lambda b: b.ids[:b.size - b.padded].tolist()  # noqa: E731
    os.environ["SC_TEST_SOURCE_MBPS"] = "0.03"  # a batch takes ~15 ms to read: next() waits
    try:
        loader = open_loader(dataset, cache_dir, remainder="pad", prefetch_batches=3,
                             batch_size=4, stream_bytes="4K")  # no shard loaded far ahead
    finally:
        del os.environ["SC_TEST_SOURCE_MBPS"]
    with loader:
        ids, it = [], loader.epoch(0)
        ids.extend(real(next(it)))
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            with pytest.raises(KeyboardInterrupt):
                # Arrives while next() waits in C; raised once the batch is in.
                threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
                for _ in range(100):
                    ids.extend(real(next(it)))
        finally:
            signal.signal(signal.SIGINT, previous)
        for batch in loader.epoch(0):  # goes on: the interrupted batch first
            ids.extend(real(batch))
        assert loader.verdict(0).ok
        counts = all_ids(ids)
        assert counts.min() == 1 and counts.max() == 1


def test_tensors_kept_past_close_stay_theirs(dataset, cache_dir):
    """Metrics computed after the with-block: kept tensors read freed ring
    memory (ids out of range, wrong labels), silently."""
    images, labels = source(dataset)
    with open_loader(dataset, cache_dir, prefetch_batches=8) as loader:
        kept, last = [], None
        for batch in loader.epoch(0):
            kept.append((batch.ids, batch["labels"]))
            last = batch
    junk = [np.ones(1 << 20, dtype=np.uint8) for _ in range(8)]  # reuse freed memory
    for ids, y in kept:
        np.testing.assert_array_equal(y.numpy(), labels[ids.numpy()])
    np.testing.assert_array_equal(last.numpy("images"), images[last.ids.numpy()])
    del junk, kept, last  # frees the detached memory (valgrind and ASan would see a leak)


def test_len_then_set_epoch_of_a_later_start(dataset, cache_dir):
    """len() began epoch 0, so set_epoch(3) (resuming a schedule) raised."""
    with open_loader(dataset, cache_dir) as loader:
        n = len(loader)
        loader.set_epoch(3)
        assert sum(1 for _ in loader) == n == loader.info["batches"]
        assert loader.verdict(3).ok


def test_a_new_pass_after_a_break_is_the_next_epoch(dataset, cache_dir):
    """A max-steps loop went on in epoch 0 pass after pass, silently."""
    with open_loader(dataset, cache_dir) as loader:
        for p in range(3):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                for k, batch in enumerate(loader):
                    if k == 1:
                        break
            assert batch.epoch == p
            assert (p == 0) == (not any("a break?" in str(w.message) for w in seen))
        del batch
        loader.finish_epoch()
        assert loader.verdict(0).caller_skipped > 0 and not loader.verdict(0).ok
        # set_epoch of the same epoch goes on with it instead.
        loader.set_epoch(3)
        for k, batch in enumerate(loader):
            if k == 0:
                break
        loader.set_epoch(3)
        rest = sum(1 for _ in loader)
        assert rest == loader.info["batches"] - 1
        assert loader.verdict(3).ok


def test_a_python_callable_per_batch_runs_ahead(dataset, cache_dir):
    """batch_transform: fn(batch) on a thread ahead of the loop; the loop gets
    its results, and a checkpoint says what the loop got, not what the thread
    took (resumed, every sample exactly once)."""
    import threading
    images, labels = source(dataset)
    threads = set()

    def fn(batch):
        threads.add(threading.get_ident())
        return (batch["images"].float() / 255, batch["labels"],
                batch.ids[:batch.size - batch.padded].clone())

    settings = dict(remainder="pad", batch_transform=fn, batch_transform_ahead=3)
    with open_loader(dataset, cache_dir, **settings) as loader:
        it = loader.epoch(0)
        n, got = len(it), []
        for k, (x, y, ids) in enumerate(it):
            full = ids.numpy()
            np.testing.assert_array_equal(y.numpy()[:len(full)], labels[full])
            np.testing.assert_allclose(x.numpy()[:len(full)], images[full] / np.float32(255))
            got.extend(full.tolist())
            if k == 2:
                state = loader.state_dict()  # the thread has taken more by now
                break
        assert threading.get_ident() not in threads and n > 3
    states = COMM.allgather(state)
    with open_loader(dataset, cache_dir, resume=states, **settings) as loader:
        for x, y, ids in loader.epoch(0):
            got.extend(ids.tolist())
        assert loader.verdict(0).ok
    counts = all_ids(got)
    assert counts.min() == 1 and counts.max() == 1

    def bad(batch):
        raise RuntimeError(f"augment failed on batch {batch.index}")
    with open_loader(dataset, cache_dir, batch_transform=bad) as loader:
        with pytest.raises(RuntimeError, match="augment failed on batch 0"):
            next(iter(loader.epoch(0)))
        loader.finish_epoch()


@pytest.mark.parametrize("shuffle", ["sticky", "global"])
def test_len_before_every_pass(dataset, cache_dir, shuffle):
    """len() between epochs (tqdm, an LR schedule) began a sticky epoch that
    the next pass then took for a broken one: SC_EINVAL at epoch 1."""
    with open_loader(dataset, cache_dir, shuffle=shuffle) as loader:
        for epoch in range(3):
            n = len(loader)
            assert sum(1 for _ in loader) == n
            assert loader.verdict(epoch).ok and loader.info["epoch"] == epoch
        # After the last pass, len() begins no epoch (close then found a sticky
        # epoch 3 begun and "abandoned"): the count comes without a plan.
        assert len(loader) == n and loader.info["epoch"] == 2


@pytest.mark.parametrize("ahead,asked,depth", [(7, None, 11), (7, 4, 4), (2, None, 8)])
def test_batch_transform_gets_ring_room(dataset, cache_dir, ahead, asked, depth):
    """batch_transform's queue holds batches beside the loop's: the auto ring
    leaves room for them (ahead + 4 at least, or 8), a number given is kept.
    With ahead + 3 a loop holding two as the thread took the next (the one
    get() handed it, the one its variable still named) got copies, at times."""
    def fn(batch):
        return batch["labels"]

    with open_loader(dataset, cache_dir, batch_transform=fn, batch_transform_ahead=ahead,
                     prefetch_batches=asked) as loader:
        assert loader._c.depth == depth
        with warnings.catch_warnings():
            warnings.simplefilter("error" if asked is None else "ignore")  # no copies
            switch = sys.getswitchinterval()
            sys.setswitchinterval(1e-6)  # the thread takes between get() and the rebinding
            try:
                for _ in loader.epoch(0):
                    time.sleep(0.002)  # the queue fills: the thread waits to put
            finally:
                sys.setswitchinterval(switch)


@pytest.mark.parametrize("left", [1, 2, 5])
def test_batch_transform_never_counts_unseen_batches_delivered(dataset, cache_dir, left):
    """A break near the end with batch_transform: the thread had taken the
    rest, so the verdict said ok for samples the loop never got."""
    fn = lambda b: b.ids[:b.size - b.padded].clone()  # noqa: E731
    with open_loader(dataset, cache_dir, remainder="pad", batch_transform=fn,
                     batch_transform_ahead=3) as loader:
        n, got = len(loader), []
        for k, ids in enumerate(loader.epoch(0)):
            got.extend(ids.tolist())
            if k == n - 1 - left:
                break
        loader.finish_epoch()
        v = loader.verdict(0)
        seen = COMM.allreduce(len(got))
        assert v.delivered == seen and v.caller_skipped == 1000 - seen and not v.ok

    def fails_once(b):
        if b.index == 2:
            raise RuntimeError("no")
        return b.ids[:b.size - b.padded].clone()
    with open_loader(dataset, cache_dir, remainder="pad", batch_transform=fails_once) as loader:
        got = []
        try:
            for ids in loader.epoch(0):
                got.extend(ids.tolist())
        except RuntimeError:
            for ids in loader.epoch(0):  # goes on after the failed batch
                got.extend(ids.tolist())
        v = loader.verdict(0)
        seen = COMM.allreduce(len(got))
        assert v.delivered == seen and v.caller_skipped == 1000 - seen > 0


def test_partitions_give_the_same_global_batches_on_any_world(dataset, cache_dir):
    """partitions=P: the job's global batches (every rank's k-th, in rank
    order) are those of one process with the whole global batch."""
    images, _ = source(dataset)
    G = 16
    with open_loader(dataset, cache_dir, batch_size=G // SIZE, partitions=4,
                     remainder="pad") as loader:
        mine = [batch.ids.numpy().copy() for batch in loader.epoch(1)]
        for ids in mine:
            assert len(ids) == G // SIZE
        assert loader.verdict(1).ok
    glob = [np.concatenate(COMM.allgather(ids)) for ids in mine]
    if RANK == 0:
        with open_loader(dataset, cache_dir + "-one", comm=MPI.COMM_SELF, batch_size=G,
                         partitions=4, remainder="pad") as one:
            want = [(b.ids.numpy().copy(), b["images"].numpy().copy()) for b in one.epoch(1)]
        assert len(want) == len(glob)
        for (ids, x), got in zip(want, glob):
            np.testing.assert_array_equal(ids, got)
            np.testing.assert_array_equal(x, images[ids])
    COMM.Barrier()
    # A world size that does not divide P is refused, naming both.
    if SIZE == 1:
        with pytest.raises(shardcache.Error) as e:
            open_loader(dataset, cache_dir, batch_size=G, partitions=6, comm=MPI.COMM_SELF)
        assert "SC_PARTITIONS=6" in e.value.message or "multiple of SC_PARTITIONS=6" in e.value.message


def test_an_epoch_past_epochs_says_it_starts_cold(dataset, cache_dir, capfd):
    """Running past epochs=N (a loop's range longer than the job's count)
    was silent: it read nothing ahead, and its slower start went unexplained."""
    with open_loader(dataset, cache_dir, epochs=1, log=1) as loader:
        for epoch in range(2):
            for _ in loader.epoch(epoch):
                pass
            assert loader.verdict(epoch).ok
            err = capfd.readouterr().err
            said = "epoch 1 begun past SC_EPOCHS=1 (the job's epochs, 0 to 0)" in err
            assert said == (epoch == 1 and RANK == 0), err


def test_a_virtual_dataset_field(cache_dir):
    """A field that is an HDF5 virtual dataset: rank 0 alone asked for its
    property list, which under MPI-IO is collective, and the open hung; and
    this HDF5 reads no VDS through MPI-IO.  Shared by ranks: refused on
    every rank, naming the field.  One rank: its samples as h5py reads them."""
    import os
    root = cache_dir + "-vds"
    path = os.path.join(root, "vds.h5")
    x = np.arange(64 * 3, dtype=np.int32).reshape(64, 3)
    if RANK == 0:
        os.makedirs(root, exist_ok=True)
        layout = h5py.VirtualLayout(shape=(64, 3), dtype="int32")
        for k in range(2):
            src = os.path.join(root, f"part{k}.h5")
            with h5py.File(src, "w") as f:
                f["x"] = x[32 * k:32 * (k + 1)]
            layout[32 * k:32 * (k + 1)] = h5py.VirtualSource(src, "x", shape=(32, 3))
        with h5py.File(path, "w") as f:
            f.create_virtual_dataset("x", layout)
            f["y"] = np.arange(64, dtype=np.int64)
    COMM.Barrier()
    if SIZE > 1:
        with pytest.raises(shardcache.Error) as e:
            shardcache.Loader(source=path, batch_size=4, cache_dir=cache_dir, log=0,
                              abort_on_error=False)
        assert e.value.status == "SC_ENOTSUP"
        assert "field '/x' is a virtual dataset (HDF5 VDS)" in e.value.message
        return
    with shardcache.Loader(source=path, batch_size=4, cache_dir=cache_dir, log=0) as loader:
        for batch in loader.epoch(0):
            np.testing.assert_array_equal(batch["x"].numpy(), x[batch.ids.numpy()])
        assert loader.verdict(0).ok


def test_a_directory_says_what_hdf5_it_leaves_out(cache_dir, capfd):
    """A directory source takes *.h5 and *.hdf5: files named `x.H5` or
    `x.hdf`, and a subdirectory of more files, were left out in silence
    (an epoch short of them, its proof still exactly-once).  Rank 0 now
    names them; the samples delivered are the taken files', by value."""
    import os
    root = cache_dir + "-dir"
    parts = {"a.h5": 0, "b.hdf5": 1, "c.H5": 2, "d.hdf": 3, "sub/e.h5": 4}
    if RANK == 0:
        os.makedirs(os.path.join(root, "sub"), exist_ok=True)
        os.makedirs(os.path.join(root, "logs"), exist_ok=True)
        with open(os.path.join(root, "README.txt"), "w") as f:
            f.write("not data\n")
        for name, k in parts.items():
            with h5py.File(os.path.join(root, name), "w") as f:
                f["x"] = np.full((8, 2), k, dtype=np.int32)
    COMM.Barrier()
    capfd.readouterr()
    with shardcache.Loader(source=root, batch_size=2, cache_dir=cache_dir, log=1) as loader:
        ids = []
        for b in loader.epoch(0):
            np.testing.assert_array_equal(b["x"].numpy()[:, 0], b.ids.numpy() // 8)
            ids.append(b.ids.numpy().copy())
        assert loader.verdict(0).ok
    ids = np.concatenate(COMM.allgather(np.concatenate(ids)))
    assert len(np.unique(ids)) == len(ids) and ids.max() < 16  # a.h5, b.hdf5: 16 samples
    assert len(ids) == 16 - 16 % (2 * SIZE)  # an epoch's whole global batches
    err = capfd.readouterr().err
    files = "2 HDF5 file(s) left out, named neither *.h5 nor *.hdf5 ('c.H5' first)"
    dirs = "1 subdirectory(ies) holding *.h5 or *.hdf5 not searched ('sub' first)"
    assert (files in err) == (RANK == 0) and (dirs in err) == (RANK == 0), err
    assert "README" not in err and "logs" not in err


@pytest.mark.parametrize("fields", [" images , labels", "images, labels, ",
                                    "labels,images,/labels", "labels,images,//labels/"])
def test_fields_with_blanks_and_twice(dataset, cache_dir, fields):
    """SC_FIELDS written as Python lists are ("images, labels") was refused
    as a field '/ labels'; a dataset named twice was taken twice."""
    if fields.startswith("labels"):
        with pytest.raises(shardcache.Error) as e:
            shardcache.Loader(source=dataset, batch_size=4, cache_dir=cache_dir, log=0,
                              fields=fields, abort_on_error=False)
        assert "names one dataset of" in e.value.message
        assert "twice, as '/labels' and '/" in e.value.message
        return
    with shardcache.Loader(source=dataset, batch_size=4, cache_dir=cache_dir, log=0,
                           fields=fields) as loader:
        assert [f[0] for f in loader.fields] == ["images", "labels"]
        with h5py.File(dataset, "r") as f:
            images = f["images"][...]
        for batch in loader.epoch(0):
            np.testing.assert_array_equal(batch["images"].numpy(), images[batch.ids.numpy()])


def test_a_later_file_with_a_filter_shardcache_cannot_read_is_refused_at_open(cache_dir):
    """Layout B checked the first file's filters only: a later file written
    with h5py's LZF in chunks that split samples (which this HDF5 cannot
    load) opened, and its shard failed mid-epoch.  Refused at open now,
    naming that file and field."""
    import os
    root = cache_dir + "-lzf"
    if RANK == 0:
        os.makedirs(root, exist_ok=True)
        os.makedirs(root + "-one", exist_ok=True)
        x = np.zeros((200, 8), dtype=np.int32)  # compressible: LZF's chunks are kept
        with h5py.File(os.path.join(root, "a.h5"), "w") as f:
            f["x"] = x
        with h5py.File(os.path.join(root, "b.h5"), "w") as f:
            f.create_dataset("x", data=x, chunks=(50, 3), compression="lzf")
        for k in range(3):  # one sample a file, the last compressed
            with h5py.File(os.path.join(root + "-one", f"s{k}.h5"), "w") as f:
                f.create_dataset("x", data=x, chunks=(50, 8),
                                 compression="lzf" if k == 2 else None)
    COMM.Barrier()
    with pytest.raises(shardcache.Error) as e:
        shardcache.Loader(source=root, batch_size=2, cache_dir=cache_dir, log=0,
                          abort_on_error=False)
    assert e.value.status == "SC_ENOTSUP"
    assert f"source '{root}/b.h5': field '/x' is compressed with h5py's LZF" in e.value.message
    with pytest.raises(shardcache.Error) as e:
        shardcache.Loader(source=root + "-one", batch_size=1, cache_dir=cache_dir, log=0,
                          sample_axis="none", abort_on_error=False)
    assert e.value.status == "SC_ENOTSUP"
    assert (f"source '{root}-one/s2.h5': field '/x' needs HDF5 filter 32000 (LZF), "
            "which this HDF5 library cannot load") in e.value.message


def test_a_root_scalar_and_a_dangling_link(cache_dir):
    """h5py habits in "every field" mode: a scalar beside the samples
    (f["version"] = 3) was refused pointing at SC_SAMPLE_AXIS alone, and a
    soft link to nothing failed the listing with HDF5's "component not
    found".  The scalar's refusal names SC_FIELDS, with which the samples
    load by value; the dangling link is left out, said on rank 0, and so
    is a soft link to a field (it was a second copy of the field), but not
    an external link to another file's dataset at the same address."""
    import os
    path = cache_dir + "-meta.h5"
    x = np.arange(40, dtype=np.int32).reshape(20, 2)
    if RANK == 0:
        with h5py.File(path, "w") as f:
            f["x"] = x
            f["version"] = 3
            f["old"] = h5py.SoftLink("/gone")
            f["a_x"] = h5py.SoftLink("/x")  # sorts first: the dataset's other name
            f["ext"] = h5py.ExternalLink(path + "-ext", "/x")  # another dataset
        with h5py.File(path + "-ext", "w") as f:  # written alike: at /x's address
            f["x"] = x + 1
    COMM.Barrier()
    with pytest.raises(shardcache.Error) as e:
        shardcache.Loader(source=path, batch_size=2, cache_dir=cache_dir, log=0,
                          abort_on_error=False)
    assert "field '/version' is a scalar (0 dimensions)" in e.value.message
    assert "SC_FIELDS" in e.value.message
    with shardcache.Loader(source=path, batch_size=2, cache_dir=cache_dir, log=0,
                           fields="x") as loader:
        for batch in loader.epoch(0):
            np.testing.assert_array_equal(batch["x"].numpy(), x[batch.ids.numpy()])
    if RANK == 0:
        with h5py.File(path, "a") as f:
            del f["version"]
    COMM.Barrier()
    with shardcache.Loader(source=path, batch_size=2, cache_dir=cache_dir + "-2",
                           log=0) as loader:
        assert [f[0] for f in loader.fields] == ["ext", "x"]
        for batch in loader.epoch(0):
            np.testing.assert_array_equal(batch["ext"].numpy(), x[batch.ids.numpy()] + 1)


@pytest.mark.skipif(SIZE < 2, reason="needs 2 ranks or more")
def test_a_verdict_waited_for_on_some_ranks_says_so(dataset, cache_dir, capfd, monkeypatch):
    """`if rank == 0: validate()` with a loader opened on every rank: rank 0's
    verdict waits for the others to end the epoch, and waited in silence
    (for ever, where they never do).  It says so after a while (a minute;
    here a second), naming the way out; the verdict comes once they do."""
    monkeypatch.setenv("SC_TEST_VERDICT_SAY_S", "1")
    with open_loader(dataset, cache_dir, log=1) as loader:
        t0 = time.time()
        while RANK != 0 and time.time() - t0 < 2.5:  # busy elsewhere, in MPI now and then
            COMM.Iprobe()  # (rank 0's claims on their ledger need their MPI progress)
            time.sleep(0.001)
        for _ in loader.epoch(0):
            pass
        assert loader.verdict(0).ok
        err = capfd.readouterr().err
        said = "rank 0 has waited 1 s for epoch 0's exactly-once verdict" in err
        assert said == (RANK == 0), err
        assert ("MPI.COMM_SELF for rank 0 alone" in err) == (RANK == 0)


def test_a_peek_before_the_set_epoch_loop_is_said(dataset, cache_dir):
    """DataLoader's habit: next(iter(loader)) to see the shapes, then the
    set_epoch loop.  Here the peek takes epoch 0's first batch (an epoch
    gives each batch once), and the loop trained on one batch fewer, in
    silence.  It is said, naming loader.fields; a loop that breaks and goes
    on with set_epoch naming its epoch again is not warned."""
    with open_loader(dataset, cache_dir) as loader:
        n = len(loader)
        peek = next(iter(loader))
        assert peek.epoch == 0
        del peek
        loader.set_epoch(0)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            taken = sum(1 for _ in loader)
        assert taken == n - 1
        said = [str(x.message) for x in w if "epoch 0 goes on at batch 2" in str(x.message)]
        assert len(said) == 1 and "loader.fields" in said[0], [str(x.message) for x in w]
        assert loader.verdict(0).ok
        next(iter(loader))  # the same peek, then loader.epoch(e) rather than set_epoch
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert sum(1 for _ in loader.epoch(1)) == n - 1
        assert [x for x in w if "epoch 1 goes on at batch 2" in str(x.message)]
        loader.set_epoch(2)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in loader:
                break
            loader.set_epoch(2)
            taken = 1 + sum(1 for _ in loader)
        assert taken == n and not [x for x in w if "goes on" in str(x.message)]


def test_a_bool_a_single_state_dict_and_torch_save(dataset, cache_dir):
    """PyTorch habits: batch_size=True opened as a batch of 1 (a bool was
    its int); resume=ckpt["loader"] holding one state_dict() failed with
    "string argument without an encoding"; torch.save(loader) failed on a
    thread lock.  A bool is a switch's value and refused elsewhere; one
    state dict is taken as a list of one (enough on one rank, refused
    naming the count on more); saving the loader names state_dict()."""
    import io
    for bad in ({"batch_size": True}, {"trace": True}):  # trace=True wrote ./True
        with pytest.raises(shardcache.Error, match="takes a value, not a bool"):
            open_loader(dataset, cache_dir, abort_on_error=False, **bad)
    with open_loader(dataset, cache_dir, peers=False, log=False) as loader:
        with pytest.raises(TypeError, match="save loader.state_dict\\(\\) with the model"):
            torch.save(loader, io.BytesIO())
        n = len(loader)
        for k, _ in enumerate(loader.epoch(0)):
            if k == 1:
                state = loader.state_dict()
                break
    if SIZE > 1:
        with pytest.raises(shardcache.Error) as e:
            open_loader(dataset, cache_dir, resume=state, abort_on_error=False)
        assert (f"all {SIZE} are needed, 1 given" if RANK == 0
                else "rank 0 refused the checkpoints") in e.value.message
        return
    for given in (state, {0: state}):  # one state dict, and states by rank
        with open_loader(dataset, cache_dir, resume=given) as loader:
            assert loader.resumed_epoch == 0
            assert sum(1 for _ in loader.epoch(0)) == n - 2


def test_a_truncated_file_says_hdf5s_reason(dataset, cache_dir):
    """A file cut short (a copy killed mid-way) said only "cannot be opened
    as HDF5": HDF5's reason, which h5py shows, was cleared before it was
    read.  It is appended now."""
    import os
    import shutil
    path = cache_dir + "-cut.h5"
    if RANK == 0:
        shutil.copy(dataset, path)
        os.truncate(path, os.path.getsize(path) - 512)
    COMM.Barrier()
    with pytest.raises(shardcache.Error) as e:
        shardcache.Loader(source=path, batch_size=2, cache_dir=cache_dir, log=0,
                          abort_on_error=False)
    assert f"source '{path}' cannot be opened as HDF5 (HDF5: truncated file: eof = " \
        in e.value.message


def test_a_broken_vlen_heap_says_hdf5s_reason(cache_dir):
    """A variable-length field whose heap is damaged said only "cannot read
    its variable-length samples": the read's dataspaces were closed first,
    which clears HDF5's reason.  It is appended now, as h5py shows it."""
    path = cache_dir + "-vlen.h5"
    if RANK == 0:
        with h5py.File(path, "w") as f:
            d = f.create_dataset("img", (64,), dtype=h5py.vlen_dtype(np.uint8), chunks=(8,))
            for i in range(64):
                d[i] = np.full(10 + i, i, np.uint8)
            f["label"] = np.arange(64, dtype=np.int32)
        with open(path, "r+b") as f:
            raw = f.read()
            f.seek(raw.find(b"GCOL"))
            f.write(b"XXXX")
    COMM.Barrier()
    with pytest.raises(shardcache.Error) as e:
        shardcache.Loader(source=path, batch_size=2, cache_dir=cache_dir, log=0,
                          abort_on_error=False)
    assert ("field '/img': cannot read its variable-length samples "
            "(HDF5: bad global heap collection signature)") in e.value.message
