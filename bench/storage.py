#!/usr/bin/env python3
"""bench/storage.py: storage-bound training, measured as MLPerf Storage measures it.

MLPerf Storage v1.0's three training workloads for H100 accelerators, from
its public DLIO configurations (github.com/mlcommons/storage, v1.0,
storage-conf/workload/{unet3d,resnet50,cosmoflow}_h100.yaml; the figures
carry over, the file count is scaled to this machine):

  unet3d     one sample a file, 146,600,628 bytes (stdev 68,341,808), batch 7,
             0.323 s of computation a step, AU >= 0.90, 4 read threads
  resnet50   1,251 samples a file of 114,660 bytes, batch 400, 0.224 s,
             AU >= 0.90, 8 read threads
  cosmoflow  one sample a file, 2,828,486 bytes (stdev 71,311), batch 1,
             0.0035 s, AU >= 0.70, 4 read threads

The files are HDF5 (/images: the samples as uint8 rows, /labels), written
once per workload (layout B, a directory of files; with --layouts B,A also
layout A, the same samples in one file, where a file holds many samples) and
deleted at the end.  shardcache's fields have one shape, so every sample has
the mean size (the stdev is what MLPerf's generator draws).

MLPerf's rule against caching in memory: a job runs in a memory cgroup
(cgroup v2's memory.max, or v1's memory.limit_in_bytes, found at run time)
limited to a fifth of the dataset, page cache included, so every epoch reads
the disk; the page cache is dropped before each run.  Two allowances sit on
top, the same for every loader, as MLPerf's client's memory holds them too:
a rank's working memory (OVERHEAD, 256 MiB: Python with torch and its
workers, or SC_STREAM_BYTES' shards) and, where a fifth is less, what a rank
must hold (the batch in the step, the one being filled, a sample in flight
for each of MLPerf's read threads: unet3d's batch is 1 GB: a dataset is at
least 2.5 times what one rank must hold with its allowances, 7.4 GB, below
unet3d's 20 GiB default).  A loader that holds more is killed by the OOM
killer, and the table says so. With many ranks the allowances leave the page
cache room for more than a fifth: every run's disk reads are counted (the
cgroup's I/O counters, or where those stay at 0, as v1's blkio throttle
counters do on some guests, the job's processes' own, /proc/self/io's
read_bytes with its children reaped): the table gives them per counted
epoch, as a share of the dataset, which is what shows the epochs came from
the disk, and a run without a cache that read less than 0.8 of the dataset
an epoch is flagged in the verdicts.  A node-local cache on a tmpfs
(standing in for a node's NVMe) is charged to the same cgroup, so its
capacity is added to the limit.

An accelerator is an MPI rank whose step sleeps for the computation time
(what DLIO does); AU is DLIO's (dlio_benchmark/utils/statscounter.py,
metric_exclude_start_steps 1): per rank and counted epoch, the computation
over the wall time, the first step's load and computation left out of both,
averaged over the ranks, then the epochs; the computation at its nominal
step time (DLIO measures its sleep, which on these busy 2 cores runs over:
cosmoflow's 3.5 ms by up to a tenth).  Beside it the table gives the
stricter utilization of a job that synchronizes every step: all steps
counted, over the slowest rank's wall time.  For each workload and loader
the number of ranks is searched (1, 2, 4, ... then bisected; at most
--max-ranks: sleeping ranks cost little CPU, but every rank's loader threads
share this machine's cores) for the largest with AU >= the threshold; then
that count and the one above it run again, each decided by the majority of
its trials (a third where two disagree), and the table gives the median
trial: this disk's own rate varies by up to 2x within a run, and one trial at
the boundary decided the answer by chance.  Loaders:

  sc-nocache  shardcache, no room to cache (SC_CACHE_BYTES=1: a shard larger
              than the capacity is served and not kept), every epoch from
              the source; SC_PREFETCH_BATCHES 2 to 8 (sc_prefetch)
  sc-cache    shardcache with a node-local cache (a tmpfs) of a third of the
              dataset (SC_CACHE_BYTES = dataset / 3 / ranks), one warm-up epoch
              not counted, which fills it whole (SC_CACHE_WRITES=all: the
              default skips entries its writer is behind for, and fills the
              cache over more epochs)
  dataloader  bench/storage_loader.py: PyTorch's DataLoader, its workers the
              read threads, one h5py read a sample, numpy (DLIO's reader);
              where a file holds many samples (resnet50), a read takes a
              batch's run of them: one sample a read thrashed the page cache
              in the cgroup (6.8x the dataset read from the disk an epoch)

Each run is paired with the storage's own read limit at the same concurrency
(bench_odirect: ranks x read threads, O_DIRECT, the same files, in blocks
of 256 MiB (less where 4 GiB in all would not hold them, or where the
largest file is smaller; 4 MiB at least), a file larger than a block in
pieces read at once, 4 s of reading: a loader's one read of a large shard
is a request the kernel keeps in flight at once, and 4 MiB blocks read
unet3d's files at 0.53-0.98 of the rate of 64 MiB ones in four alternated
pairs here, a limit shardcache's cold reads exceeded), measured just before
it and
just after it, the mean of the two; the loaders' trials are interleaved
round by round.  Bytes read from the disk per run come from the cgroup's I/O
counters (v1 blkio, v2 io.stat), or where those stay at 0, /proc/self/io;
they include the libraries a job loads after drop_caches (a 24 MB --quick
dataset: 0.10 GB an epoch for shardcache, 0.54 GB for the DataLoader's
torch).  The bytes the cache saves are counted by shardcache itself
(bench_deliver prints each epoch's shard bytes from the source, the cache and
other nodes), which leaves the libraries out.  The memory column gives the
cgroup's peak beside its limit.  Share: a run's delivered bytes/s over that
limit, at the loader's own concurrency (so compare shares within a loader);
sc-cache's include the cache's bytes and may exceed 1.  The share target is
met where the loader is not what stops the accelerators: 0.9 of the limit at
the answer, or at the count above it (which then fails on the storage).

shardcache runs its defaults but for the settings named above, so its
shuffle is SC_SHUFFLE=sticky (a tenth of a rank's shards change owner an
epoch) with the auto window; the DataLoader reshuffles its files and deals
them again every epoch, as DLIO does.  sc-cache is shardcache's own feature,
not an MLPerf setup (MLPerf forbids caching on the client), and a tmpfs is
faster than a node's NVMe: its rows are an upper bound.

Requirements: root on a node to yourself (the memory cgroup under
/sys/fs/cgroup, v2 with memory in cgroup.subtree_control; drop_caches before
every trial and every limit reading: without either the runs go on, the
table's header says so, and --doc is refused); the release build
(bench_deliver, bench_odirect); h5py, numpy, torch, mpi4py; --dir on the
disk under test with about 20 GiB free; --tmpfs with a third of the largest
dataset.  A run killed by SIGKILL may leave sc-storage.* in --dir and a
shardcache-bench-PID cgroup.  SC_BENCH_KEEP_LOG=FILE keeps every command's
output.

  bench/storage.py --bin build/release/bin [--dir DIR] [--tmpfs DIR] [--size MiB]
                   [--workloads ...] [--loaders ...] [--max-ranks N] [--layouts B[,A]]
                   [--min-steps N | --epochs N] [--sc-env SC_X=V] [--window-fit] [--doc FILE]
                   [--quick]

--quick: tiny datasets (a few MB of samples scaled down, step times too),
one rank, one epoch: checks that everything runs (tests/system).
"""
import argparse
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

