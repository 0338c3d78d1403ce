#!/usr/bin/python3
"""bench/augment: CIFAR's training augmentations built in (SC_AUGMENT) against
the same torchvision transforms in a DataLoader.

  augment.py --dir TMP [--samples N] [--epochs E] [--doc FILE]

The package must be importable (PYTHONPATH=BUILD/python).  The dataset:
N uint8 3x32x32 images and int64 labels in one HDF5 file, batch 256; the
pipeline RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor's /255
and Normalize(CIFAR's mean and std) into float32 NCHW batches.

  - shardcache: Loader(augment=...) with 1 and 2 producers, one rank; an
    epoch to fill the cache, then E epochs timed; and the same loader
    without SC_AUGMENT (the copy alone) for reference;
  - shardcache with batch_transform: the same pipeline as a Python callable
    per batch (torch ops on the whole batch, run on the package's thread
    ahead of the loop), 1 and 2 producers;
  - torchvision: a map-style Dataset over the images already in memory (no
    I/O at all: only the transforms and the collation are timed), the
    transforms applied per sample on tensors, DataLoader(batch_size=256,
    shuffle=True) with 1 and 2 workers; one epoch to start the workers,
    then E epochs timed.
Each loop touches every batch (its first element) and nothing else.
Samples/s is samples delivered over the timed epochs' wall time.
"""
import argparse
import os
import time

import h5py
import numpy as np
import torch
import torchvision.transforms as T

import shardcache

BATCH = 256
MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
SPEC = ("random_crop(32, padding=4); random_horizontal_flip; normalize(mean=%s, std=%s)"
        % (",".join(map(str, MEAN)), ",".join(map(str, STD))))


def make(path, n):
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        f["images"] = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
        f["labels"] = rng.integers(0, 10, n, dtype=np.int64)


def cifar_batch(batch):
    """CIFAR's pipeline on a whole uint8 batch in torch: pad 4, a random 32x32
    crop and a coin-flip mirror per sample, /255, normalize."""
    x = torch.nn.functional.pad(batch["images"], (4, 4, 4, 4))
    b = x.shape[0]
    rows = torch.randint(0, 9, (b, 1)) + torch.arange(32)
    cols = torch.randint(0, 9, (b, 1)) + torch.arange(32)
    x = x[torch.arange(b)[:, None, None, None], torch.arange(3)[None, :, None, None],
          rows[:, None, :, None], cols[:, None, None, :]]
    x = torch.where((torch.rand(b) < 0.5)[:, None, None, None], x.flip(-1), x)
    mean, std = torch.tensor(MEAN)[:, None, None], torch.tensor(STD)[:, None, None]
    return {"images": (x.float() / 255 - mean) / std, "labels": batch["labels"]}


def shardcache_rate(path, cache, producers, epochs, augment, fn=None):
    with shardcache.Loader(source=path, cache_dir=cache, batch_size=BATCH, shard_size=1024,
                           shuffle="global", producers=producers, prefetch_batches=8,
                           augment=augment, batch_transform=fn, log=0) as loader:
        for _ in loader.epoch(0):  # fills the cache
            pass
        n, t0 = 0, time.perf_counter()
        for e in range(1, epochs + 1):
            for batch in loader.epoch(e):
                x = batch["images"]
                x[0, 0, 0, 0].item()
                n += x.shape[0]
        return n / (time.perf_counter() - t0), tuple(x.shape), str(x.dtype)


class Images(torch.utils.data.Dataset):
    def __init__(self, images, labels, tf):
        self.images, self.labels, self.tf = torch.from_numpy(images), labels, tf

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.tf(self.images[i]), int(self.labels[i])


def torchvision_rate(images, labels, workers, epochs):
    tf = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
                    T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)])
    dl = torch.utils.data.DataLoader(Images(images, labels, tf), batch_size=BATCH, shuffle=True,
                                     num_workers=workers, persistent_workers=True,
                                     drop_last=True)
    for _ in dl:  # starts the workers
        pass
    n, t0 = 0, time.perf_counter()
    for _ in range(epochs):
        for x, _ in dl:
            x[0, 0, 0, 0].item()
            n += x.shape[0]
    return n / (time.perf_counter() - t0), tuple(x.shape), str(x.dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--samples", type=int, default=50000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--doc")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "cifar.h5")
    make(path, a.samples)
    with h5py.File(path, "r") as f:
        images, labels = f["images"][...], f["labels"][...]
    rows = []
    for p in (1, 2):
        for aug in ("", SPEC):
            r, shape, dt = shardcache_rate(path, os.path.join(a.dir, f"cache{p}"), p, a.epochs,
                                           aug)
            what = "shardcache SC_AUGMENT" if aug else "shardcache, no augmentation"
            rows.append((what, f"{p} producer{'s' * (p > 1)}", r, shape, dt))
        r, shape, dt = shardcache_rate(path, os.path.join(a.dir, f"cache{p}"), p, a.epochs, "",
                                       cifar_batch)
        rows.append(("shardcache batch_transform (Python, per batch)",
                     f"{p} producer{'s' * (p > 1)} + 1 thread", r, shape, dt))
    for w in (1, 2):
        r, shape, dt = torchvision_rate(images, labels, w, a.epochs)
        rows.append(("torchvision DataLoader", f"{w} worker{'s' * (w > 1)}", r, shape, dt))
    lines = ["| loop | threads | samples/s | batch |", "|---|---|---:|---|"]
    for what, threads, r, shape, dt in rows:
        lines.append(f"| {what} | {threads} | {r:,.0f} | {dt} {list(shape)} |")
    text = "\n".join(lines)
    print(text)
    print(f"{a.samples} samples, batch {BATCH}, {a.epochs} timed epochs, "
          f"{os.cpu_count()} cores online")


if __name__ == "__main__":
    main()
