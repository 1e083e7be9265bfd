"""Parking coroutines and waking them from device worker threads.

This is the only module that touches asyncio or trio directly: each event loop gets
one ``Delivery`` that worker threads hand finished waiters to. A delivery signals its
loop once per batch with the cheapest thread-safe primitive the loop offers
(``call_soon_threadsafe`` on asyncio and uvloop, the trio token on trio) and resumes at
most ``WAKE_BATCH`` waiters per loop iteration, so a flood of completions never
stalls the loop.

A ``Waiter`` is the one wait primitive of the front end: the worker stores an
``outcome.Value`` or ``outcome.Error`` in it, and ``Waiter.wait`` owns the checkpoint,
the ``timeout=`` and abandonment.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import outcome
from anyio.lowlevel import RunVar

if sys.version_info < (3, 11):  # anyio depends on the backport there
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "DONE",
    "EXPIRED",
    "WAKE_BATCH",
    "Delivery",
    "Flag",
    "Outbox",
    "Ready",
    "Then",
    "Turn",
    "Waiter",
    "current_delivery",
    "failure",
    "is_cancellation",
    "post",
    "post_to",
    "raise_if_cancelled",
    "to_completion",
    "unwrap",
]

_T = TypeVar("_T")

#: Waiters resumed per loop iteration; the rest wait for the next iteration.
WAKE_BATCH = 64

_delivery: RunVar[Delivery] = RunVar("aclasync_delivery")


class _Expired(Exception):
    """The worker's answer to a wait whose timeout ran out before it first looked."""


#: The result a worker gives such a wait when the awaited work is not done yet.
EXPIRED: outcome.Error = outcome.Error(_Expired())
#: The result of a wait that succeeded with nothing to return, shared by all such
#: waits: ``Waiter.wait`` returns None for it without unwrapping (which an outcome
#: allows once only), and workers save making an outcome per waiter.
DONE: outcome.Value[None] = outcome.Value(None)


