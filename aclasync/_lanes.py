"""One stream as the device worker sees it: its points, its failures, its two states.

Two small state machines instead of a bag of flags, their legal moves in ``_MOVES``,
checked by ``Lane.move`` (an ``assert``: debug runs and the tests check every move):

- ``life``: ``OPEN``; ``STOPPED`` (``FailureMode.STOP`` tripped: later calls are
  refused with 107023); ``CLOSED``; ``FORCED`` (closed with ``destroy_stream_force``:
  its queued work may never have run).
- ``loan``, who waits for the stream's head point: ``FREE`` (the worker watches it);
  ``EVENT`` (lent to the waiting thread, waited for by its event); ``STREAM`` (its tail
  lent as a stream sync, to the waiting thread or the worker itself); ``HELD`` (the
  worker waits for that sync to come back); ``BACK`` (it came back; not lent again
  before the worker has looked); ``POLLED`` (a lent wait failed short of the point: only
  the worker polls the stream from then on).

Who changes what is in the worker module's docstring.
"""

from __future__ import annotations

import bisect
import enum
import time
from collections import deque

from ._loop import Waiter
from ._pyacl.constants import StreamFlag

__all__ = ["EventRecord", "Lane", "Life", "Loan", "Watch"]

#: How much before its typical time a stream's head point is first looked at: a look
#: that comes too early is repeated soon, one too late would teach a longer time.
_EARLY_S = 50e-6
#: A point purges abandoned waiters once it holds this many (then twice the survivors).
_PURGE_FLOOR = 16

# Members are singletons compared by identity: they hash as objects (in C), not by name
# in Python, since every move looks its state up (twice per request).


class Life(enum.Enum):
    __hash__ = object.__hash__
    OPEN = 1
    STOPPED = 2
    CLOSED = 3
    FORCED = 4


class Loan(enum.Enum):
    __hash__ = object.__hash__
    FREE = 1
    EVENT = 2
    STREAM = 3
    HELD = 4
    BACK = 5
    POLLED = 6


_MOVES: dict[enum.Enum, frozenset[enum.Enum]] = {
    Life.OPEN: frozenset({Life.STOPPED, Life.CLOSED, Life.FORCED}),
    Life.STOPPED: frozenset({Life.CLOSED, Life.FORCED}),
    Life.CLOSED: frozenset(),
    Life.FORCED: frozenset(),
    Loan.FREE: frozenset({Loan.EVENT, Loan.STREAM, Loan.POLLED}),
    Loan.EVENT: frozenset({Loan.FREE}),
    Loan.STREAM: frozenset({Loan.FREE, Loan.HELD}),
    Loan.HELD: frozenset({Loan.BACK}),
    Loan.BACK: frozenset({Loan.FREE, Loan.POLLED}),
    Loan.POLLED: frozenset({Loan.FREE}),  # a wrapped event's point was reached
}


class EventRecord:
    """One record of an event on a stream: ``seq`` numbers it among the stream's points
    (0 until the worker ran it, always before any later job naming it); ``failure`` is
    the record's failure (then the event was never recorded and is never watched)."""

    __slots__ = ("failure", "seq")

    def __init__(self, seq: int = 0) -> None:
        self.seq = seq
        self.failure: BaseException | None = None


class Watch:
    """A point of a stream that waiters wait for: an event, or a fence (``fence``).

    A fence's ``event`` is 0 while the fence is the stream's tail: reaching it then
    means the stream is idle, which a stream sync or ``stream_query`` tells without an
    event task on the stream. ``launches``: the stream's calls queued at a fence.
    """

    __slots__ = ("_limit", "event", "fence", "launches", "pending_at", "seq", "since", "waiters")

    def __init__(self, event: int, seq: int, *, fence: bool, launches: int) -> None:
        self.since = 0.0  # when a fence was set (monotonic seconds)
        self.pending_at = 0.0  # when a poll last found it not reached
        self.event = event
        self.seq = seq
        self.fence = fence
        self.launches = launches
        self.waiters: list[Waiter] = []
        self._limit = _PURGE_FLOOR

    def add(self, waiter: Waiter) -> None:
        """Add a waiter in amortised O(1): abandoned ones are dropped only when the list
        doubled since the last purge, so a point polled with short timeouts stays small
        without every registration paying for a rebuild."""
        waiters = self.waiters
        if len(waiters) >= self._limit:
            waiters = self.waiters = [w for w in waiters if not w.abandoned]
            self._limit = max(_PURGE_FLOOR, 2 * len(waiters))
        waiters.append(waiter)


