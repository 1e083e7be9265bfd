"""Stream pools: borrow a stream, first come first served, and give it back clean."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
import outcome

from ._errors import raise_closing, report
from ._factory import AsyncResource
from ._loop import Delivery, current_delivery, failure, to_completion
from ._pyacl.constants import StreamFlag
from ._stream_config import check_stream_config
from ._waits import check_timeout

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import ExceptionGroup

if TYPE_CHECKING:
    from ._device import Device
    from ._stream import Stream

__all__ = ["PoolStatistics", "StreamPool", "stream_pool"]

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PoolStatistics:
    """A snapshot of a pool's counters (``StreamPool.statistics()``).

    Attributes
    ----------
    size:
        Streams the pool holds now (less than asked for only if a replacement failed,
        or a device closed or broke: its streams are dropped, never lent).
    borrowed:
        Streams lent out now.
    waiting:
        Borrowers queued for a stream now.
    grants:
        Streams lent out since the pool opened.
    waits:
        Grants whose borrower had to queue first.
    grants_out_of_order:
        Grants that went to a borrower who arrived after one already served later; the
        pool serves strictly in arrival order, so this stays 0.
    replaced:
        Streams closed and re-created because their work failed or their borrower
        changed their settings (``set_failure_mode``, ``set_overflow_switch``).
    in_flight:
        Device id to streams of that device lent out now.
    capacity:
        Device id to streams of that device in the pool.
    busy_seconds:
        Device id to stream-seconds spent lent out (summed over its streams); its rate
        divided by ``capacity`` is the device's utilisation.
    """

    size: int
    borrowed: int
    waiting: int
    grants: int
    waits: int
    grants_out_of_order: int
    replaced: int
    in_flight: dict[int, int]
    capacity: dict[int, int]
    busy_seconds: dict[int, float]


class StreamPool(AsyncResource):
    """Streams lent out one borrower at a time, strictly first come first served.

    Get one from ``Device.stream_pool(size)`` or use ``aclasync.DevicePool``; open it
    with ``async with`` (or ``await``) and borrow with ``async with pool.stream() as s``.

    A freed stream goes straight to the oldest queued borrower, so a newcomer can never
    overtake one that waits. When several devices have a free stream, the least busy
    device lends. On return the pool awaits ``synchronize()`` on the stream (unless the
    borrower's own last sync succeeded and nothing was queued since: then the stream is
    known idle and goes back at once): a stream whose work failed (an ``AclError``, or
    any exception a launched call raised) is closed and replaced by a fresh one, and
    the failure is raised from the borrower's ``async with`` exit (unless the body
    already raised). A stream whose borrower set ``FailureMode.STOP`` or turned its
    overflow switch on is replaced too, so every borrower gets a stream with the
    default settings. The pool's streams are their borrowers' alone:
    ``Device.synchronize`` waits for them but never raises their failures, so a
    borrower always learns of its own. A stream must not be used after its borrow
    ended: it is the next borrower's, and so are the failures of work queued on it
    then. The streams of a device that closed or broke are dropped, never lent; the
    other devices lend on.

    Unlike a ``Device``, a pool belongs to the event loop that opened it (its queue
    of borrowers is made of that loop's primitives): open one per loop; a borrow from
    another loop raises ``RuntimeError``.
    """

    def __init__(
        self, devices: Sequence[Device], per_device: int, flags: int, priority: int
    ) -> None:
        self._devices = tuple(devices)
        self._per_device = per_device
        self._flags = flags
        self._priority = priority
        self._opened = False
        self._owner: Delivery | None = None  # the event loop that opened it (held weakly)
        self._closing = False
        self._closed = False
        self._forced = False
        self._close_reason = ""
        self._free: dict[int, list[Stream]] = {d.id: [] for d in self._devices}
        self._capacity: dict[int, int] = {d.id: 0 for d in self._devices}
        self._in_flight: dict[int, int] = {d.id: 0 for d in self._devices}
        self._busy: dict[int, float] = {d.id: 0.0 for d in self._devices}
        self._lent_at: dict[Stream, float] = {}
        self._waiters: deque[_Waiter] = deque()
        self._leases: dict[anyio.CancelScope, int] = {}  # -> the borrowing task's id
        self._all_returned: anyio.Event | None = None
        self._recycling: set[Stream] = set()  # returned, their work waited for
        self._force_closed: set[Stream] = set()  # by a close's timeout, while lent
        self._close_done: anyio.Event | None = None
        self._tickets = itertools.count()
        self._last_granted = -1
        self._grants = 0
        self._waits = 0
        self._out_of_order = 0
        self._replaced = 0

    def __repr__(self) -> str:
        state = " closed" if self._closed else " closing" if self._closing else ""
        devices = ",".join(str(d.id) for d in self._devices)
        return f"<aclasync.StreamPool devices={devices} size={self.size}{state}>"

    @property
    def size(self) -> int:
        """Streams the pool holds now."""
        return sum(self._capacity.values())

    @property
    def closed(self) -> bool:
        """Whether the pool is closed or closing (it then lends no more streams)."""
        return self._closing or self._closed

    def statistics(self) -> PoolStatistics:
        """Return a snapshot of the pool's counters (for metrics); never blocks."""
        now = time.monotonic()
        busy = dict(self._busy)
        for stream, since in self._lent_at.items():
            busy[stream.device.id] += now - since
        return PoolStatistics(
            size=self.size,
            borrowed=sum(self._in_flight.values()),
            waiting=len(self._waiters),
            grants=self._grants,
            waits=self._waits,
            grants_out_of_order=self._out_of_order,
            replaced=self._replaced,
            in_flight=dict(self._in_flight),
            capacity=dict(self._capacity),
            busy_seconds=busy,
        )

    # -- opening ---------------------------------------------------------------------

    def __await__(self) -> Generator[Any, None, StreamPool]:
        return self._open().__await__()

    async def __aenter__(self) -> StreamPool:
        return await self._open()

    async def _open(self) -> StreamPool:
        """Create the streams; if one fails, close those made and raise its error.

        ``anyio.ClosedResourceError`` (and nothing opened) once ``aclose`` was called."""
        if self._closing:
            raise anyio.ClosedResourceError(f"{self!r} was closed: a closed pool never opens")
        if self._opened:
            raise RuntimeError(f"{self!r} was already opened")
        self._opened = True
        self._owner = current_delivery()  # its waits are this loop's: see _lend
        try:
            with anyio.CancelScope(shield=True):
                for device in self._devices:
                    for _ in range(self._per_device):
                        stream = await device._create_private_stream(self._flags, self._priority)
                        self._free[device.id].append(stream)
                        self._capacity[device.id] += 1
            # A cancellation that came meanwhile: the caller never gets the pool.
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException as exc:
            errors, cancelled = await self._shut(None)
            report(errors, exc)
            if cancelled is not None:  # (asyncio's own, during the clean-up) it goes on
                raise cancelled from exc
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        """Close the pool as ``aclose()`` does; while *exc* propagates, what the close
        finds is added to it as notes and never replaces it (errors rule 6)."""
        errors, cancelled = await self._shut(None)
        await raise_closing(errors, cancelled, exc)

    # -- borrowing -------------------------------------------------------------------

    def stream(self) -> _Borrow:
        """Borrow a stream for the body of ``async with pool.stream() as s``.

        Waits (in arrival order) while every stream is lent out. Cancellation while
        waiting leaves the queue; a stream granted at that very moment passes on to the
        next borrower. On exit the pool awaits the stream's queued work, shielded from
        cancellation, before lending it again. The failures that work left are raised
        here, each once (one as itself, several as an ``ExceptionGroup``), and the
        stream is replaced; a body that raised keeps its exception, with the failures
        added as notes (a cancelled body's go to the device: its next ``synchronize``
        or its close raises them). Raises ``anyio.ClosedResourceError`` if the pool is closed,
        or its device (a body's finished work is quiet then: the device's close reported
        what it left), or if ``aclose(timeout=...)`` ran out of time and force-closed the
        stream while it was borrowed. When no streams are left because the devices
        closed, raises ``anyio.ClosedResourceError`` naming them (else, with none left,
        ``anyio.BrokenResourceError``). The stream must not be used once the block is
        left: it is the next borrower's, and the failures of work queued on it then
        are that borrower's. Enter and exit the block in one task: the borrow holds a
        cancel scope (the pool's forced close cancels the body through it). On asyncio
        an exit in another plain task raises ``RuntimeError`` (the stream still goes
        back); a task of a trio nursery or of an anyio task group that entered the
        block and ends without exiting it leaves that scope open, and its group then
        never finishes (trio raises an error about a cancel scope stack instead).
        """
        return _Borrow(self)

    async def _lend(self) -> tuple[Stream, anyio.CancelScope]:
        """Borrow a stream and open its lease (``_Borrow.__aenter__``)."""
        if self._opened and current_delivery() is not self._owner:  # (its waiters: its loop's)
            raise RuntimeError(
                f"{self!r} belongs to the event loop that opened it: open one per loop"
            )
        stream = await self._acquire()
        lease = anyio.CancelScope()
        lease.__enter__()
        self._leases[lease] = anyio.get_current_task().id
        return stream, lease

    async def _take_back(
        self, stream: Stream, lease: anyio.CancelScope, exc: BaseException | None
    ) -> bool:
        """End a borrow (``_Borrow.__aexit__``): close the lease, recycle the stream,
        report its failures. True if the lease swallowed its own cancellation (then
        ``ClosedResourceError`` is raised instead). The stream is recycled whatever
        happens: if the lease cannot be closed (exited in another task), and through
        asyncio's own ``task.cancel()``, which is raised once the stream is back (but
        for a body's exception, which it never replaces: rule 6)."""
        state = stream.device._state
        try:
            swallowed = bool(lease.__exit__(type(exc) if exc else None, exc, None))
        except BaseException as error:  # (exited in another task than it was entered in)
            del self._leases[lease]
            failures, _ = await self._recycle(stream)
            state.hand_over(failures, error)
            raise
        del self._leases[lease]
        failures, cancelled = await self._recycle(stream)
        if exc is not None and not swallowed:  # rule 6: kept, not replaced by a
            state.hand_over(failures, exc)  # cancellation that came meanwhile
            if isinstance(cancelled, KeyboardInterrupt):  # but Ctrl-C stops the program
                raise cancelled
            return False
        if cancelled is not None:
            state.hand_over(failures, cancelled)
            raise cancelled
        if lease.cancelled_caught or stream in self._force_closed:
            self._force_closed.discard(stream)
            closed = anyio.ClosedResourceError(self._close_reason)
            report(failures, closed)
            raise closed
        report(failures)
        return swallowed

    async def _acquire(self) -> Stream:
        await anyio.lowlevel.checkpoint_if_cancelled()
        self._check_usable()
        ticket = next(self._tickets)
        if not self._waiters:
            stream = self._take_free()
            if stream is not None:
                self._grant(stream, ticket)
                try:  # (asyncio's own task.cancel() passes the shield)
                    await anyio.lowlevel.cancel_shielded_checkpoint()
                except BaseException:
                    self._ungrant(stream)
                    raise
                return stream
            self._check_usable()  # its last streams were dropped (their devices are gone)
        waiter = _Waiter(ticket)
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.stream is not None:
                self._ungrant(waiter.stream)
            elif waiter.error is None:
                self._waiters.remove(waiter)
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.stream is not None
        self._waits += 1
        return waiter.stream

    async def _recycle(self, stream: Stream) -> tuple[list[BaseException], BaseException | None]:
        """Make a returned stream fit to lend again and put it back; shielded.

        Returns the failures its work left, for the borrower's exit to report, and
        asyncio's own cancellation if one came meanwhile (the work went on to its end:
        the exit raises it). Whatever happens meanwhile (a backend fault included), the
        stream stops counting as lent and the pool goes on with it, its replacement, or
        one stream fewer.
        """
        if self._forced or (_idle(stream) and not stream.closed):
            self._put_back(stream)  # settled: synced, nothing queued since
            return [], None
        failures: list[BaseException] = []
        keep: Stream | None = stream
        decided = False
        cancelled: BaseException | None = None  # asyncio's own, for the exit to raise
        self._recycling.add(stream)  # a close's timeout force-closes it too

        async def replace() -> Stream | None:
            nonlocal cancelled
            made, cancelled_now = await _finish(functools.partial(self._replace, stream, failures))
            cancelled = cancelled or cancelled_now
            return made.unwrap()

        try:
            if stream.closed and not (self._closing or stream._state.gone()):
                # Its borrower closed it (the close reported what it held): a fresh one.
                keep = await replace()
                decided = True
                return failures, cancelled
            synced, cancelled = await _finish(stream.synchronize)
            if isinstance(synced, outcome.Error) and isinstance(synced.error, Exception):
                exc = synced.error
                if _gone(stream):
                    keep = None
                    self._drop(stream)
                    # A device that closed released the stream: its close reported what
                    # the stream left, as for a stream the borrower made. (A death is
                    # reported: the error made for it counts as told.)
                    if not self._closing and not stream._state.closed:
                        failures.append(exc)
                else:  # an AclError, or what a launched call raised: the work failed
                    failures = [exc, *stream._state.take_failures(stream._lane)]
                    keep = await replace()
            else:
                synced.unwrap()  # (a BaseException: raised, and the finally decides)
                # A stopped stream (its cause already reported) refuses all work; a
                # reconfigured one would hand its settings on to the next borrower.
                if stream._stopped() or stream._reconfigured:
                    keep = await replace()
            decided = True
        finally:
            self._recycling.discard(stream)
            if decided and keep is stream:
                self._put_back(stream)
            elif decided:
                self._settle(stream)
                if keep is not None:
                    self._hand_on(keep)
            elif _idle(stream):  # a BaseException escaped: put back if known settled,
                self._put_back(stream)
            else:  # else one stream fewer (the device's close releases it)
                self._settle(stream)
                self._drop(stream)
        return failures, cancelled

    async def _replace(self, stream: Stream, failures: list[BaseException]) -> Stream | None:
        """Close a failed stream and create its successor (None if that failed: the
        stream is dropped); failures met on the way are added to *failures*."""
        try:
            await stream.aclose(force=True)
        except ExceptionGroup as group:  # its last failures, seen by the close
            failures.extend(group.exceptions)
        except Exception as exc:  # an AclError, or a backend fault: reported, never hung on
            failures.append(exc)
        try:
            successor = await stream.device._create_private_stream(self._flags, self._priority)
        except Exception as exc:
            self._drop(stream)
            if not isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError)):
                failures.append(exc)
            return None
        self._replaced += 1
        return successor

    # -- closing ---------------------------------------------------------------------

    async def aclose(self, *, timeout: float | None = None) -> None:
        """Close the pool: refuse new borrowers, wait for lent streams, close them all.

        Queued borrowers get ``anyio.ClosedResourceError`` at once. With ``timeout``
        (seconds), borrowers still holding a stream after that long are cancelled, get
        ``anyio.ClosedResourceError`` saying why, and the streams are force-closed
        (queued work dropped; a wait still pending on one raises
        ``ClosedResourceError``, even in a shielded scope, and so does the borrow's
        exit); the close then returns without waiting for them to leave. Raises what closing the
        streams found (failures of work that had ended: one as itself, several as an
        ``ExceptionGroup``). Idempotent: a call while another is under way returns when
        that one is complete. Runs to completion even when cancelled (asyncio's own
        ``task.cancel()`` too: then raised once the close is complete, with those
        failures as notes). Raises ``RuntimeError`` at once, closing nothing, when
        called by a task from inside one of its own borrows (the close would wait for
        that borrow for ever). A pool closed before it was opened never opens.
        """
        errors, cancelled = await self._shut(check_timeout(timeout))
        await raise_closing(errors, cancelled)

    async def _shut(
        self, timeout: float | None
    ) -> tuple[list[BaseException], BaseException | None]:
        """``aclose``'s work, run to completion: what closing the streams found, and
        asyncio's own cancellation if one came meanwhile (for the caller to raise)."""
        self._refuse_own_borrow()
        if self._close_done is not None:  # a second caller: wait for the first
            _, cancelled = await to_completion(self._close_done.wait)
            return [], cancelled
        self._close_done = anyio.Event()
        self._closing = True
        self._close_reason = f"{self!r} is closed"
        self._fail_waiters(anyio.ClosedResourceError(self._close_reason))
        deadline = math.inf if timeout is None else anyio.current_time() + timeout
        errors: list[BaseException] = []
        try:
            closed, cancelled = await to_completion(
                functools.partial(self._close, deadline, timeout, errors)
            )
        finally:
            self._close_done.set()
        error = failure(closed)
        if error is not None:  # a fault of the close itself: told too
            errors.append(error)
        return errors, cancelled

    def _refuse_own_borrow(self) -> None:
        """Raise ``RuntimeError`` if the calling task holds one of the pool's streams."""
        if self._leases and anyio.get_current_task().id in self._leases.values():
            raise RuntimeError(
                f"{self!r}.aclose() was called from inside one of the calling task's "
                "borrows: the close would wait for that borrow to end; close the pool "
                "after leaving the 'async with pool.stream()' block"
            )

    async def _close(
        self, deadline: float, timeout: float | None, errors: list[BaseException]
    ) -> None:
        """The close's work, adding what closing the streams raised to *errors*; run to
        completion by ``_shut``."""
        if self._lent_at:
            if self._all_returned is None:
                self._all_returned = anyio.Event()
            if not self._forced:
                with anyio.CancelScope(deadline=deadline):
                    await self._all_returned.wait()
            if self._lent_at:
                if not self._forced:
                    self._forced = True
                    self._close_reason = (
                        f"{self!r} was closed with timeout={timeout} s while this stream "
                        "was borrowed; the stream was force-closed and its queued work dropped"
                    )
                    for lease in self._leases:
                        lease.cancel()
                # The lent streams, and those whose borrowers left, still waited for on
                # the way back: their waits end with the close (even shielded ones), and
                # their exits raise ClosedResourceError. The close does not wait for
                # them: a borrower shielded from the cancellation, or a close called
                # from a task its borrow waits for, would hold it for ever.
                for stream in list(self._lent_at):
                    if not stream.closed:
                        self._force_closed.add(stream)
                        await self._close_stream(stream, errors)
        for streams in self._free.values():
            while streams:
                await self._close_stream(streams.pop(), errors)
        self._closed = True

    async def _close_stream(self, stream: Stream, errors: list[BaseException]) -> None:
        """Close one of the pool's streams (forced after a timeout); add what it raised
        to *errors* (whatever it is: the close goes on with the others)."""
        try:
            await stream.aclose(force=self._forced)
        except ExceptionGroup as group:  # a stream's several failures
            errors.extend(group.exceptions)
        except anyio.get_cancelled_exc_class():
            raise  # (not a failure; none comes: the close runs to completion)
        except BaseException as exc:  # an AclError, what a launched call raised, a fault
            errors.append(exc)

    # -- bookkeeping (synchronous, on the event loop) -----------------------------------

    def _check_usable(self) -> None:
        if not self._opened:
            raise RuntimeError(f"{self!r} is not open; use 'async with' or 'await' on it")
        if self._closing:
            raise anyio.ClosedResourceError(self._close_reason)
        if self.size == 0:
            raise self._no_streams_error()

    def _no_streams_error(self) -> Exception:
        """What a borrower gets once the pool has no streams left."""
        closed = [device for device in self._devices if device.closed]
        if len(closed) == len(self._devices):  # dropped with their devices
            names = ", ".join(repr(device) for device in closed)
            return anyio.ClosedResourceError(f"{self!r} has no streams left: {names} closed")
        broken = [d for d in self._devices if not d.closed and d._state.worker.death is not None]
        why = (
            f"{', '.join(repr(d) for d in broken)} broke"
            if broken
            else "its streams were closed and could not be replaced"
        )
        return anyio.BrokenResourceError(f"{self!r} has no streams left: {why}")

    def _take_free(self) -> Stream | None:
        """Pop a free stream of the least busy device that has one; streams of a device
        that closed or broke are dropped on the way."""
        while True:
            best: int | None = None
            for device in self._devices:
                key = device.id
                if self._free[key] and (best is None or self._load(key) < self._load(best)):
                    best = key
            if best is None:
                return None
            stream = self._free[best].pop()
            if not _gone(stream):
                return stream
            self._drop(stream)

    def _load(self, device_id: int) -> float:
        return self._in_flight[device_id] / max(1, self._capacity[device_id])

    def _grant(self, stream: Stream, ticket: int) -> None:
        if ticket < self._last_granted:
            self._out_of_order += 1
        self._last_granted = max(self._last_granted, ticket)
        self._grants += 1
        self._in_flight[stream.device.id] += 1
        self._lent_at[stream] = time.monotonic()

    def _settle(self, stream: Stream) -> None:
        """Account for *stream* no longer being lent out."""
        since = self._lent_at.pop(stream, None)
        if since is not None:
            key = stream.device.id
            self._in_flight[key] -= 1
            self._busy[key] += time.monotonic() - since
        if self._all_returned is not None and not self._lent_at:
            self._all_returned.set()

    def _ungrant(self, stream: Stream) -> None:
        """Take back a stream granted to a borrower cancelled before it got it: the
        grant never happened, and the stream goes on to the next."""
        self._grants -= 1
        self._put_back(stream)

    def _put_back(self, stream: Stream) -> None:
        """Take *stream* back from its borrower: to the oldest waiter, or free."""
        self._settle(stream)
        self._hand_on(stream)

    def _hand_on(self, stream: Stream) -> None:
        """Give a stream nobody holds to the oldest waiter, or keep it free; drop it if
        it, or its device, is closed or broken."""
        if _gone(stream):
            self._drop(stream)
        elif self._waiters and not self._closing:
            waiter = self._waiters.popleft()
            waiter.stream = stream
            self._grant(stream, waiter.ticket)
            waiter.event.set()
        else:
            self._free[stream.device.id].append(stream)

    def _drop(self, stream: Stream) -> None:
        """Forget a stream that can no longer be used (closed, its device closed or
        broke, or its successor was never made): one stream fewer."""
        if self._closing:  # the statistics keep the size the pool had, whatever closed
            return
        self._capacity[stream.device.id] -= 1
        if self.size == 0:
            self._fail_waiters(self._no_streams_error())

    def _fail_waiters(self, error: BaseException) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            waiter.error = error
            waiter.event.set()


