"""Launchers and torch.distributed against the loader's MPI world
(tests/python, under mpiexec -n 1, 2 and 4).

torchrun's processes (each alone in MPI) are refused on every process,
with the message and no verdict, by Loader and by init_torch_distributed;
a torch.distributed group of another size than the MPI world is refused
on every rank; init_torch_distributed works twice in a row, on one node
with nothing listening (the store is a file only this user can open), and
across nodes with a TCPStore on a port rank 0 bound itself.
"""
import os
import socket
import stat
import subprocess
import sys
import tempfile

import pytest
import torch
import torch.distributed as dist

import shardcache
from shardcache import _launch
from conftest import COMM

RANK, SIZE = COMM.Get_rank(), COMM.Get_size()

CHILD = """
import sys, shardcache
if sys.argv[2] == "init":
    shardcache.init_torch_distributed("gloo")
loader = shardcache.Loader(source=sys.argv[1], cache_dir=sys.argv[3], batch_size=10, log=0)
for batch in loader.epoch(0):
    pass
print(loader.verdict(0))
loader.close()
"""


def torchrun_env(rank, world):
    """What torchrun gives each process it starts, and none of mpiexec's
    variables (a child of an mpiexec rank would otherwise join its job)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_COMM_WORLD", "OMPI_MCA_orte", "OMPI_MCA_ess",
                                "OMPI_MCA_pmix", "PMIX_", "PMI_"))}
    env.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT="29500", TORCHELASTIC_RUN_ID="none")
    return env


@pytest.mark.parametrize("first", ["loader", "init"])
def test_torchrun_processes_refused_on_every_process(dataset, cache_dir, first):
    """The issue's job: two processes started the way torchrun starts them,
    MPI a singleton in each.  Both fail naming 2 and 1 and the fix; neither
    prints a verdict (before the check both said 'exactly-once ok' and
    together read the dataset twice)."""
    if SIZE != 1:
        pytest.skip("run once, under mpiexec -n 1: its processes are its own")
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        procs = [subprocess.Popen([sys.executable, script, dataset, first, cache_dir],
                                  env=torchrun_env(r, 2), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for r in range(2)]
        outs = [p.communicate(timeout=120)[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode != 0, f"process {r} exited 0:\n{out}"
        assert "torchrun started 2 processes" in out, out
        assert f"WORLD_SIZE=2 RANK={r} LOCAL_RANK={r}" in out, out
        assert "MPI_COMM_WORLD holds 1" in out, out
        assert "mpirun -n 2, srun --mpi=pmix -n 2 or shardcache-run -n 2" in out, out
        assert "exactly-once" not in out and "Address already in use" not in out, out


@pytest.fixture
def torch_of_one(shared_dir):
    """torch.distributed set up on each rank alone (a world of 1), as a
    launcher other than the loader's would leave it."""
    path = os.path.join(shared_dir, f"alone-{RANK}")
    dist.init_process_group("gloo", store=dist.FileStore(path, 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    COMM.Barrier()


def test_torch_group_of_another_world_refused(dataset, cache_dir, torch_of_one):
    if SIZE == 1:  # the same world: it opens
        shardcache.Loader(source=dataset, cache_dir=cache_dir, batch_size=10, log=0).close()
        return
    with pytest.raises(shardcache.Error) as e:
        shardcache.Loader(source=dataset, cache_dir=cache_dir, batch_size=10, log=0)
    assert e.value.status == "SC_EINVAL"
    assert (f"torch.distributed is initialised as rank 0 of 1, but the loader's MPI world "
            f"is rank {RANK} of {SIZE}") in e.value.message
    assert "shardcache.init_torch_distributed()" in e.value.message


def listening():
    """This process's listening TCP sockets: {(address hex, port)}."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    addr, port = cols[1].split(":")
                    found.add((addr, int(port, 16)))
    return found


def all_reduce_works():
    t = torch.full((1,), float(RANK + 1))
    dist.all_reduce(t)
    assert t.item() == SIZE * (SIZE + 1) / 2


def test_init_torch_distributed_one_node_listens_nowhere(shared_dir, monkeypatch):
    """Twice in a row; each time the store is a 0600 file in a 0700
    directory of rank 0's in TMPDIR, the file gone when the group goes, and
    no new socket listens (the TCPStore of before listened on every
    interface).  A TMPDIR others may write without the sticky bit is not
    used (they could swap the file, which torch reopens by path)."""
    def fresh(name, mode=0o700):
        path = os.path.join(shared_dir, name)
        if RANK == 0:
            os.mkdir(path)
            os.chmod(path, mode)
        COMM.Barrier()
        monkeypatch.setattr(tempfile, "tempdir", path)
        return path

    for k in range(2):
        store_dir = fresh(f"stores{k}")
        before = listening()
        shardcache.init_torch_distributed("gloo")
        try:
            all_reduce_works()
            assert listening() - before == set()
            dirs = os.listdir(store_dir)
            assert len(dirs) == 1 and dirs[0].startswith("shardcache-torch-store-")
            private = os.path.join(store_dir, dirs[0])
            assert stat.S_IMODE(os.stat(private).st_mode) == 0o700
            assert stat.S_IMODE(os.stat(os.path.join(private, "store")).st_mode) == 0o600
        finally:
            COMM.Barrier()
            dist.destroy_process_group()
            COMM.Barrier()
        assert os.listdir(private) == []
    store_dir = fresh("stores-shared", 0o775)  # others' to write, no sticky bit: not used
    shardcache.init_torch_distributed("gloo")
    try:
        all_reduce_works()
        assert os.listdir(store_dir) == []
    finally:
        COMM.Barrier()
        dist.destroy_process_group()
        COMM.Barrier()


def test_init_torch_distributed_across_nodes(monkeypatch):
    """As across nodes: a TCPStore on rank 0 on a port it bound itself
    (port 0), twice in a row, the second time with the first's port taken
    by another socket meanwhile: never 'Address already in use' (a port
    found free, then released for torch to bind, or left in MASTER_PORT for
    the next call, could be taken in between)."""
    monkeypatch.setattr(_launch, "_one_node", lambda comm: False)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    taken = None
    try:
        for _ in range(2):
            before = listening()
            shardcache.init_torch_distributed("gloo")
            try:
                all_reduce_works()
                new = listening() - before
                assert len(new) == (1 if RANK == 0 else 0), new
            finally:
                COMM.Barrier()
                dist.destroy_process_group()
                COMM.Barrier()
            if RANK == 0 and taken is None:  # another program takes the port
                taken = socket.socket(socket.AF_INET6)
                taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                taken.bind(("::", new.pop()[1]))
                taken.listen()
    finally:
        if taken is not None:
            taken.close()