WORKLOADS = {  # MLPerf Storage v1.0, *_h100.yaml (module docstring); mib: this
    # machine's dataset at least, so that an epoch has EPOCH_STEPS steps a rank
    # where the search may go (unet3d at 1 rank, resnet50 at 16)
    "unet3d": dict(sample=146600628, stdev=68341808, per_file=1, batch=7, step=0.323,
                   au=0.90, threads=4, mib=20 << 10),
    "resnet50": dict(sample=114660, stdev=0, per_file=1251, batch=400, step=0.224,
                     au=0.90, threads=8, mib=12 << 10),
    "cosmoflow": dict(sample=2828486, stdev=71311, per_file=1, batch=1, step=0.0035,
                      au=0.70, threads=4, mib=3 << 10),
}
# DLIO leaves each epoch's first step out of its AU: in MLPerf's runs one of
# hundreds; here an epoch of fewer steps a rank than this is flagged.
EPOCH_STEPS = 16
NOTE = {"cgroup": "", "drop": "each run after drop_caches"}
LOADERS = ("sc-nocache", "sc-cache", "dataloader")
# A rank's working memory besides its batches, the same for every loader
# (Python with torch and its workers; a C rank's threads and SC_STREAM_BYTES'
# 256 MiB of shards ahead of assembly), and mpirun's: added to the limit.
OVERHEAD = dict.fromkeys(("dataloader", "sc-nocache", "sc-cache"), 256 << 20)
MPIRUN = 64 << 20
STREAM_BYTES = 256 << 20  # SC_STREAM_BYTES' default
CONFIRM = 2  # trials at least of the answer and of the count above it (Search)
LIMIT_S = 4  # seconds of each O_DIRECT measurement around a trial (one before, one after)
PRODUCERS = 2  # SC_PRODUCERS a shardcache rank (its default, 2..8 by the cores, would make
# the limit's concurrency depend on the machine)


