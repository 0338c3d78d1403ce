"""SC_AUGMENT's built-in stages against torchvision's own, under mpiexec -n 1, 2 and 4.

Every delivered sample equals torchvision's functional pipeline (TF.pad,
TF.crop, TF.hflip, ToTensor's /255, TF.normalize) on the source image for
exactly one crop offset and flip, bit for bit in float32, for images stored
channels first and channels last; every offset and both flips occur; the
delivered dtype and shape are what sc_loader_field reports; one producer
and three deliver the same bytes; the epoch is still exactly once; and bad
specs are refused at open with their reason.
"""
import os

import h5py
import numpy as np
import pytest
import torch
import torchvision.transforms.functional as TF
from mpi4py import MPI

import shardcache
from conftest import COMM, SAMPLES

RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
MEAN, STD = [0.49, 0.48, 0.45], [0.25, 0.24, 0.26]
CROP = "random_crop(4, padding=2);random_horizontal_flip;normalize(mean=0.49,0.48,0.45,std=0.25,0.24,0.26)"


@pytest.fixture(scope="module")
def images(dataset):
    with h5py.File(dataset, "r") as f:
        return f["images"][...]  # [n, 3, 6, 6]


@pytest.fixture(scope="module")
def hwc_dataset(shared_dir, images):
    """The same images stored channels last: [n, 6, 6, 3]."""
    path = os.path.join(shared_dir, "hwc.h5")
    if RANK == 0:
        with h5py.File(path, "w") as f:
            f["images"] = np.ascontiguousarray(images.transpose(0, 2, 3, 1))
            f["labels"] = np.arange(SAMPLES, dtype=np.int64)
    COMM.Barrier()
    return path


def open_loader(path, cache_dir, **kw):
    settings = dict(source=path, cache_dir=cache_dir, batch_size=16, shard_size=50,
                    shuffle="global", seed=11, log=0)
    settings.update(kw)
    return shardcache.Loader(**settings)


def torchvision_candidates(chw):
    """{(top, left, flip): RandomCrop(4, padding=2) + flip + ToTensor + Normalize}."""
    padded = TF.pad(torch.from_numpy(chw), [2])
    out = {}
    for top in range(padded.shape[1] - 4 + 1):
        for left in range(padded.shape[2] - 4 + 1):
            crop = TF.crop(padded, top, left, 4, 4)
            for flip in (0, 1):
                x = TF.hflip(crop) if flip else crop
                out[(top, left, flip)] = TF.normalize(x.float().div(255), MEAN, STD)
    return out


@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_stages_are_torchvisions(dataset, hwc_dataset, images, cache_dir, layout):
    spec = CROP + (";to_nchw" if layout == "hwc" else "")
    path = dataset if layout == "chw" else hwc_dataset
    seen, checked = set(), 0
    with open_loader(path, cache_dir, augment=spec, augment_layout=layout) as loader:
        assert loader.fields[0] == ("images", "float32", (3, 4, 4))
        for k, batch in enumerate(loader.epoch(0)):
            x = batch["images"]
            assert x.dtype == torch.float32 and x.shape == (16, 3, 4, 4)
            for j, i in enumerate(batch.ids[:8] if k < 4 else []):
                cands = torchvision_candidates(images[i])
                hits = [p for p, want in cands.items() if torch.equal(want, x[j])]
                assert len(hits) == 1, (i, hits)
                seen.add(hits[0])
                checked += 1
        assert loader.verdict(0).ok
    seen = COMM.allgather(seen)
    offsets = set().union(*seen)
    # 4 batches x 8 samples per rank: most of the 5 x 5 offsets and both flips appear.
    assert len({(t, l) for t, l, _ in offsets}) > 15 and {f for _, _, f in offsets} == {0, 1}
    assert checked == 32


def epoch_bytes(path, cache_dir, producers, spec, layout, epochs=2):
    out, ids = {}, []
    with open_loader(path, cache_dir, augment=spec, augment_layout=layout,
                     producers=producers, prefetch_batches=6,
                     shuffle="sticky", exchange=0) as loader:  # the same samples each epoch
        for epoch in range(epochs):
            for batch in loader.epoch(epoch):
                x = batch["images"]
                for j, i in enumerate(batch.ids):
                    out[(epoch, int(i))] = x[j].numpy().copy()
                ids.extend(batch.ids[:batch.size - batch.padded].tolist())
            assert loader.verdict(epoch).ok
        fields = loader.fields
    return out, ids, fields


@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_any_producer_count_the_same_bytes(dataset, hwc_dataset, cache_dir, layout):
    path = dataset if layout == "chw" else hwc_dataset
    spec = "random_crop(5,padding=1,padding_mode=reflect);random_vertical_flip(p=0.3);" \
           "normalize(mean=0.5,std=0.2,dtype=float16)"
    one, ids, fields = epoch_bytes(path, cache_dir + "-1", 1, spec, layout)
    three, _, _ = epoch_bytes(path, cache_dir + "-3", 3, spec, layout)
    shape = (3, 5, 5) if layout == "chw" else (5, 5, 3)
    assert fields[0] == ("images", "float16", shape)
    assert one.keys() == three.keys()
    for key, img in one.items():
        assert img.dtype == np.float16 and img.shape == shape
        np.testing.assert_array_equal(img, three[key])
    # A fresh draw every epoch: of the samples this rank got twice, most differ.
    both = [i for e, i in one if e == 0 and (1, i) in one]
    differ = COMM.allreduce(sum(not np.array_equal(one[(0, i)], one[(1, i)]) for i in both))
    assert differ > 0.5 * COMM.allreduce(len(both)) > 0
    counts = np.zeros(SAMPLES, dtype=np.int64)
    np.add.at(counts, np.asarray(ids, dtype=np.int64), 1)
    COMM.Allreduce(MPI.IN_PLACE, counts, op=MPI.SUM)
    assert counts.max() == 2  # two epochs, each exactly once (drop: some none)


def test_layout_change_alone_is_a_transpose(hwc_dataset, images, cache_dir):
    with open_loader(hwc_dataset, cache_dir, augment="images=ToNCHW()",
                     augment_layout="hwc") as loader:
        assert loader.fields[0] == ("images", "uint8", (3, 6, 6))
        for batch in loader.epoch(0):
            np.testing.assert_array_equal(batch["images"].numpy(), images[batch.ids])


@pytest.mark.parametrize("spec,why", [
    ("random_crop(32,padding=4)", "larger than the padded image"),
    ("color_jitter(0.4)", "unknown stage 'color_jitter'"),
    ("normalize(mean=0.5,std=0)", "std of 0"),
    ("labels=to_nhwc", "field '/labels' is not a fixed-shape 3-D uint8 image"),
    ("pixels=to_nhwc", "names field 'pixels'"),
])
def test_bad_specs_are_refused_at_open(dataset, cache_dir, spec, why):
    with pytest.raises(shardcache.Error) as e:
        open_loader(dataset, cache_dir, augment=spec)
    assert e.value.status == "SC_EINVAL" and why in e.value.message, e.value.message
