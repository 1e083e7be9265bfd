"""The worker's bookkeeping for one stream: its watched events and its unreported failures."""

from __future__ import annotations

import bisect
from collections import deque

from ._loop import Waiter

__all__ = ["EventRecord", "Lane", "Watch"]

#: A watch purges abandoned waiters once it holds this many (then twice the survivors).
_PURGE_FLOOR = 16


class EventRecord:
    """One record of an event on a stream, as the worker saw it.

    ``seq`` numbers the record among the stream's points; it is 0 until the worker has
    run the record, which it always does before any later job that names the record
    (jobs run in order). ``failure`` is the record's failure (the stream reports it);
    an event whose record failed was never recorded and is never watched.
    """

    __slots__ = ("failure", "seq")

    def __init__(self, seq: int = 0) -> None:
        self.seq = seq
        self.failure: BaseException | None = None


class Watch:
    """An event the worker watches for some waiters (a fence when ``fence`` is set).

    A fence's ``event`` is 0 while the fence is the stream's tail: reaching it then
    means the stream is idle, which a stream sync or ``stream_query`` tells without
    an event task on the stream.
    """

    __slots__ = ("_limit", "event", "fence", "launches", "seq", "waiters")

    def __init__(self, event: int, seq: int, *, fence: bool, launches: int) -> None:
        self.event = event
        self.seq = seq
        self.fence = fence
        self.launches = launches
        self.waiters: list[Waiter] = []
        self._limit = _PURGE_FLOOR

    def add(self, waiter: Waiter) -> None:
        """Add a waiter in amortised O(1).

        Abandoned waiters are dropped only when the list has doubled since the last
        purge, so a long-lived watch polled with short timeouts stays small without
        every registration paying for a rebuild.
        """
        waiters = self.waiters
        if len(waiters) >= self._limit:
            waiters = self.waiters = [w for w in waiters if not w.abandoned]
            self._limit = max(_PURGE_FLOOR, 2 * len(waiters))
        waiters.append(waiter)


class Lane:
    """One stream as the device worker sees it.

    The worker owns every field but ``errors``: it appends failures there (with a
    device-wide sequence number, so the device can report them in the order it saw
    them) and the event loop pops them when it reports them. The fields about the
    stream's watches (``watches``, ``lent``, ``lent_stream``, ``unlendable``,
    ``collected``) are shared with the device's waiting thread and change only under
    the worker's lock.
    """

    __slots__ = (
        "aborted",
        "closed",
        "collected",
        "errors",
        "fast_sync",
        "forced",
        "handle",
        "held",
        "idle_at",
        "launches",
        "lent",
        "lent_stream",
        "open_fence",
        "overflow_buffer",
        "records",
        "settled_at",
        "submitted",
        "unlendable",
        "watches",
    )

    def __init__(self, handle: int, *, fast_sync: bool) -> None:
        self.handle = handle
        self.fast_sync = fast_sync
        self.launches = 0
        self.records = 0
        self.watches: list[Watch] = []
        self.errors: deque[tuple[int, BaseException]] = deque()
        self.overflow_buffer = 0
        self.closed = False
        #: Stopped by FailureMode.STOP: its 107023 refusals were reported once.
        self.aborted = False
        #: Closed with ``destroy_stream_force``: its queued work may never have run.
        self.forced = False
        #: ``launches`` when the stream's failures were last collected by a sync.
        self.collected = 0
        #: ``(launches, calls)`` when the worker last saw the stream idle with its
        #: failures collected (``calls``: the worker's count of arbitrary calls, any of
        #: which may have queued work on the stream behind the worker's back). While it
        #: still matches, a sync needs no runtime call (worker thread only).
        self.idle_at: tuple[int, int] | None = None
        #: The head watch is lent to the waiting thread (waited on by a stream sync
        #: when ``lent_stream``: that sync returns the stream's failures).
        self.lent = False
        self.lent_stream = False
        #: The waiting thread's wait failed for this stream: the worker watches it.
        self.unlendable = False
        #: The worker waits for the stream's loan to come back: lend it no more.
        self.held = False
        #: Event-loop side only: launches submitted, and ``(submitted, device calls)``
        #: when a sync of the stream last succeeded (see ``DeviceState.settled``).
        self.submitted = 0
        self.settled_at: tuple[int, int] | None = None
        #: A fence without an event: it marks the stream's tail, until the worker
        #: records its event before queuing more work (worker thread only).
        self.open_fence: Watch | None = None

    def next_seq(self) -> int:
        """Number the next point recorded on the stream (events and fences)."""
        self.records += 1
        return self.records

    def find(self, seq: int) -> int:
        """Index in ``watches`` where the record number *seq* is or would go."""
        return bisect.bisect_left(self.watches, seq, key=lambda w: w.seq)
