"""The timeline of one simulated device: its scheduler thread.

All state is guarded by the runtime's single lock; the scheduler waits on a condition
built on it, so no lock ordering can go wrong. Methods named ``*_locked`` expect the
caller to hold that lock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable

from .._platform import precise_timers
from ._cores import CorePool
from ._objects import SimStream, Task

__all__ = ["Engine"]

#: Longest single wait of the scheduler: a kernel of years must not overflow the
#: platform's timeout (``OverflowError`` killed the thread); it wakes and waits again.
_LONGEST_WAIT_S = 3600.0


class Engine:
    """Runs the tasks of one device's streams with real timing."""

    def __init__(
        self,
        device_id: int,
        lock: threading.Lock,
        cores: CorePool,
        on_failure: Callable[[Task], None],
    ) -> None:
        self.device_id = device_id
        self._lock = lock
        self._wake = threading.Condition(lock)
        self._on_failure = on_failure
        self._ready: deque[SimStream] = deque()
        self._timers: list[tuple[float, int, Task]] = []
        self._tiebreak = itertools.count()
        self._cores = cores
        self._stopping = False
        self._waiting = False
        #: Called as ``observer(device_id, stream_handle, task_name, start, finish)``.
        self.observer: Callable[[int, int, str, float, float], None] | None = None
        self._thread = threading.Thread(
            target=self._schedule, name=f"aclasync-sim-dev{device_id}", daemon=True
        )

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the scheduler and join it. Call without holding the lock."""
        with self._lock:
            self._stopping = True
            self._wake.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()

    # -- called with the lock held ---------------------------------------------------

    def submit_locked(self, task: Task) -> None:
        """Append *task* to its stream's FIFO."""
        stream = task.stream
        stream.tail = task
        idle = stream.running is None and not stream.queue
        if idle:  # the device may start it at once (see _start_head_locked)
            task.submitted = time.monotonic()
        stream.queue.append(task)
        if idle:
            self._ready.append(stream)
            if self._waiting:
                self._wake.notify()

    def release_hold_locked(self, task: Task) -> None:
        """Mark a blocking callback as run, letting its stream go on."""
        if task.hold and not task.done:
            task.hold = False
            self._satisfy_locked(task, time.monotonic())

    def complete_locked(self, task: Task) -> None:
        """Finish a placeholder task no stream runs (a notify's gate), waking its dependents."""
        if not task.done:
            self._finish_locked(task, time.monotonic())

    def drop_queued_locked(self, stream: SimStream) -> None:
        """Discard the tasks of *stream* that have not started, as if completed."""
        now = time.monotonic()
        while stream.queue:
            self._finish_locked(stream.queue.popleft(), now)

    # -- scheduler thread ------------------------------------------------------------

    def _schedule(self) -> None:
        precise_timers()  # a kernel's end is a timed wait: on time, not up to 50 us late
        timers = self._timers
        with self._lock:
            while not self._stopping:
                now = time.monotonic()
                while timers and timers[0][0] <= now:
                    deadline, _, task = heapq.heappop(timers)
                    timed_only = task.fn is None and not task.hold  # its end is modelled
                    self._satisfy_locked(task, deadline if timed_only else now)
                while self._ready:
                    self._start_head_locked(self._ready.popleft(), now)
                if self._ready:
                    continue
                timeout = timers[0][0] - time.monotonic() if timers else None
                if timeout is not None:  # (a kernel of years: wake, and look again)
                    timeout = min(timeout, _LONGEST_WAIT_S)
                self._waiting = True
                self._wake.wait(timeout)
                self._waiting = False

    def _start_head_locked(self, stream: SimStream, now: float) -> None:
        """Start tasks at the head of *stream* until one stays running or blocks."""
        queue_ = stream.queue
        while stream.running is None and queue_:
            task = queue_[0]
            dep = task.dep
            if dep is not None and not dep.done:
                if dep.dependents is None:
                    dep.dependents = []
                dep.dependents.append(stream)
                return
            queue_.popleft()
            stream.running = task
            start = now
            if task.submitted and task.fn is None and not task.hold:
                # Queued on an idle stream, it starts when it was queued, not when this
                # thread got the GIL: host Python right after a launch must not delay
                # the modelled kernel (on a card it does not). Work queued behind other
                # work starts when this thread finds its turn, as before, so a late
                # thread never catches up with a backlog in one burst that would hold
                # the GIL; a body or a hold runs on the host and starts now too.
                start = task.submitted
                if stream.free_at > start:
                    start = stream.free_at
                if dep is not None and dep.finish > start:
                    start = dep.finish
                if start > now:
                    start = now
            task.start = start
            if task.action is not None:
                task.action(task)
            pending = 0
            if task.duration > 0:
                pending += 1
                heapq.heappush(self._timers, (start + task.duration, next(self._tiebreak), task))
            if task.fn is not None:
                pending += 1
                self._cores.submit(task, self._body_done_locked)
            if task.hold:
                pending += 1
            task.pending = pending
            if pending == 0:
                self._finish_locked(task, start, requeue=False)  # this loop goes on

    def _satisfy_locked(self, task: Task, now: float) -> None:
        task.pending -= 1
        if task.pending == 0 and not task.done:
            self._finish_locked(task, now)

    def _finish_locked(self, task: Task, now: float, *, requeue: bool = True) -> None:
        task.done = True
        task.finish = now
        stream = task.stream
        if self.observer is not None:
            try:
                self.observer(self.device_id, stream.handle, task.name, task.start, now)
            except Exception:
                self.observer = None  # a broken observer must not stop the device
        if stream.running is task:
            stream.running = None
            stream.free_at = now
            if requeue and stream.queue:
                self._ready.append(stream)
        if task.overflow and task.stream.sat_mode == 0:
            task.stream.context.overflow_status = 1
        waiters, task.waiters = task.waiters, None
        if waiters:
            for waiter in waiters:
                waiter.release()
        dependents, task.dependents = task.dependents, None
        if dependents:
            self._ready.extend(dependents)
        if task.error:
            self._on_failure(task)
        if self._ready and self._waiting:
            self._wake.notify()

    def _body_done_locked(self, task: Task) -> None:
        self._satisfy_locked(task, time.monotonic())
