#!/usr/bin/env python3
"""bench/storage_loader.py: the DLIO-style baseline of bench/storage.py.

One MPI rank is one accelerator: a PyTorch DataLoader whose workers are
the read threads (MLPerf's read_threads), each item one sample read with
h5py from its file (/images[i]: one read per sample, files kept open per
worker as DLIO's HDF5 reader does), as a numpy array.  The files are
shuffled every epoch (DLIO's file_shuffle: seed) and dealt to the ranks;
a rank reads its files' samples in order and groups them into batches of
--batch in the training loop, which sleeps --step seconds per batch (the
accelerator's computation, what DLIO does) and drops a last short batch.

  mpirun -np N python3 bench/storage_loader.py --dir DIR --batch B --step S
         [--epochs E] [--workers W] [--prefetch P] [--seed S]

Rank 0 prints, over the epochs (the first is counted: nothing warms):
  dataloader: N ranks, E epochs, step S s: X MB/s, utilization U% (min V%)
utilization: each rank's computation over its wall time (the epoch's, from
the barrier that starts it to the rank's last step), averaged over ranks.
"""
import argparse
import os
import random
import time

import h5py
import numpy as np
import torch
from mpi4py import MPI


class Samples(torch.utils.data.Dataset):
    """(file, row) pairs; a worker keeps its files open (a few at a time)."""

    def __init__(self, files, rows):
        self.items = [(f, r) for f in files for r in range(rows[f])]
        self.open = {}

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, row = self.items[i]
        f = self.open.get(path)
        if f is None:
            if len(self.open) >= 8:
                old = next(iter(self.open))
                self.open.pop(old).close()
            f = self.open[path] = h5py.File(path, "r")
        return np.asarray(f["images"][row])


class EpochSampler(torch.utils.data.Sampler):
    """This rank's samples for the epoch set last: its files of the shuffle, rows in order."""

    def __init__(self, data, rows, rank, size, seed):
        self.rows, self.rank, self.size, self.seed = rows, rank, size, seed
        self.first = {}
        for at, (f, _) in enumerate(data.items):
            self.first.setdefault(f, at)
        self.epoch = 0

    def indices(self):
        order = sorted(self.rows)
        random.Random(self.seed * 1000003 + self.epoch).shuffle(order)
        mine = order[self.rank :: self.size]
        out = []
        for f in mine:
            out.extend(range(self.first[f], self.first[f] + self.rows[f]))
        return out

    def __iter__(self):
        return iter(self.indices())

    def __len__(self):
        return len(self.indices())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--step", type=float, required=True)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    files = sorted(os.path.join(a.dir, n) for n in os.listdir(a.dir) if n.endswith(".h5"))
    rows = {}
    for f in files:  # the rows of every file: what DLIO's file list gives it
        with h5py.File(f, "r") as h:
            rows[f] = h["images"].shape[0]
    data = Samples(files, rows)
    sampler = EpochSampler(data, rows, rank, size, a.seed)
    loader = torch.utils.data.DataLoader(
        data, batch_size=None, sampler=sampler, num_workers=a.workers,
        prefetch_factor=a.prefetch if a.workers else None, persistent_workers=a.workers > 0)
    busy = wall = moved = 0.0
    for e in range(a.epochs):
        sampler.epoch = e
        comm.Barrier()
        t0 = time.perf_counter()
        batch, nbytes = 0, 0
        for sample in loader:
            batch += 1
            nbytes += sample.numel() * sample.element_size()
            if batch == a.batch:
                time.sleep(a.step)
                busy += a.step
                moved += nbytes
                batch, nbytes = 0, 0
        wall += time.perf_counter() - t0
    au = busy / wall if wall else 0.0
    aus = comm.gather(au, root=0)
    total = comm.reduce(moved, op=MPI.SUM, root=0)
    slowest = comm.reduce(wall, op=MPI.MAX, root=0)
    if rank == 0:
        print("dataloader: %d ranks, %d epochs, step %g s: %.1f MB/s, utilization %.1f%% (min %.1f%%)"
              % (size, a.epochs, a.step, total / slowest / 1e6, 100 * sum(aus) / len(aus),
                 100 * min(aus)), flush=True)


if __name__ == "__main__":
    main()
