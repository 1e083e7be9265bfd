"""The one object that streams, events and buffers of a device talk to.

``DeviceState`` owns the device's worker, its open/closed/broken state and the
reporting of failures. Everything the front end asks of a device goes through one of
its methods: a round trip, a launch, a fence or an event watch, a creation, a release.

The error-delivery rule
-----------------------
Failures are delivered by the rule of docs/errors.md, implemented here once: a
failure is numbered and kept with its stream by the worker (``Lane.errors``), raised
by ``report`` (one stream) or ``report_device`` (any stream the device reports) at
the end of an await, by a close (``raise_closing``), or handed to the device when a
cancellation would drop it (``hand_over``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import anyio.lowlevel
import outcome

from ._errors import (
    AclasyncError,
    AclError,
    AclTimeoutError,
    never_recorded,
    raise_closing,
    raise_for_status,
    report,
)
from ._errors import report as report_closing
from ._jobs import Call, EventWait, Fence, Launch, Record, Run, Stop
from ._lanes import FORCED_EVENT, EventRecord, Lane, Life
from ._loop import (
    Turn,
    Waiter,
    current_delivery,
    is_cancellation,
    raise_if_cancelled,
    to_completion,
)
from ._options import WorkerOptions
from ._pyacl.codes import ErrorCode
from ._pyacl.constants import EventRecordedStatus
from ._worker import DeviceWorker

if TYPE_CHECKING:
    from ._pyacl.backend import AclBackend
    from ._stream import Stream

__all__ = ["DeviceState"]

_T = TypeVar("_T")


class FailureHolder(Protocol):
    """What keeps failures for its own close to report (``Model``)."""

    def take_failures(self) -> list[BaseException]:
        """The failures held, which the caller now reports."""
        ...


class DeviceState:
    """Shared state of one open device (see the module docstring for the error rule)."""

    def __init__(self, acl: AclBackend, device_id: int, options: WorkerOptions) -> None:
        self.acl = acl
        self.device_id = device_id
        self.worker = DeviceWorker(acl, device_id, options)
        self.closed = False
        #: Every open stream (the default one too) -> whether ``Device.synchronize``
        #: reports its failures: not for a stream a ``Model`` holds for its runs, whose
        #: failures are the runs' own (the device's close still reports what is left).
        self._lanes: dict[Lane, bool] = {self.worker.default_lane: True}
        #: The lane of each stream handle the device made or wrapped, until it is closed
        #: or let go of, so that a ``Stream`` made again for it (after the last one was
        #: collected) finds its stream and failures.
        self._by_handle: dict[int, Lane] = {}
        #: Calls submitted to the worker so far (any of them may queue stream work).
        self.calls = 0
        #: The ``Stream`` objects of the device's streams by handle (made or wrapped).
        self.streams: weakref.WeakValueDictionary[int, Stream] = weakref.WeakValueDictionary()
        #: Taken by the first close, for good; closers on other loops (or threads)
        #: wait for it to end.
        self._closing = Turn()
        #: Events collected unclosed (appended from any thread, by ``Event.__del__``),
        #: given back at the device's next record.
        self._dropped_events: deque[tuple[Lane, int, EventRecord]] = deque()
        #: Holders (a ``Model``) of failures of work nobody waited for: the device's
        #: close reports those still held (a holder closed later then has none).
        self.holders: weakref.WeakSet[FailureHolder] = weakref.WeakSet()
        #: The first close's wait for the worker's stop, while it waits.
        #: (A list: taking it is one atomic pop, whichever closer's thread gets there.)
        self._stop: list[Waiter] = []

    @property
    def default_lane(self) -> Lane:
        return self.worker.default_lane

    def gone(self) -> bool:
        """Closed or broken: nothing is left to release through the worker."""
        return self.closed or self.worker.death is not None

    def check_open(self) -> None:
        """Raise ``ClosedResourceError`` once closed, a fresh ``DeviceBrokenError`` once
        its worker died."""
        if self.closed:
            raise anyio.ClosedResourceError(f"device {self.device_id} is closed")
        if self.worker.death is not None:
            raise self.worker.broken_error()

    def other(self, theirs: DeviceState) -> str:
        """Names the device of an object of *theirs*, not this state, for errors: another
        device, or another ``open_device`` of the same one (whose objects are its own)."""
        if theirs.device_id == self.device_id:
            return f"another open_device({self.device_id}) (aclasync keeps each one's apart)"
        return f"another device (device {theirs.device_id}, not {self.device_id})"

    # -- round trips -----------------------------------------------------------------

    async def roundtrip(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn()`` on the worker and return its result (or raise its exception).

        Cancellation abandons the wait; ``fn`` still runs, in order.
        """
        result: _T = await self._call(fn).wait()
        return result

    def _call(self, fn: Callable[[], _T]) -> Waiter:
        """Queue ``fn()`` on the worker; the waiter its answer comes to."""
        self.check_open()
        waiter = current_delivery().new_waiter()
        self.calls += 1
        self.worker.submit(Call(fn, waiter))
        return waiter

    async def create(self, make: Callable[[], _T], release: Callable[[_T], Awaitable[None]]) -> _T:
        """Make a resource on the worker, never leaking it to a cancellation.

        The round trip is shielded; if the caller was cancelled meanwhile, the new
        resource is released again (also shielded) before the cancellation goes on.
        asyncio's own ``task.cancel()``, which passes a shield, is raised once the
        resource is released (``Waiter.answered``), the release running to completion
        (``to_completion``) whatever else cancels the caller.
        """
        waiter = self._call(make)
        cancelled = await waiter.answered()
        made: _T = waiter.answer(cancelled)
        try:
            await raise_if_cancelled(cancelled)
        except BaseException as exc:
            released, _ = await to_completion(functools.partial(release, made))
            if isinstance(released, outcome.Error):  # told, never in the way (rule 6)
                report_closing([released.error], exc)
            raise
        return made

    async def lane_call(self, lane: Lane, fn: Callable[[], _T]) -> _T:
        """A round trip for a stream, then the stream's oldest unreported failure."""
        result = await self.roundtrip(fn)
        self.report(lane)
        return result

    def launch(
        self, lane: Lane, fn: Callable[..., Any], args: tuple[Any, ...], api: str | None = None
    ) -> None:
        """Queue ``fn(*args, stream)`` on the worker; never blocks."""
        if self.closed or self.worker.death is not None:
            self.check_open()
        lane.submit()
        self.worker.submit(Launch(lane, fn, args, api))

    def post(self, fn: Callable[[], Any]) -> None:
        """Run the library's own ``fn()`` on the worker without waiting for it (nothing
        to report). It queues no stream work (``calls`` does not count it); a fault in
        it is the device's death, as in any ``Run`` job."""
        if not self.gone():
            try:  # noqa: SIM105 - a worker that just died or stopped released everything
                self.worker.submit(Run(fn))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    # -- waits: each is wait_for (the worker answers), Waiter.wait, settle ------------------

    def wait_for(
        self, lane: Lane, *, timed: bool, event: int = 0, record: EventRecord | None = None
    ) -> Waiter:
        """Hand the worker a point of *lane* to wait for; return the waiter to await.

        The point is the work queued so far (a fence), or *event* with its *record*.
        *timed*: the wait has a timeout, so the worker's first look must answer it. Not
        a coroutine: a parked wait's frames are its memory, so callers await the waiter
        themselves (``Waiter.wait`` owns the timeout and abandonment), then ``settle``.
        """
        if self.closed or self.worker.death is not None:
            self.check_open()
        waiter = Waiter(current_delivery(), timed=timed)
        if record is None:
            self.worker.submit(Fence(lane, waiter, timed))
        else:
            self.worker.submit(EventWait(lane, event, record, waiter))
        return waiter

    def settle(self, lane: Lane, mark: tuple[int, int] | None = None) -> None:
        """After a wait on *lane* succeeded: raise the stream's oldest unreported
        failure (rule 2); or, for a sync begun at *mark*, remember the stream settled."""
        self.report(lane)
        if mark is not None:
            lane.settle(mark)

    def settled(self, lane: Lane) -> bool:
        """Whether *lane* is known idle with nothing to report, without asking the worker.

        True when a sync of it succeeded and nothing was submitted since: no launch on
        it and no call on the device (a call may queue work on any stream). Then a
        further sync would return at once without raising.
        """
        if lane.shared:  # others may have queued work on it since
            return False
        return lane.settled_at == (lane.submitted, self.calls) and not lane.errors

    def never_recorded(self, lane: Lane, record: EventRecord) -> bool:
        """Whether a wait on an event whose record failed should raise the stream's
        failure (still unreported) rather than its own "never recorded" error."""
        return record.failure is not None and bool(lane.errors)

    async def synchronize(self, timeout: float | None) -> None:
        """Wait for every stream of the device; report the device's oldest failure."""
        self.check_open()
        self._let_go_dropped()
        timed = timeout is not None
        # A copy made in one C call: streams of other threads' loops come and go.
        waits = [(lane, self.wait_for(lane, timed=timed)) for lane in list(self._lanes)]
        on_timeout = self.expiry("aclasync.Device.synchronize", timeout, None)
        deadline = None if timeout is None else anyio.current_time() + timeout
        try:
            for lane, waiter in waits:
                left = None if deadline is None else max(0.0, deadline - anyio.current_time())
                try:
                    await waiter.wait(left, on_timeout=on_timeout)
                except anyio.ClosedResourceError:
                    # A stream force-closed meanwhile: its dropped work is nothing to
                    # wait for, and the forced close is that stream's to report.
                    if self.closed or not (lane.life is Life.FORCED or lane.disowned):
                        raise
        except BaseException:
            for _, waiter in waits:
                waiter.abandoned = True
            raise
        self._prune_closed()
        self.report_device()

    def expiry(
        self, api: str, timeout: float | None, lane: Lane | None, *, event: bool = False
    ) -> Callable[[], BaseException]:
        """What a wait raises when its ``timeout=`` runs out (the one place)."""

        def make() -> BaseException:
            code = (
                ErrorCode.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
                if event
                else ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
            )
            return AclTimeoutError(
                int(code),
                api,
                device=self.device_id,
                stream=None if lane is None else lane.handle,
                detail=f"timeout={timeout}s expired",
            )

        return make

    # -- reporting -------------------------------------------------------------------

    def report(self, lane: Lane) -> None:
        """Raise the stream's oldest unreported failure, if any."""
        if lane.errors:
            raise lane.errors.popleft()[1]

    def report_device(self) -> None:
        """Raise the device's oldest unreported failure (any stream, or orphaned)."""
        oldest: deque[tuple[int, BaseException]] | None = None
        queues = [lane.errors for lane, reported in list(self._lanes.items()) if reported]
        for queue in (*queues, self.worker.orphan_errors):
            if queue and (oldest is None or queue[0][0] < oldest[0][0]):
                oldest = queue
        if oldest is not None:
            raise oldest.popleft()[1]

    def take_failures(self, lane: Lane) -> list[BaseException]:
        """Take every unreported failure of *lane*, oldest first (they are the caller's
        to report)."""
        return self._take_all([lane.errors])

    def _take_all(self, queues: list[deque[tuple[int, BaseException]]]) -> list[BaseException]:
        found = []
        for queue in queues:
            while queue:
                found.append(queue.popleft())
        return [error for _, error in sorted(found, key=lambda item: item[0])]

    # -- creation and release --------------------------------------------------------

    def adopt_stream(self, handle: int) -> Lane:
        """The lane of a stream handle: the device's, if it made or wrapped it and has
        not let go of it, else a new wrapped one, counted among the device's from now on
        (the worker registers it before any later job); never blocks."""
        self.check_open()
        lane = self._by_handle.get(handle)
        if lane is not None and lane in self._lanes and not lane.closed:
            return lane
        self._let_go_dropped()
        lane = self._by_handle[handle] = Lane(handle, borrowed=True)
        self.worker.submit(Run(functools.partial(self.worker.handles.adopt, lane)))
        self._lanes[lane] = True
        return lane

    def _let_go_dropped(self) -> None:
        """Let go of the wrapped streams whose every ``Stream`` was collected unclosed:
        nothing of aclasync's uses them any more (its device syncs and close no longer
        touch them, so their owner may destroy them); their failures go to the device."""
        streams = self.streams
        for handle, lane in list(self._by_handle.items()):
            if lane.borrowed and handle not in streams:
                self._by_handle.pop(handle, None)
                self._lanes.pop(lane, None)
                self.post(functools.partial(self.worker.let_go, lane))

    async def create_stream(self, priority: int, flags: int, *, reported: bool = True) -> Lane:
        """Create a stream (cancellation-safe, see ``create``).

        Not *reported*: ``synchronize`` waits for the stream but leaves its failures
        to its owner (see ``_lanes``).
        """
        make = functools.partial(self.worker.handles.create_stream, priority, flags)
        lane = await self.create(make, self._drop_lane)
        self._lanes[lane] = reported
        if reported:  # (a holder's private stream is its holder's alone)
            self._by_handle[lane.handle] = lane
        return lane

    async def _drop_lane(self, lane: Lane) -> None:
        close = functools.partial(self.worker.close_stream, lane, force=True, reported=False)
        await self.roundtrip(close)

    async def close_stream(
        self, lane: Lane, *, force: bool, propagating: BaseException | None
    ) -> None:
        """Destroy a stream and report what it still holds (rules 5 and 6).

        Without *force*, first wait for its queued work; if that wait is cancelled
        the stream is destroyed on the worker after its work anyway, and its failures
        go to the device (``hand_over``). Quiet when the device is closed or broken:
        the device released it.
        """
        if self.gone():
            await anyio.lowlevel.checkpoint()
            return
        if self._by_handle.get(lane.handle) is lane:  # a wrapper made from now on is new
            self._by_handle.pop(lane.handle, None)
        if not force and isinstance(propagating, KeyboardInterrupt):  # Ctrl-C: no wait
            try:
                await self._look_once([lane])  # but what already ended is told
            finally:
                self._close_when_done(lane, propagating)
            return
        if not force:
            waiter = self.wait_for(lane, timed=False)
            try:
                await waiter.wait()
            except BaseException as exc:
                if self.gone() and isinstance(
                    exc, (anyio.ClosedResourceError, anyio.BrokenResourceError)
                ):
                    return  # the device closed meanwhile and released the stream
                if isinstance(exc, anyio.ClosedResourceError) and lane.life is Life.FORCED:
                    return  # force-closed meanwhile: that close reports what it held
                # Rule 6: an exception in flight (an ``async with`` exit) is not replaced
                # by a cancellation of the wait: its scope cancels again at its next one.
                if propagating is not None and is_cancellation(exc):
                    self._close_when_done(lane, propagating)
                    return
                self._close_when_done(lane, exc)
                raise
        close = functools.partial(self.worker.close_stream, lane, force=force, reported=True)
        cancelled: BaseException | None = None  # asyncio's own or Ctrl-C, raised once closed
        with anyio.CancelScope(shield=True):
            try:
                waiter = self._call(close)
                cancelled = await waiter.answered()
                waiter.answer(cancelled)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                if not self.gone():
                    raise
                if cancelled is not None:
                    raise cancelled from None
                return
        self._lanes.pop(lane, None)
        errors = self._take_all([lane.errors])
        await raise_closing(errors, cancelled, propagating, self.hand_over)

    def _close_when_done(self, lane: Lane, propagating: BaseException) -> None:
        """Give up waiting for a stream's work (its close was cancelled, or Ctrl-C is in
        flight): what it holds now is told by ``hand_over``, what comes later goes to
        the device, and the worker destroys it once its work is done, without being
        held meanwhile (until then the device's synchronize waits for it too)."""
        self.hand_over(self._take_all([lane.errors]), propagating)
        self._prune_closed()
        self._lanes[lane] = False  # its failures go to the device (disowned)
        self.post(functools.partial(self.worker.close_when_done, lane))

    def _prune_closed(self) -> None:
        """Forget streams whose cancelled close has since destroyed them."""
        # A snapshot, and pop: another loop's thread may add or close streams meanwhile.
        for lane in [lane for lane in list(self._lanes) if lane.closed]:
            self._lanes.pop(lane, None)

    async def close_default(
        self, lane: Lane, *, force: bool, propagating: BaseException | None
    ) -> None:
        """Close the default stream's object: wait for its work (unless *force*), then
        report its failures (rules 5 and 6); the stream itself is the device's and stays.
        Cancelled while waiting, its failures stay with the device (its ``synchronize``)."""
        if self.gone():
            await anyio.lowlevel.checkpoint()
            return
        if not force and not isinstance(propagating, KeyboardInterrupt):  # (no wait then)
            try:
                await self.wait_for(lane, timed=False).wait()
            except BaseException as exc:  # (rule 6: never in place of one in flight)
                if propagating is None or not is_cancellation(exc):
                    raise
                return
        await raise_closing(self._take_all([lane.errors]), None, propagating, self.hand_over)

    def hand_over(self, errors: list[BaseException], propagating: BaseException | None) -> None:
        """Report what a close found (rules 5 and 6), on the device's behalf.

        Raised (one as itself, several as an ``ExceptionGroup``) when nothing
        propagates; as notes on an exception that propagates; but for a cancellation,
        which the cancel scope that caught it may swallow with its notes, they go to
        the device: its next ``synchronize`` or its close raises them.
        """
        # A broken device's close still raises what it holds: so it goes there too.
        if errors and is_cancellation(propagating) and not self.closed:
            for error in errors:
                self.worker.orphan(error)
            return
        report(errors, propagating)

    async def record(
        self, lane: Lane, timing: bool, *, report: bool = True
    ) -> tuple[int, EventRecord]:
        """Record an event on *lane*: its handle and record; cancellation-safe.

        Then raises the stream's oldest unreported failure, unless not *report*.
        """
        self._give_back_dropped()
        make = functools.partial(self.worker.record, lane, timing)

        async def give_back(made: tuple[int, EventRecord]) -> None:
            self.forget_event(lane, *made)
            await anyio.lowlevel.checkpoint()

        try:
            handle, record = await self.create(make, give_back)
        except AclError:
            if report and lane.errors:  # a stopped stream: the failure that stopped it
                self.report(lane)
            raise
        if report and lane.errors:  # reported instead of returning the event: give it back
            self.forget_event(lane, handle, record)
            self.report(lane)
        return handle, record

    def record_nowait(self, lane: Lane, timing: bool) -> tuple[int, EventRecord]:
        """Queue the record of an event kept ready: its handle and record; never blocks.

        Raises ``anyio.WouldBlock`` when none is ready (more are being made).
        """
        self.check_open()
        self._give_back_dropped()
        event, refill = self.worker.handles.take_ready(timing)
        if refill:
            self.worker.submit(Run(functools.partial(self.worker.handles.refill, timing)))
        if event is None:
            raise anyio.WouldBlock
        record = EventRecord()
        lane.submit()
        self.worker.submit(Record(lane, event, timing, record))
        return event, record

    def forget_event(self, lane: Lane, handle: int, record: EventRecord) -> None:
        """Give an event back (its pending waits fail); never blocks."""
        self.post(functools.partial(self.worker.forget_event, lane, handle, record))

    def event_dropped(self, lane: Lane, handle: int, record: EventRecord) -> None:
        """An event was collected unclosed: give it back at the next record (from any
        thread; never blocks)."""
        self._dropped_events.append((lane, handle, record))

    def _give_back_dropped(self) -> None:
        dropped, events = self._dropped_events, []
        while dropped:
            try:  # another thread's record may take the last ones meanwhile
                events.append(dropped.popleft())
            except IndexError:
                break
        if events:
            self.forget_events(events)

    def forget_events(self, events: list[tuple[Lane, int, EventRecord]]) -> None:
        """``forget_event`` for several events in one job; never blocks."""
        forget = self.worker.forget_event
        self.post(lambda: [forget(*event) for event in events])

    async def query_event(self, lane: Lane, handle: int, record: EventRecord) -> bool:
        """Whether a recorded event has completed; then report the stream's oldest failure.

        Raises, instead, if the event's record failed (it would read NOT_READY for
        ever): the stream's failure if still unreported, else a fresh ``AclError``.
        """
        query = self.acl.rt.query_event_status

        def ask() -> tuple[int, int]:
            if lane.life is Life.FORCED:  # its work may be dropped: it may read done
                raise anyio.ClosedResourceError(FORCED_EVENT)
            if record.failure is not None:
                raise never_recorded(record.failure, self.device_id, lane.handle)
            status, ret = query(handle)
            return int(status), int(ret)

        status = 0
        try:
            status, ret = await self.roundtrip(ask)
        except AclasyncError:
            if not self.never_recorded(lane, record):
                raise
        else:
            raise_for_status(ret, "acl.rt.query_event_status", device=self.device_id)
        self.report(lane)
        return status == EventRecordedStatus.COMPLETE

    async def alloc(self, nbytes: int, *, host: bool) -> int:
        """Allocate memory (cancellation-safe); the worker owns it until ``free``."""
        alloc = functools.partial(self.worker.handles.alloc, nbytes, host=host)
        return await self.create(alloc, self.free)

    async def free(self, ptr: int) -> None:
        """Free memory from ``alloc``; shielded. Quiet once the device released it."""
        if self.gone():
            await anyio.lowlevel.checkpoint()
            return
        with anyio.CancelScope(shield=True):
            await self.roundtrip(functools.partial(self.worker.handles.free_or_raise, ptr))

    # -- the device's life -----------------------------------------------------------

    async def start(self) -> None:
        """Start the worker and set the device; cancellation-safe (closes again)."""
        waiter = current_delivery().new_waiter()
        try:
            self.worker.start(waiter)  # (trio may raise Ctrl-C in a thread's start, too)
            cancelled = await waiter.answered()  # (asyncio's own passes a shield)
        except KeyboardInterrupt:  # Ctrl-C twice: the worker closes the device by itself
            self.closed = True
            self._closing.take()
            self._stop_unwaited()
            raise
        try:
            waiter.answer(cancelled)
        except BaseException:
            self.closed = True
            self._closing.take()  # (nobody else can have it: the device never opened)
            self._stop_quietly()
            self._closing.end(keep=True)
            raise
        try:
            await raise_if_cancelled(cancelled)
        except BaseException as exc:
            await self.aclose(exc)
            raise

    def _stop_quietly(self) -> None:
        """After a failed ``set_device``: end the thread (nothing to release)."""
        if self.worker.death is None:
            self.worker.submit(Stop(current_delivery().new_waiter()))
        self.worker.thread.join()

    async def aclose(self, propagating: BaseException | None = None) -> None:
        """Close the device (rules 5 and 6); a concurrent second close waits for the
        device's release, and reports what the first could not (its loop was closed)."""
        if (first := self._closing.take()) is not None:  # another close: wait for it
            await first.wait()
            stop = self._stop[0] if self._stop else None
            if stop is not None and (stop.abandoned or stop.delivery.gone()):  # the first
                try:  # will never resume, or stopped waiting (Ctrl-C twice)
                    self._stop.remove(stop)  # one later closer reports what it left
                except ValueError:
                    return
                await _join(self.worker.thread)
                left: list[BaseException] = []  # the releases' failures, or its death
                if isinstance(stop.result, outcome.Error):
                    left.append(stop.result.error)
                elif isinstance(stop.result, outcome.Value):
                    left.extend(stop.result.value)
                await raise_closing(self._left(left), None, propagating)
            return
        self.closed = True
        if isinstance(propagating, KeyboardInterrupt) and self.worker.death is None:
            told: list[BaseException] = []  # Ctrl-C in flight: no wait (docs/errors.md)
            try:  # but the failures of work that already ended are told now
                await self._look_once(list(self._lanes))
                told = self._unreported()
            finally:
                self._stop_unwaited()
            report_closing(told, propagating)
            return
        errors: list[BaseException] = []
        cancelled: BaseException | None = None  # asyncio's own or Ctrl-C, raised once closed
        released = True  # (False while a stop's answer is awaited: ``_stopped`` ends it)
        try:
            with anyio.CancelScope(shield=True):
                worker = self.worker
                if worker.death is None:
                    waiter = current_delivery().new_waiter()
                    self._stop.append(waiter)
                    try:
                        worker.submit(Stop(waiter, self._stopped))
                        released = False
                        cancelled = await waiter.answered()
                        released = True
                        errors.extend(waiter.answer())
                    except anyio.BrokenResourceError as exc:  # it died tearing down
                        errors.append(exc)
                    self._stop.clear()
                    try:
                        await _join(worker.thread)
                    except anyio.get_cancelled_exc_class() as exc:  # (it ends by itself)
                        cancelled = cancelled or exc
                # After a death the thread releases what it can (reset_device waits
                # for work still running) and ends by itself: nobody waits for it.
                errors = self._left(errors)
        finally:
            if released:  # else a later close waits for the release, and reports it
                self._closing.end(keep=True)
        await raise_closing(errors, cancelled, propagating)

    async def _look_once(self, lanes: list[Lane]) -> None:
        """One look at each of *lanes* (a ``timeout=0`` sync): work that has ended has
        told its failures (into its lane) by then; work still going is not waited for."""
        for lane in lanes:
            if not lane.closed:
                with contextlib.suppress(Exception):  # not done, or gone: nothing to tell
                    waiter = Waiter(current_delivery(), timed=True)  # (the device may be
                    self.worker.submit(Fence(lane, waiter, True))  # marked closed already)
                    await waiter.wait(0)

    def _stop_unwaited(self) -> None:
        """Hand the worker its stop without waiting for it: it releases the device once
        the work queued there ends, and a later ``aclose`` waits for that and reports
        what it found (the stop's waiter is marked abandoned for it)."""
        waiter = current_delivery().new_waiter()
        waiter.abandoned = True
        self._stop.append(waiter)
        try:
            self.worker.submit(Stop(waiter, self._stopped))
        except anyio.BrokenResourceError:  # it died meanwhile: nothing ends the turn
            self._stop.clear()
            self._closing.end(keep=True)

    def _stopped(self) -> None:
        """(worker) The device is released: closers waiting for the first go on."""
        self._closing.end(keep=True)

    def _left(self, errors: list[BaseException]) -> list[BaseException]:
        """The failures a close reports: the streams' and the device's, then *errors*
        (the releases'), then the worker's death if nobody was told of it."""
        worker = self.worker
        errors[:0] = self._unreported()
        self._lanes.clear()
        if worker.death is not None and not worker.death_reported:
            errors.append(worker.broken_error())
        return errors

    def _unreported(self) -> list[BaseException]:
        """Take the failures nobody was told of: the streams' and the device's (in the
        order the worker found them), then those its holders (models) keep."""
        queues = [lane.errors for lane in list(self._lanes)]
        held = [error for holder in list(self.holders) for error in holder.take_failures()]
        return [*self._take_all([*queues, self.worker.orphan_errors]), *held]


async def _join(thread: threading.Thread) -> None:
    """Join a worker that has answered its stop without blocking the event loop."""
    thread.join(0.005)  # its last act was that answer: it ends at once
    while thread.is_alive():  # noqa: ASYNC110 - a thread's end is not awaitable
        await anyio.sleep(0.001)