class Waiter:
    """One wait for a worker result.

    The worker sets ``result`` (an ``outcome.Outcome``) and hands the waiter to its
    delivery. ``abandoned`` tells the worker that nobody will read the result. A timed
    wait (``timed=True``) has a ``claim``: whichever of the worker and the loop takes it
    first decides what a wait not done at the worker's first look becomes. The worker
    takes it when it parks the wait (``keep``): a timeout running out later raises at
    once. The loop takes it when the timeout runs out first: the worker then answers at
    its first look, done or ``EXPIRED``, which is what lets ``timeout=0`` poll once, as
    pyACL's timed waits do, however long that look takes.
    """

    __slots__ = ("_future", "_task", "abandoned", "claim", "delivery", "result")

    def __init__(self, delivery: Delivery, *, timed: bool = False) -> None:
        self.delivery = delivery
        self.result: outcome.Outcome[Any] | None = None
        self.abandoned = False
        #: One item, popped by the first to decide (``list.pop`` is atomic).
        self.claim: list[None] | None = [None] if timed else None
        self._future: asyncio.Future[None] | None = None
        self._task: Any = None

    def keep(self) -> bool:
        """(worker) Park a wait its first look found not done? False if its timeout
        ran out first: answer it ``EXPIRED`` instead."""
        claim = self.claim
        if claim is None:
            return True
        try:
            claim.pop()
        except IndexError:
            return False
        return True

    def expired(self) -> bool:
        """(worker) Whether the wait's timeout ran out before the worker decided it."""
        return self.claim is not None and not self.claim

    async def wait(
        self,
        timeout: float | None = None,
        *,
        on_timeout: Callable[[], BaseException] | None = None,
    ) -> Any:
        """Wait for the worker's result and return it (or raise what it holds).

        Always checkpoints. If *timeout* (seconds; the waiter must be ``timed``) runs
        out after the worker parked the wait, the wait is abandoned and
        ``on_timeout()`` is raised; if it runs out before, the worker's first look
        decides (done: the result; not done: ``on_timeout()``). Cancellation abandons
        the wait: whatever the worker was doing carries on and its result is dropped.
        """
        try:
            if timeout is None:
                # Inlined rather than a helper: a parked wait's frames are its memory.
                if self.result is None:
                    await self.delivery.park(self)
                else:
                    await anyio.lowlevel.checkpoint()
            else:
                assert self.claim is not None, "a timed wait needs Waiter(timed=True)"
                with anyio.move_on_after(timeout):
                    await self._park()
                if self.result is None:
                    try:
                        self.claim.pop()
                    except IndexError:  # the worker parked it: not done at its look
                        raise self._timed_out(on_timeout) from None
                    await self._park()  # the worker answers at its first look
        except BaseException:
            self.abandoned = True
            raise
        result = self.result
        if result is DONE:
            return None
        assert result is not None
        if result is EXPIRED:
            self.abandoned = True
            raise self._timed_out(on_timeout)
        return result.unwrap()

    async def answered(self) -> BaseException | None:
        """Park, shielded, until the worker answered, even through asyncio's own
        ``task.cancel()``, which passes a shield; ``answer()`` then gives the answer
        with no checkpoint between. Returns the first such cancellation (None if none
        came), for the caller to raise once its work is done. Only for a waiter the
        worker answers whatever happens (a call's, a stop's), never a point's, which an
        abandoned wait leaves.

        A ``KeyboardInterrupt`` delivered into the wait (trio delivers Ctrl-C to a
        parked task, shield or not) is held the same way and returned; a second one
        goes on at once, the waiter abandoned (Ctrl-C twice: stop waiting).
        """
        cancelled: BaseException | None = None
        interrupted = False
        while self.result is None:
            try:
                with anyio.CancelScope(shield=True):
                    await self._park()
            except anyio.get_cancelled_exc_class() as exc:  # (only asyncio's own)
                cancelled = cancelled or exc
            except KeyboardInterrupt as exc:
                if interrupted:
                    self.abandoned = True
                    raise
                interrupted, cancelled = True, exc
        return cancelled

    def answer(self, cancelled: BaseException | None = None) -> Any:
        """The answer ``answered()`` awaited, as ``unwrap`` gives it (with *cancelled*,
        what ``answered()`` returned). No checkpoint, so no cancellation can come
        between the two."""
        assert self.result is not None, "answer() is for a waiter that answered()"
        return unwrap(self.result, cancelled)

    def _timed_out(self, on_timeout: Callable[[], BaseException] | None) -> BaseException:
        if on_timeout is None:
            return TimeoutError("the wait timed out")
        return on_timeout()

    def _trio_abort(self, _: object) -> Any:
        # trio's abort callback: a cancelled park leaves the waiter to ``wait``.
        import trio.lowlevel

        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def _park(self) -> None:
        if self.result is not None:
            await anyio.lowlevel.checkpoint()
        else:
            await self.delivery.park(self)


class Delivery:
    """Resumes waiters in one event loop on behalf of worker threads."""

    def __init__(self, signal: Callable[[Callable[[], None]], None]) -> None:
        self._signal = signal
        self._pending: deque[Waiter] = deque()
        self._scheduled = False
        #: Its loop was closed (or its run ended) with waits in flight: nobody resumes
        #: them, and holding them would hold their tasks, and through them the loop.
        self.dead = False

    def post(self, waiters: Iterable[Waiter]) -> None:
        """Queue finished waiters for resumption; callable from any thread. Raises
        ``RuntimeError`` if the loop is closed (its waiters are dropped)."""
        if self.dead:
            raise RuntimeError("the event loop is closed")
        self._pending.extend(waiters)
        if not self._scheduled:
            self._scheduled = True
            try:
                self._signal(self._drain)
            except RuntimeError:
                self._die()
                raise
        elif self.gone():  # closed with a drain due: that drain never runs
            raise RuntimeError("the event loop is closed")

    def _die(self) -> None:
        self.dead = True
        self._pending.clear()

    def gone(self) -> bool:
        """Whether its loop is closed (or its run over) as far as can be told: its
        waiters will never resume (then dropped). From any thread."""
        if not self.dead and self._closed():
            self._die()
        return self.dead

    def _closed(self) -> bool:
        """Whether the loop is known to be closed (a drain scheduled will never run)."""
        return False

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
        """A waiter to hand to a worker, then ``await waiter.wait()``."""
        return Waiter(self)

    async def park(self, waiter: Waiter) -> None:
        """Suspend until ``_resume(waiter)``; the caller checked ``waiter.result``."""
        raise NotImplementedError

    def _resume(self, waiter: Waiter) -> None:
        raise NotImplementedError


