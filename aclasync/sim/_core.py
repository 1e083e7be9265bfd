"""State shared by every call of one simulated runtime, and the helpers the calls use."""

from __future__ import annotations

import _thread
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from .._pyacl.codes import code_name
from ._callbacks import ReportHub
from ._cores import CorePool
from ._device import SimDevice
from ._host import host_view
from ._memory import HostMemory, Region
from ._objects import Context, ExceptionInfo, SimEvent, SimStream, Task, stream_id
from ._profiles import SocProfile

__all__ = ["Core", "check_ints", "wait_for_tasks"]

_HANDLE_BASE = 0x5A00_0000_0000
_log = logging.getLogger("aclasync.sim")
_T = TypeVar("_T")


class Core:
    """Process-level state of one simulated runtime."""

    def __init__(
        self, device_count: int, profile: SocProfile, visible: Sequence[int] | None = None
    ) -> None:
        self.lock = threading.Lock()
        self.profile = profile
        self._handles = itertools.count(1)
        self.cores = CorePool(profile.core_threads, self.lock)
        physical = list(range(device_count)) if visible is None else list(visible)
        #: Logical devices: ``devices[i]`` is physical device ``physical[i]``.
        self.devices = [
            SimDevice(
                i,
                profile,
                self.lock,
                self.cores,
                self.new_handle,
                physical_id=phys,
                on_failure=self._on_failure_locked,
            )
            for i, phys in enumerate(physical)
        ]
        self.physical_count = device_count
        #: Host pointer -> (device id, device address) of ``host_register``.
        self.host_registrations: dict[int, tuple[int, int]] = {}
        self.exception_callback: Callable[[int], Any] | None = None
        self.exception_infos: dict[int, ExceptionInfo] = {}
        self.pending_infos: list[int] = []
        self.objects: dict[int, object] = {}
        self.init_count = 0
        #: Set by a finalize, cleared by the next first ``init``: a finalize then fails.
        self.finalized = False
        #: The unmodelled calls this runtime has warned about (``UnmodelledWarning``).
        self.unmodelled_warned: set[str] = set()
        self.host = HostMemory()
        self.reports = ReportHub(self.lock)
        #: ``(device, peer)`` pairs for which ``device_enable_peer_access`` was called.
        self.peers: set[tuple[int, int]] = set()
        self.task_ids = itertools.count(1)
        #: Process-wide settings of ``set_sys_param_opt`` and the op timeouts.
        self.sys_params: dict[int, int] = {}
        self.op_wait_timeout_s = 0
        self.op_execute_timeout_us = 0
        self._local = threading.local()
        #: Per-thread state of the call groups (``use_stream_res_in_current_thread``).
        self.thread_state = threading.local()

    def _on_failure_locked(self, task: Task) -> None:
        """Record a failed task for the exception callback (engine thread, lock held)."""
        if self.exception_callback is None:
            return
        handle = self.new_handle()
        self.exception_infos[handle] = ExceptionInfo(
            task.error,
            task.task_id,
            stream_id(task.stream),
            task.submitter & 0xFFFF_FFFF,
            task.stream.device.id,
        )
        self.pending_infos.append(handle)

    def deliver_exception_infos(self) -> None:
        """Run the exception callback for failures recorded so far, on this thread."""
        with self.lock:
            handles, self.pending_infos = self.pending_infos, []
            callback = self.exception_callback
        for handle in handles:
            if callback is None:
                break
            try:
                callback(handle)
            except Exception:
                _log.exception("exception info callback %r raised; dropped", callback)

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

    def resolve(
        self, address: int, count: int, *, write: bool
    ) -> tuple[memoryview | None, int | None, bool]:
        """Find ``[address, address + count)``: ``(view, device id or None, pinned)``.

        Device addresses must lie inside one live allocation. Any other address is host
        memory: a range starting in a ``malloc_host`` block must stay inside it (pinned);
        anything else must be mapped by the process with the access needed (pageable).
        The view is None when the range is unusable.
        """
        for device in self.devices:
            if device.memory.contains(address):
                region = device.memory.find(address)
                view = None if region is None else region.view(address, count)
                return view, device.id, True
        region = self.host.find(address)
        if region is not None:  # a block the runtime handed out is bounds-checked
            return region.view(address, count), None, True
        return host_view(address, count, write=write), None, False

    def peer_linked(self, first: int, second: int) -> bool:
        """Whether peer access between two devices was enabled (in either direction)."""
        return (first, second) in self.peers or (second, first) in self.peers

    # -- per-thread records ----------------------------------------------------------

    @property
    def last_task_id(self) -> int:
        """The id of the last task the calling thread queued (0 if none)."""
        return int(getattr(self._local, "last_task_id", 0))

    @last_task_id.setter
    def last_task_id(self, task_id: int) -> None:
        self._local.last_task_id = task_id

    def record_error(self, code: int, api: str = "") -> None:
        self._local.last_error = code
        self._local.recent = (code, api)

    def recent_error_message(self) -> str | None:
        recent: tuple[int, str] | None = getattr(self._local, "recent", None)
        self._local.recent = None
        if recent is None:
            return None
        code, api = recent
        return f"{api or 'a runtime call'} failed with {code_name(code)} ({code})"

    def last_error(self, *, clear: bool) -> int:
        code: int = getattr(self._local, "last_error", 0)
        if clear:
            self._local.last_error = 0
        return code

    def device(self, device_id: int) -> SimDevice | None:
        if 0 <= device_id < len(self.devices):
            return self.devices[device_id]
        return None


def check_ints(api: str, *values: object) -> None:
    """Raise TypeError, as pyACL's argument parser does, unless every value is an integer.

    Calls decorated with ``_args.parsed`` are checked more precisely before they run;
    this guards the simulator's own extensions (``acl.sim``).
    """
    for value in values:
        if not hasattr(value, "__index__"):
            raise TypeError(f"{api} args parse failed")


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


def has_ended(task: Task) -> bool:
    """Whether *task*, its stream's last, is modelled device time alone that has run
    out: the device is done with it even if the scheduler thread has not had the GIL
    to say so yet. A query then reports it done, and a sync finds the stream idle (it
    still waits for the scheduler, which delivers the task's failure, but not for the
    wake-up a passive wait for running work pays)."""
    return (
        task.stream.running is task
        and task.fn is None
        and not task.hold
        and task.start + task.duration <= time.monotonic()
    )


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
