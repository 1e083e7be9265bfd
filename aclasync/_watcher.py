"""Watching for finished work, for one device worker (docs/design.md, "A sync").

The ``Watcher`` registers the points waiters wait for (its ``Points``) and decides who
waits for each: the waiting thread it holds, the worker itself, or the worker polling
between rounds. Its methods run on the worker thread but ``choose`` and ``returned``
(also the waiting thread's); ``lock`` guards the ``Points`` and each lane's ``loan``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import outcome

from ._lanes import EventRecord, Lane, Loan, Watch
from ._loop import DONE, EXPIRED, Ready, Waiter, post, post_to
from ._options import WorkerOptions
from ._points import STREAM_ABORT, STREAM_COMPLETE, Points
from ._pyacl.codes import is_timeout
from ._waiting_thread import Lent, WaitingThread

if TYPE_CHECKING:
    from ._handles import Handles
    from ._pyacl.backend import AclRt

__all__ = ["Watcher"]

_LENT = (Loan.EVENT, Loan.STREAM, Loan.HELD)
#: Slices the worker waits for a default-mode stream itself before it lends the wait.
DEFAULT_SLICES = 2
#: The shortest sleep between two polls of streams whose work is due.
_MIN_POLL_S = 20e-6


class Watcher:
    """Who waits for the points of one device's waiters. *fail* gives a stream a
    failure; *look_again* makes the worker go round again."""

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
        self._points = Points(rt, device_id, handles, fail, self._await_loan)
        self.out = self._points.out  # the resolved waiters, to post (under the lock)
        self._asked: set[Lane] = set()  # found busy by a fence this round: not asked again
        self._context = 0
        self._thread: WaitingThread | None = None
        self._slice_s = options.wait_slice_ms / 1e3
        self._inline_s = DEFAULT_SLICES * self._slice_s

    def start(self, context: int) -> None:
        """The device's context is set: lend waits from now on."""
        self._context = context

    def idle_answer(self, lane: Lane, waiter: Waiter, calls: int) -> bool:
        """Answer a sync of a stream known idle at once (no lock: ``idle_at`` is ours)."""
        if not lane.known_idle(calls) or self._points.out:
            return False
        waiter.result = DONE
        post_to(waiter.delivery, (waiter,))
        return True

    def wait_here(
        self, lane: Lane, waiter: Waiter, calls: int, jobs_came: Callable[[], bool]
    ) -> bool:
        """Answer an untimed sync by waiting for the stream right here, as a thread that
        launches and syncs does, if it is all the device waits for (waiters resolved so
        far are posted first). False if not, or if the wait ran out of slices: the
        caller then registers the fence."""
        points = self._points
        if points.waiting or lane.watches or lane.closed or not self._may_wait_inline(lane):
            return False
        if points.out:
            self.flush()
        launches = lane.launches  # the worker is the one that counts: it waits here
        ret = self.wait_tail(lane, lambda: jobs_came() or waiter.abandoned)
        if is_timeout(ret):
            return False
        with self.lock:
            if ret:
                self._points.take_sync_status(lane, ret)
            lane.synced(launches, None if ret else calls)
            points.out.put(waiter, DONE)
        return True

    def wait_tail(self, lane: Lane, jobs_came: Callable[[], bool]) -> int:
        """Wait in the stream's sync (GIL released): its status, or a timeout status.
        A FAST_SYNC stream is waited for in slices until ``jobs_came()``; a default one
        for ``DEFAULT_SLICES`` at most (each wake-up costs CPU), then its waits go to
        the waiting thread until one is short."""
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
        lane.waited(short=False)
        return ret

    def fence(self, lane: Lane, waiter: Waiter, timed: bool, calls: int) -> None:
        """Answer *waiter* once the work queued on *lane* so far is done (*timed*: the
        wait has a timeout, so this first look must answer an idle stream)."""
        with self.lock:
            points = self._points
            if waiter.abandoned:
                return  # cancelled before a look: nobody to answer
            if lane.closed:  # closing concurrently: nothing more will run on it
                points.out.put(waiter, DONE)
            elif (tail := lane.shareable_tail()) is not None and not timed:
                points.park(lane, tail, waiter)  # nothing queued since: share it
            elif lane.known_idle(calls):
                points.out.put(waiter, DONE)  # idle since the last look: nothing to ask
            else:
                self._fence(lane, waiter, timed, calls, tail)
                if (
                    len(points.waiting) == 1
                    and lane.loan is Loan.FREE
                    and lane.watches
                    and not self._may_wait_inline(lane)
                ):
                    self._lend()  # it alone is waited for, and the worker may not: now

    def _fence(
        self, lane: Lane, waiter: Waiter, timed: bool, calls: int, tail: Watch | None
    ) -> None:
        # Only a timed wait's first look must answer an idle stream; an untimed one is
        # lent or waited for by the round (a query would only delay its wait). Not
        # done: it waits for *tail*, the fence nothing was queued behind, or a new one.
        if timed:
            status, ret = self._rt.stream_query(lane.handle)
            if ret:
                error = self._handles.error(ret, "acl.rt.stream_query", lane)
                self._points.out.put(waiter, outcome.Error(error))
                return
            if status == STREAM_COMPLETE:
                if lane.uncollected(lane.launches):  # else nothing ran since the last look
                    self._points.collect(lane)
                lane.synced(lane.launches, calls)
                self._points.out.put(waiter, DONE)
                return
            if waiter.expired():  # its timeout ran out before this first look
                self._points.out.put(waiter, EXPIRED)
                return
        self._asked.add(lane)  # looked at, or too fresh to: not swept this round
        self._points.park(lane, tail or lane.new_fence(), waiter)

    def watch(self, lane: Lane, event: int, record: EventRecord, waiter: Waiter) -> None:
        """Answer *waiter* once *event* (its *record* on *lane*) completes."""
        with self.lock:
            self._points.watch(lane, event, record, waiter)

    def close_fence(self, lane: Lane) -> None:
        """Give the open fence its event before work is queued behind it (if the record
        fails, the stream's failure, the fence is reached when the stream is idle)."""
        fence = lane.take_open_fence()
        assert fence is not None
        with self.lock:
            index = lane.find(fence.seq)
            if index < len(lane.watches) and lane.watches[index] is fence:
                event, ret = self._handles.fence_event()
                if not ret:
                    ret = self._rt.record_event(event, lane.handle)
                    if ret:
                        self._handles.fence_pool.append(event)
                if not ret:
                    fence.close(event)
                elif ret != STREAM_ABORT:  # a stop's refusal: the call queued next reports it
                    self._fail(lane, self._handles.error(ret, "acl.rt.record_event", lane))

    def round(self, may_wait: Callable[[], bool], busy: bool) -> tuple[Lent | None, Ready]:
        """Sweep and lend what is waited for: the wait the worker takes itself (only if
        ``may_wait()``), and what is resolved. While *busy* (jobs keep coming) and
        several streams are waited for, none is lent: the worker polls them all."""
        inline = None
        with self.lock:
            if self._points.waiting:
                # A lone sync first: nothing between launch and wait (a sweep: 20 us).
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
        """A stream's tail, if it is all the device waits for and the worker may wait."""
        waiting = self._points.waiting
        if len(waiting) != 1:
            return None
        lane = next(iter(waiting))
        head = lane.watches[0] if lane.watches else None
        if head is None or not head.fence or head.event or not self._may_wait_inline(lane):
            return None
        if lane.forsaken():  # every wait was cancelled: nothing to wait for
            return None
        lane.move(Loan.STREAM)
        return Lent(lane, head, by_stream=True)

    def _may_wait_inline(self, lane: Lane) -> bool:
        """Whether the worker may wait for *lane* itself (a default one: while short)."""
        options = self._options
        if lane.fast_sync:
            inline = options.inline_fast_sync
        else:
            inline = options.inline_default_sync and lane.quick
        return inline and lane.loan is Loan.FREE

    def wait_inline(self, lent: Lent, interrupted: Callable[[], bool]) -> None:
        """Wait for a point the round lent the worker; if cut short (no slices left, or
        ``interrupted()``), the next round lends it."""
        ret = self.wait_tail(lent.lane, lambda: interrupted() or lent.point.forsaken())
        with self.lock:
            self.returned(lent, ret)
            ready = self._points.out.take()
        post(ready)  # at once: before the round's bookkeeping (11 -> 7 us measured)

    def watching(self) -> bool:
        """Whether a point waited for is the worker's to look at (a lock-free hint)."""
        return bool(self._watched())

    def _watched(self) -> list[Lane]:
        """The streams waited for that no loan is out on: the worker's to look at (not
        those whose every wait was cancelled: a FAST_SYNC one would be polled for as
        long as its work runs, for nobody)."""
        waiting = list(self._points.waiting)
        return [lane for lane in waiting if lane.loan not in _LENT and not lane.forsaken()]

    def take_ready(self) -> Ready:
        """The waiters resolved so far, to post."""
        with self.lock:
            return self._points.out.take()

    def idle_plan(self, busy: bool) -> tuple[float | None, int]:
        """How the idle worker waits for what it watches: ``(timeout, 0)``, sleep at most
        *timeout* s (None: until a job comes), or ``(None, event)``, a slice on *event*.
        It polls every ``fast_sync_poll_us`` for a FAST_SYNC stream, every
        ``busy_poll_us`` while *busy* (jobs come in), else blocks in a slice."""
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

    def _lend(self) -> None:
        """Lend the oldest point to the waiting thread, if it has none."""
        if self._context:
            if self._thread is None:
                self._thread = WaitingThread(
                    self._rt, self._device_id, self._context, self, self._look_again
                )
            self._thread.offer()

    def wake_waiting_thread(self) -> None:
        """Wake the waiting thread for what was lent to it (worker, before it blocks)."""
        thread = self._thread
        if thread is not None and thread.wake_due:
            with self.lock:
                thread.wake()

    def choose(self) -> Lent | None:
        """The oldest stream's head point: an open fence as a stream sync (the runtime
        waits in the stream's mode and returns its failure), else by its event."""
        for lane in self._points.waiting:
            if lane.loan is Loan.FREE and lane.watches and not lane.forsaken():
                head = lane.watches[0]
                by_stream = head.fence and not head.event
                lane.move(Loan.STREAM if by_stream else Loan.EVENT)
                return Lent(lane, head, by_stream=by_stream)
        return None

    def returned(self, lent: Lent, ret: int) -> None:
        """A lent wait returned *ret*: resolve what is finished (lock held)."""
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
                self._points.take_sync_status(lane, ret)
            point = lent.point
            lane.synced(point.launches)
            if self._points.reached_tail(lane, point):
                post(self._points.out.take())  # first: the loop's wake-up overlaps the rest
            if not lane.quick:  # short again? the worker may wait for the next itself
                lane.waited(short=time.monotonic() - point.since < self._inline_s)
            if not lane.watches:
                return
        self._points.sweep_lane(lane)
        reached = self._points.drop_if_done(lane) or lane.watches[0] is not head
        if not reached and (ret or not lent.by_stream):
            # Returned short of the point (a stopped stream, a bad or unrecorded event):
            # the worker polls it rather than lend a wait that returns at once again.
            lane.move(Loan.POLLED)
            self._look_again()

    def _await_loan(self, lane: Lane) -> None:
        """Wait (lock released) until a stream sync lent on *lane* returned."""
        if lane.loan is Loan.STREAM:
            if self._thread is not None:
                self._thread.wake()  # it may not have been told yet
            lane.move(Loan.HELD)
            self._returned.wait_for(lambda: lane.loan is not Loan.HELD)
            lane.take_back()

    @contextlib.contextmanager
    def points(self) -> Iterator[Points]:
        """The ``Points``, under the lock (for the worker's calls that need no more)."""
        with self.lock:
            yield self._points

    def close_stream(self, lane: Lane, *, force: bool) -> int:
        """Retire *lane*'s points and destroy it: the destroy's status. Without *force*
        its work is waited for and its failures collected; with *force* queued work is
        dropped. Waits still pending fail with ``ClosedResourceError``."""
        with self.lock:
            return self._points.close(lane, force=force)

    def finish(self, lanes: Iterable[Lane]) -> None:
        """At the device's stop: collect the last failures, fail what can never end."""
        with self.lock:
            self._points.finish(lanes)
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

    def resolve(self, waiter: Waiter, result: outcome.Outcome[Any]) -> None:
        """Give *waiter* its result, to be posted with the round's others."""
        with self.lock:
            self._points.out.put(waiter, result)

    def flush(self) -> None:
        """Post the waiters resolved so far."""
        post(self.take_ready())