class Then(Delivery):
    """Runs *fn* on the thread that resolves its waiter, in place of resuming a task:
    what to do once a worker reached a point nobody awaits (the result is dropped)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        super().__init__(lambda _: None)
        self._fn = fn

    def post(self, waiters: Iterable[Waiter]) -> None:
        self._fn()


class _AsyncioDelivery(Delivery):
    # The loop is held weakly: the run variable that keeps this delivery lives in a
    # mapping keyed weakly by the loop, so a strong reference here would keep every
    # loop that ever used aclasync alive.
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        loop_ref = weakref.ref(loop)

        def signal(callback: Callable[[], None]) -> None:
            alive = loop_ref()
            if alive is None:
                raise RuntimeError("the event loop is gone")
            alive.call_soon_threadsafe(callback)

        super().__init__(signal)
        self._loop_ref = loop_ref

    def _closed(self) -> bool:
        loop = self._loop_ref()
        return loop is None or loop.is_closed()

    async def park(self, waiter: Waiter) -> None:
        # A fresh future per park: a cancelled await cancels its future, and a wait
        # whose timeout ran out before the worker looked parks a second time.
        future = waiter._future = asyncio.get_running_loop().create_future()
        if waiter.result is not None:  # resolved between the caller's check and now
            future.set_result(None)
        try:
            await future
        finally:
            waiter._future = None

    def _resume(self, waiter: Waiter) -> None:
        future = waiter._future
        if future is not None and not future.done():
            future.set_result(None)


class _TrioDelivery(Delivery):
    def __init__(self) -> None:
        import trio.lowlevel

        token_ref = weakref.ref(trio.lowlevel.current_trio_token())

        def signal(callback: Callable[[], None]) -> None:
            token = token_ref()
            if token is None:
                raise RuntimeError("the trio run is over")
            token.run_sync_soon(callback)

        super().__init__(signal)
        self._lowlevel = trio.lowlevel

    async def park(self, waiter: Waiter) -> None:
        lowlevel = self._lowlevel
        waiter._task = lowlevel.current_task()
        await lowlevel.wait_task_rescheduled(waiter._trio_abort)

    def _resume(self, waiter: Waiter) -> None:
        task = waiter._task
        if task is not None:
            waiter._task = None
            self._lowlevel.reschedule(task, outcome.Value(None))


class _LastDelivery(threading.local):
    """The delivery this thread used last, and (weakly) the loop or trio token it
    belongs to: the thread must not keep a finished loop alive."""

    key: weakref.ref[Any] | None = None
    delivery: Delivery | None = None


_last = _LastDelivery()


def _loop_key() -> object:
    """The running asyncio loop or trio run of this thread (None when neither)."""
    loop = asyncio._get_running_loop()
    if loop is not None:
        return loop
    trio = sys.modules.get("trio")
    if trio is None:
        return None
    try:
        return trio.lowlevel.current_trio_token()
    except RuntimeError:
        return None


def current_delivery() -> Delivery:
    """The delivery of the running event loop, created on first use.

    Every wait asks for it, so the thread's last answer is kept and reused while the
    same loop (or trio run) is running; the run variable is the source of truth.
    """
    key = asyncio._get_running_loop() or _loop_key()  # (the common case first)
    last = _last
    if key is not None and last.key is not None and last.key() is key:
        delivery = last.delivery
        assert delivery is not None
        return delivery
    delivery = _find_delivery()
    last.key = None if key is None else weakref.ref(key)
    last.delivery = delivery
    return delivery


def _find_delivery() -> Delivery:
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


#: Resolved waiters by the event loop they go to.
Ready = dict[Delivery, list[Waiter]]


def post(ready: Ready) -> None:
    """Hand resolved waiters to their event loops (from any thread)."""
    for delivery, waiters in ready.items():
        post_to(delivery, waiters)


def post_to(delivery: Delivery, waiters: Iterable[Waiter]) -> None:
    """Hand waiters to one event loop; a closed loop is skipped (nobody is left to
    resume), so that other loops' waiters are still served."""
    try:  # noqa: SIM105 - contextlib.suppress costs more on this hot path
        delivery.post(waiters)
    except RuntimeError:
        pass


