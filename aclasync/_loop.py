"""Parking coroutines and waking them from device worker threads.

This is the only module that touches asyncio or trio directly: each event loop gets
one ``Delivery`` that worker threads hand finished waiters to. A delivery signals its
loop once per batch with the cheapest thread-safe primitive the loop offers
(``call_soon_threadsafe`` on asyncio and uvloop, the trio token on trio) and resumes at
most ``WAKE_BATCH`` waiters per loop iteration, so a flood of completions never
stalls the loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, cast

from anyio.lowlevel import RunVar

__all__ = ["WAKE_BATCH", "Delivery", "Waiter", "current_delivery"]

#: Waiters resumed per loop iteration; the rest wait for the next iteration.
WAKE_BATCH = 256

_delivery: RunVar[Delivery] = RunVar("aclasync_delivery")
#: Marks a trio waiter resumed before its coroutine parked (several waiters in flight).
_RESOLVED = object()


class Waiter:
    """One parked coroutine: the worker sets ``value`` and hands it to its delivery."""

    __slots__ = ("_future", "_task", "abandoned", "delivery", "value")

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.value: Any = None
        self.abandoned = False
        self._future: asyncio.Future[None] | None = None
        self._task: Any = None

    def _trio_abort(self, _: object) -> Any:
        # trio's abort callback: cancellation abandons the wait.
        import trio.lowlevel

        self.abandoned = True
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def wait(self) -> Any:
        """Park until the worker resolves this waiter; return its value.

        Cancellation abandons the wait only: the waiter is marked and dropped by the
        worker, whatever it was waiting for carries on.
        """
        return await self.delivery.park(self)


class Delivery:
    """Resumes waiters in one event loop on behalf of worker threads."""

    def __init__(self, signal: Callable[[Callable[[], None]], None]) -> None:
        self._signal = signal
        self._pending: deque[Waiter] = deque()
        self._scheduled = False

    def post(self, waiters: Iterable[Waiter]) -> None:
        """Queue finished waiters for resumption; callable from any thread."""
        self._pending.extend(waiters)
        if not self._scheduled:
            self._scheduled = True
            self._signal(self._drain)

    def _drain(self) -> None:
        pending = self._pending
        for _ in range(min(len(pending), WAKE_BATCH)):
            self._resume(pending.popleft())
        self._scheduled = False
        # Re-check after clearing the flag: a worker may have posted in between and
        # seen the flag still set.
        if pending and not self._scheduled:
            self._scheduled = True
            self._signal(self._drain)

    def new_waiter(self) -> Waiter:
        """A waiter to hand to a worker, then ``await waiter.wait()`` at once."""
        return Waiter(self)

    async def park(self, waiter: Waiter) -> Any:
        raise NotImplementedError

    def _resume(self, waiter: Waiter) -> None:
        raise NotImplementedError


class _AsyncioDelivery(Delivery):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(cast("Callable[[Callable[[], None]], None]", loop.call_soon_threadsafe))
        self._loop = loop

    def new_waiter(self) -> Waiter:
        waiter = Waiter(self)
        waiter._future = self._loop.create_future()
        return waiter

    async def park(self, waiter: Waiter) -> Any:
        assert waiter._future is not None
        try:
            await waiter._future
        except BaseException:
            waiter.abandoned = True
            raise
        return waiter.value

    def _resume(self, waiter: Waiter) -> None:
        future = waiter._future
        if future is not None and not future.done():
            future.set_result(None)


class _TrioDelivery(Delivery):
    def __init__(self) -> None:
        import outcome
        import trio.lowlevel

        super().__init__(trio.lowlevel.current_trio_token().run_sync_soon)
        self._lowlevel = trio.lowlevel
        self._value = outcome.Value

    async def park(self, waiter: Waiter) -> Any:
        lowlevel = self._lowlevel
        if waiter._task is _RESOLVED:  # resumed before it was awaited
            await lowlevel.checkpoint()
            return waiter.value
        waiter._task = lowlevel.current_task()
        await lowlevel.wait_task_rescheduled(waiter._trio_abort)
        return waiter.value

    def _resume(self, waiter: Waiter) -> None:
        task = waiter._task
        if task is _RESOLVED:
            return
        if task is not None:
            waiter._task = None
            self._lowlevel.reschedule(task, self._value(None))
        elif not waiter.abandoned:
            waiter._task = _RESOLVED


def current_delivery() -> Delivery:
    """The delivery of the running event loop, created on first use."""
    try:
        return _delivery.get()
    except LookupError:
        pass
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        delivery: Delivery = _AsyncioDelivery(loop)
    else:
        try:
            delivery = _TrioDelivery()
        except (ImportError, RuntimeError):
            raise RuntimeError("aclasync needs a running asyncio or trio event loop") from None
    _delivery.set(delivery)
    return delivery
