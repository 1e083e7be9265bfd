"""The device worker's watching of finished work.

Fences and event watches, the loans to the device's waiting thread (and the FAST_SYNC
waits the worker takes itself), the worker's own polling between rounds, and resolved
waiters on their way to their event loops. ``Watching`` is a part of ``DeviceWorker``
(``_worker``), kept in its own module for size: the state it uses is the worker's,
declared below. Its methods run on the worker thread, or on the waiting thread with
the worker's ``lock`` held, as each one says.
"""

from __future__ import annotations

import _thread
import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import anyio
import outcome

from ._errors import AclasyncError, AclError
from ._handles import Handles
from ._lanes import EventRecord, Lane, Watch
from ._loop import DONE, EXPIRED, Delivery, Waiter
from ._options import WorkerOptions
from ._pyacl.codes import ErrorCode
from ._pyacl.constants import EventRecordedStatus, StreamStatus
from ._waiting_thread import Loan, Ready, WaitingThread, is_timeout

if TYPE_CHECKING:
    from ._pyacl.backend import AclRt

__all__ = ["STREAM_ABORT", "Watching", "closed_outcome", "done_outcome", "post"]

_EVENT_COMPLETE = int(EventRecordedStatus.COMPLETE)  # query_event_status
_STREAM_COMPLETE = int(StreamStatus.COMPLETE)  # stream_query
STREAM_ABORT = int(ErrorCode.ACL_ERROR_RT_STREAM_ABORT)


def done_outcome() -> outcome.Value[None]:
    """The result of every successful wait (one shared object)."""
    return DONE


def closed_outcome(message: str) -> Callable[[], outcome.Error]:
    """Makes the result of a wait whose point went away: ``ClosedResourceError``."""
    return lambda: outcome.Error(anyio.ClosedResourceError(message))