# ---------------------------------------------------------------- cgroups
class Cgroup:
    """A child memory cgroup (v2, or v1 with a blkio sibling) for one run."""

    def __init__(self, name):
        self.v2 = self.mem = self.io = None
        self.why = ""
        root = "/sys/fs/cgroup"
        try:
            if os.path.exists(os.path.join(root, "cgroup.controllers")):
                ctl = open(os.path.join(root, "cgroup.subtree_control")).read().split()
                if "memory" not in ctl:
                    raise OSError("the memory controller is not enabled in %s" % root)
                self.v2 = True
                self.mem = os.path.join(root, name)
                os.mkdir(self.mem)
            else:
                self.v2 = False
                self.mem = os.path.join(root, "memory", name)
                os.mkdir(self.mem)
                blk = os.path.join(root, "blkio")
                if os.path.isdir(blk):
                    self.io = os.path.join(blk, name)
                    os.mkdir(self.io)
        except OSError as e:
            self.why = "no memory cgroup: %s" % e
            self.remove()
            self.mem = None

    def limit(self, nbytes):
        f = "memory.max" if self.v2 else "memory.limit_in_bytes"
        with open(os.path.join(self.mem, f), "w") as h:
            h.write(str(int(nbytes)))
        # no swap either, where the knob exists: v2's swap.max, v1's memory+swap limit
        sw, v = ("memory.swap.max", 0) if self.v2 else ("memory.memsw.limit_in_bytes", nbytes)
        if os.path.exists(os.path.join(self.mem, sw)):
            try:
                with open(os.path.join(self.mem, sw), "w") as h:
                    h.write(str(int(v)))
            except OSError:
                pass

    def join(self):
        """In the child, before exec: this process (and so its children) joins."""
        for d in (self.mem, self.io):
            if d:
                with open(os.path.join(d, "cgroup.procs"), "w") as h:
                    h.write(str(os.getpid()))

    def _read(self, d, f):
        try:
            return open(os.path.join(d, f)).read()
        except OSError:
            return ""

    def ooms(self):
        """The processes the OOM killer took in this cgroup (None: unknown)."""
        m = re.search(r"oom_kill (\d+)", self._read(self.mem, "memory.events" if self.v2
                                                     else "memory.oom_control"))
        return int(m.group(1)) if m else None

    def kill_all(self):
        for d in (self.mem, self.io):
            for pid in self._read(d, "cgroup.procs").split() if d else ():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass

    def stats(self):
        """peak bytes, OOM kills, bytes read from block devices (None: unknown)."""
        peak = rd = None
        oom = self.ooms()
        if self.v2:
            p = self._read(self.mem, "memory.peak")
            peak = int(p) if p.strip() else None
            io = re.findall(r"rbytes=(\d+)", self._read(self.mem, "io.stat"))
            rd = sum(map(int, io)) if io else None
        else:
            p = self._read(self.mem, "memory.max_usage_in_bytes")
            peak = int(p) if p.strip() else None
            if self.io:
                io = re.findall(r"^\S+ Read (\d+)$",
                                self._read(self.io, "blkio.throttle.io_service_bytes"), re.M)
                rd = sum(map(int, io)) if io else 0
        return peak, oom, rd

    def remove(self):
        for d in (self.mem, self.io):
            if not d or not os.path.isdir(d):
                continue
            for i in range(100):  # the last process may still be leaving
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    if i == 50:  # the job's stragglers (an orphaned rank): ours, by id
                        self.kill_all()
                    time.sleep(0.1)


def disk_reads():
    """Bytes this process and its reaped children (a job's every process) made
    the block layer read (/proc/self/io), or None."""
    try:
        return int(re.search(r"read_bytes: (\d+)", open("/proc/self/io").read()).group(1))
    except (OSError, AttributeError):
        return None


def drop_caches():
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as h:
            h.write("3")
        return True
    except OSError:
        return False


# ---------------------------------------------------------------- datasets
def write_dataset(path, w, nfiles, layout):
    """nfiles files of w's samples (layout B), or their samples in one file (A)."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(34)
    pool = rng.integers(0, 256, w["sample"] * w["per_file"] + 65536, dtype=np.uint8)
    labels = np.arange(w["per_file"], dtype=np.int64)
    rows = lambda i: pool[i % 65536: i % 65536 + w["sample"] * w["per_file"]].reshape(
        w["per_file"], w["sample"])
    if layout == "B":
        os.makedirs(path)
        for i in range(nfiles):
            with h5py.File(os.path.join(path, "f%06d.h5" % i), "w") as f:
                f.create_dataset("images", data=rows(i * 4099))
                f.create_dataset("labels", data=labels)
    else:
        n = nfiles * w["per_file"]
        with h5py.File(path, "w") as f:
            d = f.create_dataset("images", (n, w["sample"]), dtype="uint8")
            for i in range(nfiles):
                d[i * w["per_file"]:(i + 1) * w["per_file"]] = rows(i * 4099)
            f.create_dataset("labels", data=np.arange(n, dtype=np.int64))
    subprocess.run(["sync"], check=False)


def files_of(path):
    if os.path.isfile(path):
        return [path]
    return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".h5"))


# ---------------------------------------------------------------- runs
def end_job(p, cg):
    """Kills the job: mpirun, and every process of its cgroup (the ranks, their workers)."""
    cg.kill_all()
    p.kill()
    p.wait()


def watch(p, cg, timeout=600, grace=10):
    """The job's exit status.  A job still running `grace` s after the OOM killer
    took one of its processes (a DataLoader whose worker was killed waited for
    it until the timeout), or after `timeout` s, is killed with every process
    of its cgroup: 137, or 124 for the timeout."""
    t0, oom_at = time.time(), None
    while p.poll() is None:
        now = time.time()
        if oom_at is None and cg.mem and cg.ooms():
            oom_at = now
        if now - t0 > timeout or (oom_at is not None and now - oom_at > grace):
            end_job(p, cg)
            return 124 if oom_at is None else 137
        time.sleep(0.2)
    return p.returncode


def run_job(cmd, env, limit, log):
    """cmd in a fresh cgroup limited to `limit` bytes: (rc, output, peak, oom, disk bytes, s).
    The disk's bytes: the cgroup's I/O counters, or where they say nothing (v1's
    blkio throttle counters stay 0 on some guests) the job's own I/O accounting."""
    cg = Cgroup("shardcache-bench-%d" % os.getpid())
    if cg.mem:
        cg.limit(limit)
        NOTE["cgroup"] = "in a memory cgroup (%s)" % (
            "v2, memory.max" if cg.v2 else "v1, memory.limit_in_bytes")
    else:
        NOTE["cgroup"] = cg.why + "; the limits below were not applied"
    if not drop_caches():
        NOTE["drop"] = "the page cache could not be dropped (not root)"
    dev0 = disk_reads()
    t0 = time.time()
    with tempfile.TemporaryFile() as f:
        p = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                             preexec_fn=cg.join if cg.mem else None)
        try:
            rc = watch(p, cg)
        except BaseException:  # SIGTERM or ^C: the job and its cgroup go too
            end_job(p, cg)
            cg.remove()
            raise
        f.seek(0)
        out = f.read().decode(errors="replace") + ("\n(timed out)" if rc == 124 else "")
    secs = time.time() - t0
    peak, oom, rd = cg.stats() if cg.mem else (None, None, None)
    dev1 = disk_reads()
    if not rd and dev0 is not None and dev1 is not None:
        rd = dev1 - dev0
    cg.remove()
    log.write("$ %s\n%s(rc %d, peak %s, oom %s, read %s, %.1f s)\n"
              % (" ".join(cmd), out, rc, peak, oom, rd, secs))
    log.flush()
    return rc, out, peak, oom, rd, secs, cg.why


