"""Watching for finished work, on behalf of one device worker.

The ``Watcher`` decides who waits for the points waiters wait for (its ``Points``): the
waiting thread it holds, the worker itself (a lone FAST_SYNC sync), or the worker's
polling between rounds. It registers fences, lends points and takes what their waits
returned, and collects the kernel failures pyACL reports through
``synchronize_stream`` only.

Its methods run on the worker thread, but for ``pick`` and ``returned``, which the
waiting thread calls. ``lock`` guards what both threads touch: the ``Points`` (the
streams waited for, each lane's ``watches``, the resolved waiters) and each lane's
``loan``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import outcome

from ._lanes import EventRecord, Lane, Life, Loan, Watch
from ._loop import DONE, EXPIRED, Ready, Waiter, post, post_to
from ._options import WorkerOptions
from ._points import STREAM_COMPLETE, Points
from ._pyacl.codes import ErrorCode, is_timeout
from ._waiting_thread import Lent, WaitingThread

if TYPE_CHECKING:
    from ._handles import Handles
    from ._pyacl.backend import AclRt

__all__ = ["STREAM_ABORT", "Watcher"]

STREAM_ABORT = int(ErrorCode.ACL_ERROR_RT_STREAM_ABORT)
_LENT = (Loan.EVENT, Loan.STREAM, Loan.HELD)
#: Slices the worker waits for a default-mode stream itself before it lends the wait.
DEFAULT_SLICES = 2
#: The shortest sleep between two polls of streams whose work is due.
_MIN_POLL_S = 20e-6


class Watcher:
    """Who waits for the points of one device's waiters. *fail* gives a stream a
    failure (the worker numbers it); *look_again* makes the worker go round again."""

    def __init__(
        self,
        rt: AclRt,
        device_id: int,
        handles: Handles,
        options: WorkerOptions,
        fail: Callable[[Lane, BaseException], None],
        look_again: Callable[[], None],
    ) -> None:
        self._rt = rt
        self._device_id = device_id
        self._handles = handles
        self._options = options
        self._fail = fail
        self._look_again = look_again
        self.lock = threading.Lock()
        self._returned = threading.Condition(self.lock)  # a held stream loan came back
        self._points = Points(rt, device_id, handles, self._collect)
        self._asked: set[Lane] = set()  # found busy by a fence this round: not asked again
        self._context = 0
        self._thread: WaitingThread | None = None
        self._thread_busy = False  # the waiting thread holds a loan
        self._offered: Lent | None = None  # chosen for the waiting thread, not yet taken
        self._poke_due = False  # lent something: wake the thread before the worker blocks
        self._slice_s = options.wait_slice_ms / 1e3
        self._inline_s = DEFAULT_SLICES * self._slice_s

    def start(self, context: int) -> None:
        """The device's context is set: lend waits from now on."""
        self._context = context

    # -- registering waits --------------------------------------------------------------

    def idle_answer(self, lane: Lane, waiter: Waiter, calls: int) -> bool:
        """Answer a sync of a stream known idle at once, the bare shape of a round trip
        (no lock, no batch: the waiting thread never touches ``idle_at``)."""
        if lane.idle_at != (lane.launches, calls) or self._points.out:
            return False
        waiter.seen = True
        waiter.result = DONE
        post_to(waiter.delivery, (waiter,))
        return True

    def wait_here(
        self, lane: Lane, waiter: Waiter, calls: int, jobs_came: Callable[[], bool]
    ) -> bool:
        """Answer an untimed sync of *lane* by waiting for the stream right here, as a
        thread that launches and then syncs does, when it is all the device waits for
        and the worker may wait for it itself (``_may_wait_inline``). Waiters resolved
        so far are posted first. False when this does not apply, or when the wait ran
        out of slices (``wait_tail``): the caller then registers the fence as usual."""
        points = self._points
        if (
            points.waiting
            or lane.watches
            or lane.loan is not Loan.FREE
            or lane.closed
            or not self._may_wait_inline(lane)
        ):
            return False
        if points.out:
            self.flush()
        waiter.seen = True
        launches = lane.launches  # the worker is the one that counts: it waits here
        ret = self.wait_tail(lane, jobs_came)
        if is_timeout(ret):
            return False
        with self.lock:
            if ret:
                self._take_sync_status(lane, ret)
            else:
                lane.idle_at = (launches, calls)
            lane.collected = launches
            points.out.put(waiter, DONE)
        return True

    def wait_tail(self, lane: Lane, jobs_came: Callable[[], bool]) -> int:
        """Wait in the stream's sync (GIL released) until it returns: the sync's status,
        or a timeout status when it ran out of slices. A FAST_SYNC stream's wait goes on
        in ``wait_slice_ms`` slices until ``jobs_came()``; a default stream's, for
        ``DEFAULT_SLICES`` slices at most (each slice's wake-up costs CPU a passive wait
        does not), after which its waits go to the waiting thread until one is short."""
        self.wake_waiting_thread()
        sync = self._rt.synchronize_stream_with_timeout
        handle, slice_ms = lane.handle, self._options.wait_slice_ms
        if lane.fast_sync:
            while is_timeout(ret := sync(handle, slice_ms)) and not jobs_came():
                pass
            return ret
        for _ in range(DEFAULT_SLICES):
            if not is_timeout(ret := sync(handle, slice_ms)) or jobs_came():
                return ret
        lane.quick = False
        return ret

    def fence(self, lane: Lane, waiter: Waiter, timed: bool, calls: int) -> None:
        """Answer *waiter* once the work queued on *lane* so far is done (*timed*: the
        wait has a timeout, so this first look must answer an idle stream)."""
        with self.lock:
            waiter.seen = True
            watches, points = lane.watches, self._points
            if lane.closed:  # closing concurrently: nothing more will run on it
                points.out.put(waiter, DONE)
            elif watches and watches[-1].fence and watches[-1].launches == lane.launches:
                points.park(lane, watches[-1], waiter)  # nothing queued since: share it
            elif lane.idle_at == (lane.launches, calls):
                points.out.put(waiter, DONE)  # idle since the last look: nothing to ask
            else:
                self._fence(lane, waiter, timed or waiter.expired, calls)
                if (
                    len(points.waiting) == 1
                    and lane.loan is Loan.FREE
                    and lane.watches
                    and not self._may_wait_inline(lane)
                ):
                    self._lend()  # it alone is waited for, and the worker may not: now

    def _fence(self, lane: Lane, waiter: Waiter, timed: bool, calls: int) -> None:
        # Only a timed wait's first look must answer an idle stream: an untimed one is
        # not asked here, since a sync answers an idle stream at once too and a query
        # only puts one more runtime call between the launch and the wait. The round
        # lends it or waits for it itself; if neither, a later sweep asks.
        if timed:
            status, ret = self._rt.stream_query(lane.handle)
            if ret:
                error = self._handles.error(ret, "acl.rt.stream_query", lane)
                self._points.out.put(waiter, outcome.Error(error))
                return
            if status == STREAM_COMPLETE:
                if lane.collected != lane.launches:  # else nothing ran since the last look
                    self._collect(lane)
                lane.idle_at = (lane.launches, calls)
                self._points.out.put(waiter, DONE)
                return
            if waiter.expired:  # its timeout ran out before this first look
                self._points.out.put(waiter, EXPIRED)
                return
        self._asked.add(lane)  # looked at, or too fresh to: not swept this round
        fence = lane.open_fence = Watch(0, lane.next_seq(), fence=True, launches=lane.launches)
        fence.since = time.monotonic()
        lane.watches.append(fence)
        self._points.park(lane, fence, waiter)

    def watch(self, lane: Lane, event: int, record: EventRecord, waiter: Waiter) -> None:
        """Answer *waiter* once *event* (its *record* on *lane*) completes."""
        with self.lock:
            self._points.watch(lane, event, record, waiter)

    def close_fence(self, lane: Lane) -> None:
        """Give the stream's open fence its event before anything is queued behind it.
        If the record fails, the fence is reached when the stream next goes idle (later,
        never early), and the failure is the stream's."""
        fence, lane.open_fence = lane.open_fence, None
        assert fence is not None
        with self.lock:
            index = lane.find(fence.seq)
            if index < len(lane.watches) and lane.watches[index] is fence:
                event, ret = self._handles.fence_event()
                if not ret:
                    ret = self._rt.record_event(event, lane.handle)
                    if ret:
                        self._handles.fence_pool.append(event)
                if ret:
                    self._fail(lane, self._handles.error(ret, "acl.rt.record_event", lane))
                else:
                    fence.event = event

    # -- the round ----------------------------------------------------------------------

    def round(self, may_wait: Callable[[], bool], busy: bool) -> tuple[Lent | None, Ready]:
        """Sweep and lend what is waited for: the wait the worker takes itself, if any
        (only while ``may_wait()``: no job queued, not stopping), and what is resolved.
        While *busy* (jobs keep coming) and several streams are waited for, none is
        lent: the worker, awake for the jobs anyway, polls them all (``idle_plan``)."""
        inline = None
        with self.lock:
            if self._points.waiting:
                # A lone FAST_SYNC sync first: its own wait answers it, so that nothing
                # stands between the launch and the wait (a query and a sweep measured
                # 20 us here). Else sweep and try again.
                if may_wait():
                    inline = self._inline_loan()
                if inline is None:
                    for lane in list(self._points.waiting):
                        if lane.loan not in _LENT and lane not in self._asked:
                            self._points.sweep_lane(lane)
                            done = self._points.drop_if_done(lane)
                            if done and lane.handle < 0 and lane.loan is Loan.POLLED:
                                lane.move(Loan.FREE)  # a wrapped event, reached: lend again
                    if may_wait():
                        inline = self._inline_loan()
                if inline is None and (not busy or len(self._points.waiting) == 1):
                    self._lend()
            self._asked.clear()
            return inline, self._points.out.take()

    def _inline_loan(self) -> Lent | None:
        """The tail of a stream, when it is all the device waits for (FAST_SYNC, or
        default with short waits): the worker, running right now, waits for it itself,
        as a program that launches and syncs on one thread does, where waking the
        waiting thread would put a thread wake-up between a short kernel's end and its
        waiter."""
        waiting = self._points.waiting
        if len(waiting) != 1:
            return None
        lane = next(iter(waiting))
        if not self._may_wait_inline(lane) or lane.loan is not Loan.FREE or not lane.watches:
            return None
        head = lane.watches[0]
        if not head.fence or head.event:
            return None
        lane.move(Loan.STREAM)
        return Lent(lane, head, by_stream=True)

    def _may_wait_inline(self, lane: Lane) -> bool:
        options = self._options
        if lane.fast_sync:
            inline = options.inline_fast_sync
        else:  # a default stream: while its waits are short (see ``wait_inline``)
            inline = options.inline_default_sync and lane.quick
        return inline and lane.loan not in (Loan.HELD, Loan.BACK, Loan.POLLED)

    def wait_inline(self, lent: Lent, interrupted: Callable[[], bool]) -> None:
        """Wait for a point the round lent to the worker itself (``wait_tail``), then
        resolve what it reached. If the wait ran out of slices, or ``interrupted()``
        (a job came), the next round lends it if it is still pending."""
        ret = self.wait_tail(lent.lane, interrupted)
        with self.lock:
            self.returned(lent, ret)
            ready = self._points.out.take()
        # Posted at once rather than at the end of the round: the round's bookkeeping
        # on a just-woken CPU would come first (return to post 11 -> 7 us measured).
        post(ready)

    def watching(self) -> bool:
        """Whether any point waited for is the worker's to look at (none is lent). A
        hint read without the lock (a stale answer costs a round or a look)."""
        return bool(self._watched())

    def _watched(self) -> list[Lane]:
        """The streams waited for that no loan is out on: the worker's to look at."""
        return [lane for lane in list(self._points.waiting) if lane.loan not in _LENT]

    def take_ready(self) -> Ready:
        """The waiters resolved so far, to post."""
        with self.lock:
            return self._points.out.take()

    def idle_plan(self, busy: bool) -> tuple[float | None, int]:
        """How the idle worker waits for the streams it watches itself: ``(timeout, 0)``,
        sleep at most *timeout* s (None: until a job comes), or ``(None, event)``, block
        a ``wait_slice_ms`` slice on *event*. It polls every ``fast_sync_poll_us`` for a
        FAST_SYNC stream, every ``busy_poll_us`` while jobs come in (*busy*: close to a
        passive wait's own wake-up, and jobs are taken at once), else blocks in a slice.
        """
        if not self._points.waiting:  # (a stale answer only costs a round)
            return None, 0
        with self.lock:
            watched = self._watched()
            head = watched[0].watches[0] if watched and watched[0].watches else None
        if head is None:
            return None, 0
        options = self._options
        if any(lane.fast_sync for lane in watched):
            return options.fast_sync_poll_us / 1e6, 0
        if watched[0].loan is Loan.POLLED:  # its waits return at once: poll it
            return self._slice_s, 0
        if not busy:
            if watched[0].open_fence is head:
                self.close_fence(watched[0])  # the slice needs its event
            if head.event:
                return None, head.event
        # Busy: poll, and first when a stream's recent waits say its work will be done.
        poll = options.busy_poll_us / 1e6
        due = min(lane.due(poll) for lane in watched) - time.monotonic()
        return min(poll, max(due, _MIN_POLL_S)), 0

    # -- lending to the waiting thread --------------------------------------------------

    def _lend(self) -> None:
        """Lend the oldest point to the waiting thread now, if it has none: the stream
        counts as lent at once, so the worker does not poll it meanwhile."""
        if self._context:
            if self._thread is None:
                self._thread = WaitingThread(self._rt, self._device_id, self._context, self)
            if not self._thread_busy and self._offered is None:
                self._offered = self._choose()
            # Woken when the worker next blocks (``wake_waiting_thread``), not now: the
            # worker holds the GIL until then, and the thread would only wait for it.
            self._poke_due = True

    def wake_waiting_thread(self) -> None:
        """Wake the waiting thread for what was lent to it (worker, before it blocks)."""
        if self._poke_due:
            with self.lock:
                self._poke_now()

    def _poke_now(self) -> None:
        if self._poke_due and self._thread is not None:
            self._poke_due = False
            self._thread.poke()

    def pick(self) -> Lent | None:
        """The next point for the waiting thread (lock held): the one ``_lend`` chose for
        it, or the oldest stream's head point."""
        lent, self._offered = self._offered, None
        if lent is None:
            lent = self._choose()
        self._thread_busy = lent is not None
        return lent

    def _choose(self) -> Lent | None:
        """Lend the oldest stream's head point: an open fence (the stream's tail) as a
        stream sync, so that the runtime waits in the stream's own mode and returns its
        failure; anything else by its event."""
        for lane in self._points.waiting:
            if lane.loan is Loan.FREE and lane.watches:
                head = lane.watches[0]
                by_stream = head.fence and not head.event
                lane.move(Loan.STREAM if by_stream else Loan.EVENT)
                return Lent(lane, head, by_stream=by_stream)
        return None

    def returned(self, lent: Lent, ret: int) -> None:
        """A lent wait returned *ret*: resolve what is finished; when its point was
        reached, post the resolved waiters at once (lock held)."""
        lane = lent.lane
        if lane.loan is Loan.HELD:  # the worker waits for it: not lent before it looks
            lane.move(Loan.BACK)
            self._returned.notify_all()
        else:
            lane.move(Loan.FREE)
        if lane.closed or is_timeout(ret):
            return
        head = lane.watches[0] if lane.watches else None
        if lent.by_stream:
            if ret:
                self._take_sync_status(lane, ret)
            point = lent.point
            lane.collected = point.launches
            if self._points.reached_tail(lane, point):
                # The common case, kept short: the CPU is cold here. Posted before the
                # rest of the bookkeeping, which the loop's wake-up then overlaps.
                post(self._points.out.take())
                if not lane.quick:  # short again? the worker may wait for the next itself
                    lane.quick = time.monotonic() - point.since < self._inline_s
                return
            if not lane.quick:
                lane.quick = time.monotonic() - point.since < self._inline_s
        self._points.sweep_lane(lane)
        reached = self._points.drop_if_done(lane) or lane.watches[0] is not head
        if not reached and (ret or not lent.by_stream):
            # The wait returned, the point is not reached (a stopped stream, a bad event,
            # an event not recorded yet, whose sync returns at once): the worker polls
            # it, rather than lending a wait that returns at once again.
            lane.move(Loan.POLLED)
            self._look_again()

    def _await_loan(self, lane: Lane) -> None:
        """Wait (lock released) until a stream sync lent on *lane* returned, and keep it
        from being lent straight back meanwhile (as a timed-out sync would be)."""
        if lane.loan is Loan.STREAM:
            self._poke_now()  # it may not have been told yet
            lane.move(Loan.HELD)
            self._returned.wait_for(lambda: lane.loan is not Loan.HELD)
            lane.take_back()

    # -- failures pyACL reports through synchronize_stream ------------------------------

    def collect(self, lane: Lane) -> None:
        """Take the stream's kernel failure, if any (blocks until the stream is idle)."""
        with self.lock:
            self._collect(lane)

    def _collect(self, lane: Lane) -> None:
        self._await_loan(lane)  # the failure goes to whichever sync comes first
        if not lane.closed:
            launches = lane.launches
            self._take_sync_status(lane, self._rt.synchronize_stream(lane.handle))
            lane.collected = launches

    def _take_sync_status(self, lane: Lane, ret: int) -> None:
        if ret == STREAM_ABORT:  # stopped: the cause came with the first sync after it
            if lane.life is Life.OPEN:
                lane.move(Life.STOPPED)
        elif ret:
            self._fail(lane, self._handles.error(ret, "acl.rt.synchronize_stream", lane))

    # -- ends -----------------------------------------------------------------------------

    def close_stream(self, lane: Lane, *, force: bool) -> int:
        """Retire *lane*'s points and destroy it: the destroy's status. Without *force*
        its work is waited for and its last failures collected; with *force* queued
        work is dropped and waits still pending fail with ``ClosedResourceError``."""
        with self.lock:
            self._points.sweep_lane(lane)
            ret = 0  # a borrowed stream is only let go of, never destroyed
            if force:
                if not lane.borrowed:
                    ret = int(self._rt.destroy_stream_force(lane.handle))
                self._await_loan(lane)  # a lent stream sync may hold the failure
                lane.move(Life.FORCED)
                why = "the stream was closed with force=True: the work this waited for was dropped"
            else:
                self._collect(lane)
                self._points.sweep_lane(lane)
                if not lane.borrowed:
                    ret = int(self._rt.destroy_stream(lane.handle))
                lane.move(Life.CLOSED)
                why = "the stream was closed"
            self._points.fail_all(lane, why)
        return ret

    def forget_event(self, lane: Lane, record: EventRecord) -> None:
        """An event was closed: fail the waits still pending on it."""
        with self.lock:
            self._points.forget(lane, record)

    def finish(self, lanes: Iterable[Lane]) -> None:
        """At the device's stop: collect the last failures, fail what can never end
        (a wrapped event's waits too)."""
        with self.lock:
            for lane in {**dict.fromkeys(lanes), **self._points.waiting}:
                if not lane.borrowed:  # its owner's work and failures are not the device's
                    self._collect(lane)
                self._points.sweep_lane(lane)
                self._points.fail_all(lane, "the device was closed")
        self.stop_thread()

    def abandon_all(self, lanes: Iterable[Lane]) -> list[Waiter]:
        """At the worker's death: post what was resolved, return every parked waiter."""
        with self.lock:
            post(self._points.out.take())  # results found before the death are still true
            return self._points.abandon({**dict.fromkeys(lanes), **self._points.waiting})

    def stop_thread(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()

    def thread_failure(self) -> BaseException | None:
        """Why the waiting thread died, if it did."""
        return None if self._thread is None else self._thread.failure

    def thread_died(self) -> None:
        """The waiting thread died (``thread_failure`` says why): the worker must look."""
        self._look_again()

    # -- resolved waiters ---------------------------------------------------------------

    def resolve(self, waiter: Waiter, result: outcome.Outcome[Any]) -> None:
        """Give *waiter* its result, to be posted with the round's others."""
        with self.lock:
            self._points.out.put(waiter, result)

    def flush(self) -> None:
        """Post the waiters resolved so far."""
        post(self.take_ready())

    def take_ready_locked(self) -> Ready:
        """The waiters resolved so far (waiting thread, lock held)."""
        return self._points.out.take()
