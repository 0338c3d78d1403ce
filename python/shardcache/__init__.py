"""shardcache: the C loader in a PyTorch (or numpy) training loop.

    import shardcache
    loader = shardcache.Loader(source="data.h5", batch_size=256, shuffle="sticky", seed=7)
    for epoch in range(epochs):
        for batch in loader.epoch(epoch):        # equal batch count on every rank
            x, y = batch["images"], batch["labels"]   # torch tensors, zero-copy
            ...
        print(loader.verdict(epoch))             # the job's exactly-once verdict
    state = loader.state_dict()                  # saved with the model
    loader.close()                               # collective

Every keyword is a setting: name=value is SC_NAME=value (docs/api.md lists
them); the SC_* environment applies first, keywords override it.  The C
library does all the work; this module only turns its buffers into arrays.

A batch's tensors are views of the loader's ring: they stay valid until
the next batch is taken (when the batch is released), unless batch.keep()
is called, then until batch.release().  At most SC_PREFETCH_BATCHES
batches can be held; holding more is a shardcache.Error, never a hang.
"""
import atexit
import sys

from mpi4py import MPI

from . import _core, _launch

__all__ = ["Loader", "Batch", "Error", "Verdict", "features", "init_torch_distributed"]

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency of both paths
    _np = None
try:
    import torch as _torch
except ImportError:
    _torch = None


class Error(RuntimeError):
    """A shardcache call failed: .status is the status's name (e.g. "SC_EIO"),
    .message the library's message (naming the file, shard, rank or epoch)."""

    def __init__(self, status, message, code):
        super().__init__(f"{status}: {message}")
        self.status, self.message, self.code = status, message, code


def _call(fn, *args):
    try:
        return fn(*args)
    except _core.Error as e:
        raise Error(*e.args) from None


def features():
    """What this build of the library has: cuda, nccl, cuda_devices, testing."""
    return _core.features()


class _View:
    """An array's owner: the address and layout of one field of a batch, and
    the batch itself, kept alive by every array made from it."""

    __slots__ = ("__array_interface__", "__cuda_array_interface__", "_batch")

    def __init__(self, batch, addr, shape, typestr, device, readonly=False):
        self._batch = batch
        iface = {"shape": shape, "typestr": typestr, "data": (addr, readonly), "version": 3}
        if device >= 0:
            iface["version"] = 2
            self.__cuda_array_interface__ = iface
        else:
            self.__array_interface__ = iface