class Outbox:
    """Waiters a device's threads resolved, by the event loop each goes to, until they
    are posted in one batch per loop. Its owner (the device's watcher) guards it with
    its lock."""

    __slots__ = ("_ready",)

    def __init__(self) -> None:
        self._ready: dict[Delivery, list[Waiter]] = {}

    def __bool__(self) -> bool:
        return bool(self._ready)

    def put(self, waiter: Waiter, result: outcome.Outcome[Any]) -> None:
        waiter.result = result
        self._ready.setdefault(waiter.delivery, []).append(waiter)

    def put_all(self, waiters: Iterable[Waiter], make: Callable[[], outcome.Outcome[Any]]) -> None:
        """Resolve every waiter nobody abandoned with a fresh ``make()``."""
        ready = self._ready
        for waiter in waiters:  # put() inlined: this runs on a just-woken CPU
            if not waiter.abandoned:
                waiter.result = make()
                ready.setdefault(waiter.delivery, []).append(waiter)

    def take(self) -> Ready:
        """The waiters resolved so far, for ``post``."""
        ready, self._ready = self._ready, {}
        return ready


class Flag:
    """A one-shot event that tasks of any event loop, in any thread, may await (an
    ``anyio.Event`` belongs to the loop that made it). ``set`` may be called from any
    thread; cancelling ``wait`` abandons that wait only."""

    __slots__ = ("_lock", "_set", "_waiters")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._waiters: list[Waiter] = []

    def set(self) -> None:
        with self._lock:
            self._set = True
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.result = DONE
            post_to(waiter.delivery, (waiter,))

    async def wait(self) -> None:
        """Return once ``set`` was called (at once, after a checkpoint, if it was)."""
        with self._lock:
            waiter = None if self._set else current_delivery().new_waiter()
            if waiter is not None:
                self._waiters.append(waiter)
        if waiter is None:
            await anyio.lowlevel.checkpoint()
        else:
            await waiter.wait()


class Turn:
    """One holder at a time among tasks of any event loop, in any thread (an
    ``anyio.Lock`` belongs to one loop). ``take`` and ``end`` never block but on a lock
    held for a few lines. With *reclaim*, a turn whose holder's loop was closed before
    it ended the turn is taken from it by the next ``take``; such holders pass their own
    ``Flag`` to ``take`` and ``end``, so that a late ``end`` (its coroutine closed when
    collected) leaves the next holder's turn alone."""

    __slots__ = ("_by", "_holder", "_lock", "_reclaim")

    def __init__(self, *, reclaim: bool = False) -> None:
        self._lock = threading.Lock()
        self._holder: Flag | None = None
        self._by: Delivery | None = None  # the holder's loop, with *reclaim*
        self._reclaim = reclaim

    def take(self, mine: Flag | None = None) -> Flag | None:
        """Take the turn (as *mine*, if given): None if the caller holds it now, else the
        holder's ``Flag`` (set when that turn ends) to wait for before trying again."""
        by = current_delivery() if self._reclaim else None
        stale = None
        with self._lock:  # the look and the taking are one step for every thread
            holder = self._holder
            if holder is not None and self._by is not None and self._by.gone():
                stale, holder = holder, None  # it can never end its turn
            if holder is None:
                self._holder, self._by = mine or Flag(), by
        if stale is not None:
            stale.set()  # whoever waits for it tries again
        return holder

    def end(self, mine: Flag | None = None, *, keep: bool = False) -> None:
        """End the caller's turn (only if it is still *mine*, if given); with *keep*,
        nobody takes it again (a one-time act, such as a close: later callers get the
        ended turn's set ``Flag``)."""
        with self._lock:
            holder = self._holder
            if mine is not None and holder is not mine:  # reclaimed since: not ours
                holder = mine
            elif not keep:
                self._holder = self._by = None
        assert holder is not None, "end() without take()"
        holder.set()


