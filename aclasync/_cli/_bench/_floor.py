"""The floor of every worker round trip: a bare dedicated thread answering waiters.

``BareThread`` is a plain thread blocked on a ``_thread`` lock. The coroutine takes a
waiter from the loop's own wake path (``aclasync._loop.current_delivery()``), hands it
over (append to a deque, release the lock) and awaits it; the thread sets
``outcome.Value(stamp)`` and ``post``s it. Nothing else is in the way: no runtime call,
no queue of jobs, no bookkeeping, so whatever aclasync measures above it is the cost
of aclasync itself. ``bench overhead`` times the whole round trip against it. (``bench
sync-modes`` takes its floor from its raw thread instead, which also waits on the
device: ``_raw_level``.)
"""

from __future__ import annotations

import _thread
import contextlib
import os
import threading
import time
from collections import deque
from types import TracebackType

import outcome

from aclasync._loop import Waiter, current_delivery

__all__ = ["BareThread"]

_JOIN_TIMEOUT_S = 5.0


class BareThread:
    """A dedicated thread that answers one waiter at a time.

    Use it as a context manager around the measurement (it starts the thread on entry
    and stops and joins it on exit). With *cpu*, the thread runs on that CPU only.
    """

    def __init__(self, cpu: int | None = None) -> None:
        self._cpu = cpu
        self._go = _thread.allocate_lock()
        self._go.acquire()  # held until there is a waiter to answer
        self._jobs: deque[Waiter | None] = deque()
        self._thread = threading.Thread(target=self._serve, name="aclasync-bench-bare", daemon=True)

    def __enter__(self) -> BareThread:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the thread and join it; blocks until it has taken the stop order."""
        if not self._thread.is_alive():
            return
        self._jobs.append(None)
        self._wake()
        self._thread.join(_JOIN_TIMEOUT_S)

    async def round_trip(self) -> float:
        """Hand one waiter to the thread and wait for it; return the thread's stamp.

        The stamp is ``time.perf_counter()`` just before the thread posted the waiter.
        Needs a running asyncio or trio loop. Cancellation abandons the wait (the
        thread still posts; the delivery drops the answer).
        """
        waiter = current_delivery().new_waiter()
        self._jobs.append(waiter)
        self._wake()
        stamp: float = await waiter.wait()
        return stamp

    def _wake(self) -> None:
        # Already released: the thread has yet to take it, and will see the deque.
        with contextlib.suppress(RuntimeError):
            self._go.release()

    def _serve(self) -> None:
        if self._cpu is not None:
            os.sched_setaffinity(0, {self._cpu})  # pid 0: this thread only
        jobs, go, clock = self._jobs, self._go, time.perf_counter
        while True:
            go.acquire()
            while jobs:
                waiter = jobs.popleft()
                if waiter is None:
                    return
                waiter.result = outcome.Value(clock())
                waiter.delivery.post((waiter,))
