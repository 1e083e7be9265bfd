"""``acl.rt`` host-callback calls: subscribe_report, launch_callback, process_report."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ._args import parsed
from ._calls import CallGroup
from ._core import check_ints
from ._objects import Task
from ._rc import RC

__all__ = ["CallbackCalls"]


class CallbackCalls(CallGroup):
    """Callbacks delivered to a subscribed thread by ``process_report``."""

    @parsed("acl.rt.subscribe_report")
    def subscribe_report(self, thread_id: int, stream: int, /) -> int:
        check_ints("subscribe_report", thread_id, stream)
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        with self._core.lock:
            return self._core.reports.subscribe_locked(thread_id, found)

    @parsed("acl.rt.unsubscribe_report")
    def unsubscribe_report(self, thread_id: int, stream: int, /) -> int:
        check_ints("unsubscribe_report", thread_id, stream)
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        with self._core.lock:
            return self._core.reports.unsubscribe_locked(thread_id, found)

    @parsed("acl.rt.launch_callback")
    def launch_callback(
        self, fn: Callable[[Any], Any], user_data: Any, block_type: int, stream: int, /
    ) -> int:
        if not callable(fn):
            raise TypeError("parameter must be callable")
        if block_type not in (0, 1):
            return RC.INVALID_PARAM
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        if found.subscriber is None:
            return RC.STREAM_NO_CB_REG
        reports = self._core.reports

        def post(task: Task) -> None:
            reports.post_locked(task, fn, user_data)

        return self._submit(found, Task(found, "callback", action=post, hold=bool(block_type)))

    @parsed("acl.rt.process_report")
    def process_report(self, timeout: int, /) -> int:
        check_ints("process_report", timeout)
        if timeout == 0 or timeout < -1:
            return RC.INVALID_PARAM
        return self._core.reports.process(threading.get_ident(), timeout)
