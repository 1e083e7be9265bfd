"""The points a device's waiters wait for (each lane's ``watches``): whether they were
reached, their waiters resolved into an ``Outbox``. Called under ``Watcher.lock``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import anyio
import outcome

from ._errors import never_recorded
from ._lanes import FORCED_EVENT, EventRecord, Lane, Life, Watch
from ._loop import DONE, EXPIRED, Outbox, Waiter
from ._pyacl.codes import ErrorCode
from ._pyacl.constants import EventRecordedStatus, StreamStatus

if TYPE_CHECKING:
    from ._handles import Handles
    from ._pyacl.backend import AclRt

__all__ = ["EVENT_COMPLETE", "STREAM_ABORT", "STREAM_COMPLETE", "Points"]

EVENT_COMPLETE = int(EventRecordedStatus.COMPLETE)  # query_event_status
STREAM_COMPLETE = int(StreamStatus.COMPLETE)  # stream_query
STREAM_ABORT = int(ErrorCode.ACL_ERROR_RT_STREAM_ABORT)


def _done() -> outcome.Value[None]:
    return DONE


def closed(why: str) -> Callable[[], outcome.Error]:
    """Makes the result of a wait whose point went away: ``ClosedResourceError``."""
    return lambda: outcome.Error(anyio.ClosedResourceError(why))


class Points:
    """The streams with points waited for, and the resolved waiters (``out``). *fail*
    gives a stream a failure; *await_loan* waits for a stream sync lent on a lane."""

    def __init__(
        self,
        rt: AclRt,
        device_id: int,
        handles: Handles,
        fail: Callable[[Lane, BaseException], None],
        await_loan: Callable[[Lane], None],
    ) -> None:
        self._rt = rt
        self._device_id = device_id
        self._handles = handles
        self._fail = fail
        self._await_loan = await_loan
        self.waiting: dict[Lane, None] = {}  # in the order they began to wait
        self.out = Outbox()

    def park(self, lane: Lane, point: Watch, waiter: Waiter) -> None:
        """Add *waiter* to *point*, or answer it if its timeout ran out already."""
        if not waiter.keep():  # its timeout ran out before the worker's first look
            self.out.put(waiter, EXPIRED)
        else:
            point.add(waiter)
            self.waiting[lane] = None

    def watch(self, lane: Lane, event: int, record: EventRecord, waiter: Waiter) -> None:
        """Answer *waiter* now, or once *event* (its *record* on *lane*) completes."""
        watches, out = lane.watches, self.out
        index = lane.find(record.seq)
        found = index < len(watches) and watches[index].seq == record.seq
        if record.failure is not None:  # never recorded: nothing will ever complete
            error = never_recorded(record.failure, self._device_id, lane.handle)
            out.put(waiter, outcome.Error(error))
        elif found and waiter.claim is None:  # untimed: no need to look first
            self.park(lane, watches[index], waiter)
        elif lane.life is Life.FORCED and not found:
            out.put(waiter, outcome.Error(anyio.ClosedResourceError(FORCED_EVENT)))
        else:
            status, ret = self._rt.query_event_status(event)
            if ret:
                out.put(waiter, self._failed(ret, lane)())
            elif status == EVENT_COMPLETE:
                out.put(waiter, DONE)
            elif waiter.expired():
                out.put(waiter, EXPIRED)
            elif found:  # a timed wait on a point others wait for: looked at, pending
                self.park(lane, watches[index], waiter)
            else:
                point = Watch(event, record.seq, fence=False, launches=-1)
                watches.insert(index, point)
                self.park(lane, point, waiter)

    def sweep_lane(self, lane: Lane) -> None:
        """Resolve *lane*'s points reached so far, oldest first."""
        watches = lane.watches
        while watches:
            head = watches[0]
            if head.event:
                status, ret = self._rt.query_event_status(head.event)
                reached = status == EVENT_COMPLETE
            else:  # an open fence: reached once the stream is idle
                status, ret = self._rt.stream_query(lane.handle)
                reached = status == STREAM_COMPLETE
            if not ret and not reached:
                head.pending(time.monotonic())
                return
            lane.pop_head()
            if head.since:
                lane.reached(head, time.monotonic())
            if head.fence and head.event:
                self._handles.fence_pool.append(head.event)
            if ret:
                self.out.put_all(head.waiters, self._failed(ret, lane))
                continue
            if head.fence and lane.uncollected(head.launches):
                # Kernel failures come from synchronize_stream only: collect them when
                # the stream is idle (the call then returns at once): an open fence
                # was just found so; work queued after a closed one leaves them for a
                # later look.
                try:
                    if not head.event:
                        self.collect(lane)
                    else:
                        self._collect_if_idle(lane)
                except BaseException:
                    watches.insert(0, head)  # the worker dies: its waiters are found
                    raise
            self.out.put_all(head.waiters, _done)

    def reached_tail(self, lane: Lane, point: Watch) -> bool:
        """A stream sync for the open fence *point* came back: resolve it if it is still
        the head. Whether the stream has no points left then."""
        watches = lane.watches
        if watches and watches[0] is point and not point.event:
            self.out.put_all(lane.pop_head().waiters, _done)
        return self.drop_if_done(lane)

    def drop_if_done(self, lane: Lane) -> bool:
        """Stop watching *lane* if it has no points left; whether it had none."""
        if lane.watches:
            return False
        self.waiting.pop(lane, None)
        return True

    def close(self, lane: Lane, *, force: bool) -> int:
        """Retire *lane*'s points and destroy it (a borrowed one is only let go of): the
        destroy's status. See ``Watcher.close_stream``."""
        self.sweep_lane(lane)
        ret = 0
        if force:
            if not lane.borrowed:
                self._collect_if_idle(lane)  # work that ended is not dropped
                ret = int(self._rt.destroy_stream_force(lane.handle))
            # Forced first: a lent stream sync that comes back now (its work dropped)
            # must not answer its waiters as if the work had run.
            lane.move(Life.FORCED)
            self._await_loan(lane)
            why = (
                "the wrapped stream was let go of with force=True: this wait ended before "
                "its work (which runs on, its owner's)"
                if lane.borrowed
                else "the stream was closed with force=True: the work this waited for was dropped"
            )
        else:
            if lane.borrowed:  # its owner may keep queueing: the worker must not wait
                self._collect_if_idle(lane)
            else:
                self.collect(lane)
            self.sweep_lane(lane)
            if not lane.borrowed:
                ret = int(self._rt.destroy_stream(lane.handle))
            lane.move(Life.CLOSED)
            why = "the stream was closed"
        self.fail_all(lane, why)
        return ret

    def finish(self, lanes: Iterable[Lane]) -> None:
        """At the device's stop: collect the last failures, fail what can never end."""
        for lane in {**dict.fromkeys(lanes), **self.waiting}:
            if not lane.borrowed:  # its owner's work and failures are not the device's
                self.collect(lane)
            self.sweep_lane(lane)
            self.fail_all(lane, "the device was closed")

    def forget(self, lane: Lane, record: EventRecord) -> None:
        """An event was closed: fail the waits still pending on it."""
        index = lane.find(record.seq)
        point = lane.watches[index] if index < len(lane.watches) else None
        if point is not None and point.seq == record.seq and not point.fence:
            del lane.watches[index]
            self.out.put_all(point.waiters, closed("the event was closed while this waited for it"))

    def fail_all(self, lane: Lane, why: str) -> None:
        """*lane* is closing: every point it still has never completes."""
        for point in lane.drop_points():
            if point.fence and point.event:
                self._handles.fence_pool.append(point.event)
            self.out.put_all(point.waiters, closed(why))
        self.waiting.pop(lane, None)

    def drop_if_forsaken(self, lane: Lane) -> bool:
        """Drop *lane*'s points if nobody waits for any (waits that timed out or were
        cancelled leave theirs); whether it has none now."""
        if lane.forsaken():
            for point in lane.drop_points():
                if point.fence and point.event:
                    self._handles.fence_pool.append(point.event)
            self.waiting.pop(lane, None)
        return not lane.watches

    def abandon(self, lanes: Iterable[Lane]) -> list[Waiter]:
        """Forget every point; their waiters (at the worker's death)."""
        waiters = [w for lane in lanes for point in lane.drop_points() for w in point.waiters]
        self.waiting.clear()
        return waiters

    def _failed(self, ret: int, lane: Lane) -> Callable[[], outcome.Error]:
        """Makes a fresh error for each waiter of a point whose query failed."""
        handles = self._handles
        return lambda: outcome.Error(handles.error(ret, "acl.rt.query_event_status", lane))

    def collect(self, lane: Lane) -> None:
        """Take the stream's kernel failure, if any (blocks until the stream is idle).
        Kernel failures come from ``synchronize_stream`` only, which returns at once on
        an idle stream; a stream sync lent meanwhile may hold it: that one comes first."""
        self._await_loan(lane)
        if not lane.closed:
            launches = lane.launches
            self.take_sync_status(lane, self._rt.synchronize_stream(lane.handle))
            lane.synced(launches)

    def _collect_if_idle(self, lane: Lane) -> None:
        """Take the stream's failures if its work has all ended (the sync then returns at
        once); a busy stream's come only with its work."""
        status, ret = self._rt.stream_query(lane.handle)
        if not ret and status == STREAM_COMPLETE:
            self.collect(lane)

    def take_sync_status(self, lane: Lane, ret: int) -> None:
        """A stream sync returned *ret* (107023: stopped, the cause came with the first)."""
        if ret == STREAM_ABORT:
            if lane.life is Life.OPEN:
                lane.move(Life.STOPPED)
        elif ret:
            self._fail(lane, self._handles.error(ret, "acl.rt.synchronize_stream", lane))
