"""The device's waiting thread: it blocks in the runtime's own wait, one point at a time.

A device worker cannot block in a runtime wait for long: a job submitted meanwhile
would wait for the wait to end. So the worker lends the oldest point that waiters
watch to this second thread, which blocks in ``synchronize_stream_with_timeout`` (when
the point is a fence at the stream's tail: the runtime then waits in the stream's own
mode, spinning for a FAST_SYNC stream, sleeping for a default one, and returns the
stream's failure with it) or ``synchronize_event_with_timeout`` (any other point), the
GIL released. When the wait returns, the worker's bookkeeping resolves the waiters
from this thread, under the worker's lock, and hands them straight to their event
loops: a completion costs one thread-to-loop wake-up, as in a program that blocks in
the same call on its own thread, and a quiet wait costs no CPU. (The one wait the
worker takes itself, in ``wait_slice_ms`` slices, is a FAST_SYNC stream's sync when nothing else is
waited for or queued: see ``_worker_waits.Watching._inline_loan``.)

The worker decides what is lent and what a return means (``pick`` and ``done``, both
called with the lock held); this module owns only the thread and its sleep.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._lanes import Lane, Watch
from ._loop import Delivery, Waiter
from ._pyacl.codes import TIMEOUT_CODES

if TYPE_CHECKING:
    from ._pyacl.backend import AclRt

__all__ = ["SLICE_MS", "Loan", "Ready", "WaitingThread", "is_timeout"]

#: Longest single runtime wait, so that a stop or a retarget is seen within this time.
#: One wake-up per slice costs well under 0.1 % of a core.
SLICE_MS = 100


#: Resolved waiters by the event loop they go to.
Ready = dict[Delivery, list[Waiter]]


class Loan:
    """The point lent to the waiting thread: a stream's head watch, and how to wait."""

    __slots__ = ("by_stream", "lane", "watch")

    def __init__(self, lane: Lane, watch: Watch, *, by_stream: bool) -> None:
        self.lane = lane
        self.watch = watch
        #: Wait with ``synchronize_stream_with_timeout`` (a fence at the tail).
        self.by_stream = by_stream


def is_timeout(ret: int) -> bool:
    """Whether a timed runtime wait ran out of time (rather than finished or failed)."""
    return ret in TIMEOUT_CODES


class WaitingThread:
    """A thread that blocks in runtime waits on behalf of a device worker.

    Parameters
    ----------
    rt:
        The ``acl.rt`` namespace.
    context:
        The device's context, made current on the thread before its first wait.
    lock:
        The worker's lock; ``pick`` and ``done`` run with it held.
    pick:
        Returns the next ``Loan`` or None when nothing is waited for.
    done:
        Called with the loan and the wait's status code once the runtime wait returned.
    take_ready, post:
        Take the waiters resolved so far (with the lock held) and hand them to their
        event loops (without it). The thread posts right before it blocks again, so
        that the event loop it wakes finds the GIL free.
    on_failure:
        Called (without the lock) if the thread dies; ``failure`` then holds why.
    """

    def __init__(
        self,
        rt: AclRt,
        device_id: int,
        context: int,
        lock: threading.Lock,
        pick: Callable[[], Loan | None],
        done: Callable[[Loan, int], None],
        take_ready: Callable[[], Ready],
        post: Callable[[Ready], None],
        on_failure: Callable[[], None],
    ) -> None:
        self._rt = rt
        self._context = context
        self._lock = lock
        self._pick = pick
        self._done = done
        self._take_ready = take_ready
        self._post = post
        self._on_failure = on_failure
        self._wake = _thread.allocate_lock()
        self._wake.acquire()
        #: Set under the lock when the thread found nothing to wait for and sleeps.
        self.idle = False
        self._stopping = False
        #: Why the thread died, once it has.
        self.failure: BaseException | None = None
        self._thread = threading.Thread(
            target=self._main, name=f"aclasync-device{device_id}-wait", daemon=True
        )
        self._thread.start()

    def poke(self) -> None:
        """Wake the thread if it sleeps with nothing to wait for. Call with the lock held."""
        if self.idle:
            self.idle = False
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
        rt = self._rt
        try:
            ret = rt.set_context(self._context)
            if ret:
                raise RuntimeError(f"acl.rt.set_context failed on the waiting thread: {ret}")
            loan: Loan | None = None
            ret = 0
            while True:
                with self._lock:
                    if loan is not None:
                        self._done(loan, ret)
                    stopping = self._stopping
                    loan = None if stopping else self._pick()
                    if loan is None:
                        self.idle = True
                    ready = self._take_ready()
                if ready:
                    self._post(ready)
                if stopping:
                    return
                if loan is None:
                    self._wake.acquire()
                elif loan.by_stream:
                    ret = rt.synchronize_stream_with_timeout(loan.lane.handle, SLICE_MS)
                else:
                    ret = rt.synchronize_event_with_timeout(loan.watch.event, SLICE_MS)
        except BaseException as exc:  # the worker turns this into the device's death
            self.failure = exc
            self._on_failure()
