#!/usr/bin/env python3
"""bench/storage_loader.py: the DLIO-style baseline of bench/storage.py.

One MPI rank is one accelerator: a PyTorch DataLoader whose workers are
the read threads (MLPerf's read_threads), each item one h5py read of a
run of --run consecutive samples of one file (/images[i:i+run]; 1: one
sample a read; files kept open per worker as DLIO's HDF5 reader does), as
a numpy array.  The files are shuffled every epoch (DLIO's file_shuffle:
seed) and dealt to the ranks; a rank reads its files' samples in order
and groups them into batches of --batch in the training loop, which
sleeps --step seconds per batch (the accelerator's computation, what
DLIO does) and drops a last short batch.

  mpirun -np N python3 bench/storage_loader.py --dir DIR --rows R --batch B --step S
         [--epochs E] [--workers W] [--prefetch P] [--run K] [--seed S]

Rank 0 prints, over the epochs (the first is counted: nothing warms):
  dataloader: N ranks, E epochs, step S s: X MB/s, utilization U%, DLIO's AU A% (lowest rank L%)
as bench_deliver measures them: utilization, the steps' time over the
slowest rank's wall time (an epoch's, from the barrier that starts it to a
rank's last step), every step counted; DLIO's AU, MLPerf Storage's metric
as DLIO computes it: each rank's own epoch, its first step left out of both
the computation and the time, averaged over the ranks, then the epochs (the
computation at its nominal step time: DLIO measures its sleep).
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
    """(file, first row, rows) runs of at most `run` rows, one h5py read each; a
    worker keeps its files open (a few at a time)."""

    def __init__(self, files, rows, run):
        self.items = [(f, r, min(run, rows[f] - r)) for f in files for r in range(0, rows[f], run)]
        self.open = {}

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, row, n = self.items[i]
        f = self.open.get(path)
        if f is None:
            if len(self.open) >= 8:
                old = next(iter(self.open))
                self.open.pop(old).close()
            f = self.open[path] = h5py.File(path, "r")
        return np.asarray(f["images"][row:row + n])


class EpochSampler(torch.utils.data.Sampler):
    """This rank's samples for the epoch set last: its files of the shuffle, rows in order."""

    def __init__(self, data, rows, rank, size, seed):
        self.rows, self.rank, self.size, self.seed = rows, rank, size, seed
        self.first = {}
        self.runs = {}
        for at, (f, _, _) in enumerate(data.items):
            self.runs[f] = self.runs.get(f, 0) + 1
            self.first.setdefault(f, at)
        self.epoch = 0

    def indices(self):
        order = sorted(self.rows)
        random.Random(self.seed * 1000003 + self.epoch).shuffle(order)
        mine = order[self.rank :: self.size]
        out = []
        for f in mine:
            out.extend(range(self.first[f], self.first[f] + self.runs[f]))
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
    ap.add_argument("--rows", type=int, required=True, help="samples a file")
    ap.add_argument("--run", type=int, default=1, help="rows a read (consecutive, one file)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    files = sorted(os.path.join(a.dir, n) for n in os.listdir(a.dir) if n.endswith(".h5"))
    # The rows of every file, given as DLIO's configuration gives them: HDF5
    # opened here before the workers fork hung them now and then.
    rows = dict.fromkeys(files, a.rows)
    data = Samples(files, rows, a.run)
    sampler = EpochSampler(data, rows, rank, size, a.seed)
    # timeout: a worker the OOM killer ends must fail the run, not hang it
    more = dict(prefetch_factor=a.prefetch, persistent_workers=True, timeout=120) if a.workers else {}
    loader = torch.utils.data.DataLoader(data, batch_size=None, sampler=sampler,
                                         num_workers=a.workers, **more)
    busy = wall = moved = 0.0
    dlio = []  # DLIO's AU of each epoch: the ranks' mean, and the lowest
    for e in range(a.epochs):
        sampler.epoch = e
        comm.Barrier()
        t0 = time.perf_counter()
        batch, nbytes, held, steps = 0, 0, [], []
        for run in loader:  # a run's rows go into batches; a batch may span runs
            n, per = run.shape[0], run[0].numel() * run.element_size()
            held.append(run)  # the batch is held until its step ends, as a collate's would be
            while n:
                take = min(n, a.batch - batch)
                batch, n, nbytes = batch + take, n - take, nbytes + take * per
                if batch == a.batch:
                    s0 = time.perf_counter()
                    time.sleep(a.step)
                    steps.append((time.perf_counter() - s0, time.perf_counter() - t0))
                    moved += nbytes
                    batch, nbytes, held = 0, 0, [run] if n else []
        t = time.perf_counter() - t0
        busy += sum(s for s, _ in steps)
        wall += comm.allreduce(t, op=MPI.MAX)
        ranks = comm.allgather(dlio_au(steps, a.step, t))
        dlio.append((sum(ranks) / size, min(ranks)))
    total = comm.reduce(moved, op=MPI.SUM, root=0)
    busy = comm.reduce(busy, op=MPI.SUM, root=0)
    if rank == 0:
        print("dataloader: %d ranks, %d epochs, step %g s: %.1f MB/s, utilization %.1f%%, "
              "DLIO's AU %.1f%% (lowest rank %.1f%%)"
              % (size, a.epochs, a.step, total / wall / 1e6, 100 * busy / (wall * size),
                 100 * sum(m for m, _ in dlio) / max(1, len(dlio)),
                 100 * min((lo for _, lo in dlio), default=0)), flush=True)


def dlio_au(steps, step, wall):
    """DLIO's AU of one rank's epoch: its steps ((seconds, end) each) after the
    first at their nominal time `step` (DLIO measures its sleep, which on a
    busy machine runs over), over the wall time after the first one's end; 0
    with fewer than two steps, as DLIO's."""
    if len(steps) < 2 or wall <= steps[0][1]:
        return 0.0
    return (len(steps) - 1) * step / (wall - steps[0][1])


if __name__ == "__main__":
    main()
