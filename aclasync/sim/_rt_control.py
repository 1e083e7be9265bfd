"""``acl.rt`` error reporting, exception info, timeouts and system parameters."""

from __future__ import annotations

from typing import Any

from ._args import parsed
from ._calls import CallGroup
from ._objects import ExceptionInfo
from ._rc import RC

__all__ = ["ControlCalls"]

_THREAD_LEVEL = 0  # ACL_RT_THREAD_LEVEL, the only aclrtLastErrLevel
_SYS_PARAMS = range(4)  # aclSysParamOpt: DETERMINISTIC .. ENABLE_KERNEL_EARLY_START
_INVALID_U32 = 0xFFFF_FFFF  # what the exception-info getters return for a bad handle
#: Granularity of the op execute timeout (``get_op_timeout_interval``), microseconds.
OP_TIMEOUT_INTERVAL_US = 1000
_MAX_OP_TIMEOUT_US = (2**32 - 1) * 1000


class ControlCalls(CallGroup):
    """Last errors, the exception callback, op timeouts and system parameters."""

    # -- last error -------------------------------------------------------------------

    @parsed("acl.rt.peek_at_last_error", records=False)
    def peek_at_last_error(self, level: int, /) -> int:
        """Return the last non-zero ``ret`` of this thread's runtime calls (kept)."""
        if level != _THREAD_LEVEL:
            return RC.INVALID_PARAM
        return self._core.last_error(clear=False)

    @parsed("acl.rt.get_last_error", records=False)
    def get_last_error(self, level: int, /) -> int:
        """Return the last non-zero ``ret`` of this thread's runtime calls and clear it."""
        if level != _THREAD_LEVEL:
            return RC.INVALID_PARAM
        return self._core.last_error(clear=True)

    # -- exception info ---------------------------------------------------------------

    def set_exception_info_callback(self, *args: Any, **kwargs: Any) -> int:
        """Call ``fn(info)`` for every task that fails; ``None`` (or nothing) removes it.

        The callback runs on the thread whose synchronisation reports the failure,
        before that call returns; ``info`` is a handle for ``get_*_from_exception_info``.
        """
        if kwargs or len(args) > 1:
            raise TypeError("acl.rt.set_exception_info_callback args parse failed")
        fn = args[0] if args else None
        if fn is not None and not callable(fn):
            raise TypeError("acl.rt.set_exception_info_callback args parse failed")
        self._core.exception_callback = fn
        return RC.OK

    set_exception_info_callback.__pyacl_api__ = "acl.rt.set_exception_info_callback"  # type: ignore[attr-defined]
    set_exception_info_callback.__pyacl_fmt__ = "|O"  # type: ignore[attr-defined]

    def _info(self, handle: int) -> ExceptionInfo | None:
        return self._core.exception_infos.get(handle)

    @parsed("acl.rt.get_error_code_from_exception_info")
    def get_error_code_from_exception_info(self, info: int, /) -> int:
        found = self._info(info)
        return _INVALID_U32 if found is None else found.error

    @parsed("acl.rt.get_task_id_from_exception_info")
    def get_task_id_from_exception_info(self, info: int, /) -> int:
        found = self._info(info)
        return _INVALID_U32 if found is None else found.task_id

    @parsed("acl.rt.get_stream_id_from_exception_info")
    def get_stream_id_from_exception_info(self, info: int, /) -> int:
        found = self._info(info)
        return _INVALID_U32 if found is None else found.stream_id

    @parsed("acl.rt.get_thread_id_from_exception_info")
    def get_thread_id_from_exception_info(self, info: int, /) -> int:
        found = self._info(info)
        return _INVALID_U32 if found is None else found.thread_id

    @parsed("acl.rt.get_device_id_from_exception_info")
    def get_device_id_from_exception_info(self, info: int, /) -> int:
        found = self._info(info)
        return _INVALID_U32 if found is None else found.device_id

    # -- timeouts ---------------------------------------------------------------------

    @parsed("acl.rt.set_op_wait_timeout")
    def set_op_wait_timeout(self, timeout: int, /) -> int:
        """Set the process's event-wait timeout in seconds (0: none). Recorded only."""
        if timeout < 0:
            return RC.PARAM_INVALID
        self._core.op_wait_timeout_s = timeout
        return RC.OK

    @parsed("acl.rt.set_op_execute_time_out")
    def set_op_execute_time_out(self, timeout: int, /) -> int:
        """Set the longest a kernel may run, in seconds (0: no limit).

        A simulated kernel whose ``duration_us`` is longer stops at the limit and fails
        with 507014 (ACL_ERROR_RT_AICORE_TIMEOUT).
        """
        if timeout < 0:
            return RC.PARAM_INVALID
        self._core.op_execute_timeout_us = timeout * 1_000_000
        return RC.OK

    @parsed("acl.rt.set_op_execute_timeout_v2")
    def set_op_execute_timeout_v2(self, timeout: int, /) -> tuple[int, int]:
        """Set the kernel time limit in microseconds; return ``(actual, ret)``.

        The limit is rounded up to the timeout interval; above ``(2**32 - 1)`` ms gives
        107000. It needs a current context (``ApiImpl::SetOpExecuteTimeOutV2``: 107002).
        """
        if self._core.context is None:
            return 0, RC.CONTEXT_NULL
        if not 0 <= timeout <= _MAX_OP_TIMEOUT_US:
            return 0, RC.PARAM_INVALID
        interval = OP_TIMEOUT_INTERVAL_US
        actual = -(-timeout // interval) * interval
        self._core.op_execute_timeout_us = actual
        return actual, RC.OK

    @parsed("acl.rt.get_op_timeout_interval")
    def get_op_timeout_interval(self) -> tuple[int, int]:
        """Return ``(microseconds, ret)``: the granularity of the kernel time limit.

        It needs a current context (``ApiImpl::GetOpTimeOutInterval``: ``(0, 107002)``).
        """
        if self._core.context is None:
            return 0, RC.CONTEXT_NULL
        return OP_TIMEOUT_INTERVAL_US, RC.OK

    @parsed("acl.rt.get_op_execute_timeout")
    def get_op_execute_timeout(self) -> tuple[int, int]:
        """Return ``(milliseconds, ret)`` of the kernel time limit (0: none)."""
        return self._core.op_execute_timeout_us // 1000, RC.OK

    # -- system parameters ------------------------------------------------------------

    @parsed("acl.rt.ctx_set_sys_param_opt")
    def ctx_set_sys_param_opt(self, opt: int, value: int, /) -> int:
        """Set an ``aclSysParamOpt`` for the current context."""
        ctx = self._core.context
        if ctx is None:
            return RC.CONTEXT_NULL
        if opt not in _SYS_PARAMS:
            return RC.PARAM_INVALID
        ctx.sys_params[opt] = value
        return RC.OK

    @parsed("acl.rt.ctx_get_sys_param_opt")
    def ctx_get_sys_param_opt(self, opt: int, /) -> tuple[int, int]:
        """Return ``(value, ret)``; 107021 if the option was never set in this context."""
        ctx = self._core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        if opt not in _SYS_PARAMS:
            return 0, RC.PARAM_INVALID
        if opt not in ctx.sys_params:
            return 0, RC.SYSPARAMOPT_NOT_SET
        return ctx.sys_params[opt], RC.OK

    @parsed("acl.rt.set_sys_param_opt")
    def set_sys_param_opt(self, opt: int, value: int, /) -> int:
        """Set an ``aclSysParamOpt`` for the whole process."""
        if opt not in _SYS_PARAMS:
            return RC.PARAM_INVALID
        self._core.sys_params[opt] = value
        return RC.OK

    @parsed("acl.rt.get_sys_param_opt")
    def get_sys_param_opt(self, opt: int, /) -> tuple[int, int]:
        """Return ``(value, ret)``; 107021 if the option was never set."""
        if opt not in _SYS_PARAMS:
            return 0, RC.PARAM_INVALID
        if opt not in self._core.sys_params:
            return 0, RC.SYSPARAMOPT_NOT_SET
        return self._core.sys_params[opt], RC.OK

    # -- the current context's default stream -----------------------------------------

    @parsed("acl.rt.ctx_get_current_default_stream")
    def ctx_get_current_default_stream(self) -> tuple[int, int]:
        """Return ``(stream, ret)``: a handle for the current context's default stream.

        The handle works wherever a stream is taken, like ``0`` does, but cannot be
        destroyed (107000).
        """
        core = self._core
        ctx = core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        with core.lock:
            if not ctx.default_alias:
                ctx.default_alias = core.new_handle()
                core.objects[ctx.default_alias] = ctx.default_stream
        return ctx.default_alias, RC.OK
