#!/usr/bin/python3
"""bench/compare: shardcache against what users would pick instead, and
against the machine's limits, side by side in one run.

  compare.py compare    --bin DIR --dir TMP [--size MiB] [--runs N] [--doc FILE]
  compare.py starvation --bin DIR --dir TMP [--size MiB] [--doc FILE]

compare: on one synthetic HDF5 dataset (uint8 3x64x64 images, int64
labels), batch 256, a global shuffle per epoch, 2 epochs after a warm-up,
4 ranks (mpirun --oversubscribe) against 4 workers:
  - shardcache, sticky and global mode, host delivery (bench_deliver);
  - PyTorch DataLoader(num_workers=4, pin_memory=True, shuffle=True) over
    an h5py Dataset reading one sample at a time (the usual baseline);
  - h5py reading whole 1024-sample chunks in shuffled chunk order, no
    per-sample shuffle (Petastorm's row-group shuffle: the strong baseline),
    in 4 DataLoader workers (each chunk shipped to the loop's process), and
    in-process, nothing shipped: sliced into new arrays as the workers do
    (one process), and read_direct into two reused buffers (one process,
    and one process per core, each its share of the chunks);
  - the limits: pread of the file from the page cache and memcpy; and the
    shuffled copy, the copy any loader that shuffles samples must make
    (bench_deliver --gather: the same 4 processes copy the samples, in a
    uniformly random order, from the page cache into rings of 8 batches,
    with no loader); all in the same run.
Each figure is the median of N rounds, the methods interleaved in every
round so that the machine's noise hits them alike.

starvation: a training loop whose step takes --step-ms (a sleep: the
consumer thread waits for the GPU) fed by shardcache and by the DataLoader
baseline, swept from 0 to 20 ms: consumer wait and utilization (step time /
wall time), with an SVG plot.
"""
import argparse
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

BATCH, CHUNK, WORKERS, RANKS = 256, 1024, 4, 4


class Samples(Dataset):
    """One sample per __getitem__, read with h5py: what a user writes first."""

    def __init__(self, path):
        self.path, self.f = path, None
        with h5py.File(path, "r") as f:
            self.n = len(f["labels"])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.f is None:  # one handle per worker process
            self.f = h5py.File(self.path, "r")
            self.x, self.y = self.f["images"], self.f["labels"]
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i])


class Chunks(Dataset):
    """A whole chunk of consecutive samples per __getitem__."""

    def __init__(self, path):
        self.path, self.f = path, None
        with h5py.File(path, "r") as f:
            self.n = len(f["labels"])

    def __len__(self):
        return (self.n + CHUNK - 1) // CHUNK

    def __getitem__(self, k):
        if self.f is None:
            self.f = h5py.File(self.path, "r")
            self.x, self.y = self.f["images"], self.f["labels"]
        lo, hi = k * CHUNK, min(self.n, (k + 1) * CHUNK)
        return torch.from_numpy(self.x[lo:hi]), torch.from_numpy(self.y[lo:hi])


def chunk_reads(path, epochs, rank=0, size=1, barrier=None, direct=True):
    """The chunk reader in this process (no workers, nothing shipped): every
    size-th chunk of each epoch's shuffled chunk order from `rank` on, handed
    on as torch tensors; direct: read by h5py straight into one of two
    reused buffers (read_direct: no 12 MB allocation to fault in per chunk),
    else sliced into new arrays as Chunks does.  (samples, bytes, seconds)
    of `epochs` after a warm-up."""
    with h5py.File(path, "r") as f:
        x, y = f["images"], f["labels"]
        n = len(y)
        bufs = [(np.empty((CHUNK,) + x.shape[1:], x.dtype), np.empty(CHUNK, y.dtype))
                for _ in range(2)]
        samples = nbytes = 0
        for e in range(1 + epochs):
            if e == 1:  # after the warm-up, together with the other processes
                if barrier:
                    barrier.wait()
                t0 = time.perf_counter()
            order = np.random.default_rng(e).permutation((n + CHUNK - 1) // CHUNK)
            for i, k in enumerate(order[rank::size]):
                lo, hi = k * CHUNK, min(n, (k + 1) * CHUNK)
                if direct:
                    bx, by = (b[:hi - lo] for b in bufs[i % 2])
                    x.read_direct(bx, np.s_[lo:hi])
                    y.read_direct(by, np.s_[lo:hi])
                else:
                    bx, by = x[lo:hi], y[lo:hi]
                xt, yt = torch.from_numpy(bx), torch.from_numpy(by)
                if e:
                    samples += len(yt)
                    nbytes += xt.numel() * xt.element_size() + yt.numel() * yt.element_size()
        return samples, nbytes, time.perf_counter() - t0


def chunk_run(path, epochs, procs, direct=True):
    """Samples/s and bytes/s of chunk_reads in `procs` processes (forked,
    each its share, clocks started together)."""
    if procs == 1:
        s, b, t = chunk_reads(path, epochs, direct=direct)
        return s / t, b / t
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=lambda r: results.put(chunk_reads(path, epochs, r, procs, barrier)),
                      args=(r,)) for r in range(procs)]
    for p in ps:
        p.start()
    got = [results.get() for _ in ps]
    for p in ps:
        p.join()
    secs = max(t for _, _, t in got)
    return sum(s for s, _, _ in got) / secs, sum(b for _, b, _ in got) / secs


