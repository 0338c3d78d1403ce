"""shardcache: the C loader in a PyTorch (or numpy) training loop.

    import shardcache
    loader = shardcache.Loader(source="data.h5", batch_size=256, shuffle="sticky", seed=7)
    for epoch in range(epochs):
        for batch in loader.epoch(epoch):        # equal batch count on every rank
            x, y = batch["images"], batch["labels"]   # torch tensors, zero-copy
            ...
        print(loader.verdict(epoch))             # the job's exactly-once verdict
    state = loader.state_dict()                  # saved with the model
    loader.close()                               # collective (done at exit too)

Every keyword is a setting: name=value is SC_NAME=value (docs/api.md lists
them); the SC_* environment applies first, keywords override it.  The C
library does all the work; this module only turns its buffers into arrays.

A batch's tensors are views of the loader's ring, and a ring slot goes back
to the producers only when the batch and every tensor or array made from it
are gone: a tensor kept (in a list of labels, say) is never overwritten.
When kept batches hold all but one slot, batches arrive as copies instead
(one warning says so), never a hang (docs/python.md, "Buffers").
"""
import atexit
import collections.abc
import sys
import threading
import warnings
import weakref

from mpi4py import MPI

from . import _ahead, _core, _launch

__all__ = ["Loader", "Batch", "Error", "Verdict", "features", "init_torch_distributed"]

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency of both paths
    _np = None
try:
    import torch as _torch
except ImportError:
    _torch = None

# What torch 1.13 has no tensor type for, and the wider type batch[name] gives instead.
_WIDER = {"uint16": "int32", "uint32": "int64", "uint64": "int64"}


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


class _Slot:
    """A ring slot's claim: alive while its batch or any array or tensor made
    from it is.  When the last goes, the slot is queued for release; the
    loader gives it back at its next call (never from here: this may run on
    any thread, inside any call).  Detached at close (the memory is then
    the claim's own), it frees the memory instead."""

    __slots__ = ("_loader", "_seq", "_detached", "__weakref__")

    def __init__(self, loader, seq):
        self._loader, self._seq, self._detached = loader, seq, None

    def __del__(self):
        if self._detached is not None:
            _core.free_detached(self._detached)
        else:
            self._loader._gone.append(self._seq)  # list.append is atomic


class _View:
    """An array's owner: the address and layout of one field of a batch, and
    the claim on its memory, kept alive by every array made from it."""

    __slots__ = ("__array_interface__", "__cuda_array_interface__", "_owner")

    def __init__(self, owner, addr, shape, typestr, device, readonly=False):
        self._owner = owner
        iface = {"shape": shape, "typestr": typestr, "data": (addr, readonly), "version": 3}
        if device >= 0:
            iface["version"] = 2
            self.__cuda_array_interface__ = iface
        else:
            self.__array_interface__ = iface


def _copy_out(ids, size, bufs):
    """A host batch's bytes in fresh memory: (ids, bufs, owner), the same
    layout as the ring's, so that every view below works on either."""
    def fresh(addr, nbytes):
        a = _np.asarray(_View(None, addr, (nbytes,), "|u1", -1)).copy()
        keep.append(a)
        return a.ctypes.data
    keep = []
    ids = fresh(ids, 8 * size)
    bufs = [(fresh(a, n), n, fresh(o, 8 * (size + 1)) if o else 0) for a, n, o in bufs]
    return ids, bufs, keep


