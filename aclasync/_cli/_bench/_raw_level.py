"""``sync-modes``' raw level: a plain thread that launches, waits and posts.

``RawThread`` is what a program without aclasync does to await device work from an
event loop: a dedicated thread, blocked on a ``_thread`` lock, that the coroutine wakes
for each sample; the thread launches a kernel on a raw simulated stream, calls
``acl.rt.synchronize_stream`` (GIL released), stamps its return and posts the waiter
through aclasync's own wake path (``Delivery.post``), then blocks again. So each sample
gives both terms aclasync is judged against: the raw wait (kernel end to the runtime's
return) and the floor (the post to the coroutine running again), measured together in
the same conditions as aclasync's own samples, where the worker too is woken per launch
and posts right after its wait returns.

(A raw thread looping on its own, launch after launch, measured 5-20 us lower for the
same wait in the same run: its CPU never goes idle between samples. A floor taken from
a thread that slept instead of waiting on the device is taken on a different CPU state.
Either way "aclasync - raw - floor" would include the difference.)

With a ``_workload`` of pyACL alone (``memset``) there is no kernel to stamp its own
end: the thread records a timing event before and after the work instead, and the
sample's ``ran`` is the device time between them (``acl.rt.event_elapsed_time``) and
its ``latency`` the wait beyond it, launch to return. The thread has to query the events
before it posts, inside the coroutine's window; it times the query (``query``,
``query_cpu``) so that the coroutine takes it off, as aclasync's own sample queries its
events after its window closes. On the simulator the thread has a
simulated runtime of its own; on the native backend it shares the ``acl`` module.
"""

from __future__ import annotations

import _thread
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import outcome

from aclasync._loop import Waiter, current_delivery
from aclasync.sim import Kernel

from .._common import sim_runtime
from .._workload import Workload
from ._common import expect, make_streams, warm_up

__all__ = ["RawSample", "RawThread", "Stamp"]

_JOIN_TIMEOUT_S = 5.0


class Stamp:
    """A kernel body that runs for *length* seconds and stamps when it finished.

    The kernel's ``fn`` runs on the simulated device and stamps ``time.perf_counter()``
    as its last act; a kernel whose ``duration_us`` is 0 completes as soon as ``fn``
    returns, so ``end`` is the completion time on the clock the waiter reads.
    """

    __slots__ = ("end", "length", "start")

    def __init__(self, length: float) -> None:
        self.length = length
        self.start = 0.0
        self.end = 0.0

    def __call__(self) -> None:
        self.start = time.perf_counter()
        if self.length:
            time.sleep(self.length)
        self.end = time.perf_counter()


@dataclasses.dataclass(frozen=True)
class RawSample:
    """One raw sample, in seconds (``perf_counter`` stamps and ``thread_time``)."""

    ran: float  #: the kernel's measured length (with events: the device time)
    latency: float  #: kernel end -> ``synchronize_stream`` returned (events: launch ->
    #: return, minus the device time)
    posted: float  #: when the thread posted the waiter
    thread_cpu: float  #: the thread's CPU time inside ``synchronize_stream``
    #: Events only: the wall and thread CPU seconds of ``acl.rt.event_elapsed_time``,
    #: which the thread must call before it posts; the coroutine takes them off its
    #: sample, as aclasync's sample queries its events after its own window.
    query: float = 0.0
    query_cpu: float = 0.0