async def to_completion(
    work: Callable[[], Awaitable[_T]],
) -> tuple[outcome.Outcome[_T], BaseException | None]:
    """Await ``work()`` to its end whatever cancels the caller; return how it ended (its
    value or what it raised, as an ``outcome``) and the first of asyncio's own
    cancellations that came meanwhile (None if none did), for the caller to raise once
    it is done: a cancellation is never lost, whatever the work raised.

    anyio's (and trio's) cancellations are held off by a shield. asyncio's own
    ``task.cancel()`` (``asyncio.timeout``, a ``TaskGroup``, a server's shutdown)
    passes a shield, so on asyncio the work runs as a task of its own, which the
    caller's cancellation does not reach, and the caller awaits it again.
    """
    with anyio.CancelScope(shield=True):
        if asyncio._get_running_loop() is None:
            return await outcome.acapture(work), None
        task = asyncio.ensure_future(work())
        cancelled: BaseException | None = None
        while not task.done():
            try:
                await asyncio.wait((task,))  # (never raises what the work raised)
            except asyncio.CancelledError as exc:  # the caller's: the task is not hit
                cancelled = cancelled or exc
        ended = outcome.capture(task.result)
        if task.cancelled() and isinstance(ended, outcome.Error):  # by one cancelling
            cancelled = cancelled or ended.error  # every task: a cancellation, too
        return ended, cancelled
    raise AssertionError("unreachable: a shield nobody cancels swallows nothing")


def unwrap(result: outcome.Outcome[_T], cancelled: BaseException | None) -> _T:
    """The value of work the caller saw to its end, or what it raised; with *cancelled*
    (asyncio's own cancellation that came meanwhile) and nothing made, that
    cancellation instead, raised from what the work raised: it goes on."""
    try:
        return result.unwrap()
    except BaseException as exc:
        if cancelled is not None and cancelled is not exc:
            raise cancelled from exc
        raise


def is_cancellation(exc: BaseException | None) -> bool:
    """Whether *exc* is a cancellation, or a group of nothing else: trio's nursery in a
    cancelled scope raises its tasks' ``Cancelled`` as one group, which the scope drops
    whole, notes and all, as it drops a lone one."""
    if isinstance(exc, BaseExceptionGroup):
        return all(is_cancellation(inner) for inner in exc.exceptions)
    return isinstance(exc, anyio.get_cancelled_exc_class())


def failure(result: outcome.Outcome[Any]) -> BaseException | None:
    """What work run by ``to_completion`` raised: None if it returned, or if it was
    cancelled (``to_completion`` returns that as its cancellation)."""
    if isinstance(result, outcome.Error) and not isinstance(
        result.error, anyio.get_cancelled_exc_class()
    ):
        return result.error
    return None


async def raise_if_cancelled(cancelled: BaseException | None) -> None:
    """Raise *cancelled* (asyncio's own, held while work was seen to its end), or a
    cancellation pending now (``checkpoint_if_cancelled``)."""
    if cancelled is not None:
        raise cancelled
    await anyio.lowlevel.checkpoint_if_cancelled()