class Batch(collections.abc.Mapping):
    """One batch, a mapping of field name to tensor: batch["images"] (a torch
    tensor; numpy without torch), "images" in batch, batch.keys(), .items();
    batch.ids the sample ids (int64), batch.epoch/index/size/padded as in
    sc_batch; batch.replaced the slots holding a replacement for a skipped bad
    sample (SC_BAD_SAMPLE=skip, SC_SKIP_LIST), batch.stands_for the ids they
    replace, in the same order (both [] mostly).  Valid while you hold it
    (docs/python.md)."""

    def __init__(self, loader, seq, epoch, index, size, padded, device, ids, bufs, owner):
        self._loader, self._seq = loader, seq
        self.epoch, self.index, self.size, self.padded, self.device = (
            epoch, index, size, padded, device)
        self._ids, self._bufs, self._owner = ids, bufs, owner
        self.replaced, self.stands_for = [], []
        self.copied = not isinstance(owner, _Slot)  # fresh memory, not the ring

    def _check(self):
        if (self._loader._closed and isinstance(self._owner, _Slot)
                and self._owner._detached is None):
            raise ValueError(f"epoch {self.epoch} batch {self.index}: the loader is closed "
                             "and its buffers are freed")
        if self._owner is None:
            raise ValueError(f"epoch {self.epoch} batch {self.index} was released: its "
                             "buffers go to a later batch once no tensor made from it is left")

    def __iter__(self):
        return iter(self._loader._names)

    def __len__(self):
        return len(self._loader._fields)

    # A batch is one batch: compared and hashed by identity (Mapping's ==
    # would compare the tensors, an error for more than one element).
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __contains__(self, name):
        return isinstance(name, str) and name.lstrip("/") in self._loader._names

    def __repr__(self):
        return (f"<shardcache.Batch epoch {self.epoch} batch {self.index}: {self.size} samples"
                f"{f', {self.padded} padding' if self.padded else ''}; "
                f"fields {', '.join(self.keys())}>")

    def address(self, name):
        """The field's buffer address (a tensor made from it has this data_ptr)."""
        self._check()
        return self._bufs[self._loader._index(name)][0]

    def _array(self, addr, shape, typestr, device=-1, readonly=False):
        return _View(self._owner, addr, shape, typestr, device, readonly)

    def offsets(self, name):
        """A variable-length field's size + 1 offsets (uint64, bytes into its
        values, host memory: sample k is values[offsets[k]:offsets[k+1]])."""
        self._check()
        i = self._loader._index(name)
        if not self._bufs[i][2]:
            raise ValueError(f"field '{name}' has a fixed shape: it has no offsets")
        return _np.asarray(self._array(self._bufs[i][2], (self.size + 1,), "<u8",
                                       readonly=True))

    def _values(self, i, device):
        """A variable-length field's values, one flat array of its dtype."""
        dtype = _np.dtype(self._loader._fields[i][1])
        return self._array(self._bufs[i][0], (self._bufs[i][1] // dtype.itemsize,), dtype.str,
                           device)

    def _split(self, name, values):
        """A variable-length field's samples: views of its values, one each."""
        size = _np.dtype(self._loader._fields[self._loader._index(name)][1]).itemsize
        off = self.offsets(name) // size
        return [values[off[k]:off[k + 1]] for k in range(self.size)]

    def numpy(self, name):
        """The field as a numpy array (host batches), zero-copy, in its own
        dtype (uint16 too); a variable-length field as a list of arrays."""
        self._check()
        if self.device >= 0:
            raise ValueError("a device batch: use batch[name] for a CUDA tensor")
        i = self._loader._index(name)
        _, dtype, shape = self._loader._fields[i]
        if self._bufs[i][2]:
            return self._split(name, _np.asarray(self._values(i, -1)))
        return _np.asarray(self._array(self._bufs[i][0], (self.size,) + shape,
                                       _np.dtype(dtype).str))

    def _host_tensor(self, name, a):
        """A host array as a torch tensor: zero-copy, but for the unsigned
        types torch 1.13 lacks, widened (a copy; noted once at open)."""
        wider = _WIDER.get(a.dtype.name)
        if wider is None:
            return _torch.from_numpy(a)
        if a.dtype.name == "uint64" and a.size and int(a.max()) >> 63:
            raise OverflowError(f"field '{name}': epoch {self.epoch} batch {self.index} holds "
                                "a uint64 above int64's range, which torch cannot hold: "
                                "use batch.numpy(name)")
        return _torch.from_numpy(a.astype(wider))

    def __getitem__(self, name):
        if not isinstance(name, str):
            raise TypeError(f"a batch is indexed by field name ({', '.join(self.keys())}), "
                            f"not {type(name).__name__}")
        if _torch is None:
            return self.numpy(name)
        self._check()
        i = self._loader._index(name)
        if self.device < 0:
            a = self.numpy(name)
            if isinstance(a, list):
                return [self._host_tensor(name, v) for v in a]
            return self._host_tensor(name, a)
        # The tensor's stream waits for the copy on the GPU; no host wait.
        stream = _torch.cuda.current_stream(self.device)
        _call(self._loader._c.wait_on, self._seq, stream.cuda_stream)
        if self._bufs[i][2]:  # variable-length: a tensor a sample
            return self._split(name, _torch.as_tensor(self._values(i, self.device),
                                                      device=f"cuda:{self.device}"))
        _, dtype, shape = self._loader._fields[i]
        view = self._array(self._bufs[i][0], (self.size,) + shape, _np.dtype(dtype).str,
                           self.device)
        return _torch.as_tensor(view, device=f"cuda:{self.device}")

    @property
    def ids(self):
        """The global sample ids, int64 (ids are below 2^63): a torch tensor,
        a numpy array without torch; zero-copy."""
        self._check()
        a = _np.asarray(self._array(self._ids, (self.size,), "<i8"))
        return _torch.from_numpy(a) if _torch is not None else a

    def keep(self):
        """Holding a batch (or a tensor from it) already keeps it: kept for
        code written for earlier versions."""
        return self

    def release(self):
        """Gives up this batch: it can no longer be read, and its slot goes
        back once no tensor made from it is left (at once if none is)."""
        self._owner = None


class Verdict(dict):
    """An epoch's figures on this rank and the job's exactly-once verdict:
    ok, delivered, dropped, duplicated, skipped (missing), skipped_bad and
    skipped_listed (skipped with a reason, each replaced: replacements),
    stopped/stopped_rank/stopped_sample, detail, wait_s, wall_s, ..."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __str__(self):
        if not self["verified"]:
            return f"epoch {self['epoch']}: exactly-once not verified yet"
        if self["ok"]:
            skips = self["skipped_bad"] + self["skipped_listed"]
            return (f"epoch {self['epoch']}: exactly-once ok ({self['delivered']} delivered, "
                    f"{self['dropped']} dropped by the remainder policy"
                    f"{f', {skips} bad samples skipped and replaced' if skips else ''})")
        return f"epoch {self['epoch']}: exactly-once FAILED: {self['detail']}"


class _Exit:
    """What the process does at exit with loaders open (docs/python.md,
    "Ending a script"): the exit code sys.exit was given, for MPI_Abort."""

    hooked = False
    multi = False  # a loader of more than one rank was opened: exceptions end the job
    code = None
    loaders = {}  # id -> loader, the open ones whose abort_on_error is set


def _exit_code(code):
    """The status Python itself exits with for sys.exit(code)."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _abort(code, why):
    sys.stderr.write(f"shardcache: rank {MPI.COMM_WORLD.Get_rank()}: {why}: ending the job "
                     f"(MPI_Abort, exit code {code})\n")
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(code)


exit_timeout = 60.0  # seconds a close at exit may wait for the other ranks


def _close_at_exit():
    """At exit, loaders still open are closed when this rank is between
    epochs (collective: every rank that ends its script normally does the
    same, and the job ends with code 0); a rank leaving mid-epoch would
    leave the others waiting, so it ends the job with its own exit code."""
    for ld in list(_Exit.loaders.values()):
        code = _exit_code(_Exit.code)
        if ld._more and ld.size > 1:
            _abort(code or 1, f"exiting in the middle of epoch {ld._epoch} (no close())")
        timer = threading.Timer(exit_timeout, _abort, (code or 1, "the close at exit waited "
                                                        f"{exit_timeout:g} s for other ranks"))
        timer.daemon = True
        timer.start()
        try:
            ld.close()
        except Error as e:
            sys.stderr.write(f"shardcache: rank {ld.rank}: close at exit: {e}\n")
        finally:
            timer.cancel()


def _hook_exits():
    """An uncaught exception on one rank must end the job, not leave the
    others waiting in a collective (mpi4py's own `python -m mpi4py` does the
    same): print it, then MPI_Abort; sys.exit's code is kept for it."""
    if _Exit.hooked:
        return
    _Exit.hooked = True
    atexit.register(_close_at_exit)  # runs before mpi4py finalizes MPI
    previous_hook, previous_exit = sys.excepthook, sys.exit

    def hook(kind, value, tb):
        previous_hook(kind, value, tb)
        if _Exit.multi:
            _abort(1, f"uncaught {kind.__name__}")

    def exit(code=None):
        _Exit.code = code
        previous_exit(code)

    sys.excepthook, sys.exit = hook, exit


class _Epoch:
    """The batches of one epoch on this rank: an iterator with len() (the
    batches still to come).  Once exhausted it cannot be iterated again."""

    def __init__(self, loader, epoch):
        self._loader, self.epoch, self._done = loader, epoch, False

    def __iter__(self):
        if self._done:
            raise ValueError(f"epoch {self.epoch}'s batches were all taken: begin the next "
                             f"with loader.epoch({self.epoch + 1}) (or loader.set_epoch)")
        return self

    def __len__(self):
        ld = self._loader
        if ld._epoch != self.epoch:
            return 0
        return ld._left + (ld._ahead.inflight if ld._ahead else 0)

    def __next__(self):
        if self._done or self._loader._epoch != self.epoch:
            self._done = True
            raise StopIteration
        batch = self._loader._next_for_loop()
        if batch is None:
            self._done = True
            raise StopIteration
        return batch


# The settings a bool may give, and what True and False are for each.
_BOOLS = {"decode_exif": ("1", "0"), "peers": ("on", "off"), "launcher_check": ("on", "off"),
          "log": ("1", "0")}


def _bool_setting(key, value):
    """batch_size=True opened as a batch of 1, trace=True wrote ./True: a
    bool is a switch's value, and refused elsewhere."""
    pair = _BOOLS.get(key.lower())
    if pair is None:
        raise Error("SC_EINVAL", f"{key}={value}: SC_{key.upper()} takes a value, not a bool "
                    f"(the settings a bool sets: {', '.join(sorted(_BOOLS))})", _core.EINVAL)
    return pair[0 if value else 1]


class Loader:
    """The loader of one training process; open and close are collective.

    Loader(comm=MPI.COMM_WORLD, resume=None, abort_on_error=True, **settings)

    resume: every rank's state_dict() of the checkpointed job (a list, in
    any order; on another number of ranks too); then begin at
    loader.resumed_epoch.  batch_transform: a callable run on each batch on
    a thread ahead of the loop (batch_transform_ahead results wait at most);
    the loop gets what it returns.  abort_on_error: on more than one rank, an
    uncaught exception on any rank, or a rank leaving mid-epoch, ends the
    job with MPI_Abort instead of a hang.  transform: a C transform by name,
    "LIBRARY.so:FUNCTION" (an sc_transform_factory), given the text
    transform_arg.
    """

    def __init__(self, comm=None, resume=None, abort_on_error=True, transform=None,
                 transform_arg=None, batch_transform=None, batch_transform_ahead=2,
                 **settings):
        comm = MPI.COMM_WORLD if comm is None else comm
        env = {}
        for key, value in settings.items():
            if value is None:
                continue
            if isinstance(value, bool):
                value = _bool_setting(key, value)
            env["SC_" + key.upper()] = str(value)
        records = None
        if isinstance(resume, dict):  # one state_dict() (the check says if not all), or by rank
            resume = [resume] if "record" in resume else list(resume.values())
        if resume is not None:
            records = [s["record"] if isinstance(s, dict) else bytes(s) for s in resume]
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._closed, self._raised = False, False
        self._lock = threading.Lock()  # one C call at a time (batch_transform's thread)
        self._fn, self._fn_depth, self._ahead = batch_transform, batch_transform_ahead, None
        self._record = None  # with batch_transform: the record after the loop's last batch
        self._gone = []  # seqs of the slots whose last claim is gone, to release
        self._slots = weakref.WeakValueDictionary()  # seq -> its claim, while alive
        self._live = 0   # slots handed out and not released
        if abort_on_error:
            _hook_exits()
        _call(_launch.check_torch_group, comm)  # collective: torch's world is the loader's
        # batch_transform's queue holds batches beside the loop's, and when the thread
        # takes the next the loop may hold two (the one get() just handed it, and the one
        # its variable still names): auto's ring leaves room for both
        held = max(1, batch_transform_ahead) + 1 if batch_transform else 0
        self._c = _call(_core.Loader, comm, env, records, transform, transform_arg, held)
        if abort_on_error:
            _Exit.loaders[id(self)] = self
            _Exit.multi = _Exit.multi or self.size > 1
        self._depth = self._c.depth
        # A variable-length field's shape is (None,): one dimension, its length a sample's.
        self._fields = [(name.lstrip("/"), dtype, (None,) if vlen else tuple(shape))
                        for name, dtype, shape, vlen in _call(self._c.fields)]
        self._names = {f[0]: i for i, f in enumerate(self._fields)}
        self._epoch = self._more = None  # the epoch begun, and whether batches are left
        self._set = None  # the epoch set_epoch named, until its pass begins
        self._set_ever = False  # set_epoch was called: a pass without it is likely a slip
        self._pass_named = True  # the epoch in progress began named (set_epoch, epoch(e))
        self._next_epoch, self._left = None, 0
        self._warned_copy = False
        self.info = None
        self._note_types()

    def _note_types(self):
        wide = [f"'{n}' ({t} -> {_WIDER[t]})" for n, t, _ in self._fields if t in _WIDER]
        if wide and _torch is not None and self.rank == 0:
            warnings.warn(f"shardcache: torch 1.13 has no tensor type for field(s) "
                          f"{', '.join(wide)}: batch[name] is a widened copy, batch.numpy(name) "
                          "the zero-copy view", stacklevel=3)

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
            with self._lock:
                return _call(fn, *args)
        except Error:
            self._raised = True
            raise

    def _next_for_loop(self):
        """The loop's next batch: taken here, or batch_transform's next result."""
        if self._ahead is None:
            return self._take()
        got = self._ahead.get()
        if got is None:
            return None
        out, self._record = got
        return out

    def _stop_ahead(self):
        """Ends batch_transform's thread; the batches it took and the loop
        never got count as skipped by the caller."""
        if self._ahead is not None:
            self._ahead.stop()
            self._ahead = None

    def _reap(self):
        """Gives back the slots no batch or tensor holds any more."""
        while self._gone:
            seq = self._gone.pop()
            stream = 0
            if self._c_device >= 0 and _torch is not None:
                stream = _torch.cuda.current_stream(self._c_device).cuda_stream
            try:
                self._do(self._c.release, seq, stream)
            except Error:
                self._gone.append(seq)  # still held: tried again at the next call
                raise
            self._live -= 1

    @property
    def _c_device(self):
        return self._c.device

    def _must_copy(self):
        """Whether the next batch must come as a copy: taking it into the
        ring would leave no free slot while batches are kept (beyond the one
        a loop variable holds until the next batch replaces it).  With 2
        slots or fewer that cannot be told apart: always copies."""
        free = self._depth - self._live
        return self._depth <= 2 or (free <= 1 and self._live >= 2)

    def _take(self):
        self._reap()
        copy = self._must_copy()
        t = self._do(self._c.next)
        if t is None:
            self._more, self._left = False, 0
            return None
        self._left -= 1
        seq, epoch, index, size, padded, device, ids, bufs, replaced, stands_for = t
        if copy and device < 0:
            ids, bufs, owner = _copy_out(ids, size, bufs)
            self._do(self._c.release, seq, 0)
            self._warn_copy()
        else:
            self._live += 1
            owner = self._slots[seq] = _Slot(self, seq)
        batch = Batch(self, seq, epoch, index, size, padded, device, ids, bufs, owner)
        batch.replaced, batch.stands_for = replaced, stands_for
        return batch

    def _warn_copy(self):
        if not self._warned_copy and self._depth > 2:
            self._warned_copy = True
            warnings.warn(f"shardcache: rank {self.rank}: {self._live} of the "
                          f"{self._depth} ring slots (SC_PREFETCH_BATCHES) are held by batches "
                          "or tensors still referenced (kept in a list?): batches now arrive "
                          "as copies until they are dropped (.clone() what you keep, or raise "
                          "SC_PREFETCH_BATCHES)", stacklevel=4)

    def epoch(self, epoch):
        """The batches of `epoch` on this rank, an iterator with len() (the
        same count on every rank; after a resume, the ones left).  Asking
        again for the epoch in progress (after a break or an error) goes on
        where it stopped; another epoch can begin only once this one's
        batches are all taken (finish_epoch() skips the rest)."""
        if epoch != self._epoch and self._more:
            raise ValueError(f"epoch {self._epoch} still has batches (a break?): "
                             f"loader.epoch({self._epoch}) goes on with them, "
                             "loader.finish_epoch() skips the rest")
        if epoch != self._epoch or not self._more:
            self._stop_ahead()
            self._reap()
            self.info = self._do(self._c.begin, epoch)
            self._epoch, self._more, self._left = epoch, True, self.info["batches"]
            self._pass_named = True  # loader.epoch(e) names it; __iter__ says otherwise
        elif not self._pass_named:
            self._say_goes_on()
        if self._fn is not None and (self._ahead is None or self._ahead.done):
            self._record = self._do(self._c.checkpoint)
            self._ahead = _ahead.Ahead(self, self._fn, self._fn_depth)
        self._next_epoch = epoch + 1
        return _Epoch(self, epoch)

    def set_epoch(self, epoch):
        """The epoch `for batch in loader` iterates next (DistributedSampler's
        habit; without it each iteration begins the epoch after the last).
        Another epoch while one is in progress (a break) ends that one, its
        batches left skipped by the caller, with a warning."""
        if self._more and epoch != self._epoch:
            self._end_broken_pass(f"set_epoch({epoch})")
        self._next_epoch, self._set, self._set_ever = epoch, epoch, True

    def _end_broken_pass(self, why):
        warnings.warn(f"shardcache: rank {self.rank}: {why} while epoch {self._epoch} has "
                      f"{len(_Epoch(self, self._epoch))} batches left (a break?): they are skipped, and its verdict "
                      f"counts them as skipped by the caller (loader.epoch({self._epoch}) or "
                      f"set_epoch({self._epoch}) first goes on with them instead)", stacklevel=3)
        self.finish_epoch()

    def _current(self):
        if self._more:
            return self._epoch
        if self._next_epoch is None:
            resumed = self.resumed_epoch
            return resumed if resumed is not None else 0
        return self._next_epoch

    def __iter__(self):
        """A pass over the epoch set_epoch named, else the next one.  A new
        pass after a break in the last one ends it (as DataLoader begins a
        fresh pass), unless set_epoch named it again."""
        if self._more and self._set != self._epoch:
            self._end_broken_pass("a new pass over the loader")
        epoch = self._current()
        named = self._set is not None
        if self._set is None and self._set_ever and not self._more:
            # DistributedSampler repeats the epoch set last; an epoch here is read once.
            warnings.warn(f"shardcache: rank {self.rank}: a pass over the loader with no "
                          f"set_epoch since the last begins epoch {epoch}, the next one "
                          f"(DistributedSampler would repeat epoch {epoch - 1}): call "
                          f"set_epoch({epoch}) before it, or iterate loader.epoch(e)",
                          stacklevel=2)
        self._set = None
        began = not self._more
        batches = iter(self.epoch(epoch))
        if began:
            self._pass_named = named
        return batches

    def _say_goes_on(self):
        # DataLoader's next(iter(loader)) to peek takes nothing from the next
        # pass; here it takes a batch from the epoch, which gives it once.
        e, n = self._epoch, self.info["batches"]
        taken = n - len(_Epoch(self, e))
        self._pass_named = True
        if taken:
            warnings.warn(f"shardcache: rank {self.rank}: epoch {e} goes on at batch "
                          f"{taken + 1} of {n}: the {taken} taken by a pass before with no "
                          "set_epoch (next(iter(loader)) to peek?) are delivered, and not in "
                          "this pass (an epoch gives each batch once); loader.fields gives the "
                          "fields' names, dtypes and shapes without taking a batch",
                          stacklevel=3)

    def __len__(self):
        """Batches this rank gets in an epoch, as DataLoader's len(): the
        epoch in progress's (all of them, as its pass began; after a resume,
        the ones the resumed pass had), else the one `for batch in loader`
        runs next, computed here without beginning it (every epoch of a
        plan has the same count: floor or ceil of samples over ranks x
        batch_size), or by beginning it (a resumed epoch).
        len(loader.epoch(e)) counts what is left."""
        if self._more:
            return self.info["batches"]
        e = self._current()
        if self.resumed_epoch is None or e != self.resumed_epoch:
            return self._do(self._c.plan_batches, e)
        self.epoch(e)
        self._next_epoch = self._set = e  # the pass that follows goes on with it
        return self._left

    def finish_epoch(self):
        """Ends the epoch in progress after a break: the batches not taken are
        not handed out, and the verdict counts their samples as skipped by
        the caller (not as delivered)."""
        if self._more:
            self._stop_ahead()
            self._reap()
            self._do(self._c.skip_rest)
            self._more, self._left = False, 0

    def verdict(self, epoch, wait=True):
        """The job's exactly-once verdict on `epoch` and this rank's figures."""
        return Verdict(self._do(self._c.report, epoch, wait))

    def __reduce_ex__(self, protocol):
        # torch.save(loader) failed on a thread lock; what a checkpoint keeps is the position.
        raise TypeError("a shardcache.Loader is not saved: save loader.state_dict() with the "
                        "model, and pass every rank's to Loader(resume=[...])")

    def state_dict(self):
        """This rank's position: save every rank's with the model.  With a
        batch_transform, the position after the last batch the loop got."""
        ahead = self._ahead is not None and not self._ahead.done
        record = self._record if ahead else self._do(self._c.checkpoint)
        return {"rank": self.rank, "size": self.size, "record": record}

    def close(self):
        """Collective: every rank calls it (a with-block does, and so does
        the end of the script).  After an error this loader already raised
        (and the caller caught), it closes quietly."""
        if self._closed:
            return
        self._stop_ahead()
        self._keep_held()
        self._closed = True
        _Exit.loaders.pop(id(self), None)
        try:
            _call(self._c.close)
        except Error:
            if not self._raised:
                raise

    def _keep_held(self):
        """Batches still held (a tensor kept past the loop) keep their memory
        past the close: detached from the ring, freed with their last tensor."""
        try:
            self._reap()
        except Error:
            return  # the loader failed: its close frees what it has
        for seq, slot in list(self._slots.items()):
            if self._c_device >= 0:
                break  # device memory goes with the loader (documented)
            try:
                slot._detached = self._c.detach(seq)
            except _core.Error:
                continue
            self._live -= 1

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
