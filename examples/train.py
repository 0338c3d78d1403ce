#!/usr/bin/env python3
"""A PyTorch training loop fed by shardcache (or, to compare, by PyTorch's own
DataLoader): a small convolutional network on the synthetic image dataset,
DistributedDataParallel over gloo, one process per MPI rank.

    mpirun -np 4 python3 examples/train.py --source data.h5 --epochs 3
    mpirun -np 4 python3 examples/train.py --source data.h5 --loader torch

The shardcache path is the few lines a DataLoader loop changes: the loader
(SC_* environment settings apply), `for batch in loader.epoch(e)`, and the
verdict.  Rank 0 prints, per epoch, the mean loss, samples/s, the share of
the step time spent waiting for data, and the exactly-once verdict; then
"loss: FIRST -> LAST".  --checkpoint FILE saves the model and every rank's
loader state after each epoch; --resume FILE continues from it (on any
number of ranks).  The images are scaled in the loader's producers, not in
the loop (SC_AUGMENT's normalize: uint8 to float32, as ToTensor and
Normalize); --augment adds torchvision's stages before it, e.g. CIFAR's
"random_crop(32,padding=4);random_horizontal_flip".
"""
import argparse
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from mpi4py import MPI

import shardcache


def options():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", default=os.environ.get("SC_SOURCE"),
                   help="HDF5 file with /images (uint8 [C,H,W]) and /labels (int64)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, help="default: SC_BATCH_SIZE, else 64")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, help="default: SC_SEED, else 7")
    p.add_argument("--loader", choices=["shardcache", "torch"], default="shardcache")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (--loader torch)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--step-ms", type=float, default=0,
                   help="extra compute per step, as a bigger model would take")
    p.add_argument("--augment", default="",
                   help="built-in stages before normalize (shardcache), e.g. "
                        "'random_crop(32,padding=4);random_horizontal_flip'")
    p.add_argument("--checkpoint", help="save model and loader state here after each epoch")
    p.add_argument("--resume", help="continue from this checkpoint")
    o = p.parse_args()
    o.batch_size = o.batch_size or int(os.environ.get("SC_BATCH_SIZE", 64))
    o.seed = o.seed if o.seed is not None else int(os.environ.get("SC_SEED", 7))
    if not o.source:
        p.error("--source (or SC_SOURCE) is required")
    return o