class RawThread:
    """A plain thread with its own simulated runtime and one stream per mode.

    Use it as a context manager: entry starts the thread (which sets the device up and
    makes one warm-up sync per stream), exit stops it and releases the runtime.

    Parameters
    ----------
    modes:
        Stream flags by mode name (``acl.rt.create_stream_with_config``).
    work:
        The device work to time with events (a ``memset`` workload), or ``None`` for
        stamped simulated kernels.
    acl:
        The runtime to share (the native ``acl``), or ``None`` for a simulator of the
        thread's own.
    """

    def __init__(
        self, modes: dict[str, int], work: Workload | None = None, acl: Any = None
    ) -> None:
        self._modes = dict(modes)
        self._own = acl is None
        self._device_set = False
        self._acl: Any = sim_runtime(1) if acl is None else acl
        self._work = work
        self._go = _thread.allocate_lock()
        self._go.acquire()  # held until there is a job
        self._jobs: deque[tuple[Waiter, str, float] | None] = deque()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="aclasync-bench-raw", daemon=True)

    def __enter__(self) -> RawThread:
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            self._thread.join(_JOIN_TIMEOUT_S)
            self._release_runtime()
            raise self._failure
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the thread (after the sample it runs, if any) and release the runtime."""
        if self._thread.is_alive():
            self._jobs.append(None)
            self._release()
            self._thread.join(_JOIN_TIMEOUT_S)
        self._release_runtime()

    def _release_runtime(self) -> None:
        if self._own:
            self._acl.sim.close()

    async def sample(self, mode: str, length: float) -> tuple[RawSample, float]:
        """Run one sample of a *length*-second kernel on *mode*'s stream.

        Returns the sample and ``perf_counter()`` taken as soon as the coroutine ran
        again. Cancellation abandons the wait; the thread finishes the sample and its
        post is dropped. A failed runtime call raises here.
        """
        waiter = current_delivery().new_waiter()
        self._jobs.append((waiter, mode, length))
        self._release()
        sample: RawSample = await waiter.wait()
        return sample, time.perf_counter()

    def _release(self) -> None:
        try:  # noqa: SIM105 - already released: the thread will see the deque
            self._go.release()
        except RuntimeError:
            pass

    def _serve(self) -> None:
        rt = self._acl.rt
        streams: dict[str, int] = {}
        timed: tuple[int, int, int] | None = None  # scratch, start event, end event
        try:
            expect(rt.set_device(0), "acl.rt.set_device")
            self._device_set = True
            make_streams(rt, self._modes, streams)
            for handle in streams.values():
                warm_up(self._acl, handle)
            if self._work is not None:
                scratch, ret = rt.malloc(max(self._work.scratch_bytes, 32), 0)
                expect(ret, "acl.rt.malloc")
                start, ret = rt.create_event()
                expect(ret, "acl.rt.create_event")
                end, ret = rt.create_event()
                expect(ret, "acl.rt.create_event")
                timed = (scratch, start, end)
        except BaseException as exc:
            self._failure = exc
            self._teardown(streams, timed)
            return
        finally:
            self._ready.set()
        try:
            self._answer(self._stamped(streams) if timed is None else self._timed(streams, timed))
        finally:
            self._teardown(streams, timed)

    def _teardown(self, streams: dict[str, int], timed: tuple[int, int, int] | None) -> None:
        rt = self._acl.rt
        if timed is not None:
            scratch, start, end = timed
            rt.destroy_event(start)
            rt.destroy_event(end)
            rt.free(scratch)
        for handle in streams.values():
            rt.destroy_stream(handle)
        if self._device_set:
            rt.reset_device(0)

    def _answer(self, sample: Callable[[str, float], RawSample]) -> None:
        """Run each queued job's ``sample(mode, length)`` and post its outcome to the
        job's waiter, until the stop (``None``)."""
        jobs, go = self._jobs, self._go
        while True:
            go.acquire()
            while jobs:
                job = jobs.popleft()
                if job is None:
                    return
                waiter, mode, length = job
                try:
                    waiter.result = outcome.Value(sample(mode, length))
                except Exception as exc:  # handed to the coroutine, which raises it
                    waiter.result = outcome.Error(exc)
                waiter.delivery.post((waiter,))

    def _stamped(self, streams: dict[str, int]) -> Callable[[str, float], RawSample]:
        """One sample: a simulated kernel that stamps its own start and end."""
        launch, sync = self._acl.sim.launch_kernel, self._acl.rt.synchronize_stream
        clock, cpu_clock = time.perf_counter, time.thread_time

        def sample(mode: str, length: float) -> RawSample:
            stamp = Stamp(length)
            handle = streams[mode]
            expect(launch(Kernel(fn=stamp), handle), "acl.sim.launch_kernel")
            cpu = cpu_clock()
            ret = sync(handle)
            returned = clock()
            cpu = cpu_clock() - cpu
            expect(ret, "acl.rt.synchronize_stream")
            ran, latency = stamp.end - stamp.start, returned - stamp.end
            return RawSample(ran, latency, clock(), cpu)

        return sample

    def _timed(
        self, streams: dict[str, int], timed: tuple[int, int, int]
    ) -> Callable[[str, float], RawSample]:
        """One sample: the work of ``self._work``, timed by two events around it."""
        assert self._work is not None
        work, acl = self._work, self._acl
        rt = acl.rt
        record, sync, elapsed = rt.record_event, rt.synchronize_stream, rt.event_elapsed_time
        scratch, start, end = timed
        clock, cpu_clock = time.perf_counter, time.thread_time

        def sample(mode: str, length: float) -> RawSample:
            handle = streams[mode]
            fn, args = work.work(length * 1e6, scratch, acl)
            launched = clock()
            expect(record(start, handle), "acl.rt.record_event")
            expect(fn(*args, handle), "the workload's launch")
            expect(record(end, handle), "acl.rt.record_event")
            cpu = cpu_clock()
            ret = sync(handle)
            returned = clock()
            cpu = cpu_clock() - cpu
            expect(ret, "acl.rt.synchronize_stream")
            queried, query_cpu = clock(), cpu_clock()
            ms, ret = elapsed(start, end)
            query_cpu = cpu_clock() - query_cpu
            query = clock() - queried
            expect(ret, "acl.rt.event_elapsed_time")
            ran = ms / 1e3
            return RawSample(ran, returned - launched - ran, clock(), cpu, query, query_cpu)

        return sample
