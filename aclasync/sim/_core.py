"""State shared by every call of one simulated runtime, and the helpers the calls use."""

from __future__ import annotations

import _thread
import itertools
import threading
import time
from collections.abc import Iterable
from typing import TypeVar

from ._callbacks import ReportHub
from ._cores import CorePool
from ._device import SimDevice
from ._memory import HostMemory, Region
from ._objects import Context, SimEvent, SimStream, Task
from ._profiles import SocProfile

__all__ = ["Core", "check_ints", "wait_for_tasks"]

_HANDLE_BASE = 0x5A00_0000_0000
_T = TypeVar("_T")


class Core:
    """Process-level state of one simulated runtime."""

    def __init__(self, device_count: int, profile: SocProfile) -> None:
        self.lock = threading.Lock()
        self.profile = profile
        self._handles = itertools.count(1)
        self.cores = CorePool(profile.core_threads, self.lock)
        self.devices = [
            SimDevice(i, profile, self.lock, self.cores, self.new_handle)
            for i in range(device_count)
        ]
        self.objects: dict[int, object] = {}
        self.init_count = 0
        self.host = HostMemory()
        self.reports = ReportHub(self.lock)
        self._local = threading.local()

    def new_handle(self) -> int:
        return _HANDLE_BASE + next(self._handles) * 0x40

    # -- the calling thread's context ------------------------------------------------

    @property
    def context(self) -> Context | None:
        """The calling thread's current context, if it is still alive."""
        ctx: Context | None = getattr(self._local, "context", None)
        return ctx if ctx is not None and ctx.alive else None

    @context.setter
    def context(self, ctx: Context | None) -> None:
        self._local.context = ctx

    # -- handle lookups --------------------------------------------------------------

    def lookup(self, handle: int, kind: type[_T]) -> _T | None:
        obj = self.objects.get(handle)
        if isinstance(obj, kind) and getattr(obj, "alive", False):
            return obj
        return None

    def stream(self, ctx: Context, handle: int) -> SimStream | None:
        """Resolve a stream handle; 0 is *ctx*'s default stream."""
        if handle == 0:
            return ctx.default_stream
        return self.lookup(handle, SimStream)

    def event(self, handle: int) -> SimEvent | None:
        return self.lookup(handle, SimEvent)

    def device_region(self, address: int) -> Region | None:
        """The device memory block containing *address*, on any device."""
        for device in self.devices:
            if device.memory.contains(address):
                return device.memory.find(address)
        return None

    def host_or_device_region(self, address: int) -> tuple[Region | None, bool]:
        """The block containing *address* and whether it is device memory."""
        region = self.device_region(address)
        if region is not None:
            return region, True
        return self.host.find(address), False

    def device(self, device_id: int) -> SimDevice | None:
        if 0 <= device_id < len(self.devices):
            return self.devices[device_id]
        return None


def check_ints(api: str, *values: object) -> None:
    """Raise TypeError, as pyACL's argument parser does, unless every value is an int."""
    for position, value in enumerate(values, 1):
        if not isinstance(value, int):
            raise TypeError(
                f"{api}: argument {position} must be int, not {type(value).__name__} "
                "(args parse failed)"
            )


def wait_for_tasks(
    core: Core,
    tasks: Iterable[Task],
    deadline: float | None,
    *,
    poll_s: float | None = None,
    latency_s: float = 0.0,
) -> bool:
    """Block (GIL released) until every task is done; False if *deadline* passes first.

    Passive waiters sleep on a lock the engine releases, then wake ``latency_s`` after
    the last completion. With ``poll_s`` the waiter polls instead, sleeping between polls.
    """
    last_finish = 0.0
    for task in tasks:
        done = _block(core, task, deadline) if poll_s is None else _poll(task, deadline, poll_s)
        if not done:
            return False
        last_finish = max(last_finish, task.finish)
    if latency_s > 0 and last_finish:
        delay = last_finish + latency_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return True


def _is_done(task: Task) -> bool:
    # A function call, so that type checkers do not narrow ``task.done`` across waits.
    return task.done


def _poll(task: Task, deadline: float | None, interval: float) -> bool:
    while not _is_done(task):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def _block(core: Core, task: Task, deadline: float | None) -> bool:
    if task.done:
        return True
    waiter = _thread.allocate_lock()
    waiter.acquire()
    with core.lock:
        if _is_done(task):
            return True
        if task.waiters is None:
            task.waiters = []
        task.waiters.append(waiter)
    timeout = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
    if waiter.acquire(timeout=timeout):
        return True
    with core.lock:
        if _is_done(task):
            return True
        if task.waiters is not None:
            task.waiters.remove(waiter)
    return False
