"""The device worker: one thread per open device that makes every runtime call for it.

The event loop hands the worker *jobs* through a deque; the worker drains the whole
deque per round, so a busy worker costs submitters no wake-up. Between rounds it looks
for finished work without running Python in runtime callbacks: it queries the event at
the head of each stream's watch list (events on a stream finish in order), waits in
short ``synchronize_event_with_timeout`` slices with the GIL released, or, while a
FAST_SYNC stream has waiters, polls. Every waiter resolved in a round reaches its event
loop in one batch per loop.
"""

from __future__ import annotations

import _thread
import bisect
import dataclasses
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from ._errors import DeviceBrokenError
from ._loop import Delivery, Waiter

__all__ = ["BROKEN", "CLOSED", "DeviceWorker", "Lane", "WorkerOptions"]

#: First item of a waiter's value when the device closed or broke under it.
CLOSED: Any = object()
BROKEN: Any = object()

_LAUNCH, _CALL, _FENCE, _WATCH, _STOP = range(5)
_EVENT_COMPLETE = 1  # query_event_status: 0 = NOT_READY, 1 = COMPLETE
_STREAM_COMPLETE = 0  # stream_query: 0 = COMPLETE, 1 = NOT_READY
_PURGE_THRESHOLD = 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """Tuning of a device worker.

    Parameters
    ----------
    wait_slice_ms:
        Longest time the worker blocks in ``synchronize_event_with_timeout`` while
        waiting quietly for default-mode streams; a job submitted meanwhile waits at
        most this long (pyACL timeouts are whole milliseconds).
    busy_poll_us, busy_window_ms:
        After jobs arrived in the last ``busy_window_ms``, the worker polls every
        ``busy_poll_us`` (waking at once for new jobs) instead of blocking in slices.
    fast_sync_poll_us:
        Interval at which the worker polls while a FAST_SYNC stream has waiters
        (lower latency, more CPU: the documented FAST_SYNC trade-off).
    cpu:
        Pin the worker thread to this CPU (Linux only), or ``"loop"``: pin both the
        thread that opens the device (the event loop's) and the worker to the CPU that
        thread is running on. Loop and worker on one CPU save two cross-CPU wake-ups
        per round trip (an idle-stream sync drops from about 60 to about 30 us on a
        two-vCPU VM, see benchmarks/README.md), at the price of sharing that CPU.
    """

    wait_slice_ms: int = 1
    busy_poll_us: float = 250.0
    busy_window_ms: float = 50.0
    fast_sync_poll_us: float = 20.0
    cpu: int | Literal["loop"] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.wait_slice_ms, bool) or not isinstance(self.wait_slice_ms, int):
            raise TypeError("wait_slice_ms must be an int (milliseconds)")
        if self.wait_slice_ms < 1:
            raise ValueError(f"wait_slice_ms must be >= 1, got {self.wait_slice_ms}")
        for name in ("busy_poll_us", "fast_sync_poll_us"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not self.busy_window_ms >= 0:
            raise ValueError(f"busy_window_ms must be >= 0, got {self.busy_window_ms!r}")
        if self.cpu == "loop":
            if not hasattr(os, "sched_setaffinity"):
                raise ValueError("cpu='loop' needs os.sched_setaffinity (Linux)")
        elif self.cpu is not None and self.cpu not in os.sched_getaffinity(0):
            raise ValueError(f"cpu {self.cpu!r} is not available to this process")

    def resolve_cpu(self) -> int | None:
        """The CPU to pin the worker to; for ``"loop"``, pin the calling thread too."""
        if self.cpu != "loop":
            return self.cpu
        cpu = _current_cpu()
        os.sched_setaffinity(0, {cpu})
        return cpu


def _current_cpu() -> int:
    """The CPU the calling thread runs on (Linux: field 39 of /proc/thread-self/stat)."""
    with open("/proc/thread-self/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[36])


class _Watch:
    """An event the worker watches for some waiters."""

    __slots__ = ("event", "fence", "launches", "seq", "waiters")

    def __init__(self, event: int, seq: int, waiter: Waiter, *, fence: bool, launches: int):
        self.event = event
        self.seq = seq
        self.fence = fence
        self.launches = launches
        self.waiters = [waiter]

    def add(self, waiter: Waiter) -> None:
        if len(self.waiters) >= _PURGE_THRESHOLD:
            self.waiters = [w for w in self.waiters if not w.abandoned]
        self.waiters.append(waiter)


class Lane:
    """The worker's view of one stream.

    ``records`` numbers the points recorded on the stream (events and fences) in
    submission order, on the submitting side; ``launches`` and ``watches`` belong to
    the worker; ``deferred`` is filled by the worker and emptied by the stream.
    """

    __slots__ = ("deferred", "fast_sync", "handle", "launches", "records", "watches")

    def __init__(self, handle: int, *, fast_sync: bool) -> None:
        self.handle = handle
        self.fast_sync = fast_sync
        self.launches = 0
        self.records = 0
        self.watches: list[_Watch] = []
        #: Failures of queued calls, raised by the next await on the stream.
        self.deferred: deque[BaseException | tuple[int, str]] = deque()

    def next_seq(self) -> int:
        self.records += 1
        return self.records


class DeviceWorker:
    """The thread that owns one device's context and makes all its runtime calls."""

    def __init__(self, acl: Any, device_id: int, options: WorkerOptions) -> None:
        self.acl = acl
        self._rt = acl.rt
        self.device_id = device_id
        self.options = options
        self.broken: DeviceBrokenError | None = None
        self._inbox: deque[tuple[Any, ...]] = deque()
        self._wake = _thread.allocate_lock()
        self._wake.acquire()
        self._idle = False
        self._stopping = False
        self._last_jobs = 0.0
        self._cpu: int | None = None
        #: The job being run, so that a death in the middle of it still answers it.
        self._current: tuple[Any, ...] = ()
        self._waiting: dict[int, Lane] = {}
        self._fence_pool: list[int] = []
        self._ready: dict[Delivery, list[Waiter]] = {}
        self._thread = threading.Thread(
            target=self._main, name=f"aclasync-device{device_id}", daemon=True
        )

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    # -- submission, from the event loop ---------------------------------------------

    def start(self, waiter: Waiter) -> None:
        """Start the thread; *waiter* gets the ``set_device`` result.

        Call on the event loop's thread: ``WorkerOptions(cpu="loop")`` pins it here.
        """
        self._cpu = self.options.resolve_cpu()
        self._inbox.append((_CALL, self._set_device, waiter))
        self._thread.start()

    def launch(
        self, lane: Lane, fn: Callable[..., Any], args: tuple[Any, ...], api: str | None = None
    ) -> None:
        """Queue ``fn(*args, lane.handle)``; a failure is kept in ``lane.deferred``.

        *api* names the call in errors when ``fn`` is a wrapper.
        """
        self._submit((_LAUNCH, lane, fn, args, api))

    def call(self, fn: Callable[[], Any], waiter: Waiter) -> None:
        """Run ``fn()`` on the worker; *waiter* gets ``(result, None)`` or ``(None, exc)``."""
        self._submit((_CALL, fn, waiter))

    def fence(self, lane: Lane, waiter: Waiter) -> None:
        """*waiter* gets ``(code, api)`` once all work queued on the stream so far is done."""
        self._submit((_FENCE, lane, lane.next_seq(), waiter))

    def watch(self, lane: Lane, event: int, seq: int, waiter: Waiter) -> None:
        """*waiter* gets ``(code, api)`` once *event* (record number *seq*) completes."""
        self._submit((_WATCH, lane, event, seq, waiter))

    def stop(self, waiter: Waiter) -> None:
        """Let the thread finish; *waiter* is resolved as its very last act."""
        self._submit((_STOP, waiter))

    def _submit(self, job: tuple[Any, ...]) -> None:
        if self.broken is not None:
            raise self.broken
        self._inbox.append(job)
        if self.broken is not None:  # died between the check and the append
            raise self.broken
        if self._idle:
            self._idle = False
            try:  # noqa: SIM105 - contextlib.suppress costs more on this hot path
                self._wake.release()
            except RuntimeError:  # already released by another submitter
                pass

    # -- the thread ------------------------------------------------------------------

    def _main(self) -> None:
        stop_waiter: Waiter | None = None
        try:
            if self._cpu is not None:
                os.sched_setaffinity(0, {self._cpu})
            while stop_waiter is None:
                stop_waiter = self._drain_inbox()
                if self._waiting:
                    self._sweep()
                self._flush()
                if stop_waiter is None and not self._inbox:
                    self._idle_wait()
            self._abandon_watches()
        except BaseException as exc:  # the device is unusable; say so to every waiter
            self._die(exc)
            return
        self._flush()
        stop_waiter.value = (None, None)
        stop_waiter.delivery.post((stop_waiter,))

    def _set_device(self) -> int:
        ret: int = self._rt.set_device(self.device_id)
        return ret

    def _drain_inbox(self) -> Waiter | None:
        inbox = self._inbox
        if inbox:
            self._last_jobs = time.monotonic()
        while inbox:
            job = self._current = inbox.popleft()
            op = job[0]
            if op == _LAUNCH:
                self._launch(job[1], job[2], job[3], job[4])
            elif op == _CALL:
                self._call(job[1], job[2])
            elif op == _FENCE:
                self._fence(job[1], job[2], job[3])
            elif op == _WATCH:
                self._watch(job[1], job[2], job[3], job[4])
            else:
                self._stopping = True
                waiter: Waiter = job[1]
                return waiter
        self._current = ()
        return None

    def _launch(
        self, lane: Lane, fn: Callable[..., Any], args: tuple[Any, ...], api: str | None
    ) -> None:
        lane.launches += 1
        try:
            result = fn(*args, lane.handle)
        except Exception as exc:
            lane.deferred.append(exc)
            return
        ret = result[-1] if isinstance(result, tuple) else result
        if ret:
            lane.deferred.append((ret, api or self.api_name(fn)))

    def _call(self, fn: Callable[[], Any], waiter: Waiter) -> None:
        try:
            waiter.value = (fn(), None)
        except Exception as exc:
            waiter.value = (None, exc)
        self._resolve(waiter)

    def _fence(self, lane: Lane, seq: int, waiter: Waiter) -> None:
        rt = self._rt
        watches = lane.watches
        if watches and watches[-1].fence and watches[-1].launches == lane.launches:
            watches[-1].add(waiter)  # nothing queued since the last fence: share it
            return
        status, ret = rt.stream_query(lane.handle)
        if ret:
            self._finish(waiter, ret, "acl.rt.stream_query")
        elif status == _STREAM_COMPLETE:
            self._finish(waiter, rt.synchronize_stream(lane.handle), "acl.rt.synchronize_stream")
        else:
            if self._fence_pool:
                event, ret = self._fence_pool.pop(), 0
            else:
                event, ret = rt.create_event()
            if ret:
                self._finish(waiter, ret, "acl.rt.create_event")
                return
            ret = rt.record_event(event, lane.handle)
            if ret:
                rt.destroy_event(event)
                self._finish(waiter, ret, "acl.rt.record_event")
                return
            fence = _Watch(event, seq, waiter, fence=True, launches=lane.launches)
            watches.append(fence)
            self._waiting[lane.handle] = lane

    def _watch(self, lane: Lane, event: int, seq: int, waiter: Waiter) -> None:
        watches = lane.watches
        index = bisect.bisect_left(watches, seq, key=lambda w: w.seq)
        if index < len(watches) and watches[index].seq == seq and not watches[index].fence:
            watches[index].add(waiter)
            return
        status, ret = self._rt.query_event_status(event)
        if ret:
            self._finish(waiter, ret, "acl.rt.query_event_status")
        elif status == _EVENT_COMPLETE:
            self._finish(waiter, 0, "")
        else:
            watches.insert(index, _Watch(event, seq, waiter, fence=False, launches=-1))
            self._waiting[lane.handle] = lane

    def _sweep(self) -> None:
        """Resolve the watches whose events have completed, stream by stream."""
        query = self._rt.query_event_status
        for handle, lane in list(self._waiting.items()):
            watches = lane.watches
            while watches:
                head = watches[0]
                status, ret = query(head.event)
                if not ret and status != _EVENT_COMPLETE:
                    break
                del watches[0]
                if ret:
                    self._finish_all(head, ret, "acl.rt.query_event_status")
                elif head.fence:
                    self._complete_fence(lane, head)
                else:
                    self._finish_all(head, 0, "")
            if not watches:
                del self._waiting[handle]

    def _complete_fence(self, lane: Lane, fence: _Watch) -> None:
        # Kernel failures are reported by synchronize_stream only; collect them when the
        # stream is idle (the call then returns at once). Work queued after the fence
        # leaves them for a later sync of the stream.
        code, api = 0, ""
        status, ret = self._rt.stream_query(lane.handle)
        if not ret and status == _STREAM_COMPLETE:
            code, api = self._rt.synchronize_stream(lane.handle), "acl.rt.synchronize_stream"
        self._fence_pool.append(fence.event)
        self._finish_all(fence, code, api)

    def settle(self) -> None:
        """On the worker, before a teardown: wait for every watched event, answer its
        waiters as usual and hand them to their loops."""
        while self._waiting:
            lane = next(iter(self._waiting.values()))
            self._rt.synchronize_event(lane.watches[0].event)
            self._sweep()
        self._flush()

    def _idle_wait(self) -> None:
        """Sleep until a job arrives or it is time to look for completions again.

        With nothing to watch, sleep until a job arrives. While a FAST_SYNC stream has
        waiters, poll every ``fast_sync_poll_us``. While only default-mode streams
        have waiters and jobs have been quiet for ``busy_window_ms``, block on the
        device in a ``wait_slice_ms`` slice (GIL released; a job arriving meanwhile
        waits for the slice to end). During bursts of jobs, poll every
        ``busy_poll_us`` instead, so that jobs are picked up at once; that interval is
        close to the runtime's own wake-up latency for passive waits, so default
        streams keep their low-CPU, higher-latency character and FAST_SYNC streams
        their advantage.
        """
        options = self.options
        timeout: float | None = None
        if self._waiting:
            if any(lane.fast_sync for lane in self._waiting.values()):
                timeout = options.fast_sync_poll_us / 1e6
            elif time.monotonic() - self._last_jobs < options.busy_window_ms / 1e3:
                timeout = options.busy_poll_us / 1e6
            else:
                lane = next(iter(self._waiting.values()))
                self._rt.synchronize_event_with_timeout(
                    lane.watches[0].event, options.wait_slice_ms
                )
                return
        self._idle = True
        if self._inbox:
            self._idle = False
            return
        if timeout is None:
            self._wake.acquire()
        else:
            self._wake.acquire(timeout=timeout)
        self._idle = False

    # -- resolving waiters -----------------------------------------------------------

    def _finish(self, waiter: Waiter, code: int, api: str) -> None:
        waiter.value = (code, api)
        self._resolve(waiter)

    def _finish_all(self, watch: _Watch, code: int, api: str) -> None:
        for waiter in watch.waiters:
            if not waiter.abandoned:
                self._finish(waiter, code, api)

    def _resolve(self, waiter: Waiter) -> None:
        batch = self._ready.get(waiter.delivery)
        if batch is None:
            self._ready[waiter.delivery] = [waiter]
        else:
            batch.append(waiter)

    def _flush(self) -> None:
        if self._ready:
            ready, self._ready = self._ready, {}
            for delivery, waiters in ready.items():
                try:
                    delivery.post(waiters)
                except RuntimeError:
                    # That event loop is closed: nobody is left to resume. Other loops'
                    # waiters must still be served.
                    continue

    def _abandon_watches(self) -> None:
        """At stop, fail what still waits: the device is closing."""
        closed = (CLOSED, None)
        for lane in self._waiting.values():
            for watch in lane.watches:
                for waiter in watch.waiters:
                    waiter.value = closed
                    self._resolve(waiter)
            lane.watches.clear()
        self._waiting.clear()

    def _die(self, exc: BaseException) -> None:
        broken = DeviceBrokenError(
            f"the worker thread of device {self.device_id} died: {exc!r}; "
            "every pending and later operation on this device fails"
        )
        broken.__cause__ = exc
        self.broken = broken
        failed = (BROKEN, broken)
        waiters: list[Waiter] = []
        for lane in self._waiting.values():
            for watch in lane.watches:
                waiters.extend(watch.waiters)
        jobs = [self._current, *self._inbox]
        self._inbox.clear()
        for job in jobs:
            waiters.extend(item for item in job if isinstance(item, Waiter))
        for batch in self._ready.values():
            waiters.extend(batch)
        self._ready = {}
        for waiter in dict.fromkeys(waiters):  # each once, in order
            waiter.value = failed
            self._resolve(waiter)
        self._flush()

    def api_name(self, fn: Callable[..., Any]) -> str:
        """A readable ``acl.<namespace>.<call>`` name for a backend function."""
        owner = getattr(fn, "__self__", None)
        name = getattr(fn, "__name__", repr(fn))
        for namespace in ("rt", "sim", "util", "mdl"):
            if owner is not None and owner is getattr(self.acl, namespace, None):
                return f"acl.{namespace}.{name}"
        module = getattr(fn, "__module__", None)
        return f"{module}.{name}" if module else name
