#!/usr/bin/python3
"""bench/python: one PyTorch training loop fed by shardcache's Python package,
by PyTorch's DataLoader, and the C loop, side by side in one run.

  python.py --bin DIR --dir TMP [--size MiB] [--runs N] [--epochs E] [--doc FILE]
  python.py --bin DIR --dir TMP --against-package OTHER/python [--runs N]

The package must be importable (PYTHONPATH=BUILD/python).  The dataset is
compare.py's (uint8 3x64x64 images, int64 labels), batch 256.

Sweep: 4 ranks (mpirun --oversubscribe), one job per loop: a warm-up
epoch, then E epochs at each step time in turn (0..20 ms; the step sleeps,
as a loop whose step runs on a GPU waits for it); the same loop fed by
  - shardcache.Loader().epoch(e): batch["images"], batch["labels"] as torch
    tensors (sticky; each job from an empty cache, which its warm-up fills);
  - DataLoader(DistributedSampler) over h5py read one sample at a time, one
    worker per rank (4 in all, as compare.py's baseline), pin_memory=True;
  - and the C loop, bench_deliver, with the same settings and step times.
For each: samples/s and the data wait, the share of wall time from the end
of a step to the next batch in hand (Python: next() of the loop's
iterator, tensors made; C: sc_batch_release, sc_epoch_begin and
sc_batch_next: bench_deliver's "taking"), averaged over ranks.

The Python layer's cost per batch: one rank, a warm cache, no step: the
time per batch of the C loop and of the Python loop, and, in the Python
process, the wall and CPU time per batch outside _core's calls (clocks
around each call of loader._c, in E more epochs): what shardcache/__init__.py
and the loop add, measured directly.

Every figure is the median of N rounds; in each round the loops run one
after another, so that the machine's noise hits them alike.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from compare import BATCH, CHUNK, RANKS, WORKERS, Samples, make_dataset, write_doc

STEPS_MS = [0, 1, 2, 5, 10, 20]
now = time.perf_counter


def loop(batches, step_s):
    """The training loop over the iterable batches() makes (its making, as
    loader.epoch(e)'s sc_epoch_begin, timed with the data wait): take a
    batch (timed), then the step.  (samples, seconds waiting, seconds
    stepping)."""
    t = now()
    it = iter(batches())
    n, wait, busy = 0, now() - t, 0.0
    while True:
        t = now()
        try:
            x, y = next(it)
        except StopIteration:
            return n, wait + now() - t, busy
        s = now()
        wait += s - t
        n += len(y)
        if step_s > 0:
            time.sleep(step_s)
            busy += now() - s


class Clocked:
    """loader._c with clocks around each call the loop makes: the wall and
    CPU (this thread's) time in _core: the C library, and _core's
    conversion of its results."""

    def __init__(self, core):
        self.core, self.secs, self.cpu = core, 0.0, 0.0
        for name in ("begin", "next", "release"):
            setattr(self, name, self._clock(getattr(core, name)))

    def _clock(self, fn):
        def call(*args):
            t, c = now(), time.thread_time()
            try:
                return fn(*args)
            finally:
                self.secs += now() - t
                self.cpu += time.thread_time() - c
        return call

    def __getattr__(self, name):
        return getattr(self.core, name)


def rank_main(o):
    """One rank of a job (under mpirun): a warm-up epoch, then o.epochs at
    each step time in turn (and, with o.split, o.epochs more with clocks
    around _core); rank 0 prints the figures, a list of dicts, as a line."""
    from mpi4py import MPI  # only here: the driver must not be an MPI process
    import shardcache

    comm = MPI.COMM_WORLD
    torch.set_num_threads(1)
    if o.rank == "shardcache":
        loader = shardcache.Loader()  # every setting from SC_*

        def epoch(e):
            return ((b["images"], b["labels"]) for b in loader.epoch(e))
    else:
        ds = Samples(o.data)
        sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=comm.Get_size(), rank=comm.Get_rank(), shuffle=True, drop_last=True)
        dl = torch.utils.data.DataLoader(
            ds, batch_size=BATCH, sampler=sampler, num_workers=max(1, WORKERS // comm.Get_size()),
            pin_memory=True, persistent_workers=True, drop_last=True)

        def epoch(e):
            sampler.set_epoch(e)
            return dl

    def run(first, count, step_s):
        n = wait = busy = secs = cpu = 0.0
        for e in range(first, first + count):
            comm.Barrier()  # the clock starts together on every rank
            t0, c0 = now(), time.thread_time()
            en, ew, eb = loop(lambda: epoch(e), step_s)
            cpu += time.thread_time() - c0
            t = comm.allreduce(now() - t0, op=MPI.MAX)
            if o.rank == "shardcache" and not loader.verdict(e).ok:
                sys.exit(f"python.py: epoch {e}: {loader.verdict(e)}")
            n, wait, busy, secs = n + en, wait + ew, busy + eb, secs + t
        n, wait, busy, cpu = comm.allreduce(np.array([n, wait, busy, cpu]), op=MPI.SUM)
        size, batches = comm.Get_size(), n / BATCH
        return {"samples_s": n / secs, "wait": wait / (secs * size),
                "util": busy / (secs * size), "batch_s": secs * size / batches,
                "cpu_batch_s": cpu / batches}

    run(0, 1, 0)  # warm-up: the cache filled, workers up, the page cache warm
    first, results = 1, []
    for ms in o.step_ms:  # one after another, the loader going on warm
        results.append(run(first, o.epochs, ms / 1e3))
        first += o.epochs
    if o.rank == "shardcache" and o.split:
        # The same epochs again with clocks around _core's calls: the time
        # per batch outside them is the Python layer's (and the loop's).
        loader._c = clocked = Clocked(loader._c)
        split = run(first, o.epochs, 0)
        batches = comm.allreduce(o.epochs * loader.info["batches"])
        res = results[0]
        res["outside_s"] = split["batch_s"] - comm.allreduce(clocked.secs) / batches
        res["outside_cpu_s"] = split["cpu_batch_s"] - comm.allreduce(clocked.cpu) / batches
    if o.rank == "shardcache":
        loader.close()
    if comm.Get_rank() == 0:
        print("rank-result " + json.dumps(results), flush=True)


def sc_env(args, cache, mode="sticky"):
    return dict(os.environ, SC_SOURCE=args.data, SC_CACHE_DIR=cache, SC_SHUFFLE=mode,
                SC_BATCH_SIZE=str(BATCH), SC_SHARD_SIZE=str(CHUNK), SC_LOG="0")


def python_job(args, kind, ranks, steps, env, split=False):
    """The loop under mpirun on `ranks` ranks, each step time in turn; rank
    0's figures, one dict per step time."""
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", sys.executable,
           os.path.abspath(__file__), "--rank", kind, "--data", args.data,
           "--epochs", str(args.epochs), "--step-ms", ",".join(map(str, steps))]
    cmd += ["--split"] if split else []
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = re.search(r"^rank-result (.*)$", out.stdout, re.M)
    if out.returncode or not m:
        sys.exit(f"python.py: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return json.loads(m.group(1))


def c_job(args, ranks, steps, env):
    """bench_deliver with the same settings and step times: the C loop's
    figures, one dict per step time."""
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", os.path.join(args.bin, "bench_deliver"),
           "--epochs", str(args.epochs), "--warmup", "1", "--step-ms", ",".join(map(str, steps))]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    got = re.findall(r"deliver: .*: ([0-9.]+) samples/s, [0-9.]+ MB/s, wait [0-9.]+%, "
                     r"taking ([0-9.]+)%, utilization ([0-9.]+)%, exactly-once ok", out.stdout)
    if out.returncode or len(got) != len(steps):
        sys.exit(f"python.py: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return [{"samples_s": float(s), "wait": float(w) / 100, "util": float(u) / 100,
             "batch_s": ranks * BATCH / float(s)} for s, w, u in got]


