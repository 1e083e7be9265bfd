"""``acl.rt`` device and context calls."""

from __future__ import annotations

from ._args import parsed
from ._calls import CallGroup
from ._core import check_ints, wait_for_tasks
from ._device import forget_context
from ._objects import Context
from ._rc import RC
from ._timeouts import timeout_deadline

__all__ = ["DeviceCalls"]

_MEM_ATTR_MAX = 17


class DeviceCalls(CallGroup):
    """Devices, contexts, device-wide sync, saturation mode and memory info."""

    @parsed("acl.rt.set_device")
    def set_device(self, device_id: int, /) -> int:
        check_ints("set_device", device_id)
        core = self._core
        device = core.device(device_id)
        if device is None:
            return RC.INVALID_DEVICEID
        with core.lock:
            ctx = device.activate()
            core.objects[ctx.handle] = ctx
            device.refcount += 1
        core.context = ctx
        return RC.OK

    @parsed("acl.rt.reset_device")
    def reset_device(self, device_id: int, /) -> int:
        return self._reset(device_id, force=False)

    @parsed("acl.rt.reset_device_force")
    def reset_device_force(self, device_id: int, /) -> int:
        return self._reset(device_id, force=True)

    def _reset(self, device_id: int, *, force: bool) -> int:
        check_ints("reset_device_force" if force else "reset_device", device_id)
        core = self._core
        device = core.device(device_id)
        if device is None:
            return RC.INVALID_DEVICEID
        with core.lock:
            if device.refcount == 0:
                return RC.PARAM_INVALID
            device.refcount = 0 if force else device.refcount - 1
            if device.refcount:
                return RC.OK
            held = bool(device.contexts)
        if held:  # explicit contexts hold the device: only the default context goes
            self._release_default_context(device)
        else:
            self._release_device(device)
        return RC.OK

    @parsed("acl.rt.get_device")
    def get_device(self) -> tuple[int, int]:
        ctx = self._core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        return ctx.device.id, RC.OK

    @parsed("acl.rt.get_device_count")
    def get_device_count(self) -> tuple[int, int]:
        return len(self._core.devices), RC.OK

    @parsed("acl.rt.get_run_mode")
    def get_run_mode(self) -> tuple[int, int]:
        return self._core.profile.run_mode, RC.OK

    @parsed("acl.rt.synchronize_device")
    def synchronize_device(self) -> int:
        return self._sync_device(-1)

    @parsed("acl.rt.synchronize_device_with_timeout")
    def synchronize_device_with_timeout(self, timeout: int, /) -> int:
        check_ints("synchronize_device_with_timeout", timeout)
        if timeout < -1:
            return RC.PARAM_INVALID
        return self._sync_device(timeout)

    def _sync_device(self, timeout_ms: int) -> int:
        core = self._core
        ctx = core.context
        if ctx is None:
            return RC.CONTEXT_NULL
        device = ctx.device
        with core.lock:
            tails = device.pending_tails()
        if tails and timeout_ms == 0:
            return RC.STREAM_SYNC_TIMEOUT
        latency = core.profile.notify_latency_us / 1e6
        if not wait_for_tasks(core, tails, timeout_deadline(timeout_ms), latency_s=latency):
            return RC.STREAM_SYNC_TIMEOUT
        with core.lock:
            code = device.take_error()
        if code and core.pending_infos:
            core.deliver_exception_infos()
        return code

    @parsed("acl.rt.set_device_sat_mode")
    def set_device_sat_mode(self, mode: int, /) -> int:
        check_ints("set_device_sat_mode", mode)
        ctx = self._core.context
        if ctx is None:
            return RC.CONTEXT_NULL
        if mode not in (0, 1):
            return RC.INVALID_PARAM
        ctx.device.sat_mode = mode
        return RC.OK

    @parsed("acl.rt.get_device_sat_mode")
    def get_device_sat_mode(self) -> tuple[int, int]:
        ctx = self._core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        return ctx.device.sat_mode, RC.OK

    @parsed("acl.rt.get_mem_info")
    def get_mem_info(self, attr: int, /) -> tuple[int, int, int]:
        check_ints("get_mem_info", attr)
        ctx = self._core.context
        if ctx is None:
            return 0, 0, RC.CONTEXT_NULL
        if not 0 <= attr <= _MEM_ATTR_MAX:
            return 0, 0, RC.INVALID_PARAM
        memory = ctx.device.memory
        return memory.capacity - memory.used, memory.capacity, RC.OK

    # -- contexts --------------------------------------------------------------------

    @parsed("acl.rt.create_context")
    def create_context(self, device_id: int, /) -> tuple[int, int]:
        check_ints("create_context", device_id)
        core = self._core
        device = core.device(device_id)
        if device is None:
            return 0, RC.INVALID_DEVICEID
        with core.lock:
            if not device.active:  # the first context also makes the default one
                default = device.activate()
                core.objects[default.handle] = default
            if device.streams_used >= device.profile.stream_limit:
                return 0, RC.RESOURCE_ALLOC_FAIL
            ctx = Context(core.new_handle(), device, is_default=False)
            device.contexts[ctx.handle] = ctx
            device.streams_used += 1
            core.objects[ctx.handle] = ctx
        core.context = ctx
        return ctx.handle, RC.OK

    @parsed("acl.rt.destroy_context")
    def destroy_context(self, context: int, /) -> int:
        check_ints("destroy_context", context)
        if context == 0:
            return RC.INVALID_PARAM
        core = self._core
        ctx = core.lookup(context, Context)
        if ctx is None or ctx.is_default:
            return RC.PARAM_INVALID
        wait_for_tasks(core, [s.tail for s in ctx.all_streams() if s.tail is not None], None)
        device = ctx.device
        with core.lock:
            if not ctx.alive:
                return RC.PARAM_INVALID
            for stream in ctx.all_streams():
                core.reports.forget_stream_locked(stream)
            for stream in list(ctx.streams.values()):
                device.drop_stream_locked(stream, core.objects)
            for event in list(ctx.events.values()):
                device.drop_event_locked(event, core.objects)
            device.streams_used -= 1  # the context's own default stream
            core.objects.pop(ctx.handle, None)
            core.objects.pop(ctx.default_alias, None)
            forget_context(ctx)
            del device.contexts[ctx.handle]
            orphaned = device.refcount == 0 and not device.contexts
        if orphaned:
            self._release_device(device)
        return RC.OK

    @parsed("acl.rt.set_context")
    def set_context(self, context: int, /) -> int:
        check_ints("set_context", context)
        if context == 0:
            return RC.INVALID_PARAM
        ctx = self._core.lookup(context, Context)
        if ctx is None:
            return RC.PARAM_INVALID
        self._core.context = ctx
        return RC.OK

    @parsed("acl.rt.get_context")
    def get_context(self) -> tuple[int, int]:
        ctx = self._core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        return ctx.handle, RC.OK