class Watching:
    """The worker's half that watches for finished work (see the module doc)."""

    # The worker's state, set up by ``DeviceWorker.__init__``.
    _rt: AclRt
    device_id: int
    options: WorkerOptions
    handles: Handles
    lock: threading.Lock
    _loan_returned: threading.Condition
    _inbox: deque[tuple[Any, ...]]
    _wake: _thread.LockType
    _idle: bool
    _look: bool
    _last_jobs: float
    _calls: int
    _context: int | None
    _waiting: dict[int, Lane]
    _ready: dict[Delivery, list[Waiter]]
    _asked: set[Lane]
    _waiting_thread: WaitingThread | None

    if TYPE_CHECKING:  # the worker's own, used here

        def _rouse(self) -> None: ...
        def _fail(self, lane: Lane, error: BaseException) -> None: ...
        def _error(self, code: int, api: str, lane: Lane | None = None) -> AclError: ...
        def _error_outcome(self, code: int, api: str, lane: Lane) -> outcome.Error: ...
        def record_failed(self, lane: Lane, record: EventRecord) -> AclasyncError: ...

    def _fence(self, lane: Lane, waiter: Waiter, timed: bool) -> None:
        waiter.seen = True
        if lane.closed:  # closing concurrently: nothing more will run on it
            self._resolve(waiter, done_outcome())
            return
        watches = lane.watches
        if watches and watches[-1].fence and watches[-1].launches == lane.launches:
            self._park(lane, watches[-1], waiter)  # nothing queued since: share the fence
            return
        if lane.idle_at == (lane.launches, self._calls):
            self._resolve(waiter, done_outcome())  # idle since the last look: nothing to ask
            return
        # A FAST_SYNC stream the worker may wait for itself is not asked first: its
        # sync answers an idle stream at once too, and the query would only put one
        # more runtime call between the launch and the wait. A wait with a timeout
        # still asks: once the worker has seen it, its timeout abandons it, so this
        # look must answer an idle stream (a timeout=0 poll succeeds on one). If the
        # wait goes elsewhere, _sweep asks.
        ask = timed or waiter.expired or not self._may_wait_inline(lane)
        if ask:
            status, ret = self._rt.stream_query(lane.handle)
            if ret:
                failed = self._error(ret, "acl.rt.stream_query", lane)
                self._resolve(waiter, outcome.Error(failed))
                return
            if status == _STREAM_COMPLETE:
                if lane.collected != lane.launches:  # else nothing ran since the last look
                    self._collect(lane)
                lane.idle_at = (lane.launches, self._calls)
                self._resolve(waiter, done_outcome())
                return
            if waiter.expired:
                self._resolve(waiter, EXPIRED)
                return
        fence = Watch(0, lane.next_seq(), fence=True, launches=lane.launches)
        if self._context is None:  # no waiting thread: the worker watches an event
            error = self._mark_fence(lane, fence)
            if error is not None:
                self._resolve(waiter, outcome.Error(error))
                return
        else:
            lane.open_fence = fence
        watches.append(fence)
        self._park(lane, fence, waiter)
        if ask:
            self._asked.add(lane)

    def _answer_idle(self, lane: Lane, waiter: Waiter) -> None:
        """A sync of a stream known idle, as the only job: answer it at once.

        The bare shape of a round trip: no lock, no batch. (``idle_at`` still
        matching means the stream went idle with its failures collected, and nothing
        was queued on it since; the waiting thread never touches ``idle_at``.)
        """
        waiter.seen = True
        waiter.result = DONE
        post_to(waiter.delivery, (waiter,))

    def _mark_fence(self, lane: Lane, fence: Watch) -> AclError | None:
        """Record the fence's event at the stream's current tail; the error if that fails."""
        event, ret = self.handles.fence_event()
        if not ret:
            ret = self._rt.record_event(event, lane.handle)
            if ret:
                self.handles.fence_pool.append(event)
        if ret:
            return self._error(ret, "acl.rt.record_event", lane)
        fence.event = event
        return None

    def _close_fence(self, lane: Lane) -> None:
        """Give the stream's open fence its event before anything is queued behind it.

        If the record fails, the fence stays eventless and is reached when the stream
        next goes idle (later, never early); the failure is the stream's to report.
        """
        fence, lane.open_fence = lane.open_fence, None
        assert fence is not None
        with self.lock:
            index = lane.find(fence.seq)
            watches = lane.watches
            if index < len(watches) and watches[index] is fence:
                error = self._mark_fence(lane, fence)
                if error is not None:
                    self._fail(lane, error)

    def _watch(self, lane: Lane, event: int, record: EventRecord, waiter: Waiter) -> None:
        waiter.seen = True
        if record.failure is not None:  # never recorded: nothing will ever complete
            self._resolve(waiter, outcome.Error(self.record_failed(lane, record)))
            return
        seq = record.seq
        watches = lane.watches
        index = lane.find(seq)
        if index < len(watches) and watches[index].seq == seq:
            self._park(lane, watches[index], waiter)
            return
        if lane.forced:
            dropped = anyio.ClosedResourceError(
                "the event's stream was closed with force=True: its work may have been dropped"
            )
            self._resolve(waiter, outcome.Error(dropped))
            return
        status, ret = self._rt.query_event_status(event)
        if ret:
            error = self._error(ret, "acl.rt.query_event_status", lane)
            self._resolve(waiter, outcome.Error(error))
        elif status == _EVENT_COMPLETE:
            self._resolve(waiter, done_outcome())
        elif waiter.expired:
            self._resolve(waiter, EXPIRED)
        else:
            watch = Watch(event, seq, fence=False, launches=-1)
            watches.insert(index, watch)
            self._park(lane, watch, waiter)

    def _park(self, lane: Lane, watch: Watch, waiter: Waiter) -> None:
        if waiter.expired:  # its timeout ran out before this first look
            self._resolve(waiter, EXPIRED)
            return
        watch.add(waiter)
        self._waiting[lane.handle] = lane

    def _sweep(self) -> None:
        """Resolve the watches whose events have completed, stream by stream.

        A stream lent to the waiting thread is left to it, and one whose fence was
        parked this round after ``stream_query`` said it is busy is not asked again.
        """
        asked = self._asked
        for handle, lane in list(self._waiting.items()):
            if lane.lent or lane in asked:
                continue
            self._sweep_lane(lane)
            if not lane.watches:
                del self._waiting[handle]

    def _lend(self) -> None:
        """Make sure the waiting thread looks for something to wait for."""
        if self._context is None:
            return
        if self._waiting_thread is None:
            self._waiting_thread = WaitingThread(
                self._rt,
                self.device_id,
                self._context,
                self.lock,
                self._pick_loan,
                self._loan_done,
                self._take_ready,
                post,
                self._wake_worker,
            )
        self._waiting_thread.poke()

    def _pick_loan(self) -> Loan | None:
        """Lend the oldest stream's head watch (None when nothing can be lent).

        An open fence (the stream's tail) is waited on with ``synchronize_stream``, so
        that the runtime waits in the stream's own mode, as a program blocking in that
        call would; everything else by its event.
        """
        for lane in self._waiting.values():
            if lane.unlendable or lane.held or not lane.watches:
                continue
            head = lane.watches[0]
            by_stream = head.fence and not head.event
            lane.lent = True
            lane.lent_stream = by_stream
            return Loan(lane, head, by_stream=by_stream)
        return None

    def _inline_loan(self) -> Loan | None:
        """The sync the worker waits for itself, if any (see ``_wait_inline``).

        Only the tail of a FAST_SYNC stream, when it is all the device waits for and
        no job is queued: the worker is running right now, so it starts polling at
        once, as a program that launches and then syncs on its own thread does,
        where waking the waiting thread would put a thread wake-up (tens of us)
        between a short kernel's end and its waiter.
        """
        if self._inbox or len(self._waiting) != 1:
            return None
        lane = next(iter(self._waiting.values()))
        if not self._may_wait_inline(lane) or lane.lent:
            return None
        head = lane.watches[0]
        if not head.fence or head.event:
            return None
        lane.lent = lane.lent_stream = True
        return Loan(lane, head, by_stream=True)

    def _may_wait_inline(self, lane: Lane) -> bool:
        """Whether the worker may wait for *lane*'s tail itself (see ``_inline_loan``)."""
        return (
            lane.fast_sync
            and self.options.inline_fast_sync
            and self._context is not None
            and not lane.unlendable
            and not lane.held
        )

    def _wait_inline(self, loan: Loan) -> None:
        """Wait in the stream's sync (GIL released), ``wait_slice_ms`` at a time.

        The wait goes on slice after slice until the stream is idle or a job has
        been submitted: that job waits at most for the slice to end; the next round
        runs it, and lends the wait to the waiting thread if it is still pending.
        """
        sync = self._rt.synchronize_stream_with_timeout
        handle, slice_ms, inbox = loan.lane.handle, self.options.wait_slice_ms, self._inbox
        while is_timeout(ret := sync(handle, slice_ms)) and not inbox:
            pass
        with self.lock:
            self._loan_done(loan, ret)
            ready = self._take_ready()
        # Posted at once rather than at the end of the round: the round's bookkeeping on
        # a just-woken CPU would come first (return-to-post 11 -> 7 us measured in place;
        # the loop takes longer to wake than the rest of the round takes to run).
        post(ready)

    def _loan_done(self, loan: Loan, ret: int) -> None:
        """The waiting thread's wait returned *ret*: resolve what is finished."""
        lane = loan.lane
        lane.lent = False
        if loan.by_stream:
            lane.lent_stream = False
            if lane.held:  # only _await_loan waits for the condition
                self._loan_returned.notify_all()
        if lane.closed or is_timeout(ret):
            return
        watches = lane.watches
        head = watches[0] if watches else None
        if loan.by_stream:
            if ret:
                self._take_sync_status(lane, ret)
            lane.collected = loan.watch.launches
            if head is loan.watch and not head.event:
                # The stream sync came back: work up to this open fence is done, and
                # the sync returned the stream's failures. No need to ask again.
                del watches[0]
                self._resolve_all(head, done_outcome)
                if not watches:  # the common case, kept short: the CPU is cold here
                    self._waiting.pop(lane.handle, None)
                    return
        self._sweep_lane(lane)
        if not watches:
            self._waiting.pop(lane.handle, None)
        elif ret and watches[0] is head:
            # The wait failed yet the point is not reached (a stopped stream, a bad
            # event): polling by the worker takes over rather than a wait that returns
            # at once, again and again.
            lane.unlendable = True
            self._wake_worker()

    def _wake_worker(self) -> None:
        """Make the worker go round once more (from the waiting thread)."""
        self._look = True
        if self._idle:
            self._rouse()

    def _await_loan(self, lane: Lane) -> None:
        """Wait (lock released meanwhile) until a stream sync lent on *lane* returned.

        The stream is not lent again meanwhile: a sync that times out would otherwise
        be lent straight back (a stream closed with force while a kernel still runs).
        """
        if lane.lent_stream:
            lane.held = True
            self._loan_returned.wait_for(lambda: not lane.lent_stream)
            lane.held = False

    def _stop_waiting_thread(self) -> None:
        waiting_thread, self._waiting_thread = self._waiting_thread, None
        if waiting_thread is not None:
            waiting_thread.stop()

    def _sweep_lane(self, lane: Lane) -> None:
        query = self._rt.query_event_status
        watches = lane.watches
        while watches:
            head = watches[0]
            if head.event:
                status, ret = query(head.event)
                reached = status == _EVENT_COMPLETE
            else:  # an open fence: reached once the stream is idle
                status, ret = self._rt.stream_query(lane.handle)
                reached = status == _STREAM_COMPLETE
            if not ret and not reached:
                return
            del watches[0]
            if head.fence and head.event:
                self.handles.fence_pool.append(head.event)
            if ret:
                failed = functools.partial(
                    self._error_outcome, ret, "acl.rt.query_event_status", lane
                )
                self._resolve_all(head, failed)
                continue
            if head.fence and head.launches > lane.collected:
                # Kernel failures are reported by synchronize_stream only; collect them
                # when the stream is idle (the call then returns at once). Work queued
                # after the fence leaves them for a later look.
                status, ret = self._rt.stream_query(lane.handle)
                if not ret and status == _STREAM_COMPLETE:
                    self._collect(lane)
            self._resolve_all(head, done_outcome)

    def _idle_wait(self, ready: Ready) -> None:
        """Post *ready*, then sleep until a job arrives or it is time to look again.

        With nothing to watch (or only the stream lent to the waiting thread), sleep
        until a job arrives. While another FAST_SYNC stream has waiters, poll every
        ``fast_sync_poll_us``. While only default-mode streams have waiters and jobs
        have been quiet for ``busy_window_ms``, block on the device in a
        ``wait_slice_ms`` slice (GIL released; a job arriving meanwhile waits for the
        slice to end). During bursts of jobs, poll every ``busy_poll_us`` instead, so
        that jobs are picked up at once; that interval is close to the runtime's own
        wake-up latency for passive waits, so default streams keep their low-CPU,
        higher-latency character and FAST_SYNC streams their advantage.
        """
        options = self.options
        timeout: float | None = None
        watched: list[Lane] = []
        head: Watch | None = None
        if self._waiting:  # (a stale answer only costs a round)
            with self.lock:
                watched = [lane for lane in self._waiting.values() if not lane.lent]
                head = watched[0].watches[0] if watched else None
        if watched:
            if any(lane.fast_sync for lane in watched):
                timeout = options.fast_sync_poll_us / 1e6
            elif time.monotonic() - self._last_jobs < options.busy_window_ms / 1e3:
                timeout = options.busy_poll_us / 1e6
            else:
                assert head is not None  # a waiting stream has a watch
                if watched[0].open_fence is head:
                    self._close_fence(watched[0])  # the slice below needs its event
                if head.event:
                    post(ready)
                    self._rt.synchronize_event_with_timeout(head.event, options.wait_slice_ms)
                    return
                timeout = options.busy_poll_us / 1e6
        self._idle = True
        if self._inbox or self._look:  # re-checked after _idle is set: no lost wake-up
            self._idle = False
            self._look = False
            post(ready)
            return
        post(ready)
        if timeout is None:
            self._wake.acquire()
        else:
            self._wake.acquire(timeout=timeout)
        self._idle = False

    def _collect(self, lane: Lane) -> None:
        """Take the stream's kernel failure, if any (blocks until the stream is idle).

        Call with the lock held: a stream sync lent to the waiting thread is waited
        for first, since the failure goes to whichever sync comes first.
        """
        self._await_loan(lane)
        if not lane.closed:
            launches = lane.launches
            self._take_sync_status(lane, self._rt.synchronize_stream(lane.handle))
            lane.collected = launches

    def _take_sync_status(self, lane: Lane, ret: int) -> None:
        if ret == STREAM_ABORT:
            # A stopped stream: the failure that stopped it was reported by the first
            # sync after it; later syncs only repeat that it stopped.
            lane.aborted = True
        elif ret:
            self._fail(lane, self._error(ret, "acl.rt.synchronize_stream", lane))

    def _fail_watches(self, lane: Lane, message: str) -> None:
        lane.open_fence = None
        for watch in lane.watches:
            if watch.fence and watch.event:
                self.handles.fence_pool.append(watch.event)
            self._resolve_all(watch, closed_outcome(message))
        lane.watches.clear()

    def _resolve(self, waiter: Waiter, result: outcome.Outcome[Any]) -> None:
        waiter.result = result
        self._ready.setdefault(waiter.delivery, []).append(waiter)

    def _resolve_all(self, watch: Watch, make: Callable[[], outcome.Outcome[Any]]) -> None:
        ready = self._ready
        for waiter in watch.waiters:  # _resolve inlined: this runs on a just-woken CPU
            if not waiter.abandoned:
                waiter.result = make()
                ready.setdefault(waiter.delivery, []).append(waiter)

    def _flush(self) -> None:
        if self._ready:
            post(self._take_ready())

    def _take_ready(self) -> dict[Delivery, list[Waiter]]:
        """The waiters resolved so far, by delivery (call with the lock held)."""
        ready, self._ready = self._ready, {}
        return ready


def post(ready: dict[Delivery, list[Waiter]]) -> None:
    """Hand resolved waiters to their event loops; callable without the lock."""
    for delivery, waiters in ready.items():
        post_to(delivery, waiters)


def post_to(delivery: Delivery, waiters: Iterable[Waiter]) -> None:
    """Hand waiters to one event loop; a closed loop is skipped (nobody is left to
    resume), so that other loops' waiters are still served."""
    try:  # noqa: SIM105 - contextlib.suppress costs more on this hot path
        delivery.post(waiters)
    except RuntimeError:
        pass
