"""The device's waiting thread: it blocks in the runtime's own wait, one point at a time.

A device worker cannot block in a runtime wait for long (a job submitted meanwhile would
wait for it), so its ``Watcher`` lends the oldest point waiters watch to this thread. It
blocks in ``synchronize_stream_with_timeout`` for a fence at the stream's tail (the
runtime then waits in the stream's own mode and returns its failure) or
``synchronize_event_with_timeout``, the GIL released; the watcher resolves the waiters
on this thread, and it posts them straight to their loops. A completion costs one
thread-to-loop wake-up, as in a program blocking in the same call; a quiet wait, no CPU.
The watcher decides what is lent and what a return means (``pick``, ``returned``).
"""

from __future__ import annotations

import _thread
import threading
from typing import TYPE_CHECKING

from ._lanes import Lane, Watch
from ._loop import post

if TYPE_CHECKING:
    from ._pyacl.backend import AclRt
    from ._watcher import Watcher

__all__ = ["SLICE_MS", "Lent", "WaitingThread"]

#: Longest single runtime wait, so that a stop or a retarget is seen within this time.
#: One wake-up per slice costs well under 0.1 % of a core.
SLICE_MS = 100


class Lent:
    """A point lent to a wait: a stream's head point, and whether to wait for it with
    ``synchronize_stream_with_timeout`` (``by_stream``: a fence at the stream's tail)."""

    __slots__ = ("by_stream", "lane", "point")

    def __init__(self, lane: Lane, point: Watch, *, by_stream: bool) -> None:
        self.lane = lane
        self.point = point
        self.by_stream = by_stream


class WaitingThread:
    """A thread that blocks in runtime waits on behalf of a device's watcher.

    *context* is made current on the thread before its first wait. *lender* lends it
    points (``pick``), learns what the waits returned (``returned``) and gives it the
    resolved waiters to post (``take_ready_locked``), all under ``lender.lock``; it posts them
    right before it blocks again, so that the loop it wakes finds the GIL free. If the
    thread dies, ``failure`` says why and ``lender.thread_died()`` is called.
    """

    def __init__(self, rt: AclRt, device_id: int, context: int, lender: Watcher) -> None:
        self._rt = rt
        self._context = context
        self._lender = lender
        self._lock = lender.lock
        self._wake = _thread.allocate_lock()
        self._wake.acquire()
        #: Set under the lock when the thread found nothing to wait for and sleeps.
        self._idle = False
        self._stopping = False
        #: Why the thread died, once it has.
        self.failure: BaseException | None = None
        self._thread = threading.Thread(
            target=self._main, name=f"aclasync-device{device_id}-wait", daemon=True
        )
        self._thread.start()

    def poke(self) -> None:
        """Wake the thread if it sleeps with nothing to wait for. Call with the lock held."""
        if self._idle:
            self._idle = False
            self._wake.release()

    def stop(self) -> None:
        """Ask the thread to end and wait until it has (at most about one slice).

        Call without the lock held, from the worker thread.
        """
        with self._lock:
            self._stopping = True
            self.poke()
        self._thread.join()

    def _main(self) -> None:
        rt, lender = self._rt, self._lender
        try:
            ret = rt.set_context(self._context)
            if ret:
                raise RuntimeError(f"acl.rt.set_context failed on the waiting thread: {ret}")
            lent: Lent | None = None
            ret = 0
            while True:
                with self._lock:
                    if lent is not None:
                        lender.returned(lent, ret)  # (it posts what it resolves)
                    stopping = self._stopping
                    lent = None if stopping else lender.pick()
                    if lent is None:
                        self._idle = True
                    ready = lender.take_ready_locked()
                if ready:
                    post(ready)
                if stopping:
                    return
                if lent is None:
                    self._wake.acquire()
                elif lent.by_stream:
                    ret = rt.synchronize_stream_with_timeout(lent.lane.handle, SLICE_MS)
                else:
                    ret = rt.synchronize_event_with_timeout(lent.point.event, SLICE_MS)
        except BaseException as exc:  # the worker turns this into the device's death
            self.failure = exc
            lender.thread_died()
