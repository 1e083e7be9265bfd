"""``acl.rt`` event calls."""

from __future__ import annotations

from ._args import parsed
from ._calls import CallGroup
from ._core import check_ints, wait_for_tasks
from ._objects import SimEvent, Task
from ._rc import RC
from ._timeouts import timeout_deadline

__all__ = ["EventCalls"]

_SYNC = 0x1
_TIME_LINE = 0x8
_EXTERNAL = 0x20
_IPC = 0x40
_EX_COMBINABLE = 0x1 | 0x2 | 0x8 | 0x10

# query_event (deprecated) and query_event_status use opposite numbers.
_EVENT_COMPLETE, _EVENT_NOT_READY = 0, 1
_RECORDED_NOT_READY, _RECORDED_COMPLETE = 0, 1


class EventCalls(CallGroup):
    """Event life cycle, recording, status, host waits and timing."""

    @parsed("acl.rt.create_event")
    def create_event(self) -> tuple[int, int]:
        return self._create_event("plain", 0)

    @parsed("acl.rt.create_event_with_flag")
    def create_event_with_flag(self, flag: int, /) -> tuple[int, int]:
        check_ints("create_event_with_flag", flag)
        mask = self._core.profile.event_with_flag_mask
        if flag <= 0 or flag & ~mask:
            return 0, RC.PARAM_INVALID
        return self._create_event("flag", flag)

    @parsed("acl.rt.create_event_ex_with_flag")
    def create_event_ex_with_flag(self, flag: int, /) -> tuple[int, int]:
        check_ints("create_event_ex_with_flag", flag)
        if flag == _IPC:
            return 0, RC.FEATURE_NOT_SUPPORT
        if flag != _EXTERNAL and (flag < 0 or flag & ~_EX_COMBINABLE):
            return 0, RC.PARAM_INVALID
        return self._create_event("ex", flag)

    def _create_event(self, kind: str, flags: int) -> tuple[int, int]:
        core = self._core
        ctx = core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        hardware = kind == "plain" or (kind == "flag" and bool(flags & (_SYNC | _EXTERNAL)))
        device = ctx.device
        with core.lock:
            if hardware:
                if device.events_used >= core.profile.event_limit:
                    return 0, RC.NO_EVENT_RESOURCE
                device.events_used += 1
            event = SimEvent(core.new_handle(), ctx, kind, flags, hardware)
            ctx.events[event.handle] = event
            core.objects[event.handle] = event
        return event.handle, RC.OK

    @parsed("acl.rt.destroy_event")
    def destroy_event(self, event: int, /) -> int:
        check_ints("destroy_event", event)
        if event == 0:
            return RC.INVALID_PARAM
        core = self._core
        with core.lock:
            found = core.event(event)
            if found is None:
                return RC.PARAM_INVALID
            found.context.device.drop_event_locked(found, core.objects)
        return RC.OK

    @parsed("acl.rt.record_event")
    def record_event(self, event: int, stream: int, /) -> int:
        check_ints("record_event", event, stream)
        if event == 0:
            return RC.INVALID_PARAM
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        ev = self._core.event(event)
        if ev is None or ev.context.device is not found.device:  # (its device's only)
            return RC.PARAM_INVALID
        if found.aborted:
            return RC.STREAM_ABORT
        task = Task(found, "record_event")
        ret = self._submit(found, task)
        if ret == RC.OK:
            ev.record = task
        return ret

    @parsed("acl.rt.reset_event")
    def reset_event(self, event: int, stream: int, /) -> int:
        check_ints("reset_event", event, stream)
        if event == 0:
            return RC.INVALID_PARAM
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        ev = self._core.event(event)
        if ev is None or ev.kind != "flag" or not ev.flags & _SYNC:
            return RC.PARAM_INVALID
        if ev.context.device is not found.device:  # an event belongs to its device
            return RC.PARAM_INVALID

        def reset(_: Task) -> None:
            ev.record = None

        return self._submit(found, Task(found, "reset_event", action=reset))

    @parsed("acl.rt.query_event")
    def query_event(self, event: int, /) -> tuple[int, int]:
        check_ints("query_event", event)
        ev, ret = self._lookup_event(event)
        if ev is None:
            return 0, ret
        if ev.kind == "ex":
            return 0, RC.PARAM_INVALID
        done = ev.record is None or ev.record.done
        return (_EVENT_COMPLETE if done else _EVENT_NOT_READY), RC.OK

    @parsed("acl.rt.query_event_status")
    def query_event_status(self, event: int, /) -> tuple[int, int]:
        check_ints("query_event_status", event)
        ev, ret = self._lookup_event(event)
        if ev is None:
            return 0, ret
        done = ev.kind == "ex" if ev.record is None else ev.record.done
        return (_RECORDED_COMPLETE if done else _RECORDED_NOT_READY), RC.OK

    @parsed("acl.rt.synchronize_event")
    def synchronize_event(self, event: int, /) -> int:
        check_ints("synchronize_event", event)
        return self._sync_event(event, -1)

    @parsed("acl.rt.synchronize_event_with_timeout")
    def synchronize_event_with_timeout(self, event: int, timeout: int, /) -> int:
        check_ints("synchronize_event_with_timeout", event, timeout)
        if timeout < -1:
            return RC.PARAM_INVALID
        return self._sync_event(event, timeout)

    def _sync_event(self, event: int, timeout_ms: int) -> int:
        ev, ret = self._lookup_event(event)
        if ev is None:
            return ret
        record = ev.record
        if record is None or record.done:
            return RC.OK
        if timeout_ms == 0:
            return RC.EVENT_SYNC_TIMEOUT
        latency = self._core.profile.notify_latency_us / 1e6
        deadline = timeout_deadline(timeout_ms)
        if not wait_for_tasks(self._core, [record], deadline, latency_s=latency):
            return RC.EVENT_SYNC_TIMEOUT
        return RC.OK

    @parsed("acl.rt.event_elapsed_time")
    def event_elapsed_time(self, start: int, end: int, /) -> tuple[float, int]:
        check_ints("event_elapsed_time", start, end)
        if start == 0 or end == 0:
            return 0.0, RC.INVALID_PARAM
        first, ret = self._lookup_event(start)
        second, ret2 = self._lookup_event(end)
        if first is None or second is None:
            return 0.0, ret or ret2
        if first.context.device is not second.context.device:  # (each its device's)
            return 0.0, RC.PARAM_INVALID
        if first.record is None or second.record is None:
            return 0.0, RC.INTERNAL_ERROR
        if not (first.record.done and second.record.done):
            return 0.0, RC.EVENT_TIMESTAMP_INVALID
        if not (first.has_timestamps and second.has_timestamps):
            return 0.0, RC.EVENT_TIMESTAMP_INVALID
        elapsed = (second.record.finish - first.record.finish) * 1000.0
        if elapsed < 0:
            return 0.0, RC.EVENT_TIMESTAMP_REVERSAL
        return elapsed, RC.OK

    def _lookup_event(self, event: int) -> tuple[SimEvent | None, int]:
        if event == 0:
            return None, RC.INVALID_PARAM
        if self._core.context is None:
            return None, RC.CONTEXT_NULL
        found = self._core.event(event)
        return found, (RC.OK if found is not None else RC.PARAM_INVALID)