class Lane:
    """One stream of a device: its handle and flags, points, failures and states."""

    __slots__ = (
        "borrowed",
        "collected",
        "errors",
        "fast_sync",
        "flags",
        "handle",
        "idle_at",
        "launches",
        "life",
        "loan",
        "open_fence",
        "overflow_buffer",
        "quick",
        "records",
        "settled_at",
        "submitted",
        "typical",
        "watches",
    )

    def __init__(self, handle: int, flags: int = 0, *, borrowed: bool = False) -> None:
        self.handle = handle  # -1: no stream (the points of an event aclasync wrapped)
        #: A stream (or event) aclasync wrapped: never destroyed nor synced at the end.
        self.borrowed = borrowed
        self.flags = flags  # as validated where the stream was created
        self.fast_sync = bool(flags & StreamFlag.FAST_SYNC)
        self.life = Life.OPEN
        self.loan = Loan.FREE
        self.launches = 0  # calls queued so far
        self.records = 0  # points numbered so far
        self.watches: list[Watch] = []  # points with waiters, oldest first
        #: Unreported failures with the device's sequence number.
        self.errors: deque[tuple[int, BaseException]] = deque()
        self.overflow_buffer = 0
        #: ``launches`` when the stream's failures were last collected by a sync.
        self.collected = 0
        #: ``(launches, worker calls)`` when the worker last saw the stream idle with its
        #: failures collected (any call may queue work on it): while it matches, a sync
        #: needs no runtime call.
        self.idle_at: tuple[int, int] | None = None
        #: The fence at the stream's tail, without an event until work comes behind it.
        self.open_fence: Watch | None = None
        #: Its last sync ended within a slice: the worker may wait for the next itself.
        self.quick = True
        #: How long its polled fences took to be reached, lately (seconds; see ``due``).
        self.typical = 0.0
        #: Calls submitted, and ``(submitted, device calls)`` at the last successful sync.
        self.submitted = 0
        self.settled_at: tuple[int, int] | None = None

    def __repr__(self) -> str:
        return f"<Lane {self.handle:#x} {self.life.name} {self.loan.name}>"

    @property
    def closed(self) -> bool:
        return self.life is Life.CLOSED or self.life is Life.FORCED

    @property
    def forced(self) -> bool:
        return self.life is Life.FORCED

    @property
    def stopped(self) -> bool:
        return self.life is Life.STOPPED

    def move(self, to: Life | Loan) -> None:
        """Move ``life`` or ``loan`` to *to*; only the moves in ``_MOVES`` are legal."""
        if isinstance(to, Life):
            assert to in _MOVES[self.life], f"{self!r}: no move to {to.name}"
            self.life = to
        else:
            assert to in _MOVES[self.loan], f"{self!r}: no move to {to.name}"
            self.loan = to

    def take_back(self) -> None:
        """A held stream sync came back (``BACK``): free to lend again."""
        if self.loan is Loan.BACK:
            self.move(Loan.FREE)

    def reached(self, head: Watch, now: float) -> None:
        """A polled fence *head* was found reached at *now*. Its work ended between the
        last look that found it pending and this one: the middle is believed at once
        if shorter than the typical time, a longer one only bit by bit (a poll can
        come late, and a late one must not teach a longer time at once)."""
        took = now - head.since
        if head.pending_at > head.since:
            took = (took + head.pending_at - head.since) / 2
        typical = self.typical
        self.typical = took if took < typical or not typical else typical + (took - typical) / 8

    def due(self, poll: float) -> float:
        """When (monotonic seconds) to look at its head point next: a little before
        its recent fences say it is reached, and after a look that found it pending,
        no sooner than an eighth of the time it has taken so far (so that a point
        queued behind much work is looked at ever less often, *poll* apart at most);
        *poll* from now when nothing is known."""
        head = self.watches[0] if self.watches else None
        if head is None or not head.since or not self.typical:
            return time.monotonic() + poll
        due = head.since + self.typical - _EARLY_S
        pending = head.pending_at
        if pending > head.since:
            due = max(due, pending + min(poll, (pending - head.since) / 8))
        return due

    def next_seq(self) -> int:
        """Number the next point recorded on the stream (events and fences)."""
        self.records += 1
        return self.records

    def find(self, seq: int) -> int:
        """Index in ``watches`` where the record number *seq* is or would go."""
        return bisect.bisect_left(self.watches, seq, key=lambda w: w.seq)
