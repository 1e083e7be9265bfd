"""Host callbacks: stream subscriptions and the reports ``process_report`` delivers."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ._objects import SimStream, Task
from ._rc import RC
from ._timeouts import timeout_deadline

__all__ = ["ReportHub"]

_log = logging.getLogger("aclasync.sim")

#: Most threads a process may subscribe (facts file, callbacks).
MAX_SUBSCRIBED_THREADS = 1024

_STREAM_SUBSCRIBE = RC.STREAM_SUBSCRIBE
_THREAD_SUBSCRIBE = RC.THREAD_SUBSCRIBE
_REPORT_TIMEOUT = RC.REPORT_TIMEOUT

_Report = tuple[Callable[[Any], Any], Any, Task]

#: CPython's complaint when a C function returns a value with an exception still set,
#: as pyACL's ``process_report`` does after a callback raised (it leaves the error set).
_LEFT_SET = "<built-in function process_report> returned a result with an exception set"


class _Subscriber:
    __slots__ = ("device_id", "reports", "streams", "wake")

    def __init__(self, device_id: int, lock: threading.Lock) -> None:
        self.device_id = device_id
        self.streams: set[SimStream] = set()
        self.reports: deque[_Report] = deque()
        self.wake = threading.Condition(lock)


class ReportHub:
    """Which thread serves which stream, and the reports waiting for each thread."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._subscribers: dict[int, _Subscriber] = {}

    def subscribe_locked(self, thread_id: int, stream: SimStream) -> int:
        if stream.subscriber is not None:
            return _STREAM_SUBSCRIBE
        sub = self._subscribers.get(thread_id)
        if sub is None:
            if len(self._subscribers) >= MAX_SUBSCRIBED_THREADS:
                return _THREAD_SUBSCRIBE
            sub = self._subscribers[thread_id] = _Subscriber(stream.device.id, self._lock)
        elif sub.device_id != stream.device.id:
            return _THREAD_SUBSCRIBE
        sub.streams.add(stream)
        stream.subscriber = thread_id
        return 0

    def unsubscribe_locked(self, thread_id: int, stream: SimStream) -> int:
        if stream.subscriber is None:
            return _STREAM_SUBSCRIBE
        if stream.subscriber != thread_id:
            return _THREAD_SUBSCRIBE
        self.forget_stream_locked(stream)
        return 0

    def forget_stream_locked(self, stream: SimStream) -> None:
        """Unbind *stream*; its undelivered reports are dropped, releasing their streams."""
        thread_id, stream.subscriber = stream.subscriber, None
        sub = self._subscribers.get(thread_id) if thread_id is not None else None
        if sub is None:
            return
        sub.streams.discard(stream)
        kept: deque[_Report] = deque()
        for report in sub.reports:
            if report[2].stream is stream:
                _release(report[2])
            else:
                kept.append(report)
        sub.reports = kept
        if not sub.streams:
            del self._subscribers[thread_id]  # type: ignore[arg-type]
            sub.wake.notify_all()  # a process_report waiting forever must not hang

    def post_locked(self, task: Task, fn: Callable[[Any], Any], user_data: Any) -> None:
        """Report a callback task that reached the head of its stream."""
        thread_id = task.stream.subscriber
        sub = self._subscribers.get(thread_id) if thread_id is not None else None
        if sub is None:
            # Unsubscribed after launch: nothing will ever run it, so do not hold the stream.
            task.hold = False
            return
        sub.reports.append((fn, user_data, task))
        sub.wake.notify()

    def process(self, thread_id: int, timeout_ms: int) -> int:
        """Run the callbacks reported to *thread_id*; the body of ``process_report``.

        The whole batch runs and every blocking callback's stream is let go; then a
        ``SystemExit`` or ``KeyboardInterrupt`` a callback raised is re-raised, or else
        the first other exception comes out as the cause of pyACL's ``SystemError``.
        """
        deadline = timeout_deadline(timeout_ms)
        with self._lock:
            sub = self._subscribers.get(thread_id)
            if sub is None:
                return _THREAD_SUBSCRIBE
            while not sub.reports:
                if self._subscribers.get(thread_id) is not sub:
                    return _THREAD_SUBSCRIBE
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return _REPORT_TIMEOUT
                sub.wake.wait(remaining)
            batch = list(sub.reports)
            sub.reports.clear()
        failure: Exception | None = None
        escaping: BaseException | None = None
        for fn, user_data, task in batch:
            try:
                fn(user_data)
            except Exception as exc:
                if failure is None:
                    failure = exc
                else:
                    _log.error("callback %r raised %r after another one; dropped", fn, exc)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: after the batch
                _log.error("callback %r raised %r; re-raised after its batch", fn, exc)
                escaping = escaping or exc
            finally:
                if task.hold:
                    with self._lock:
                        _release(task)
        if escaping is not None:
            raise escaping
        if failure is not None:
            raise SystemError(_LEFT_SET) from failure
        return 0


def _release(task: Task) -> None:
    engine = task.stream.device.engine
    if engine is not None:
        engine.release_hold_locked(task)
    else:
        task.hold = False
