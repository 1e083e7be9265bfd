"""One stream as the device worker sees it: its points, failures and two states, whose
legal moves are ``_MOVES``, checked by ``Lane.move`` (an ``assert``: the tests check
every move). Who changes what: the worker module's docstring.
"""

from __future__ import annotations

import bisect
import enum
import time
from collections import deque
from dataclasses import dataclass, field

from ._loop import Waiter
from ._pyacl.constants import StreamFlag

__all__ = ["FORCED_EVENT", "EventRecord", "Lane", "Life", "Loan", "Watch"]

#: Why a wait on, or a query of, an event of a force-closed stream fails.
FORCED_EVENT = "the event's stream was closed with force=True: its work may be dropped"
#: How long before its typical time a stream's head point is first looked at.
_EARLY_S = 50e-6
#: A point purges abandoned waiters once it holds this many (then twice the survivors).
_PURGE_FLOOR = 16


class Life(enum.Enum):
    """``STOPPED``: ``FailureMode.STOP`` tripped, later calls are refused (107023);
    ``REFUSED``: and one refusal was reported (the others are not: one report);
    ``FORCED``: closed with ``destroy_stream_force``, queued work may not have run."""

    __hash__ = object.__hash__  # by identity, in C: every move looks its state up
    OPEN = 1
    STOPPED = 2
    REFUSED = 5
    CLOSED = 3
    FORCED = 4


class Loan(enum.Enum):
    """Who waits for the head point: the worker (``FREE``), the waiting thread by its
    event (``EVENT``), a stream sync of the thread or worker (``STREAM``) that the worker
    waits to come back (``HELD``) and that came back, not lent again before the worker
    looked (``BACK``); ``POLLED``: a lent wait failed short of it, the worker polls."""

    __hash__ = object.__hash__
    FREE = 1
    EVENT = 2
    STREAM = 3
    HELD = 4
    BACK = 5
    POLLED = 6


_MOVES: dict[enum.Enum, frozenset[enum.Enum]] = {
    Life.OPEN: frozenset({Life.STOPPED, Life.CLOSED, Life.FORCED}),
    Life.STOPPED: frozenset({Life.REFUSED, Life.CLOSED, Life.FORCED}),
    Life.REFUSED: frozenset({Life.CLOSED, Life.FORCED}),
    Life.CLOSED: frozenset(),
    Life.FORCED: frozenset(),
    Loan.FREE: frozenset({Loan.EVENT, Loan.STREAM, Loan.POLLED}),
    Loan.EVENT: frozenset({Loan.FREE}),
    Loan.STREAM: frozenset({Loan.FREE, Loan.HELD}),
    Loan.HELD: frozenset({Loan.BACK}),
    Loan.BACK: frozenset({Loan.FREE, Loan.POLLED}),
    Loan.POLLED: frozenset({Loan.FREE}),  # a wrapped event's point was reached
}


@dataclass(slots=True, eq=False)
class EventRecord:
    """One record of an event on a stream: ``seq`` numbers it among the stream's points
    (0 until the worker ran it); ``failure``, if the record failed (never watched)."""

    seq: int = 0
    failure: BaseException | None = field(default=None, init=False)

    def ran(self, seq: int, failure: BaseException | None) -> None:
        """The worker ran the record: its number, and its failure if it failed."""
        self.seq, self.failure = seq, failure


@dataclass(slots=True, eq=False)
class Watch:
    """A point of a stream that waiters wait for: an event, or a ``fence``, whose
    ``event`` is 0 while it is the stream's tail (reached when the stream is idle)."""

    event: int
    seq: int
    fence: bool = field(kw_only=True)
    launches: int = field(kw_only=True)  # a fence's: the stream's calls queued at it
    since: float = field(default=0.0, kw_only=True)  # when a fence was set (monotonic s)
    pending_at: float = field(default=0.0, init=False)  # when a poll found it not reached
    waiters: list[Waiter] = field(default_factory=list, init=False)
    _limit: int = field(default=_PURGE_FLOOR, init=False)

    def add(self, waiter: Waiter) -> None:
        """Add a waiter in amortised O(1): abandoned ones are dropped when the list
        doubled since the last purge."""
        waiters = self.waiters
        if len(waiters) >= self._limit:
            waiters = self.waiters = [w for w in waiters if not w.abandoned]
            self._limit = max(_PURGE_FLOOR, 2 * len(waiters))
        waiters.append(waiter)

    def forsaken(self) -> bool:
        """Whether every waiter of the point gave up (was cancelled): none to answer."""
        return not any(not waiter.abandoned for waiter in self.waiters)

    def pending(self, now: float) -> None:
        """A poll found the point not reached at *now*."""
        if self.since:
            self.pending_at = now

    def close(self, event: int) -> None:
        """Work was queued behind the fence: from now on *event* (recorded) marks it."""
        self.event = event


