"""A simulated device: reference counts, contexts, resources and its engine."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from ._cores import CorePool
from ._engine import Engine
from ._memory import DeviceMemory
from ._objects import Context, SimEvent, SimStream, Task
from ._profiles import SocProfile

__all__ = ["SimDevice"]


class SimDevice:
    """One device of a simulated runtime. All methods expect the runtime lock held."""

    def __init__(
        self,
        device_id: int,
        profile: SocProfile,
        lock: threading.Lock,
        cores: CorePool,
        new_handle: Callable[[], int],
        physical_id: int | None = None,
        on_failure: Callable[[Task], None] | None = None,
    ) -> None:
        self._report_failure = on_failure
        self.id = device_id
        #: The physical device this logical one is (``ASCEND_RT_VISIBLE_DEVICES``).
        self.physical_id = device_id if physical_id is None else physical_id
        self.profile = profile
        self._lock = lock
        self._cores = cores
        self._new_handle = new_handle
        self.refcount = 0
        self.sat_mode = profile.default_sat_mode
        self.memory = DeviceMemory(device_id, profile.memory_bytes)
        self.default_context: Context | None = None
        self.contexts: dict[int, Context] = {}
        self.engine: Engine | None = None
        self.streams_used = 0
        self.events_used = 0
        #: Core limits of ``set_device_res_limit`` (cube, vector); profile values by default.
        self.res_limits = [profile.cube_cores, profile.vector_cores]
        self.notifies: dict[int, Any] = {}
        self.notify_numbers = itertools.count()
        self.observer: Callable[[int, int, str, float, float], None] | None = None

    @property
    def active(self) -> bool:
        """Whether the device is running: set, or holding explicit contexts."""
        return self.engine is not None

    def activate(self) -> Context:
        """Start the device if needed and return its default context (made if missing).

        Starting creates the default context, its default stream and the internal sync
        stream and starts the engine. On a running device whose default context was
        released (``reset_device`` while explicit contexts hold the device) a new
        default context is made.
        """
        if self.engine is None:
            self.streams_used = self.profile.reserved_streams
            self.events_used = 0
            self.res_limits = [self.profile.cube_cores, self.profile.vector_cores]
            self.sat_mode = self.profile.default_sat_mode
            self.memory = DeviceMemory(self.id, self.profile.memory_bytes)
            self.default_context = Context(self._new_handle(), self, is_default=True)
            self.engine = Engine(self.id, self._lock, self._cores, self._on_failure)
            self.engine.observer = self.observer
            self.engine.start()
            self._cores.acquire_locked()
        elif self.default_context is None:
            self.default_context = Context(self._new_handle(), self, is_default=True)
            self.streams_used += 1  # its default stream
        return self.default_context

    def release_default_locked(self, objects: dict[int, object]) -> None:
        """Destroy the default context, its streams and events; the device keeps running.

        What ``reset_device`` does when explicit contexts still hold the device. The
        caller has waited for the context's work.
        """
        ctx = self.default_context
        if ctx is None:
            return
        for stream in list(ctx.streams.values()):
            self.drop_stream_locked(stream, objects)
        for event in list(ctx.events.values()):
            self.drop_event_locked(event, objects)
        self.streams_used -= 1  # its default stream
        objects.pop(ctx.handle, None)
        objects.pop(ctx.default_alias, None)
        forget_context(ctx)
        self.default_context = None

    def all_contexts(self) -> list[Context]:
        default = [] if self.default_context is None else [self.default_context]
        return [*default, *self.contexts.values()]

    def all_streams(self) -> list[SimStream]:
        return [s for ctx in self.all_contexts() for s in ctx.all_streams()]

    def pending_tails(self) -> list[Task]:
        """The last task of every stream that still has work."""
        return [s.tail for s in self.all_streams() if s.tail is not None and not s.tail.done]

    def take_error(self) -> int:
        """The first error any stream of the device reports now (device-wide sync)."""
        code = 0
        for stream in self.all_streams():
            found = stream.take_error()
            code = code or found
        return code

    def deactivate(self) -> tuple[Engine | None, list[threading.Thread]]:
        """Destroy every context, stream and event.

        Returns the engine to stop and the core threads to join (the last device's).
        """
        cores = self._cores.release_locked() if self.engine is not None else []
        for ctx in self.all_contexts():
            forget_context(ctx)
        self.default_context = None
        self.contexts.clear()
        for notify in self.notifies.values():
            notify.alive = False
        self.notifies.clear()
        self.memory.clear()
        self.refcount = 0
        self.streams_used = 0
        self.events_used = 0
        engine, self.engine = self.engine, None
        return engine, cores

    def drop_stream_locked(self, stream: SimStream, objects: dict[int, object]) -> None:
        """Forget an explicit stream and give back its slot and FAST_LAUNCH reservation."""
        objects.pop(stream.handle, None)
        stream.context.streams.pop(stream.handle, None)
        self.streams_used -= 1
        if stream.fast_launch:
            self.memory.used -= self.profile.fast_launch_reserved_bytes
        stream.alive = False

    def drop_event_locked(self, event: SimEvent, objects: dict[int, object]) -> None:
        """Forget an event and give back its hardware event, if it holds one."""
        objects.pop(event.handle, None)
        event.context.events.pop(event.handle, None)
        if event.hardware:
            self.events_used -= 1
        event.alive = False

    def _on_failure(self, task: Task) -> None:
        if self._report_failure is not None:
            self._report_failure(task)
        stream = task.stream
        if not stream.pending_error:
            stream.pending_error = task.error
        if stream.failure_mode == 1 and not stream.aborted:
            stream.aborted = True
            assert self.engine is not None
            self.engine.drop_queued_locked(stream)


def forget_context(ctx: Context) -> None:
    """Mark a context and everything in it as gone."""
    ctx.alive = False
    for stream in ctx.all_streams():
        stream.alive = False
    for event in ctx.events.values():
        event.alive = False
    ctx.streams.clear()
    ctx.events.clear()
