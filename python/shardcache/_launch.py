"""How a shardcache job meets its launcher and torch.distributed.

A loader's world is MPI's.  torchrun (or srun without PMIx) starts N
processes that MPI sees each alone: each would open a loader of world 1,
read the whole dataset and find it delivered exactly once.  The C library
refuses that at open (sc_launcher_check: the launcher's variables against
MPI_COMM_WORLD); here the same check runs before torch.distributed is set
up, and a torch.distributed already set up must be the loader's world too.

init_torch_distributed builds torch's store itself instead of handing
torch an address and a port found free (which another process, or the
agent of a torchrun, could take first: 'Address already in use'):

- every rank on one node: a FileStore, a file of rank 0's that only its
  user can open (mkstemp: 0600, in TMPDIR).  Nothing listens on the
  network at all; torch 1.13's TCPStore cannot be bound to loopback (it
  listens on every interface), and loopback would still let another user
  of the node connect and write.
- across nodes: a TCPStore on rank 0, on a port the OS picks as the store
  binds it, sent to the others over MPI.  It listens on every interface
  of rank 0's node (torch gives no choice).

MASTER_ADDR and MASTER_PORT (or port=) set on rank 0 still choose the
TCPStore's address and port.  Every failure is agreed over MPI: every rank
raises, none waits for a store that will not come.

Errors are the extension's (_core.Error), which the package's _call turns
into shardcache.Error.
"""
import atexit
import os
import shutil
import socket
import stat
import sys
import tempfile

from mpi4py import MPI

from . import _core


def _error(message):
    return _core.Error("SC_EINVAL", message, _core.EINVAL)


def _agree(comm, check):
    """Runs check() on every rank of comm; if it raised _core.Error on any,
    every rank raises: its own error, or one naming the rank that failed."""
    mine = None
    try:
        check()
    except _core.Error as e:
        mine = e
    failed = comm.allgather(None if mine is None else mine.args[1])
    if mine is not None:
        raise mine
    for rank, message in enumerate(failed):
        if message is not None:
            raise _error(f"rank {comm.Get_rank()}: rank {rank} refused: {message}")


def _spans_world(comm):
    return MPI.Comm.Compare(comm, MPI.COMM_WORLD) in (MPI.IDENT, MPI.CONGRUENT)


def _torch_group_check(comm):
    """The default process group, when torch.distributed has one, is comm."""
    dist = sys.modules.get("torch.distributed")  # not imported: not initialised
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    size, rank = dist.get_world_size(), dist.get_rank()
    if (size, rank) != (comm.Get_size(), comm.Get_rank()):
        raise _error(
            f"torch.distributed is initialised as rank {rank} of {size}, but the loader's "
            f"MPI world is rank {comm.Get_rank()} of {comm.Get_size()}: the two were set up "
            "by different launchers (torchrun beside an MPI job?), and each MPI world would "
            "read the whole dataset.  Launch with mpirun, srun --mpi=pmix or shardcache-run, "
            "and set torch.distributed up with shardcache.init_torch_distributed()")


def check_torch_group(comm):
    """Collective on comm: refused on every rank when torch.distributed's
    default group is not comm's world (its size or this rank differs).  A
    loader on part of the world is not compared: the group is the world's."""
    if _spans_world(comm):
        _agree(comm, lambda: _torch_group_check(comm))


def _address():
    """This host's address another node can reach: not the 127.0.1.1 that a
    default Debian install maps its own name to."""
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            if not info[4][0].startswith("127."):
                return info[4][0]
    except OSError:
        pass
    try:  # the source address of a route out (a UDP connect sends nothing)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
    except OSError:
        return socket.gethostname()


def _one_node(comm):
    """Whether every rank of comm runs on this node (collective)."""
    return len(set(comm.allgather(MPI.Get_processor_name()))) == 1


def _swappable(path):
    """Whether a directory on path's resolved chain may be written by users
    other than its owner without the sticky bit: they could rename what is
    below it and put a link in its place (torch reopens the store by path)."""
    here = "/"
    for part in [""] + os.path.realpath(path).strip("/").split("/"):
        here = os.path.join(here, part) if part else here
        st = os.lstat(here)
        sticky = st.st_mode & stat.S_ISVTX and st.st_uid in (0, os.geteuid())
        if not sticky and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return True
    return False


def _private_dir():
    """A fresh 0700 directory in the first of TMPDIR, /tmp, /dev/shm that no
    other user can swap, removed at exit."""
    for base in (tempfile.gettempdir(), "/tmp", "/dev/shm"):
        try:
            base = os.path.realpath(base)  # a link on the way could be repointed
            if not _swappable(base):
                path = tempfile.mkdtemp(prefix="shardcache-torch-store-", dir=base)
                atexit.register(shutil.rmtree, path, True)
                return path
        except OSError:
            continue
    raise OSError("no directory for torch's store that other users cannot swap (TMPDIR, "
                  "/tmp and /dev/shm are all writable by others without the sticky bit)")


def _file_store(comm, dist):
    """A FileStore in a private directory of rank 0's that every rank sees,
    or None (ranks in containers of their own may not share a TMPDIR)."""
    path = None
    if comm.Get_rank() == 0:
        path = os.path.join(_private_dir(), "store")
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
    path = comm.bcast(path, root=0)
    if not comm.allreduce(os.path.isfile(path), op=MPI.LAND):
        if comm.Get_rank() == 0:
            os.unlink(path)
        return None
    # The last rank's store to go removes the file.
    return dist.FileStore(path, comm.Get_size())


def _tcp_store(comm, dist, port, timeout):
    """A TCPStore on rank 0 (port 0: the OS picks one as it binds), its
    address sent to the others; rank 0's failure to bind fails every rank."""
    where = None
    store = None
    if comm.Get_rank() == 0:
        host = os.environ.get("MASTER_ADDR") or _address()
        port = int(port or os.environ.get("MASTER_PORT") or 0)
        try:
            store = dist.TCPStore(host, port, comm.Get_size(), True, timeout,
                                  wait_for_workers=False)
            where = (host, store.port)
        except (RuntimeError, OSError) as e:
            where = f"rank 0 could not start torch's TCPStore on {host}:{port}: {e}"
    where = comm.bcast(where, root=0)
    if isinstance(where, str):
        raise _error(where)
    if store is None:
        store = dist.TCPStore(where[0], where[1], comm.Get_size(), False, timeout)
    return store


def init_torch_distributed(backend="gloo", comm=None, port=None):
    """torch.distributed.init_process_group over comm's ranks (collective).
    Refused on every rank first when a launcher started more processes than
    MPI holds (torchrun, srun without PMIx: SC_LAUNCHER_CHECK says why)."""
    import torch.distributed as dist

    comm = MPI.COMM_WORLD if comm is None else comm
    _agree(comm, lambda: _core.launcher_check(None))
    explicit = None
    if comm.Get_rank() == 0:
        explicit = bool(port or os.environ.get("MASTER_PORT"))
    explicit = comm.bcast(explicit, root=0)
    timeout = dist.default_pg_timeout
    store = None
    if not explicit and _one_node(comm):
        store = _file_store(comm, dist)
    if store is None:
        store = _tcp_store(comm, dist, port, timeout)
    dist.init_process_group(backend, store=store, rank=comm.Get_rank(),
                            world_size=comm.Get_size(), timeout=timeout)
