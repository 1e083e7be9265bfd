"""The simulated AI cores: a small pool of threads, shared by a runtime's devices,
that runs kernel bodies (``Kernel.fn``)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from ._objects import Task
from ._rc import RC

__all__ = ["CorePool"]

_log = logging.getLogger("aclasync.sim")


class CorePool:
    """Threads that run kernel bodies; started with the first active device, joined with
    the last. The runtime lock guards ``acquire``/``release`` (callers hold it)."""

    def __init__(self, size: int, lock: threading.Lock) -> None:
        self._size = size
        self._lock = lock
        self._users = 0
        self._queue: queue.SimpleQueue[tuple[Task, Callable[[Task], None]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []

    @property
    def threads(self) -> tuple[threading.Thread, ...]:
        return tuple(self._threads)

    def acquire_locked(self) -> None:
        """One more active device; start the threads for the first one."""
        self._users += 1
        if self._users == 1:
            self._threads = [
                threading.Thread(target=self._run, name=f"aclasync-sim-core{i}", daemon=True)
                for i in range(self._size)
            ]
            for thread in self._threads:
                thread.start()

    def release_locked(self) -> list[threading.Thread]:
        """One device fewer; after the last, return the threads to join (without the lock)."""
        self._users -= 1
        if self._users:
            return []
        for _ in self._threads:
            self._queue.put(None)
        threads, self._threads = self._threads, []
        return threads

    def submit(self, task: Task, done: Callable[[Task], None]) -> None:
        """Run ``task.fn`` on a core, then call ``done(task)`` with the runtime lock held."""
        self._queue.put((task, done))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            task, done = item
            fn = task.fn
            assert fn is not None
            try:
                fn()
            except BaseException:  # a kernel body must never take the device down
                _log.exception("kernel body raised on simulated device %d", task.stream.device.id)
                task.error = task.error or RC.AICORE_EXCEPTION
            with self._lock:
                done(task)
