"""A Python callable per batch, run on a thread ahead of the training loop.

The producers are C threads and never run Python (they would hold the GIL);
a per-batch callable (Loader(batch_transform=fn)) runs here instead: one
thread takes the epoch's batches, calls fn on each and queues at most
`depth` results for the loop, so that fn's work overlaps the step (torch
releases the GIL in its kernels).

The thread takes batches before the loop sees them, and the loader counts a
batch delivered when it is taken, so: each result carries the checkpoint
record taken right after its batch (state_dict() says what the loop got);
batches taken and never handed to the loop (a break, an error in fn) are
reported as unused, so the verdict counts them skipped by the caller; and
the epoch's last batch is taken only once the loop has all the others and
asks for it, because taking it ends the epoch's verdict.
"""
import collections
import queue
import threading

_END = object()


class Ahead:
    """The thread of one epoch's pass: get() the next (result, record), or
    raise what fn raised; stop() ends it and drops what it queued."""

    def __init__(self, loader, fn, depth):
        self._loader, self._fn = loader, fn
        self._q = queue.Queue(max(1, depth))
        self._stop = threading.Event()
        self._cv = threading.Condition()
        self._taken = collections.deque()  # real samples of each batch not yet handed out
        self._asking = False  # the loop waits in get()
        self.done = False  # the epoch's last result (or an error) was handed out
        self._thread = threading.Thread(target=self._run, name="shardcache batch_transform",
                                        daemon=True)
        self._thread.start()

    @property
    def inflight(self):
        return len(self._taken)

    def _may_take_last(self):
        """The last batch: only once every other is handed out and asked for."""
        with self._cv:
            self._cv.wait_for(lambda: self._stop.is_set() or (self._asking and not self._taken))
        return not self._stop.is_set()

    def _run(self):
        ld = self._loader
        try:
            while not self._stop.is_set():
                if ld._left == 1 and not self._may_take_last():
                    return
                batch = ld._take()
                if batch is None:
                    self._put((_END, None, None))
                    return
                self._taken.append(batch.size - batch.padded)
                record = ld._do(ld._c.checkpoint)
                try:
                    out = self._fn(batch)
                except BaseException:
                    self._unused(self._taken.pop())  # the loop never gets it
                    raise
                del batch  # its slot goes back once fn's result no longer holds it
                self._put((out, record, None))
        except BaseException as e:  # handed to the loop, raised there
            self._put((None, None, e))

    def _unused(self, samples):
        try:
            self._loader._do(self._loader._c.unused, samples)
        except Exception:  # the epoch ended meanwhile: it was its last batch
            pass

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def get(self):
        """The next result and the record after its batch; None at the end."""
        with self._cv:
            self._asking = True
            self._cv.notify_all()
        try:
            out, record, error = self._q.get()
        finally:
            with self._cv:
                self._asking = False
        if error is not None or out is _END:
            self.done = True
        if error is not None:
            raise error
        if out is _END:
            return None
        with self._cv:
            self._taken.popleft()
            self._cv.notify_all()
        return out, record

    def stop(self):
        """Ends the thread; what it took and the loop never got is unused."""
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        while self._thread.is_alive():
            try:
                self._q.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()
        if self._taken:
            self._unused(sum(self._taken))
            self._taken.clear()
