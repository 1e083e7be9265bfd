"""The device's waiting thread: it blocks in the runtime's own wait (GIL released) for
the point its ``Watcher`` lends it, a stream's tail (``synchronize_stream_with_timeout``)
or an event, and posts the waiters resolved to their loops: one wake-up per completion,
as in a program blocking in the same call, and no CPU while it waits.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._lanes import Lane, Watch
from ._loop import post

if TYPE_CHECKING:
    from ._pyacl.backend import AclRt
    from ._watcher import Watcher

__all__ = ["SLICE_MS", "Lent", "WaitingThread"]

#: Longest single runtime wait: a stop is seen within it (a wake-up per slice: < 0.1 %).
SLICE_MS = 100


@dataclass(slots=True, eq=False)
class Lent:
    """A stream's head point lent to a wait, by a stream sync (``by_stream``: a fence at
    the stream's tail) or by its event."""

    lane: Lane
    point: Watch
    by_stream: bool = field(kw_only=True)


class WaitingThread:
    """A thread that blocks in runtime waits for *lender*, in *context*. Under
    ``lender.lock`` it takes a point (``offer``, or ``lender.choose``), says what the
    wait returned (``lender.returned``) and takes the resolved waiters, which it posts
    right before it blocks again. If it dies, ``failure`` says why and *look_again* is
    called."""

    def __init__(
        self,
        rt: AclRt,
        device_id: int,
        context: int,
        lender: Watcher,
        look_again: Callable[[], None],
    ) -> None:
        self._rt = rt
        self._context = context
        self._lender = lender
        self._look_again = look_again
        self._lock = lender.lock
        self._offered: Lent | None = None  # chosen for the thread, not yet taken
        self._busy = False  # it holds a loan
        self.wake_due = False  # offered something: woken when the worker blocks (the GIL)
        self._wake = _thread.allocate_lock()
        self._wake.acquire()
        self._idle = False  # (under the lock) it found nothing to wait for and sleeps
        self._stopping = False
        self.failure: BaseException | None = None  # why the thread died, once it has
        self._thread = threading.Thread(
            target=self._main, name=f"aclasync-device{device_id}-wait", daemon=True
        )
        self._thread.start()

    def offer(self) -> None:
        """Lend the thread the oldest point now if it has none (lock held)."""
        if not self._busy and self._offered is None:
            self._offered = self._lender.choose()
        self.wake_due = True

    def wake(self) -> None:
        """Wake the thread for what was offered, if it sleeps (lock held)."""
        if self.wake_due:
            self.wake_due = False
            self._poke()

    def _poke(self) -> None:
        if self._idle:
            self._idle = False
            self._wake.release()

    def stop(self) -> None:
        """End the thread and wait for it (about a slice at most); lock not held."""
        with self._lock:
            self._stopping = True
            self._poke()
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
                    lent = None if stopping else self._offered or lender.choose()
                    self._offered, self._busy = None, lent is not None
                    if lent is None:
                        self._idle = True
                    ready = lender.out.take()
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
            self._look_again()