def limit_block(threads, files):
    """bench_odirect's block, MiB: as deep as a loader's one read of a large shard (up to a
    GiB, which the kernel keeps in flight at once), up to 256 MiB, 4 GiB in all, and no
    larger than the largest file."""
    largest = max((os.path.getsize(f) for f in files), default=0)
    return max(4, min(256, 4096 // threads, -(-largest // (1 << 20))))


def storage_limit(bin_dir, files, threads, log, seconds=None):
    """The storage's O_DIRECT read rate with `threads` reads in flight, the page
    cache dropped first: (bytes/s, how), or (None, why)."""
    block = limit_block(threads, files)  # its stat()s before the drop, not after
    drop_caches()
    cmd = [os.path.join(bin_dir, "bench_odirect"), "--threads", str(threads), "--block",
           str(block)]
    if seconds:
        cmd += ["--seconds", "%g" % seconds]
    out = subprocess.run(cmd + files, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT).stdout.decode()
    log.write("$ %s (%d files)\n%s" % (" ".join(cmd[1:]), len(files), out))
    m = re.search(r"([0-9.]+) MB/s \((.*)\)", out)
    return (float(m.group(1)) * 1e6, m.group(2)) if m else (None, out.strip())


def sc_prefetch(w, share):
    """shardcache's ring (SC_PREFETCH_BATCHES): as many batches as 128 MiB holds, 2 to 8
    (cosmoflow's 2.8 MB batches: 8, as many as a DataLoader's 4 workers prefetch at 2
    each; resnet50's 46 MB: 2).  Where a batch alone exceeds SC_STREAM_BYTES' 256 MiB
    (unet3d's 1 GB) the stream holds a batch of shards beside the ring: the ring is then
    as deep as a rank's share of the cgroup (`share`) holds beside those shards, the
    allowance and a batch to spare, 1 at least (unet3d at one rank: 2 of 4.6 GB).  One
    slot cannot overlap the next batch's copy with the step (AU 0.64 against 0.87 for two,
    one rank with a cache of a third, docs/benchmarks.md)."""
    batch = w["batch"] * w["sample"]
    if batch <= STREAM_BYTES:
        return str(max(2, min(8, (128 << 20) // batch)))
    room = share - OVERHEAD["sc-nocache"] - batch  # beside the stream's batch of shards
    return str(max(1, min(8, room // batch - 1)))


def dl_prefetch(w, share):
    """The DataLoader's prefetch_factor: DLIO's 2, and 1 for items of 16 MiB and more
    where a rank's share of the cgroup would not hold its workers' two each beside the
    batch in the step, the allowance and a batch to spare."""
    item = min(w["batch"], w["per_file"]) * w["sample"]
    inflight = 2 * w["threads"] * item + 2 * w["batch"] * w["sample"]
    return "1" if item >= 16 << 20 and inflight + OVERHEAD["dataloader"] > share else "2"


def floor(w):
    """What a rank must hold at least: the batch in the step, the one being
    filled, and a sample in flight for each of MLPerf's read threads."""
    return (2 * w["batch"] + w["threads"]) * (w["sample"] + 8)


def mem_limit(a, w, loader, ranks, data_bytes):
    """The cgroup's limit for `ranks` ranks of `loader` (no node-local cache): a fifth of
    the dataset, or what the ranks must hold where that is more, and the allowances."""
    limit = max(data_bytes // 5, floor(w) * ranks) + OVERHEAD[loader] * ranks + MPIRUN
    return limit + ((256 << 20) if a.quick else 0)  # a smoke run: processes, not the rule


class Trial:
    """One workload's figures for one loader at one number of ranks."""

    peak = shard_bytes = strict = oom = secs = cgroup = None  # where a run never started

    def __init__(self, **kw):
        self.__dict__.update(kw)


def trial(a, wl, w, src, files, loader, ranks, data_bytes, work, log):
    samples = data_bytes // w["sample"]
    steps = samples // ranks // w["batch"]  # a rank's steps an epoch
    if loader == "dataloader":  # it deals whole files: the fewest a rank gets
        steps = len(files) // ranks * w["per_file"] // w["batch"]
    epochs = a.epochs or max(1, min(4, math.ceil(a.min_steps / max(steps, 1))))
    epochs = 1 if a.quick else epochs
    if steps == 0:
        return Trial(loader=loader, ranks=ranks, au=None, rate=None, storage=None, fail="the "
                     "dataset has no batch for every rank", threads=0, limit=0, disk=None,
                     epochs=0, warm=0, data=data_bytes, steps=0)
    limit = mem_limit(a, w, loader, ranks, data_bytes)
    share = (limit - MPIRUN) // ranks  # a rank's, without a cache
    threads = ranks * (w["threads"] if loader == "dataloader" else PRODUCERS)
    before, how = storage_limit(a.bin, files, threads, log, LIMIT_S)
    env = dict(os.environ, SC_LOG="0")
    mpi = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none"]
    cache = None
    if loader == "dataloader":
        run = min(w["batch"], w["per_file"])
        cmd = mpi + [PY, os.path.join(HERE, "storage_loader.py"), "--dir", src, "--batch",
                     str(w["batch"]), "--step", str(w["step"]), "--epochs", str(epochs),
                     "--workers", str(w["threads"]), "--prefetch", dl_prefetch(w, share),
                     "--run", str(run), "--rows", str(w["per_file"])]
        warm = 0
    else:
        cache = tempfile.mkdtemp(prefix="sc-cache.", dir=a.tmpfs if loader == "sc-cache" else work)
        cap = data_bytes // 3 // ranks if loader == "sc-cache" else 1
        if loader == "sc-cache":
            limit += data_bytes // 3
        warm = 1 if loader == "sc-cache" else 0
        env.update(SC_SOURCE=src, SC_BATCH_SIZE=str(w["batch"]), SC_CACHE_DIR=cache,
                   SC_CACHE_BYTES=str(cap), SC_PREFETCH_BATCHES=sc_prefetch(w, share),
                   SC_PRODUCERS=str(PRODUCERS))
        if loader == "sc-cache":  # the warm-up fills the cache whole, whatever the writer's pace
            env["SC_CACHE_WRITES"] = "all"
        if a.window_fit:  # what issue 34's window fix makes the default
            env["SC_SHUFFLE_WINDOW"] = str(max(1, (128 << 20) // w["sample"]))
        for k in a.sc_env:
            env[k.split("=", 1)[0]] = k.split("=", 1)[1]
        cmd = mpi + [os.path.join(a.bin, "bench_deliver"), "--warmup", str(warm), "--epochs",
                     str(epochs), "--step-ms", "%g" % (w["step"] * 1e3)]
    try:
        rc, out, peak, oom, rd, secs, why = run_job(cmd, env, limit, log)
    finally:
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
    after, how_after = storage_limit(a.bin, files, threads, log, LIMIT_S)
    rate = (before + after) / 2 if before and after else before or after
    how = how if before else how_after
    m = re.search(r"([0-9.]+) MB/s.*?utilization ([0-9.]+)%.*?DLIO's AU ([0-9.]+)%", out)
    au = float(m.group(3)) / 100 if m and rc == 0 else None
    strict = float(m.group(2)) / 100 if m and rc == 0 else None
    got = float(m.group(1)) * 1e6 if m and rc == 0 else None
    # shardcache's own count of where an epoch's shard bytes came from (no libraries)
    counted = re.search(r"([0-9.]+) MB from the source, ([0-9.]+) MB from the cache, "
                        r"([0-9.]+) MB from other nodes", out)
    shard_bytes = tuple(float(x) * 1e6 for x in counted.groups()) if counted and rc == 0 \
        else None
    fail = None if au is not None else ("killed: out of memory" if oom else
                                        "failed (rc %d): %s" % (rc, " ".join(out.split())[-160:]))
    t = Trial(loader=loader, ranks=ranks, au=au, strict=strict, rate=got, storage=rate,
              storage_how=how,
              threads=threads, limit=limit, peak=peak, oom=oom, disk=rd, epochs=epochs,
              warm=warm, secs=secs, fail=fail, cgroup=why, data=data_bytes, steps=steps,
              shard_bytes=shard_bytes)
    print("  %-10s %-9s %2d ranks: %s, %s MB/s (storage %s then %s MB/s at %d threads), %.0f s%s%s"
          % (wl, loader, ranks, "AU %.3f (strict %.3f)" % (au, strict) if au is not None else fail,
             "%.0f" % (got / 1e6) if got else "-", fmt_rate(before), fmt_rate(after),
             threads, secs, "; disk %.2f GB" % (rd / 1e9) if rd is not None else "",
             few_steps(t)), flush=True)
    return t


def few_steps(t):
    """A flag where DLIO's first step left out is a large share of an epoch."""
    return "; %d steps an epoch (< %d)" % (t.steps, EPOCH_STEPS) if t.steps < EPOCH_STEPS else ""


def first_batch(a, wl, w, src, files, data_bytes, log):
    """A cold epoch's first batch on one rank without a cache (bench_deliver
    --first-batch, the page cache dropped, in the cgroup), set against reading
    one window (SC_LOG=2's 'held at once' or, for a batch beyond the window,
    'holds up to') at the storage's O_DIRECT rate with the producers' threads."""
    rate, _ = storage_limit(a.bin, files, PRODUCERS, log)
    limit = mem_limit(a, w, "sc-nocache", 1, data_bytes)
    env = dict(os.environ, SC_LOG="2", SC_SOURCE=src, SC_BATCH_SIZE=str(w["batch"]),
               SC_CACHE_BYTES="1", SC_PREFETCH_BATCHES=sc_prefetch(w, limit - MPIRUN),
               SC_PRODUCERS=str(PRODUCERS))
    cache = tempfile.mkdtemp(prefix="sc-cache.", dir=os.path.dirname(src.rstrip("/")))
    env["SC_CACHE_DIR"] = cache
    cmd = ["mpirun", "-np", "1", os.path.join(a.bin, "bench_deliver"), "--first-batch"]
    rc, out, *_ = run_job(cmd, env, limit, log)
    shutil.rmtree(cache, ignore_errors=True)
    m = re.search(r"first batch: ([0-9.]+) s after open \(open ([0-9.]+) s\)", out)
    held = re.search(r"stream holds up to (\d+) bytes", out) or \
        re.search(r"\((\d+) bytes; SC_STREAM_BYTES", out)
    if rc != 0 or not m or not held or not rate:
        return dict(workload=wl, fail="failed (rc %d): %s" % (rc, out.strip()[-160:]))
    t = dict(workload=wl, first=float(m.group(1)), open=float(m.group(2)),
             window=int(held.group(1)), rate=rate)
    t["window_s"] = t["window"] / rate
    print("  %-10s first batch %.2f s after open (open %.2f s); a window of %.0f MB at %.0f MB/s: "
          "%.2f s" % (wl, t["first"], t["open"], t["window"] / 1e6, rate / 1e6, t["window_s"]),
          flush=True)
    return t


def first_batch_table(rows):
    lines = ["", "A cold epoch's first batch, one rank, no cache, the page cache dropped "
             "(`bench_deliver --first-batch` in the same cgroup):", "",
             "| workload | first batch after the open, s | of which the open, s | window (SC_LOG=2), MB "
             "| the window at the storage's O_DIRECT rate (2 threads), s | first batch / that |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for t in rows:
        if "fail" in t:
            lines.append("| %s | %s | | | | |" % (t["workload"], t["fail"]))
            continue
        lines.append("| %s | %.2f | %.2f | %.0f | %.2f (%.0f MB/s) | %.1f |"
                     % (t["workload"], t["first"], t["open"], t["window"] / 1e6, t["window_s"],
                        t["rate"] / 1e6, (t["first"] - t["open"]) / t["window_s"]))
    return lines


class Search:
    """The largest ranks with AU >= threshold: 1, 2, 4, ... then bisection; then the
    answer and the count above it run again, each count decided by the majority of
    its trials (a third where two disagree): on a disk whose own rate varies by up
    to 2x within a run, one trial at the boundary is a coin toss."""

    def __init__(self, loader, threshold, top, confirm=CONFIRM):
        self.loader, self.thr, self.top, self.confirm = loader, threshold, top, confirm
        self.trials = {}  # ranks: [Trial]

    def passes(self, n):
        """The majority's verdict at n ranks: True, False, or None (untried, a tie)."""
        up, of = self.tally(n)
        return None if 2 * up == of else 2 * up > of

    def bounds(self):
        """(good, bad): the smallest count that fails (top + 1 if none) and the
        largest below it that passes (0 if none)."""
        bad = min([n for n in self.trials if self.passes(n) is False] + [self.top + 1])
        good = max([n for n in self.trials if n < bad and self.passes(n)] + [0])
        return good, bad

    @property
    def good(self):
        return self.bounds()[0]

    def next(self):
        good, bad = self.bounds()
        if bad - good > 1:
            if bad > self.top and good < self.top:  # still doubling
                return min(self.top, max(1, 2 * good))
            return (good + bad) // 2
        for n in (good, bad):  # the boundary, confirmed
            if 1 <= n <= self.top and (len(self.trials[n]) < self.confirm or
                                       self.passes(n) is None):
                return n
        return None

    def record(self, t):
        self.trials.setdefault(t.ranks, []).append(t)

    def at(self, n):
        """The median trial at n ranks by AU (a failed run counts lowest), or None."""
        ts = sorted(self.trials.get(n, []), key=lambda t: -1 if t.au is None else t.au)
        return ts[(len(ts) - 1) // 2] if ts else None

    def tally(self, n):
        """(trials at n ranks that passed, trials at n ranks)."""
        ts = self.trials.get(n, [])
        return sum(1 for t in ts if t.au is not None and t.au >= self.thr), len(ts)

    def best(self):
        """The trial at the answer (at 1 rank where even 1 falls short)."""
        return self.at(self.good) or self.at(1)


def epoch_disk(t):
    """Disk bytes a counted epoch read (a warm-up epoch counted as the whole dataset)."""
    if t.disk is None or not t.epochs:
        return None
    return max(0, t.disk - t.warm * t.data) / t.epochs


def cache_saving(t):
    """(the bytes read over those from the source, how counted), or None: shardcache's own
    count where it printed one, else the disk's (which counts the libraries a job loads)."""
    got = t.shard_bytes
    if got and got[0] > 0:
        return sum(got) / got[0], ("shardcache's count: %.2f of %.2f GB an epoch from the source"
                                   % (got[0] / 1e9, sum(got) / 1e9))
    if got and sum(got) > 0:
        return float("inf"), "shardcache's count: all from the cache"
    per = epoch_disk(t)
    return (t.data / per, "the disk's count, libraries included") if per else None


def count(s):
    """A search's answer, saying so where it is 0 because its run failed, not because AU fell
    short."""
    t = s.at(1)
    return "%d (its run at 1 rank failed: %s)" % (s.good, t.fail) if not s.good and t and \
        t.au is None else "%d" % s.good


def fmt_rate(x):
    return "%.0f" % (x / 1e6) if x else "-"


def report(a, results, load, firsts):
    lines = []
    q = " --quick" if a.quick else ""
    opts = " --size %d" % a.size if a.size else ""
    opts += " --epochs %d" % a.epochs if a.epochs and not a.quick else ""
    lines.append("`bench/storage.py --bin BIN%s%s%s` (layout %s; %d cores online, load "
                 "average before %s; %s; %s)"
                 % (opts, q, " --window-fit" if a.window_fit else "", ",".join(a.layouts),
                    os.cpu_count(), load, NOTE["drop"], NOTE["cgroup"]))
    lines.append("")
    lines.append("| workload | layout | loader | accelerators at AU >= threshold | trials passing "
                 "there, one above | AU there (median trial; at 1 where 0; strict) | "
                 "delivered, MB/s | storage's O_DIRECT limit, MB/s (threads) | share | "
                 "memory limit (of the dataset), peak | disk read an epoch (of the dataset) |")
    lines.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    verdict = []
    for (wl, layout), per_ld in results.items():
        w = WORKLOADS[wl]
        n = {}
        for ld, s in per_ld.items():
            t = s.best()
            n[ld] = s.good
            if t is None:
                continue
            share = t.rate / t.storage if t.rate and t.storage else None
            per = epoch_disk(t)
            disk = "%.2f GB (%.2f)" % (per / 1e9, per / t.data) if per is not None else "-"
            peak = t.peak
            lines.append("| %s (AU >= %.2f) | %s | %s | %d%s | %s | %s | %s | %s (%d) | %s | "
                         "%.2f GB (%.2f), %s | %s |"
                         % (wl, w["au"], layout, ld, s.good,
                            " (top of the search)" if s.good >= s.top else "",
                            ", ".join("%d of %d" % s.tally(k) for k in (s.good, s.good + 1)
                                      if s.trials.get(k)),
                            "%.3f (%.3f)%s" % (t.au, t.strict, few_steps(t))
                            if t.au is not None else t.fail,
                            fmt_rate(t.rate),
                            fmt_rate(t.storage), t.threads, "%.2f" % share if share else "-",
                            t.limit / 1e9, t.limit / t.data,
                            "%.2f GB" % (peak / 1e9) if peak else "-", disk))
        for ld in ("sc-nocache", "dataloader"):
            t = per_ld[ld].best() if ld in per_ld else None
            e = epoch_disk(t) if t else None
            if e is not None and t.au is not None and e < 0.8 * t.data:
                verdict.append("%s/%s: %s read %.2f of the dataset from the disk an epoch: "
                               "partly from memory" % (wl, layout, ld, e / t.data))
        nc, c, dl = (per_ld.get(k) for k in LOADERS)
        if nc and nc.best() and nc.best().rate and nc.best().storage:
            t, past = nc.best(), nc.at(nc.good + 1)  # past: the first count that fails
            asks = nc.good * w["batch"] * w["sample"] * w["au"] / w["step"] / t.storage
            at = ("%d accelerators (what they ask for at AU %.2f: %.2f)"
                  % (nc.good, w["au"], asks) if nc.good else
                  "1 accelerator (none reaches AU %.2f)" % w["au"])
            share = past.rate / past.storage if past and past.rate and past.storage else None
            # Met where the loader is not what stops the accelerators: at 0.9 of the
            # limit at the answer, or at the count above it, which the storage then stops.
            met = t.rate / t.storage >= 0.9 or (share is not None and share >= 0.9
                                                 and past.ranks != t.ranks)
            verdict.append("%s/%s: shardcache without a cache at %.2f of the storage's limit "
                           "at %s (target >= 0.9, here or one above: %s)%s"
                           % (wl, layout, t.rate / t.storage, at, "met" if met else "not met",
                              "; at %d, AU %.3f, %.2f of the limit (%s)"
                              % (past.ranks, past.au, share, "the storage, not the loader, "
                                 "stops the next accelerator" if share >= 0.9 else "below 0.9")
                              if share and past.ranks != t.ranks else ""))
        if nc and dl:
            verdict.append("%s/%s: %s accelerators without a cache, %s with, %s by the "
                           "DataLoader (target: more than the DataLoader)"
                           % (wl, layout, count(nc), count(c) if c else "-", count(dl)))
        saved = cache_saving(c.best()) if c and c.best() else None
        if nc and saved:
            ratio, how = saved
            want = nc.good * ratio
            verdict.append("%s/%s: the cache saves %.2fx the source's bytes (%s); target "
                           "%.1f accelerators with it (%d x %.2f, within 10%%), got %d: %s"
                           % (wl, layout, ratio, how, want, nc.good, ratio, c.good,
                              "met" if abs(c.good - want) <= 0.1 * want else
                              "above" if c.good > want else "not met"))
    lines.append("")
    if a.quick:  # tiny files, one rank: whether everything runs, not the targets
        verdict = ["--quick: a smoke run; no target applies"]
    lines += ["- " + v for v in verdict]
    lines += first_batch_table(firsts)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the build's bin directory")
    ap.add_argument("--dir", default="/var/tmp", help="where the datasets go: the disk under "
                    "test, about 20 GiB free (default /var/tmp)")
    ap.add_argument("--tmpfs", default="/dev/shm", help="sc-cache's node-local cache: a tmpfs "
                    "(its pages are charged to the cgroup, whose limit grows by the cache) of "
                    "a third of the largest dataset, about 7 GiB (default /dev/shm)")
    ap.add_argument("--size", type=int, help="MiB of samples per workload (default: each "
                    "workload's, 3 to 20 GiB: 16 steps a rank an epoch where the search goes)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="some of %(default)s")
    ap.add_argument("--loaders", default=",".join(LOADERS), help="some of %(default)s")
    ap.add_argument("--layouts", default="B,A", help="B,A, or either (layout A where a file "
                    "holds many samples: resnet50)")
    ap.add_argument("--max-ranks", type=int, default=16, help="the search's top (default 16)")
    ap.add_argument("--min-steps", type=int, default=24, help="counted steps a rank, at least "
                    "(more epochs, at most 4; not with --epochs)")
    ap.add_argument("--epochs", type=int, default=0, help="counted epochs a trial, every loader "
                    "(MLPerf's runs: 5, which amortize a process's first touch of its memory); "
                    "default: as --min-steps needs, at most 4")
    ap.add_argument("--sc-env", action="append", default=[], metavar="SC_X=V",
                    help="a shardcache setting for both shardcache loaders")
    ap.add_argument("--window-fit", action="store_true", help="SC_SHUFFLE_WINDOW: the samples "
                    "half of SC_STREAM_BYTES' default holds, about what the auto window now "
                    "gives (for runs of builds from before it fit SC_STREAM_BYTES)")
    ap.add_argument("--doc", help="rewrite this section of docs/benchmarks.md (not where "
                    "the cgroup or drop_caches failed)")
    ap.add_argument("--quick", action="store_true", help="tiny datasets, one rank, one trial "
                    "each: checks that everything runs (tests/system)")
    a = ap.parse_args()
    if a.epochs < 0:
        ap.error("--epochs %d: 0 (the default: as --min-steps needs) or more" % a.epochs)
    a.layouts = a.layouts.split(",")
    for name, got, known in (("--workloads", a.workloads.split(","), WORKLOADS),
                             ("--loaders", a.loaders.split(","), LOADERS),
                             ("--layouts", a.layouts, ("A", "B"))):
        bad = [x for x in got if x not in known]
        if bad:
            ap.error("%s: %s unknown (known: %s)" % (name, ",".join(bad), ",".join(known)))
    if a.doc and a.quick:
        ap.error("--doc with --quick: a smoke run's figures are not the benchmark's")
    if a.doc and not doc_has_marks(a.doc):
        ap.error("--doc %s: no such file, or no %s ... %s markers in it" % ((a.doc,) + MARKS))
    if not os.path.isdir(a.dir):
        ap.error("--dir %s: not a directory" % a.dir)
    if a.quick:
        a.size, a.max_ranks = min(a.size or 24, 24), 1
        for w in WORKLOADS.values():  # files of about 1 MB, the same demand per step
            f = max(1, w["sample"] * w["per_file"] // (1 << 20))
            w["sample"] = max(64, w["sample"] // f)
            w["step"] /= f
    for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
        if os.getuid() == 0:
            os.environ.setdefault(k, "1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the datasets go too
    work = tempfile.mkdtemp(prefix="sc-storage.", dir=a.dir)
    log = open(os.path.join(work, "log"), "w")
    load = open("/proc/loadavg").read().split()[0]
    results, firsts = {}, []
    t_start = time.time()
    try:
        for wl in a.workloads.split(","):
            w = WORKLOADS[wl]
            file_bytes = w["sample"] * w["per_file"]
            # one rank's two batches and a DataLoader rank's overhead, 2.5 times
            # over: where that is more than --size (unet3d), the dataset grows
            least = 2 * w["batch"] * w["sample"]
            if not a.quick:
                least = 2.5 * (floor(w) + OVERHEAD["dataloader"] + MPIRUN)
            nfiles = max(math.ceil(least / file_bytes), ((a.size or w["mib"]) << 20) // file_bytes)
            data_bytes = nfiles * file_bytes
            for layout in a.layouts:
                if layout == "A" and w["per_file"] == 1:
                    continue  # MLPerf's one-sample files: layout B is the format
                src = os.path.join(work, wl + (".h5" if layout == "A" else ""))
                t0 = time.time()
                write_dataset(src, w, nfiles, layout)
                print("%s, layout %s: %d files, %.2f GB, written in %.0f s"
                      % (wl, layout, nfiles if layout == "B" else 1, data_bytes / 1e9,
                         time.time() - t0), flush=True)
                files = files_of(src)
                if layout == a.layouts[0]:
                    firsts.append(first_batch(a, wl, w, src, files, data_bytes, log))
                loaders = [ld for ld in a.loaders.split(",")
                           if not (ld == "dataloader" and layout == "A")]
                searches = {ld: Search(ld, w["au"], a.max_ranks, 1 if a.quick else CONFIRM)
                            for ld in loaders}
                while True:  # interleaved: one trial per loader a round
                    todo = [(s, s.next()) for s in searches.values() if s.next()]
                    if not todo:
                        break
                    for s, n in todo:
                        s.record(trial(a, wl, w, src, files, s.loader, n, data_bytes, work, log))
                results[(wl, layout)] = searches
                if os.path.isdir(src):
                    shutil.rmtree(src)
                else:
                    os.unlink(src)
        text = report(a, results, load, firsts)
        print(text)
        print("(%.0f s in all)" % (time.time() - t_start))
        if a.doc and (NOTE["cgroup"].startswith("in a memory cgroup") and
                      NOTE["drop"].startswith("each run")):
            write_doc(a.doc, text)
        elif a.doc:  # figures from the page cache, or without the rule: not the benchmark's
            sys.exit("storage.py: %s not written: %s; %s (run as root)"
                     % (a.doc, NOTE["cgroup"], NOTE["drop"]))
    finally:
        log.close()
        if os.environ.get("SC_BENCH_KEEP_LOG"):
            shutil.copy(os.path.join(work, "log"), os.environ["SC_BENCH_KEEP_LOG"])
        shutil.rmtree(work, ignore_errors=True)


MARKS = ("<!-- bench:storage -->", "<!-- /bench:storage -->")


def doc_has_marks(path):
    doc = open(path).read() if os.path.isfile(path) else ""
    return all(m in doc for m in MARKS)


def write_doc(path, text):
    """Replaces the figures between this benchmark's markers in docs/benchmarks.md."""
    begin, end = MARKS
    if not doc_has_marks(path):
        print("storage.py: %s has no %s ... %s markers: figures not written" % (path, begin, end))
        return
    head, rest = open(path).read().split(begin, 1)
    tail = rest.split(end, 1)[1]
    open(path, "w").write(head + begin + "\n" + text + "\n" + end + tail)


if __name__ == "__main__":
    main()
