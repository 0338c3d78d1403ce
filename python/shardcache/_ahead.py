"""A Python callable per batch, run on a thread ahead of the training loop.

The producers are C threads and never run Python (they would hold the GIL);
a per-batch callable (Loader(batch_transform=fn)) runs here instead: one
thread takes the epoch's batches, calls fn on each and queues at most
`depth` results for the loop, so that fn's work overlaps the step (torch
releases the GIL in its kernels).  The thread takes batches before the loop
sees them, so each result carries the checkpoint record taken right after
its batch: state_dict() says what the loop has received, not what the
thread has taken.
"""
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
        self.inflight = 0  # taken by the thread, not yet handed to the loop
        self.done = False  # the epoch's last result (or an error) was handed out
        self._thread = threading.Thread(target=self._run, name="shardcache batch_transform",
                                        daemon=True)
        self._thread.start()

    def _run(self):
        ld = self._loader
        try:
            while not self._stop.is_set():
                batch = ld._take()
                if batch is None:
                    self._put((_END, None, None))
                    return
                self.inflight += 1
                record = ld._do(ld._c.checkpoint)
                out = self._fn(batch)
                del batch  # its slot goes back once fn's result no longer holds it
                self._put((out, record, None))
        except BaseException as e:  # handed to the loop, raised there
            self._put((None, None, e))

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def get(self):
        """The next result and the record after its batch; None at the end."""
        out, record, error = self._q.get()
        if error is not None or out is _END:
            self.done = True
        if error is not None:
            raise error
        if out is _END:
            return None
        self.inflight -= 1
        return out, record

    def stop(self):
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._q.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()
