"""What the event loop hands the device worker: one small class per kind of job.

``Launch`` (``fn(*args, stream)``; its failure is the stream's), ``Call`` (``fn()``; its
outcome to the waiter, if any), ``Fence`` (answer the waiter once the stream's queued
work is done), ``EventWait`` (once an event completes), ``Record`` (record an event from
the ready pool), ``Run`` (the library's own ``fn()``: it queues no stream work, unlike a
``Call``, which may) and ``Stop``. Each runs itself on the
worker thread, in submission order (``run`` is True for the stop); ``answers`` names
the wait it answers, so that a dying worker can fail every wait still queued.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._lanes import EventRecord, Lane
    from ._loop import Waiter
    from ._worker import DeviceWorker

__all__ = ["Call", "EventWait", "Fence", "Job", "Launch", "Record", "Run", "Stop"]


class Job:
    __slots__ = ()

    def run(self, worker: DeviceWorker) -> bool:
        raise NotImplementedError

    def answers(self) -> Waiter | None:
        return None


class Launch(Job):
    __slots__ = ("api", "args", "fn", "lane")

    def __init__(
        self, lane: Lane, fn: Callable[..., Any], args: tuple[Any, ...], api: str | None
    ) -> None:
        self.lane, self.fn, self.args, self.api = lane, fn, args, api

    def run(self, worker: DeviceWorker) -> bool:
        worker.launch_now(self.lane, self.fn, self.args, self.api)
        return False


class Call(Job):
    __slots__ = ("fn", "waiter")

    def __init__(self, fn: Callable[[], Any], waiter: Waiter | None) -> None:
        self.fn, self.waiter = fn, waiter

    def run(self, worker: DeviceWorker) -> bool:
        worker.call_now(self.fn, self.waiter)
        return False

    def answers(self) -> Waiter | None:
        return self.waiter


class Fence(Job):
    __slots__ = ("lane", "timed", "waiter")

    def __init__(self, lane: Lane, waiter: Waiter, timed: bool) -> None:
        self.lane, self.waiter, self.timed = lane, waiter, timed

    def run(self, worker: DeviceWorker) -> bool:
        worker.fence_now(self.lane, self.waiter, self.timed)
        return False

    def answers(self) -> Waiter | None:
        return self.waiter


class EventWait(Job):
    __slots__ = ("event", "lane", "record", "waiter")

    def __init__(self, lane: Lane, event: int, record: EventRecord, waiter: Waiter) -> None:
        self.lane, self.event, self.record, self.waiter = lane, event, record, waiter

    def run(self, worker: DeviceWorker) -> bool:
        worker.watcher.watch(self.lane, self.event, self.record, self.waiter)
        return False

    def answers(self) -> Waiter | None:
        return self.waiter


class Record(Job):
    __slots__ = ("event", "lane", "record", "timing")

    def __init__(self, lane: Lane, event: int, timing: bool, record: EventRecord) -> None:
        self.lane, self.event, self.timing, self.record = lane, event, timing, record

    def run(self, worker: DeviceWorker) -> bool:
        worker.record_ready_now(self.lane, self.event, self.timing, self.record)
        return False


class Run(Job):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn

    def run(self, worker: DeviceWorker) -> bool:
        self.fn()
        return False


class Stop(Job):
    __slots__ = ("waiter",)

    def __init__(self, waiter: Waiter) -> None:
        self.waiter = waiter

    def run(self, worker: DeviceWorker) -> bool:
        return True

    def answers(self) -> Waiter | None:
        return self.waiter