def cold(args):
    """A fresh, empty cache directory: each sweep run starts as a first job."""
    cache = os.path.join(args.dir, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    return cache


def median_of(runs):
    """The median of each figure over the runs' dicts."""
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def sweep(args):
    """The three loops one after another, each sweeping the step times in
    one job, in N rounds."""
    got = {ms: ([], [], []) for ms in STEPS_MS}
    for r in range(args.runs):
        jobs = (python_job(args, "shardcache", RANKS, STEPS_MS, sc_env(args, cold(args))),
                python_job(args, "torch", RANKS, STEPS_MS, sc_env(args, cold(args))),
                c_job(args, RANKS, STEPS_MS, sc_env(args, cold(args))))
        for i, ms in enumerate(STEPS_MS):
            py, dl, c = got[ms]
            py.append(jobs[0][i])
            dl.append(jobs[1][i])
            c.append(jobs[2][i])
            print(f"round {r}, step {ms} ms: data wait: shardcache.Loader {py[-1]['wait']:.1%}, "
                  f"DataLoader {dl[-1]['wait']:.1%}, C loop {c[-1]['wait']:.1%}", flush=True)
    rows = []
    for ms in STEPS_MS:
        py, dl, c = got[ms]
        diff = statistics.median(p["wait"] - q["wait"] for p, q in zip(py, c))
        rows.append((ms, median_of(py), median_of(dl), median_of(c), diff))
    return rows


def layer_cost(args):
    """One rank, warm cache (kept between runs), no step, interleaved rounds."""
    env = sc_env(args, os.path.join(args.dir, "cache-1"))
    c, py = [], []
    for r in range(args.runs):
        c.append(c_job(args, 1, [0], env)[0])
        py.append(python_job(args, "shardcache", 1, [0], env, split=True)[0])
        print(f"round {r}: C {c[-1]['batch_s'] * 1e6:.1f} us/batch, Python "
              f"{py[-1]['batch_s'] * 1e6:.1f} us/batch, outside _core "
              f"{py[-1]['outside_s'] * 1e6:.1f} us/batch ({py[-1]['outside_cpu_s'] * 1e6:.1f} "
              f"us CPU)", flush=True)
    ratios = lambda k: [p[k] / q["batch_s"] for p, q in zip(py, c)]  # noqa: E731
    return {"c": median_of(c)["batch_s"], "py": median_of(py)["batch_s"],
            "outside": median_of(py)["outside_s"], "outside_cpu": median_of(py)["outside_cpu_s"],
            "py_ratio": ratios("batch_s"), "outside_ratio": ratios("outside_s"),
            "outside_cpu_ratio": ratios("outside_cpu_s")}


def package_ab(args):
    """This package against another build's (--against-package DIR: its
    python directory), one rank, warm cache, no step, interleaved rounds:
    the loop's time per batch and the data wait, each round's ratio."""
    env = sc_env(args, os.path.join(args.dir, "cache-ab"))
    other = dict(env, PYTHONPATH=args.against_package)
    python_job(args, "shardcache", 1, [0], env)  # the cache filled for both
    runs, stepped = [], []
    for r in range(args.runs):
        b, b5 = python_job(args, "shardcache", 1, [0, 5], other)
        a, a5 = python_job(args, "shardcache", 1, [0, 5], env)
        runs.append((a, b))
        stepped.append((a5, b5))
        print(f"round {r}: no step: this {a['batch_s'] * 1e6:.1f} us/batch, other "
              f"{b['batch_s'] * 1e6:.1f} us/batch, ratio {a['batch_s'] / b['batch_s']:.3f}; "
              f"5 ms step: data wait {a5['wait']:.2%} against {b5['wait']:.2%}", flush=True)
    ratio = statistics.median(a["batch_s"] / b["batch_s"] for a, b in runs)
    print(f"this package / {args.against_package}: {ratio:.3f} of its time per batch with no "
          f"step (median of {args.runs} rounds' ratios); with a 5 ms step, data wait "
          f"{statistics.median(a['wait'] for a, _ in stepped):.2%} against "
          f"{statistics.median(b['wait'] for _, b in stepped):.2%}")


def report(args, n, rows, cost):
    lines = [f"`scripts/bench` (`bench/python.py --size {args.size} --epochs {args.epochs} "
             f"--runs {args.runs}`): {n} samples of {3 * 64 * 64 + 8} bytes, batch {BATCH}, "
             f"median of {args.runs} rounds; sweep: {RANKS} ranks, one warm-up epoch then "
             f"{args.epochs}, the step a sleep; Python layer: one rank, warm cache, no step; "
             f"{os.cpu_count()} cores online\n",
             "| step (ms) | shardcache.Loader samples/s | data wait | DataLoader samples/s "
             "| data wait | C loop samples/s | data wait | wait, Python - C (points) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    worst = 0.0
    for ms, py, dl, c, diff in rows:
        diff *= 100
        worst = max(worst, abs(diff))
        lines.append(f"| {ms} | {py['samples_s']:.0f} | {py['wait']:.1%} | {dl['samples_s']:.0f} "
                     f"| {dl['wait']:.1%} | {c['samples_s']:.0f} | {c['wait']:.1%} | {diff:+.1f} |")
    us = lambda s: f"{s * 1e6:.1f} us"  # noqa: E731
    med = {k: statistics.median(cost[k]) for k in ("py_ratio", "outside_ratio", "outside_cpu_ratio")}
    each = lambda k: ", ".join(f"{r:.3f}" for r in cost[k])  # noqa: E731
    lines += ["",
              "| one rank, warm cache, no step | time per batch | against the C loop "
              "| each round |",
              "| --- | ---: | ---: | ---: |",
              f"| C loop (bench_deliver: sc_batch_next, sc_batch_release) | {us(cost['c'])} "
              f"| 1.000 | |",
              f"| Python loop (shardcache.Loader, torch tensors) | {us(cost['py'])} "
              f"| {med['py_ratio']:.3f} | {each('py_ratio')} |",
              f"| of which outside _core's calls (the package's Python and the loop), wall "
              f"| {us(cost['outside'])} | {med['outside_ratio']:.3f} | {each('outside_ratio')} |",
              f"| of which outside _core's calls, CPU time of the loop's thread "
              f"| {us(cost['outside_cpu'])} | {med['outside_cpu_ratio']:.3f} "
              f"| {each('outside_cpu_ratio')} |",
              "",
              f"Python layer: {med['py_ratio'] - 1:+.1%} on the C loop's time per batch end to "
              f"end; measured directly, {med['outside_ratio']:.1%} (wall) and "
              f"{med['outside_cpu_ratio']:.1%} (CPU) of it (target < 3%); largest data-wait "
              f"difference from the C loop: {worst:.1f} points (target <= 1).  Times are the "
              f"rounds' medians; ratios and differences the medians of each round's own, its "
              f"runs side by side."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.doc:
        write_doc(args.doc, "python", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", help="directory of shardcache and bench_deliver")
    ap.add_argument("--dir", help="scratch directory (dataset, caches)")
    ap.add_argument("--size", type=int, default=512, help="dataset size in MiB")
    ap.add_argument("--epochs", type=int, default=2, help="counted epochs per run")
    ap.add_argument("--runs", type=int, default=3, help="rounds (the median is shown)")
    ap.add_argument("--doc", help="docs/benchmarks.md to update")
    ap.add_argument("--rank", choices=["shardcache", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--step-ms", type=lambda v: [float(x) for x in v.split(",")],
                    help=argparse.SUPPRESS)
    ap.add_argument("--split", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--against-package", metavar="DIR",
                    help="only time this package against another build's python directory")
    args = ap.parse_args()
    if args.rank:
        return rank_main(args)
    if not args.bin or not args.dir or args.runs < 1 or args.epochs < 1 or args.size < 16:
        ap.error("--bin and --dir are required; --runs >= 1, --epochs >= 1, --size >= 16")
    os.makedirs(args.dir, exist_ok=True)
    n = make_dataset(args)
    if args.against_package:
        return package_ab(args)
    report(args, n, sweep(args), layer_cost(args))


if __name__ == "__main__":
    main()
