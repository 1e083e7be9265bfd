"""``acl.rt`` stream and event queries beyond the basics: ids, what is left, attributes,
core limits per stream, aborting, event timestamps and wait status."""

from __future__ import annotations

from typing import Any

from ._args import parsed
from ._calls import CallGroup
from ._objects import SimStream, stream_id
from ._rc import RC

__all__ = ["MoreStreamCalls"]

_FAILURE_MODE, _OVERFLOW_CHECK, _USER_TAG, _CACHE_OP_INFO, _PRIORITY = 1, 2, 3, 4, 5
_RESERVED_WORDS = 4
_RES_TYPES = (0, 1)
_WAIT_COMPLETE, _WAIT_NOT_READY = 0, 1


class MoreStreamCalls(CallGroup):
    """Stream ids, capacity, attributes, per-stream core limits, abort; event extras."""

    @parsed("acl.rt.stream_get_id")
    def stream_get_id(self, stream: int, /) -> tuple[int, int]:
        """Return ``(id, ret)``: 0 for a default stream, a unique number otherwise."""
        _, found, ret = self._resolve_stream(stream)
        return (stream_id(found) if found is not None else 0), ret

    @parsed("acl.rt.get_stream_available_num")
    def get_stream_available_num(self) -> tuple[int, int]:
        """Return ``(count, ret)``: streams the current device can still create."""
        ctx = self._core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        with self._core.lock:
            left = self._core.profile.stream_limit - ctx.device.streams_used
        return max(left, 0), RC.OK

    @parsed("acl.rt.get_thread_last_task_id")
    def get_thread_last_task_id(self) -> tuple[int, int]:
        """Return ``(task_id, ret)`` of the last task this thread queued."""
        return self._core.last_task_id, RC.OK

    @parsed("acl.rt.stream_abort")
    def stream_abort(self, stream: int, /) -> int:
        """Drop the stream's queued tasks (a running one finishes); the stream stays usable.

        If tasks were dropped, the next synchronisation of the stream returns 107023.
        A stream of another context gives 107003.
        """
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        with self._core.lock:
            engine = found.device.engine
            if engine is not None and found.queue:
                engine.drop_queued_locked(found)
                found.pending_error = found.pending_error or RC.STREAM_ABORT
        return RC.OK

    # -- attributes -------------------------------------------------------------------

    @parsed("acl.rt.set_stream_attribute")
    def set_stream_attribute(self, stream: int, attr: int, value: dict[str, Any], /) -> int:
        """Set an ``aclrtStreamAttr`` from a dict (``{"failureMode": 1}``, ...).

        Failure mode and overflow check follow ``set_stream_failure_mode`` and
        ``set_stream_overflow_switch``; the others are stored. Unknown ids give 107000.
        """
        if not isinstance(value, dict):
            raise TypeError("the aclrtStreamAttrValue argument is not dict")
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        if attr == _FAILURE_MODE:
            mode = value.get("failureMode", 0)
            if mode not in (0, 1):
                return RC.INVALID_PARAM
            found.failure_mode = mode
        elif attr == _OVERFLOW_CHECK:
            switch = value.get("overflowSwitch", 0)
            if switch not in (0, 1):
                return RC.INVALID_PARAM
            found.overflow_switch = switch
        elif attr == _USER_TAG:
            found.tag = int(value.get("userCustomTag", 0))
        elif attr not in (_CACHE_OP_INFO, _PRIORITY):
            return RC.PARAM_INVALID
        return RC.OK

    @parsed("acl.rt.get_stream_attribute")
    def get_stream_attribute(self, stream: int, attr: int, /) -> tuple[dict[str, Any], int]:
        """Return ``(value dict, ret)`` for an ``aclrtStreamAttr``."""
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return {}, ret
        if attr == _FAILURE_MODE:
            return {"failureMode": found.failure_mode}, RC.OK
        if attr == _OVERFLOW_CHECK:
            return {"overflowSwitch": found.overflow_switch}, RC.OK
        if attr == _USER_TAG:
            return {"userCustomTag": found.tag}, RC.OK
        if attr == _PRIORITY:
            return {"reserved": [found.priority] + [0] * (_RESERVED_WORDS - 1)}, RC.OK
        if attr == _CACHE_OP_INFO:
            return {"reserved": [0] * _RESERVED_WORDS}, RC.OK
        return {}, RC.PARAM_INVALID

    # -- core limits per stream -------------------------------------------------------

    def _limits(self, stream: SimStream) -> list[int]:
        limits = stream.res_limits
        return list(stream.device.res_limits) if limits is None else limits

    @parsed("acl.rt.get_stream_res_limit")
    def get_stream_res_limit(self, stream: int, kind: int, /) -> tuple[int, int]:
        """Return ``(cores, ret)`` a stream may use of a kind (the device's by default)."""
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return 0, ret
        if kind not in _RES_TYPES:
            return 0, RC.PARAM_INVALID
        return self._limits(found)[kind], RC.OK

    @parsed("acl.rt.set_stream_res_limit")
    def set_stream_res_limit(self, stream: int, kind: int, value: int, /) -> int:
        """Limit a stream's cores of a kind; 107000 above the device's limit."""
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        if kind not in _RES_TYPES or not 0 < value <= found.device.res_limits[kind]:
            return RC.PARAM_INVALID
        limits = self._limits(found)
        limits[kind] = value
        found.res_limits = limits
        return RC.OK

    @parsed("acl.rt.reset_stream_res_limit")
    def reset_stream_res_limit(self, stream: int, /) -> int:
        _, found, ret = self._resolve_stream(stream)
        if found is not None:
            found.res_limits = None
        return ret

    @parsed("acl.rt.use_stream_res_in_current_thread")
    def use_stream_res_in_current_thread(self, stream: int, /) -> int:
        """Make this thread's core limits those of *stream*."""
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        self._core.thread_state.res_stream = found
        return RC.OK

    @parsed("acl.rt.unuse_stream_res_in_current_thread")
    def unuse_stream_res_in_current_thread(self, stream: int, /) -> int:
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        if getattr(self._core.thread_state, "res_stream", None) is not found:
            return RC.PARAM_INVALID
        self._core.thread_state.res_stream = None
        return RC.OK

    @parsed("acl.rt.get_res_in_current_thread")
    def get_res_in_current_thread(self, kind: int, /) -> tuple[int, int]:
        """Return ``(cores, ret)`` this thread may use: its stream's, else its device's."""
        ctx = self._core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        if kind not in _RES_TYPES:
            return 0, RC.PARAM_INVALID
        stream: SimStream | None = getattr(self._core.thread_state, "res_stream", None)
        if stream is not None and stream.alive:
            return self._limits(stream)[kind], RC.OK
        return ctx.device.res_limits[kind], RC.OK

    # -- events -----------------------------------------------------------------------

    @parsed("acl.rt.query_event_wait_status")
    def query_event_wait_status(self, event: int, /) -> tuple[int, int]:
        """Return ``(status, ret)``: 0 (COMPLETE) once every ``stream_wait_event`` on the
        event has been passed, 1 (NOT_READY) before. Ex events give 107000."""
        ev, ret = self._lookup_event(event)  # type: ignore[attr-defined]
        if ev is None:
            return 0, ret
        if ev.kind == "ex":
            return 0, RC.PARAM_INVALID
        waiting = any(not task.done for task in ev.waits)
        return (_WAIT_NOT_READY if waiting else _WAIT_COMPLETE), RC.OK

    @parsed("acl.rt.event_get_timestamp")
    def event_get_timestamp(self, event: int, /) -> tuple[int, int]:
        """Return ``(microseconds, ret)`` at which the event's record completed.

        Never recorded: 507000; not complete yet or no timestamps: 107006.
        """
        ev, ret = self._lookup_event(event)  # type: ignore[attr-defined]
        if ev is None:
            return 0, ret
        if ev.record is None:
            return 0, RC.INTERNAL_ERROR
        if not ev.record.done or not ev.has_timestamps:
            return 0, RC.EVENT_TIMESTAMP_INVALID
        return int(ev.record.finish * 1e6), RC.OK

    @parsed("acl.rt.get_event_id")
    def get_event_id(self, event: int, /) -> tuple[int, int]:
        """Return ``(id, ret)``: a number unique among the runtime's events."""
        ev, ret = self._lookup_event(event)  # type: ignore[attr-defined]
        return ((ev.handle >> 6) & 0xFFFF_FFFF if ev is not None else 0), ret

    @parsed("acl.rt.get_event_avail_num")
    def get_event_avail_num(self) -> tuple[int, int]:
        """Return ``(count, ret)``: hardware events the current device has left."""
        ctx = self._core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        with self._core.lock:
            left = self._core.profile.event_limit - ctx.device.events_used
        return max(left, 0), RC.OK
