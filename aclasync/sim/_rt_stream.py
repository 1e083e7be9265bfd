"""``acl.rt`` stream calls."""

from __future__ import annotations

import struct
import time

from ._args import parsed
from ._calls import CallGroup
from ._core import check_ints, has_ended, wait_for_tasks
from ._objects import SimStream, Task
from ._rc import RC

__all__ = ["StreamCalls"]

_MODELLED_FLAGS = 0x3  # FAST_LAUNCH | FAST_SYNC
_OVERFLOW_BUFFER_SIZE = 64
_STATUS_NOT_READY = 1


class StreamCalls(CallGroup):
    """Stream life cycle, synchronisation, ordering, failure mode and overflow."""

    @parsed("acl.rt.create_stream")
    def create_stream(self) -> tuple[int, int]:
        return self._create_stream(0, 0)

    @parsed("acl.rt.create_stream_with_config")
    def create_stream_with_config(self, priority: int, flag: int, /) -> tuple[int, int]:
        check_ints("create_stream_with_config", priority, flag)
        if flag & ~_MODELLED_FLAGS:
            flag = 0  # the reference page: out-of-range values act like create_stream
        limit = self._core.profile.max_priority
        priority = 0 if limit is None else min(max(priority, 0), limit)
        return self._create_stream(priority, flag)

    def _create_stream(self, priority: int, flags: int) -> tuple[int, int]:
        core = self._core
        ctx = core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        device = ctx.device
        profile = core.profile
        fast_launch = bool(flags & 0x1)
        with core.lock:
            if device.streams_used >= profile.stream_limit:
                return 0, RC.RESOURCE_ALLOC_FAIL
            if fast_launch:
                reserve = profile.fast_launch_reserved_bytes
                if device.memory.used + reserve > device.memory.capacity:
                    return 0, RC.MEMORY_ALLOCATION
                device.memory.used += reserve
            device.streams_used += 1
            stream = SimStream(core.new_handle(), ctx, flags=flags, priority=priority)
            ctx.streams[stream.handle] = stream
            core.objects[stream.handle] = stream
        if fast_launch and profile.fast_launch_setup_us:
            time.sleep(profile.fast_launch_setup_us / 1e6)
        return stream.handle, RC.OK

    @parsed("acl.rt.destroy_stream")
    def destroy_stream(self, stream: int, /) -> int:
        return self._destroy_stream(stream, force=False)

    @parsed("acl.rt.destroy_stream_force")
    def destroy_stream_force(self, stream: int, /) -> int:
        return self._destroy_stream(stream, force=True)

    def _destroy_stream(self, handle: int, *, force: bool) -> int:
        check_ints("destroy_stream_force" if force else "destroy_stream", handle)
        if handle == 0:
            return RC.INVALID_PARAM
        stream, ret = self._own_stream(handle)
        if stream is None:
            return ret
        if stream.is_default:
            return RC.PARAM_INVALID
        core = self._core
        if force:
            with core.lock:
                engine = stream.device.engine
                if engine is not None:
                    engine.drop_queued_locked(stream)
        elif stream.tail is not None:
            wait_for_tasks(core, [stream.tail], None)
        with core.lock:
            if not stream.alive:
                return RC.PARAM_INVALID
            stream.device.drop_stream_locked(stream, core.objects)
            core.reports.forget_stream_locked(stream)
        return RC.OK

    @parsed("acl.rt.synchronize_stream")
    def synchronize_stream(self, stream: int, /) -> int:
        check_ints("synchronize_stream", stream)
        return self._sync_stream(stream, -1)

    @parsed("acl.rt.synchronize_stream_with_timeout")
    def synchronize_stream_with_timeout(self, stream: int, timeout: int, /) -> int:
        check_ints("synchronize_stream_with_timeout", stream, timeout)
        if timeout < -1:
            return RC.PARAM_INVALID
        return self._sync_stream(stream, timeout)

    def _sync_stream(self, handle: int, timeout_ms: int) -> int:
        _, stream, ret = self._resolve_stream(handle)
        if stream is None:
            return ret
        if not self._wait_stream(stream, timeout_ms):
            return RC.STREAM_SYNC_TIMEOUT
        with self._core.lock:
            code = stream.take_error()
        if code and self._core.pending_infos:
            self._core.deliver_exception_infos()
        return code

    @parsed("acl.rt.stream_query")
    def stream_query(self, stream: int, /) -> tuple[int, int]:
        check_ints("stream_query", stream)
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return 0, ret
        tail = found.tail
        idle = tail is None or tail.done or has_ended(tail)
        return (0 if idle else _STATUS_NOT_READY), RC.OK

    @parsed("acl.rt.stream_wait_event")
    def stream_wait_event(self, stream: int, event: int, /) -> int:
        check_ints("stream_wait_event", stream, event)
        if event == 0:
            return RC.INVALID_PARAM
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        ev = self._core.event(event)
        if ev is None or (ev.kind != "plain" and not ev.flags & 0x1):
            return RC.PARAM_INVALID
        if ev.context.device is not found.device:  # an event belongs to its device
            return RC.PARAM_INVALID
        task = Task(found, "wait_event", dep=ev.record)
        ret = self._submit(found, task)
        if ret == RC.OK:
            ev.waits = [*(t for t in ev.waits if not t.done), task]
        return ret

    @parsed("acl.rt.set_stream_failure_mode")
    def set_stream_failure_mode(self, stream: int, mode: int, /) -> int:
        """Set CONTINUE (0) or STOP (1) on failure, as ``ApiImpl::StreamSetMode`` does.

        Only the lowest bit of *mode* counts. The stream's own mode again succeeds, even
        on another context's stream; STOP back to CONTINUE, or any change once a STOP
        stream stopped, gives 207000; then a stream of another context gives 107003.
        """
        check_ints("set_stream_failure_mode", stream, mode)
        if stream == 0 and not self._core.profile.failure_mode_on_default_stream:
            return RC.PARAM_INVALID
        ctx, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        mode &= 1
        if found.aborted:  # stopped by a failure: the runtime's ABORT_ON_FAILURE state
            return RC.FEATURE_NOT_SUPPORT
        if found.failure_mode == mode:
            return RC.OK
        if found.failure_mode == 1:  # STOP to CONTINUE
            return RC.FEATURE_NOT_SUPPORT
        if found.context is not ctx:
            return RC.STREAM_CONTEXT
        found.failure_mode = mode
        return RC.OK

    @parsed("acl.rt.set_stream_overflow_switch")
    def set_stream_overflow_switch(self, stream: int, flag: int, /) -> int:
        check_ints("set_stream_overflow_switch", stream, flag)
        if flag not in (0, 1):
            return RC.INVALID_PARAM
        if not self._core.profile.overflow_switch_supported:
            return RC.FEATURE_NOT_SUPPORT
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        found.overflow_switch = flag
        return RC.OK

    @parsed("acl.rt.get_stream_overflow_switch")
    def get_stream_overflow_switch(self, stream: int, /) -> tuple[int, int]:
        check_ints("get_stream_overflow_switch", stream)
        if not self._core.profile.overflow_switch_supported:
            return 0, RC.FEATURE_NOT_SUPPORT
        found, ret = self._own_stream(stream)
        if found is None:
            return 0, ret
        return found.overflow_switch, RC.OK

    @parsed("acl.rt.get_overflow_status")
    def get_overflow_status(self, output_addr: int, output_size: int, stream: int, /) -> int:
        check_ints("get_overflow_status", output_addr, output_size, stream)
        if output_addr == 0:
            return RC.INVALID_PARAM
        if output_size != _OVERFLOW_BUFFER_SIZE:
            return RC.PARAM_INVALID
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        region = self._core.device_region(output_addr)
        view = None if region is None else region.view(output_addr, _OVERFLOW_BUFFER_SIZE)
        if view is None:
            return RC.PARAM_INVALID
        scope = found.context

        def write_status(_: Task) -> None:
            view[:] = struct.pack("<Q", scope.overflow_status).ljust(_OVERFLOW_BUFFER_SIZE, b"\0")

        return self._submit(found, Task(found, "get_overflow_status", action=write_status))

    @parsed("acl.rt.reset_overflow_status")
    def reset_overflow_status(self, stream: int, /) -> int:
        check_ints("reset_overflow_status", stream)
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        scope = found.context

        def clear_status(_: Task) -> None:
            scope.overflow_status = 0

        return self._submit(found, Task(found, "reset_overflow_status", action=clear_status))
