"""What the event loop hands the device worker, run by the worker thread in order:
``Launch`` (``fn(*args, stream)``, its failure the stream's), ``Call`` (``fn()``, which may
queue work on any stream; its outcome to the waiter, if any), ``Fence`` and ``EventWait``
(answer the waiter once the stream's work so far, or the event's record, is done),
``Record`` (record an event from the ready pool), ``Run`` (the library's own ``fn()``,
which queues no stream work) and ``Stop`` (the last: tear down, answer the waiter, call
``ended``). A job
with a ``waiter`` answers it, so that a dying worker can fail every wait still queued.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from ._lanes import EventRecord, Lane
    from ._loop import Waiter
    from ._worker import DeviceWorker

__all__ = ["Call", "EventWait", "Fence", "Job", "Launch", "Record", "Run", "Stop"]


class Job:
    __slots__ = ()

    def run(self, worker: DeviceWorker) -> None:
        raise NotImplementedError

    def answers(self) -> Waiter | None:
        return cast("Waiter | None", getattr(self, "waiter", None))


@dataclass(slots=True, eq=False)
class Launch(Job):
    lane: Lane
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    api: str | None

    def run(self, worker: DeviceWorker) -> None:
        worker.launch_now(self.lane, self.fn, self.args, self.api)


@dataclass(slots=True, eq=False)
class Call(Job):
    fn: Callable[[], Any]
    waiter: Waiter | None

    def run(self, worker: DeviceWorker) -> None:
        worker.call_now(self.fn, self.waiter)


@dataclass(slots=True, eq=False)
class Fence(Job):
    lane: Lane
    waiter: Waiter
    timed: bool

    def run(self, worker: DeviceWorker) -> None:
        worker.fence_now(self.lane, self.waiter, self.timed)


@dataclass(slots=True, eq=False)
class EventWait(Job):
    lane: Lane
    event: int
    record: EventRecord
    waiter: Waiter

    def run(self, worker: DeviceWorker) -> None:
        worker.watcher.watch(self.lane, self.event, self.record, self.waiter)


@dataclass(slots=True, eq=False)
class Record(Job):
    lane: Lane
    event: int
    timing: bool
    record: EventRecord

    def run(self, worker: DeviceWorker) -> None:
        worker.record_ready_now(self.lane, self.event, self.timing, self.record)


@dataclass(slots=True, eq=False)
class Run(Job):
    fn: Callable[[], object]

    def run(self, worker: DeviceWorker) -> None:
        self.fn()


@dataclass(slots=True, eq=False)
class Stop(Job):
    #: None once answered (``forget``): the worker keeps the job, which ``submit``
    #: reads, and the waiter would keep the closing task's loop alive.
    waiter: Waiter | None
    #: Called on the worker's thread once it answered the waiter (the device is
    #: released, or the worker died): other closers wait for this, not for the task
    #: that asked, whose loop may be closed before it resumes.
    ended: Callable[[], None] | None = None

    def run(self, worker: DeviceWorker) -> None:
        pass

    def forget(self) -> None:
        """Drop the waiter once answered: the worker keeps the job."""
        self.waiter = None