class Net(nn.Module):
    """Two convolutions and a linear layer over the pooled map: the synthetic
    classes differ pixel by pixel, so the map is kept, not averaged away."""

    def __init__(self, shape, classes):
        super().__init__()
        c, h, w = shape
        self.conv1 = nn.Conv2d(c, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16 * (h // 2) * (w // 2), classes)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.fc(torch.flatten(F.max_pool2d(x, 2), 1))


class H5Images(torch.utils.data.Dataset):
    """The same file for the DataLoader baseline: h5py, opened once per worker."""

    def __init__(self, path):
        import h5py
        self.path, self.f = path, None
        with h5py.File(path, "r") as f:
            self.n = len(f["labels"])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.f is None:
            import h5py
            self.f = h5py.File(self.path, "r")
        return torch.from_numpy(self.f["images"][i]), int(self.f["labels"][i])


class Source:
    """Batches of (images, labels) per epoch, and what the loader can prove."""

    def __init__(self, o, comm, resume):
        self.loader = None
        if o.loader == "shardcache":
            # The producers scale the images: the loop gets float32 in [0, 1].
            stages = f"{o.augment};" if o.augment else ""
            self.loader = shardcache.Loader(source=o.source, batch_size=o.batch_size,
                                            seed=o.seed, resume=resume,
                                            augment=f"images={stages}normalize(mean=0,std=1)")
            return
        ds = H5Images(o.source)
        self.sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=comm.Get_size(), rank=comm.Get_rank(), shuffle=True, seed=o.seed,
            drop_last=True)
        self.torch = torch.utils.data.DataLoader(
            ds, batch_size=o.batch_size, sampler=self.sampler, num_workers=o.workers,
            persistent_workers=o.workers > 0, drop_last=True)

    def __len__(self):
        """Batches per epoch on this rank (what a LR schedule would count)."""
        return len(self.loader) if self.loader else len(self.torch)

    def epoch(self, e):
        if self.loader:
            for batch in self.loader.epoch(e):
                yield batch["images"], batch["labels"]
        else:
            self.sampler.set_epoch(e)
            yield from self.torch

    def verdict(self, e):
        if not self.loader:
            return "exactly-once not checked (DataLoader)"
        v = self.loader.verdict(e)
        return "exactly-once ok" if v.ok else f"exactly-once FAILED: {v.detail}"

    def close(self):
        if self.loader:
            self.loader.close()


def train_epoch(o, net, opt, src, e):
    """One epoch; returns (summed loss, samples, seconds waiting for data, wall)."""
    loss_sum, n, wait = torch.zeros(()), 0, 0.0
    t0 = t = time.perf_counter()
    for x, y in src.epoch(e):
        wait += time.perf_counter() - t
        if x.dtype == torch.uint8:  # DataLoader's batches (shardcache's are scaled already)
            x = x.float().div_(255.0)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += loss.detach() * len(y)
        n += len(y)
        if o.step_ms:
            end = time.perf_counter() + o.step_ms / 1000.0
            while time.perf_counter() < end:
                pass
        t = time.perf_counter()
    return float(loss_sum), n, wait, time.perf_counter() - t0


def save(o, comm, net, opt, src, e):
    states = comm.gather(src.loader.state_dict() if src.loader else None, root=0)
    if comm.Get_rank() == 0:
        # A temporary of a name no one can guess or plant a link at (mkstemp:
        # O_EXCL, 0600), beside the checkpoint; the rename replaces whatever
        # is there, a link included, without writing through it.
        d, base = os.path.split(os.path.abspath(o.checkpoint))
        fd, tmp = tempfile.mkstemp(prefix=base + ".", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save({"epoch": e, "model": net.state_dict(), "opt": opt.state_dict(),
                            "loader": states}, f)
            os.replace(tmp, o.checkpoint)
        except BaseException:
            os.unlink(tmp)
            raise


def main():
    o = options()
    torch.set_num_threads(o.threads)
    comm, rank = MPI.COMM_WORLD, MPI.COMM_WORLD.Get_rank()
    shardcache.init_torch_distributed("gloo")
    ck = torch.load(o.resume) if o.resume else None
    src = Source(o, comm, ck["loader"] if ck else None)
    import h5py
    with h5py.File(o.source, "r") as f:
        shape, classes = f["images"].shape[1:], int(np.max(f["labels"][...])) + 1
    torch.manual_seed(0)
    net = nn.parallel.DistributedDataParallel(Net(shape, classes))
    opt = torch.optim.SGD(net.parameters(), lr=o.lr, momentum=0.9)
    first = 0
    if ck:
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        first = src.loader.resumed_epoch if src.loader else ck["epoch"] + 1
    losses = []
    for e in range(first, first + o.epochs):
        if rank == 0 and e == first:
            print(f"{len(src)} batches per rank per epoch", flush=True)
        loss, n, wait, wall = train_epoch(o, net, opt, src, e)
        verdict = src.verdict(e)
        loss, n, wait = comm.allreduce(np.array([loss, n, wait]))
        wall = comm.allreduce(wall, op=MPI.MAX)
        losses.append(loss / n)
        if rank == 0:
            print(f"epoch {e}: loss {loss / n:.4f}, {n / wall:.0f} samples/s, data wait "
                  f"{100 * wait / (wall * comm.Get_size()):.1f}% of step time, {verdict}",
                  flush=True)
        if o.checkpoint:
            save(o, comm, net, opt, src, e)
    src.close()
    if rank == 0:
        print(f"loss: {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)


if __name__ == "__main__":
    main()