def loader(kind, path):
    if kind == "samples":
        return DataLoader(Samples(path), batch_size=BATCH, shuffle=True,
                          num_workers=WORKERS, pin_memory=True, persistent_workers=True,
                          drop_last=True)
    return DataLoader(Chunks(path), batch_size=None, shuffle=True, num_workers=WORKERS,
                      pin_memory=True, persistent_workers=True)


def epochs_of(dl, epochs, step_s=0.0):
    """Samples/s, bytes/s, wait share, utilization over `epochs` epochs."""
    samples = nbytes = 0
    wait = busy = 0.0
    t0 = time.perf_counter()
    for _ in range(epochs):
        it = iter(dl)
        while True:
            w0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - w0
            samples += len(y)
            nbytes += x.numel() * x.element_size() + y.numel() * y.element_size()
            if step_s > 0:
                s0 = time.perf_counter()
                time.sleep(step_s)
                busy += time.perf_counter() - s0
    secs = time.perf_counter() - t0
    return samples / secs, nbytes / secs, wait / secs, busy / secs


def python_run(kind, path, epochs, step_s=0.0):
    dl = loader(kind, path)
    epochs_of(dl, 1)  # warm-up: workers up, page cache warm
    return epochs_of(dl, epochs, step_s)


def bench_deliver(args, options, pattern, env=None):
    """Runs bench_deliver on RANKS ranks; the floats its line's `pattern`
    captures, or exits naming the command."""
    cmd = ["mpirun", "-np", str(RANKS), "--oversubscribe",
           os.path.join(args.bin, "bench_deliver")] + options
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = re.search(pattern, out.stdout)
    if out.returncode or not m:
        sys.exit(f"compare: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return [float(g) for g in m.groups()]


def shardcache_run(args, mode, epochs, step_s=0.0):
    """One job from a cold cache: its own warm-up epoch fills it, as a
    first job on a node would (a later job on the same nodes starts warm)."""
    cache = os.path.join(args.dir, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, SC_SOURCE=args.data, SC_CACHE_DIR=cache,
               SC_SHUFFLE=mode, SC_BATCH_SIZE=str(BATCH), SC_SHARD_SIZE=str(CHUNK),
               SC_LOG="0")
    s, mb, w, u = bench_deliver(
        args, ["--epochs", str(epochs), "--warmup", "1", "--step-ms", str(step_s * 1e3)],
        r"deliver: .*: ([0-9.]+) samples/s, ([0-9.]+) MB/s, wait ([0-9.]+)%, "
        r"taking [0-9.]+%, utilization ([0-9.]+)%, exactly-once ok", env)
    return s, mb * 1e6, w / 100, u / 100


def shuffled_copy(args):
    """Bytes/s of the shuffled-sample copy that batch assembly needs, with
    the loader's processes on the same cores (2 epochs after a warm-up)."""
    _, mb = bench_deliver(args, ["--gather", args.data, "--epochs", "2", "--warmup", "1"],
                          r"gather: .*: ([0-9.]+) samples/s, ([0-9.]+) MB/s")
    return mb * 1e6


def pread_limit(path):
    """The file's bytes from the page cache, 8 MiB preads, one thread."""
    size = os.path.getsize(path)
    buf = bytearray(8 << 20)
    fd = os.open(path, os.O_RDONLY)
    try:
        t0 = time.perf_counter()
        off = 0
        while off < size:
            off += os.preadv(fd, [buf], off) or size
        return size / (time.perf_counter() - t0)
    finally:
        os.close(fd)


def memcpy_limit(nbytes):
    """The same bytes, batch by batch, into a ring of 8 batches (numpy's copy
    is memcpy); the second of two passes, so no page is touched first."""
    src = np.ones(nbytes, dtype=np.uint8)
    ring = np.ones((8, BATCH * 12296), dtype=np.uint8)
    step = ring.shape[1]
    for _ in range(2):
        t0 = time.perf_counter()
        for k, at in enumerate(range(0, nbytes - step, step)):
            np.copyto(ring[k % 8], src[at:at + step])
        secs = time.perf_counter() - t0
    return (nbytes - nbytes % step) / secs


def write_doc(path, name, text):
    """Replaces the block between <!-- bench:NAME --> markers (or appends it)."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    doc = open(path).read() if os.path.exists(path) else ""
    block = f"{begin}\n{text}{end}"
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
    else:
        doc += "\n" + block + "\n"
    open(path, "w").write(doc)


def make_dataset(args):
    args.data = os.path.join(args.dir, "data.h5")
    if not os.path.exists(args.data):
        n = (args.size << 20) // (3 * 64 * 64 + 8)
        subprocess.run([os.path.join(args.bin, "shardcache"), "make-dataset", "--out", args.data,
                        "--samples", str(n), "--shape", "3x64x64", "--dtype", "uint8",
                        "--labels", "10", "--seed", "1"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    with h5py.File(args.data, "r") as f:
        return len(f["labels"])


def compare(args):
    n = make_dataset(args)
    cores = os.cpu_count()
    dataloader = "PyTorch DataLoader, h5py per sample (4 workers)"
    chunks = ["h5py whole chunks, shuffled chunk order (4 DataLoader workers)",
              "h5py whole chunks, shuffled chunk order, in-process, new arrays (1 process)",
              "h5py whole chunks, shuffled chunk order, in-process, read_direct (1 process)",
              f"h5py whole chunks, shuffled chunk order, in-process, read_direct ({cores} processes, "
              "one per core)"]
    methods = [
        ("shardcache, sticky (4 ranks)", lambda: shardcache_run(args, "sticky", 2)),
        ("shardcache, global (4 ranks)", lambda: shardcache_run(args, "global", 2)),
        (dataloader, lambda: python_run("samples", args.data, 2)),
        (chunks[0], lambda: python_run("chunks", args.data, 2)),
        (chunks[1], lambda: chunk_run(args.data, 2, 1, direct=False)),
        (chunks[2], lambda: chunk_run(args.data, 2, 1)),
        (chunks[3], lambda: chunk_run(args.data, 2, cores)),
    ]
    figures = {name: [] for name, _ in methods}
    limits = {"pread": [], "memcpy": [], "gather": []}
    for r in range(args.runs):
        for name, fn in methods:
            figures[name].append(fn()[:2])
            print(f"round {r}: {name}: {figures[name][-1][0]:.0f} samples/s", flush=True)
        limits["pread"].append(pread_limit(args.data))
        limits["memcpy"].append(memcpy_limit(os.path.getsize(args.data)))
        limits["gather"].append(shuffled_copy(args))
    med = {k: (statistics.median(s for s, _ in v), statistics.median(b for _, b in v))
           for k, v in figures.items()}
    sample_bytes = 3 * 64 * 64 + 8
    pread = statistics.median(limits["pread"])
    memcpy = statistics.median(limits["memcpy"])
    gather = statistics.median(limits["gather"])
    strongest = max(chunks, key=lambda k: med[k][0])
    base = med[dataloader][0]
    lines = [f"`scripts/bench` (`bench/compare.py compare --size {args.size} --runs {args.runs}`):"
             f" {n} samples of {sample_bytes} bytes ({os.path.getsize(args.data) / 2**20:.0f} MiB),"
             f" batch {BATCH}, 2 epochs after a warm-up, median of {args.runs} rounds,"
             f" {cores} cores online\n",
             "| loader | samples/s | MB/s | ratio to page-cache read | ratio to shuffled copy "
             "| ratio to DataLoader |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, _ in methods:
        s, b = med[name]
        lines.append(f"| {name} | {s:.0f} | {b / 1e6:.0f} | {b / pread:.2f} | {b / gather:.2f} "
                     f"| {s / base:.1f} |")
    lines.append(f"| pread of the file from the page cache, one thread (the limit) "
                 f"| {pread / sample_bytes:.0f} | {pread / 1e6:.0f} | 1.00 | {pread / gather:.2f} | - |")
    lines.append(f"| memcpy of the same bytes, one thread | {memcpy / sample_bytes:.0f} "
                 f"| {memcpy / 1e6:.0f} | {memcpy / pread:.2f} | {memcpy / gather:.2f} | - |")
    lines.append(f"| shuffled copy: the samples in a random order from the page cache into batch rings, "
                 f"{RANKS} processes, no loader | {gather / sample_bytes:.0f} | {gather / 1e6:.0f} "
                 f"| {gather / pread:.2f} | 1.00 | - |")
    best = max(med["shardcache, sticky (4 ranks)"][0], med["shardcache, global (4 ranks)"][0])
    lines.append("")
    lines.append(f"shardcache (best mode) against the strongest whole-chunk h5py reader "
                 f"({strongest}): {best / med[strongest][0]:.1f}x; against the DataLoader "
                 f"baseline: {best / base:.0f}x.")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.doc:
        write_doc(args.doc, "compare", text)


def svg_plot(path, title, xs, series, ylabel):
    """A line plot of series {name: (color, [y...])} over xs, as plain SVG."""
    w, h, left, top, right, bottom = 640, 360, 60, 40, 20, 50
    xmax = max(xs) or 1
    ymax = max(max(v) for _, v in series.values()) or 1
    ymax = 100 if ymax <= 100 else ymax
    px = lambda x: left + (w - left - right) * x / xmax  # noqa: E731
    py = lambda y: top + (h - top - bottom) * (1 - y / ymax)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="100%" height="100%" fill="#ffffff"/>',
           f'<text x="{left}" y="20" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{py(0)}" x2="{w - right}" y2="{py(0)}" stroke="#000"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{py(0)}" stroke="#000"/>',
           f'<text x="{w / 2}" y="{h - 10}">step time (ms)</text>',
           f'<text x="5" y="{top - 8}">{ylabel}</text>']
    for k in range(6):
        y = ymax * k / 5
        out.append(f'<text x="{left - 40}" y="{py(y) + 4}">{y:.0f}</text>')
    for x in xs:
        out.append(f'<text x="{px(x) - 6}" y="{py(0) + 16}">{x:g}</text>')
    for i, (name, (color, ys)) in enumerate(series.items()):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{w - 250}" y="{top + 16 * i}" fill="{color}">{name}</text>')
    out.append("</svg>\n")
    open(path, "w").write("\n".join(out))


def starvation(args):
    make_dataset(args)
    steps = [0, 1, 2, 5, 10, 20]
    rows = []
    for ms in steps:
        sc = shardcache_run(args, "sticky", 1, ms / 1e3)
        pt = python_run("samples", args.data, 1, ms / 1e3)
        rows.append((ms, sc, pt))
        print(f"step {ms} ms: shardcache wait {sc[2]:.1%} util {sc[3]:.1%}; "
              f"DataLoader wait {pt[2]:.1%} util {pt[3]:.1%}", flush=True)
    lines = [f"`scripts/bench` (`bench/compare.py starvation --size {args.size}`): a loop whose "
             f"step sleeps for the step time (a GPU step), fed by shardcache (4 ranks, sticky, "
             f"warm cache) and by the DataLoader baseline (4 workers); one epoch after a warm-up "
             f"at each step time, {os.cpu_count()} cores online\n",
             "| step (ms) | shardcache wait | shardcache utilization | DataLoader wait "
             "| DataLoader utilization |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for ms, sc, pt in rows:
        lines.append(f"| {ms} | {sc[2]:.1%} | {sc[3]:.1%} | {pt[2]:.1%} | {pt[3]:.1%} |")
    lines.append("")
    lines.append("Utilization: the share of wall time spent in the step (what the GPU would "
                 "compute); wait: the share spent waiting for the next batch.  Plot: "
                 "`docs/starvation.svg`.")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.doc:
        svg_plot(os.path.join(os.path.dirname(args.doc), "starvation.svg"),
                 "utilization (%) against step time",
                 steps, {"shardcache": ("#1e88e5", [100 * r[1][3] for r in rows]),
                         "PyTorch DataLoader + h5py": ("#e53935", [100 * r[2][3] for r in rows])},
                 "%")
        write_doc(args.doc, "starvation", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["compare", "starvation"])
    ap.add_argument("--bin", required=True, help="directory of shardcache and bench_deliver")
    ap.add_argument("--dir", required=True, help="scratch directory (dataset, caches)")
    ap.add_argument("--size", type=int, default=2048, help="dataset size in MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--doc", help="docs/benchmarks.md to update")
    args = ap.parse_args()
    if args.runs < 1 or args.size < 16:
        ap.error("--runs >= 1, --size >= 16")
    torch.set_num_threads(1)
    os.makedirs(args.dir, exist_ok=True)
    compare(args) if args.what == "compare" else starvation(args)


if __name__ == "__main__":
    main()