@dataclass(slots=True, eq=False, repr=False, weakref_slot=True)
class Lane:
    """One stream of a device; every field changes through a method named for what
    happened. ``handle`` -1: no stream (the points of an event aclasync wrapped)."""

    handle: int
    flags: int = 0  # as validated where the stream was created
    priority: int = 0
    #: A stream (or event) aclasync wrapped: never destroyed nor synced at the end.
    borrowed: bool = field(default=False, kw_only=True)
    #: Its close was cancelled: its failures go to the device from now on.
    disowned: bool = field(default=False, init=False)
    #: Others may queue work on it (wrapped, or its handle given out): the counters
    #: below see aclasync's work only, so they never say it is idle or collected.
    shared: bool = field(default=False, init=False)
    fast_sync: bool = field(init=False)
    life: Life = field(default=Life.OPEN, init=False)
    loan: Loan = field(default=Loan.FREE, init=False)
    launches: int = field(default=0, init=False)  # calls queued so far
    records: int = field(default=0, init=False)  # points numbered so far
    watches: list[Watch] = field(default_factory=list, init=False)  # oldest first
    #: Unreported failures, numbered (the worker appends, the event loop pops).
    errors: deque[tuple[int, BaseException]] = field(default_factory=deque, init=False)
    #: ``launches`` when the stream's failures were last collected by a sync.
    collected: int = field(default=0, init=False)
    #: ``(launches, worker calls)`` when last seen idle, failures collected: while it
    #: matches, a sync needs no runtime call (any call may queue work on it).
    idle_at: tuple[int, int] | None = field(default=None, init=False)
    #: The fence at the stream's tail, without an event until work comes behind it.
    open_fence: Watch | None = field(default=None, init=False)
    #: Its last sync ended within a slice: the worker may wait for the next itself.
    quick: bool = field(default=True, init=False)
    #: How long its polled fences took to be reached, lately (seconds; see ``due``).
    typical: float = field(default=0.0, init=False)
    #: The event loop's: calls submitted, and ``(submitted, calls)`` at the last sync.
    submitted: int = field(default=0, init=False)
    settled_at: tuple[int, int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.fast_sync = bool(self.flags & StreamFlag.FAST_SYNC)
        self.shared = self.borrowed

    def __repr__(self) -> str:
        return f"<Lane {self.handle:#x} {self.life.name} {self.loan.name}>"

    @property
    def closed(self) -> bool:
        return self.life is Life.CLOSED or self.life is Life.FORCED

    def forsaken(self) -> bool:
        """Whether nobody waits for any of its points any more: not worth a look (its
        points are resolved when a wait comes, or at its close)."""
        return all(point.forsaken() for point in self.watches)

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

    def submit(self) -> None:
        """A call was handed to the worker for the stream."""
        self.submitted += 1

    def settle(self, mark: tuple[int, int]) -> None:
        """A sync begun at *mark* (``(submitted, device calls)``) succeeded."""
        self.settled_at = mark

    def queue(self) -> None:
        """A call was queued on the stream (or was refused)."""
        self.launches += 1

    def disown(self) -> None:
        """Its close was cancelled: nobody will await it any more."""
        self.disowned = True

    def share(self) -> None:
        """Its handle was given out: others may queue work on it from now on."""
        self.shared = True

    def known_idle(self, calls: int) -> bool:
        """Whether a look found it idle with nothing queued since (*calls*: the
        worker's arbitrary calls so far, any of which may queue work on it)."""
        return not self.shared and self.idle_at == (self.launches, calls)

    def uncollected(self, launches: int) -> bool:
        """Whether failures of its first *launches* calls may not be collected yet."""
        return self.shared or launches > self.collected

    def shareable_tail(self) -> Watch | None:
        """Its last point, if a new sync may wait for it: a fence nothing was queued
        behind (on a shared stream, only while open: once its event is recorded,
        nobody can say that)."""
        last = self.watches[-1] if self.watches else None
        if last is None or not last.fence or last.launches != self.launches:
            return None
        return None if self.shared and last.event else last

    def synced(self, launches: int, calls: int | None = None) -> None:
        """A sync returned with the failures of the first *launches* calls collected;
        with *calls* (the worker's), it found the stream idle."""
        self.collected = launches
        if calls is not None:
            self.idle_at = (launches, calls)

    def waited(self, *, short: bool) -> None:
        """A sync ended within the slices the worker waits itself (*short*), or not."""
        self.quick = short

    def new_fence(self) -> Watch:
        """Open a fence at the stream's tail (a point without an event, yet)."""
        fence = Watch(
            0, self.next_seq(), fence=True, launches=self.launches, since=time.monotonic()
        )
        self.watches.append(fence)
        self.open_fence = fence
        return fence

    def take_open_fence(self) -> Watch | None:
        """The open fence, which work queued behind it closes."""
        fence, self.open_fence = self.open_fence, None
        return fence

    def pop_head(self) -> Watch:
        """Drop the oldest point (reached, or failed)."""
        head = self.watches.pop(0)
        if self.open_fence is head:
            self.open_fence = None
        return head

    def drop_points(self) -> list[Watch]:
        """Drop every point (the stream is closing, or the worker died)."""
        points = self.watches[:]
        self.watches.clear()
        self.open_fence = None
        return points

    def reached(self, head: Watch, now: float) -> None:
        """A polled fence *head* was found reached at *now*: its work ended since the
        last look found it pending. The middle is believed at once if shorter than the
        typical time, else only bit by bit (a late poll must not teach a longer time)."""
        took = now - head.since
        if head.pending_at > head.since:
            took = (took + head.pending_at - head.since) / 2
        typical = self.typical
        self.typical = took if took < typical or not typical else typical + (took - typical) / 8

    def due(self, poll: float) -> float:
        """When (monotonic s) to look at its head point next: a little before its recent
        fences say it is reached; after a look found it pending, no sooner than an
        eighth of the time it has taken so far (*poll* apart at most); *poll* from now
        when nothing is known."""
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