class _Borrow:
    """One ``async with pool.stream() as s``: a class rather than a generator, since a
    request pays for every step of its borrow."""

    __slots__ = ("_lease", "_pool", "_stream")

    def __init__(self, pool: StreamPool) -> None:
        self._pool = pool
        self._stream: Stream | None = None
        self._lease: anyio.CancelScope | None = None

    async def __aenter__(self) -> Stream:
        if self._lease is not None:
            raise RuntimeError("a pool.stream() borrow can be entered once")
        self._stream, self._lease = await self._pool._lend()
        return self._stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        stream, lease = self._stream, self._lease
        if stream is None or lease is None:
            raise RuntimeError("a pool.stream() borrow can be exited once, after its entry")
        self._stream = None  # (the stream is the next borrower's from now on)
        return await self._pool._take_back(stream, lease, exc)


class _Waiter:
    """A queued borrower: its arrival ticket, and what it was given."""

    __slots__ = ("error", "event", "stream", "ticket")

    def __init__(self, ticket: int) -> None:
        self.ticket = ticket
        self.event = anyio.Event()
        self.stream: Stream | None = None
        self.error: BaseException | None = None


async def _finish(
    step: Callable[[], Awaitable[_T]],
) -> tuple[outcome.Outcome[_T], BaseException | None]:
    """``step()`` to its end, as ``to_completion`` does, without its task on the way:
    in a shield, then, if asyncio's own cancellation passed the shield, or trio's
    Ctrl-C (the step was cut short: each step here is safe to start again), once more
    as a task of its own, which no cancellation reaches (a second Ctrl-C does, on
    trio). Returns how it ended and that cancellation (or Ctrl-C), to raise after."""
    with anyio.CancelScope(shield=True):
        first = await outcome.acapture(step)
    if isinstance(first, outcome.Error) and isinstance(
        first.error, (anyio.get_cancelled_exc_class(), KeyboardInterrupt)
    ):
        again, _ = await to_completion(step)  # (a later cancellation: the same request)
        return again, first.error
    return first, None


def _gone(stream: Stream) -> bool:
    """Whether *stream* can no longer be lent: it, or its device, is closed or broken."""
    return stream.closed or stream._state.gone()


def _idle(stream: Stream) -> bool:
    """Whether *stream* can go back as it is: known idle with nothing to report (see
    ``Stream._settled``), neither stopped nor reconfigured, its device alive."""
    return (
        stream._settled()
        and not stream._stopped()
        and not stream._reconfigured
        and stream._state.worker.death is None
    )


def stream_pool(
    devices: Sequence[Device],
    per_device: int,
    *,
    flags: StreamFlag | int = 0,
    priority: int = 0,
    size_name: str = "size",
) -> StreamPool:
    """Check the arguments and build an unopened ``StreamPool`` over *devices*."""
    if isinstance(per_device, bool) or not isinstance(per_device, int):
        raise TypeError(f"{size_name} must be an int, got {type(per_device).__name__}")
    if per_device < 1:
        raise ValueError(f"{size_name} must be >= 1, got {per_device}")
    flags, priority = check_stream_config(flags, priority)
    return StreamPool._create(devices, per_device, flags, priority)
