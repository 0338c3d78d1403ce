"""bench/jpeg_loader.py FILE [--workers 1,2] [--batch 64] [--crop 224] [--epochs 2]

The CPU transformation wall's baseline (issue 21, benchmark (a)): PyTorch's
DataLoader over a JPEG set (make-dataset --encode jpeg, or any h5py file
whose /images is vlen uint8 and /labels int), each sample decoded by PIL
and cropped by torchvision's RandomResizedCrop and RandomHorizontalFlip
(PILToTensor: uint8, as shardcache's decoder delivers), shuffled, one
h5py handle per worker.  Prints samples/s per worker count (the first
epoch's first 2 batches, the workers' start, off the clock), and PIL's
own decode-and-crop rate in this process, one thread.
"""
import argparse
import io
import time

import h5py
import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


class JpegSet(Dataset):
    def __init__(self, path, crop):
        self.path, self.h5 = path, None
        with h5py.File(path, "r") as f:
            self.n = len(f["labels"])
        self.tf = transforms.Compose([transforms.RandomResizedCrop(crop),
                                      transforms.RandomHorizontalFlip(),
                                      transforms.PILToTensor()])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.h5 is None:  # per worker: h5py handles do not cross fork
            self.h5 = h5py.File(self.path, "r")
        img = Image.open(io.BytesIO(self.h5["images"][i].tobytes())).convert("RGB")
        return self.tf(img), int(self.h5["labels"][i])


def loader_rate(ds, workers, batch, epochs):
    dl = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
                    persistent_workers=workers > 0)
    n, t0 = 0, None
    for _ in range(epochs):
        for k, (x, y) in enumerate(dl):
            assert x.dtype == torch.uint8 and x.shape[1:] == (3, ds.crop, ds.crop)
            if t0 is None and k == 1:
                t0 = time.perf_counter()
            elif t0 is not None:
                n += len(y)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--crop", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ds = JpegSet(a.file, a.crop)
    ds.crop = a.crop
    with h5py.File(a.file, "r") as f:
        blobs = [f["images"][i].tobytes() for i in range(min(500, ds.n))]
    t0 = time.perf_counter()
    for b in blobs:
        ds.tf(Image.open(io.BytesIO(b)).convert("RGB"))
    single = len(blobs) / (time.perf_counter() - t0)
    print(f"pil: one thread, decode + crop {a.crop}: {single:.0f} samples/s")
    for w in [int(x) for x in a.workers.split(",")]:
        print(f"dataloader: {w} workers, batch {a.batch}: "
              f"{loader_rate(ds, w, a.batch, a.epochs):.0f} samples/s")


if __name__ == "__main__":
    main()