class Batch:
    """One batch: batch["name"] is a field as a torch tensor (numpy array
    without torch), batch.ids the sample ids, batch.epoch/index/size/padded
    as in sc_batch.  Valid until released (docs/python.md)."""

    def __init__(self, loader, seq, epoch, index, size, padded, device, ids, bufs):
        self._loader, self._seq = loader, seq
        self.epoch, self.index, self.size, self.padded, self.device = (
            epoch, index, size, padded, device)
        self._ids, self._bufs = ids, bufs
        self._kept = self._released = False

    def _check(self):
        if self._loader._closed:
            raise ValueError(f"epoch {self.epoch} batch {self.index}: the loader is closed "
                             "and its buffers are freed")
        if self._released:
            raise ValueError(f"epoch {self.epoch} batch {self.index} was released: its "
                             "buffers belong to a later batch (keep() it to hold it)")

    def keys(self):
        return [f[0] for f in self._loader._fields]

    def address(self, name):
        """The field's buffer address (a tensor made from it has this data_ptr)."""
        self._check()
        return self._bufs[self._loader._index(name)][0]

    def offsets(self, name):
        """A variable-length field's size + 1 offsets (uint64, bytes into its
        values, host memory: sample k is values[offsets[k]:offsets[k+1]])."""
        self._check()
        i = self._loader._index(name)
        if not self._bufs[i][2]:
            raise ValueError(f"field '{name}' has a fixed shape: it has no offsets")
        return _np.asarray(_View(self, self._bufs[i][2], (self.size + 1,), "<u8", -1,
                                 readonly=True))

    def _values(self, i, device):
        """A variable-length field's values, one flat array of its dtype."""
        dtype = _np.dtype(self._loader._fields[i][1])
        return _View(self, self._bufs[i][0], (self._bufs[i][1] // dtype.itemsize,), dtype.str,
                     device)

    def _split(self, name, values):
        """A variable-length field's samples: views of its values, one each."""
        size = _np.dtype(self._loader._fields[self._loader._index(name)][1]).itemsize
        off = self.offsets(name) // size
        return [values[off[k]:off[k + 1]] for k in range(self.size)]

    def numpy(self, name):
        """The field as a numpy array (host batches), zero-copy; a
        variable-length field as a list of arrays, one a sample."""
        self._check()
        if self.device >= 0:
            raise ValueError("a device batch: use batch[name] for a CUDA tensor")
        i = self._loader._index(name)
        _, dtype, shape = self._loader._fields[i]
        if self._bufs[i][2]:
            return self._split(name, _np.asarray(self._values(i, -1)))
        return _np.asarray(_View(self, self._bufs[i][0], (self.size,) + shape,
                                 _np.dtype(dtype).str, -1))

    def __getitem__(self, name):
        if not isinstance(name, str):
            raise TypeError(f"a batch is indexed by field name ({', '.join(self.keys())}), "
                            f"not {type(name).__name__}")
        if _torch is None:
            return self.numpy(name)
        self._check()
        i = self._loader._index(name)
        if self._bufs[i][2]:  # variable-length: a tensor a sample
            if self.device < 0:
                return self._split(name, _torch.from_numpy(_np.asarray(self._values(i, -1))))
            stream = _torch.cuda.current_stream(self.device)
            _call(self._loader._c.wait_on, self._seq, stream.cuda_stream)
            return self._split(name, _torch.as_tensor(self._values(i, self.device),
                                                      device=f"cuda:{self.device}"))
        if self.device < 0:
            # A ring slot's buffers never move: its tensors are made once
            # (bench/python.py: 52 -> 31 us of CPU per batch) and handed out
            # as fresh aliases, so that a caller's in-place reshape of one
            # cannot reach the next batch's.
            key = (i, self._bufs[i][0])
            t = self._loader._tensors.get(key)
            if t is None:
                a = self.numpy(name)
                if a.dtype.kind == "u" and a.dtype.itemsize > 1:
                    raise TypeError(f"field '{name}' is {a.dtype}, which torch 1.13 has no "
                                    "tensor type for: use batch.numpy(name)")
                t = self._loader._tensors[key] = _torch.from_numpy(a)
            return t.detach()
        _, dtype, shape = self._loader._fields[i]
        # The tensor's stream waits for the copy on the GPU; no host wait.
        stream = _torch.cuda.current_stream(self.device)
        _call(self._loader._c.wait_on, self._seq, stream.cuda_stream)
        view = _View(self, self._bufs[i][0], (self.size,) + shape, _np.dtype(dtype).str,
                     self.device)
        return _torch.as_tensor(view, device=f"cuda:{self.device}")

    @property
    def ids(self):
        """The global sample ids, a uint64 numpy array (zero-copy)."""
        self._check()
        return _np.asarray(_View(self, self._ids, (self.size,), "<u8", -1, readonly=True))

    def keep(self):
        """Hold this batch past the next one; release() it yourself."""
        self._kept = True
        return self

    def release(self):
        """Gives the buffers back (on the current CUDA stream for device batches)."""
        if self._released:
            return
        self._released = True
        if self._loader._closed:
            return  # close() took every buffer back
        stream = 0
        if self.device >= 0 and _torch is not None:
            stream = _torch.cuda.current_stream(self.device).cuda_stream
        _call(self._loader._c.release, self._seq, stream)


class Verdict(dict):
    """An epoch's figures on this rank and the job's exactly-once verdict:
    ok, delivered, dropped, duplicated, skipped, detail, wait_s, wall_s, ..."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __str__(self):
        if not self["verified"]:
            return f"epoch {self['epoch']}: exactly-once not verified yet"
        if self["ok"]:
            return (f"epoch {self['epoch']}: exactly-once ok ({self['delivered']} delivered, "
                    f"{self['dropped']} dropped by the remainder policy)")
        return f"epoch {self['epoch']}: exactly-once FAILED: {self['detail']}"


_hook_installed = False
_open = set()  # ids of the loaders not closed yet


def _exit_with_loader_open():
    """At exit, a loader still open means this rank stopped early (sys.exit,
    or an error caught and not re-raised): the others would wait for it in
    a collective, so end the job."""
    if _open:
        sys.stderr.write(f"shardcache: rank {MPI.COMM_WORLD.Get_rank()}: exiting with a "
                         "loader open (no close()): ending the job (MPI_Abort)\n")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)


def _abort_on_uncaught():
    """An uncaught exception on one rank must end the job, not leave the
    others waiting in a collective (mpi4py's own `python -m mpi4py` does the
    same): print it, then MPI_Abort."""
    global _hook_installed
    if _hook_installed:
        return
    _hook_installed = True
    atexit.register(_exit_with_loader_open)  # runs before mpi4py finalizes MPI
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.write(f"shardcache: rank {MPI.COMM_WORLD.Get_rank()}: uncaught "
                         f"{kind.__name__}: ending the job (MPI_Abort)\n")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


class Loader:
    """The loader of one training process; open and close are collective.

    Loader(comm=MPI.COMM_WORLD, resume=None, abort_on_error=True, **settings)

    resume: every rank's state_dict() of the checkpointed job (a list, in
    any order; on another number of ranks too); then begin at
    loader.resumed_epoch.  abort_on_error: an uncaught exception on any rank
    ends the job with MPI_Abort instead of a hang.  transform: a C transform
    by name, "LIBRARY.so:FUNCTION" (an sc_transform_factory), given the
    text transform_arg.
    """

    def __init__(self, comm=None, resume=None, abort_on_error=True, transform=None,
                 transform_arg=None, **settings):
        comm = MPI.COMM_WORLD if comm is None else comm
        env = {}
        for key, value in settings.items():
            if value is None:
                continue
            if isinstance(value, bool):
                value = int(value)
            env["SC_" + key.upper()] = str(value)
        records = None
        if resume is not None:
            records = [s["record"] if isinstance(s, dict) else bytes(s) for s in resume]
        if abort_on_error:
            _abort_on_uncaught()
        _call(_launch.check_torch_group, comm)  # collective: torch's world is the loader's
        self._c = _call(_core.Loader, comm, env, records, transform, transform_arg)
        if abort_on_error:
            _open.add(id(self))
        # A variable-length field's shape is (None,): one dimension, its length a sample's.
        self._fields = [(name.lstrip("/"), dtype, (None,) if vlen else tuple(shape))
                        for name, dtype, shape, vlen in _call(self._c.fields)]
        self._names = {f[0]: i for i, f in enumerate(self._fields)}
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._closed = self._raised = False
        self._tensors = {}  # (field, ring slot address) -> the slot's tensor
        self._epoch = self._more = None  # the epoch begun, and whether batches are left
        self.info = None

    @property
    def fields(self):
        """[(name, dtype, shape of one sample)], in batch order."""
        return list(self._fields)

    @property
    def resumed_epoch(self):
        """After resume: the epoch to begin next (None without resume)."""
        return self._c.resumed_epoch

    def _index(self, name):
        try:
            return self._names[name.lstrip("/")]
        except KeyError:
            raise KeyError(f"no field '{name}' (fields: {', '.join(self._names)})") from None

    def _do(self, fn, *args):
        """A loader call; its error, once raised, is not raised again by close()."""
        try:
            return _call(fn, *args)
        except Error:
            self._raised = True
            raise

    def _take(self):
        t = self._do(self._c.next)
        return None if t is None else Batch(self, *t)

    def epoch(self, epoch):
        """The batches of `epoch` on this rank; each is released when the next
        is taken (unless kept), the last when the epoch ends.  Asking again
        for the epoch in progress (after a break or an error) goes on where
        it stopped; another epoch can begin only once this one's batches
        are all taken (finish_epoch() takes the rest)."""
        if epoch != self._epoch and self._more:
            raise ValueError(f"epoch {self._epoch} still has batches (a break?): "
                             f"loader.epoch({self._epoch}) goes on with them, "
                             "loader.finish_epoch() takes the rest")
        if epoch != self._epoch or not self._more:
            self.info = self._do(self._c.begin, epoch)
            self._epoch, self._more = epoch, True
        return self._batches()

    def _batches(self):
        held = None
        try:
            while True:
                if held is not None and not held._kept:
                    held.release()
                held = self._take()
                if held is None:
                    self._more = False
                    return
                yield held
        finally:
            if held is not None and not held._kept:
                held.release()

    def finish_epoch(self):
        """Takes and releases the rest of the epoch in progress (they count
        as delivered), so that the next can begin: after a break."""
        if self._more:
            for _ in self._batches():
                pass

    def verdict(self, epoch, wait=True):
        """The job's exactly-once verdict on `epoch` and this rank's figures."""
        return Verdict(self._do(self._c.report, epoch, wait))

    def state_dict(self):
        """This rank's position: save every rank's with the model."""
        return {"rank": self.rank, "size": self.size, "record": self._do(self._c.checkpoint)}

    def close(self):
        """Collective: every rank calls it (a with-block does).  After an error
        this loader already raised (and the caller caught), it closes quietly."""
        self._closed = True
        self._tensors.clear()
        _open.discard(id(self))
        try:
            _call(self._c.close)
        except Error:
            if not self._raised:
                raise

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.close()
        # With an exception the other ranks may not reach close(): the
        # exception goes on (and, uncaught, ends the job with MPI_Abort).
        return False


def init_torch_distributed(backend="gloo", comm=None, port=None):
    """torch.distributed.init_process_group over the MPI ranks (collective):
    refused on every rank when a launcher started more processes than MPI
    holds; on one node torch's store is a file only this user can open
    (nothing listens), across nodes a TCPStore on rank 0 on a port the OS
    picks, sent through MPI.  MASTER_ADDR and MASTER_PORT (or port) set on
    rank 0 choose the TCPStore's address and port (docs/python.md)."""
    _call(_launch.init_torch_distributed, backend, comm, port)
