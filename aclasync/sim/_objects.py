"""Plain state objects of the simulated runtime: tasks, streams, events, contexts."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._rc import RC

if TYPE_CHECKING:
    import _thread

    from ._device import SimDevice

__all__ = ["Context", "ExceptionInfo", "SimEvent", "SimStream", "Task"]


class Task:
    """One entry of a stream's FIFO.

    A started task completes once its outstanding conditions (modelled duration, kernel
    body, blocking callback) are all met; ``pending`` counts them.
    """

    __slots__ = (
        "action",
        "dep",
        "dependents",
        "done",
        "duration",
        "error",
        "finish",
        "fn",
        "hold",
        "name",
        "overflow",
        "pending",
        "start",
        "stream",
        "submitted",
        "submitter",
        "task_id",
        "waiters",
    )

    def __init__(
        self,
        stream: SimStream,
        name: str,
        *,
        duration: float = 0.0,
        action: Callable[[Task], None] | None = None,
        fn: Callable[[], Any] | None = None,
        overflow: bool = False,
        error: int = 0,
        dep: Task | None = None,
        hold: bool = False,
    ) -> None:
        self.stream = stream
        self.name = name
        self.duration = duration
        self.action = action
        self.fn = fn
        self.overflow = overflow
        self.error = error
        self.dep = dep
        self.hold = hold
        self.done = False
        self.task_id = 0
        self.submitter = 0
        self.pending = 0
        self.start = 0.0
        self.finish = 0.0
        self.submitted = 0.0  # when it was queued on an idle stream (else 0)
        self.waiters: list[_thread.LockType] | None = None
        self.dependents: list[SimStream] | None = None


class SimStream:
    """A stream: a FIFO of tasks on one device, owned by one context."""

    __slots__ = (
        "aborted",
        "alive",
        "context",
        "failure_mode",
        "flags",
        "free_at",
        "handle",
        "is_default",
        "launched",
        "overflow_switch",
        "pending_error",
        "priority",
        "queue",
        "res_limits",
        "running",
        "sat_mode",
        "subscriber",
        "tag",
        "tail",
    )

    def __init__(
        self,
        handle: int,
        context: Context,
        *,
        flags: int = 0,
        priority: int = 0,
        is_default: bool = False,
    ) -> None:
        self.handle = handle
        self.context = context
        self.flags = flags
        self.priority = priority
        self.is_default = is_default
        self.sat_mode = context.device.sat_mode
        self.queue: deque[Task] = deque()
        self.running: Task | None = None
        self.tail: Task | None = None
        self.free_at = 0.0  # when its last task finished (monotonic seconds)
        self.pending_error = 0
        self.failure_mode = 0
        self.aborted = False
        self.overflow_switch = 0
        self.launched = False
        self.subscriber: int | None = None
        self.tag = 0
        self.res_limits: list[int] | None = None
        self.alive = True

    @property
    def fast_sync(self) -> bool:
        return bool(self.flags & 0x2)

    @property
    def fast_launch(self) -> bool:
        return bool(self.flags & 0x1)

    @property
    def device(self) -> SimDevice:
        return self.context.device

    def take_error(self) -> int:
        """Return the error a sync reports now, clearing a one-shot kernel error."""
        code = self.pending_error
        if code:
            self.pending_error = 0
            return code
        return RC.STREAM_ABORT if self.aborted else 0


class SimEvent:
    """An event: remembers the record task it captured last."""

    __slots__ = ("alive", "context", "flags", "handle", "hardware", "kind", "record", "waits")

    def __init__(self, handle: int, context: Context, kind: str, flags: int, hardware: bool):
        self.handle = handle
        self.context = context
        self.kind = kind  # "plain", "flag" or "ex"
        self.flags = flags
        self.hardware = hardware
        self.record: Task | None = None
        #: The ``stream_wait_event`` tasks queued on this event (``query_event_wait_status``).
        self.waits: list[Task] = []
        self.alive = True

    @property
    def has_timestamps(self) -> bool:
        return self.kind == "plain" or bool(self.flags & 0x8)


class Context:
    """A context: a device, a default stream and the streams and events made in it."""

    __slots__ = (
        "alive",
        "default_alias",
        "default_stream",
        "device",
        "events",
        "handle",
        "is_default",
        "overflow_status",
        "streams",
        "sys_params",
    )

    def __init__(self, handle: int, device: SimDevice, *, is_default: bool) -> None:
        self.handle = handle
        self.device = device
        self.is_default = is_default
        self.overflow_status = 0
        self.streams: dict[int, SimStream] = {}
        self.events: dict[int, SimEvent] = {}
        self.alive = True
        self.default_stream = SimStream(0, self, is_default=True)
        #: The handle ``ctx_get_current_default_stream`` gave out for the default stream.
        self.default_alias = 0
        self.sys_params: dict[int, int] = {}

    def all_streams(self) -> list[SimStream]:
        return [self.default_stream, *self.streams.values()]


class ExceptionInfo:
    """One failed task, as ``get_*_from_exception_info`` read it."""

    __slots__ = ("device_id", "error", "stream_id", "task_id", "thread_id")

    def __init__(
        self, error: int, task_id: int, stream_id: int, thread_id: int, device_id: int
    ) -> None:
        self.error = error
        self.task_id = task_id
        self.stream_id = stream_id
        self.thread_id = thread_id
        self.device_id = device_id


def stream_id(stream: SimStream) -> int:
    """The number ``stream_get_id`` reports: 0 for default streams."""
    return 0 if stream.is_default else (stream.handle >> 6) & 0xFFFF
