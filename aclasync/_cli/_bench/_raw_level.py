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
"""

from __future__ import annotations

import _thread
import dataclasses
import threading
import time
from collections import deque
from typing import Any

import outcome

from aclasync import sim
from aclasync._loop import Waiter, current_delivery
from aclasync.sim import Kernel

from ._common import expect

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

    ran: float  #: the kernel's measured length
    latency: float  #: kernel end -> ``synchronize_stream`` returned
    posted: float  #: when the thread posted the waiter
    thread_cpu: float  #: the thread's CPU time inside ``synchronize_stream``


class RawThread:
    """A plain thread with its own simulated runtime and one stream per mode.

    Use it as a context manager: entry starts the thread (which sets the device up and
    makes one warm-up sync per stream), exit stops it and releases the runtime.

    Parameters
    ----------
    modes:
        Stream flags by mode name (``acl.rt.create_stream_with_config``).
    """

    def __init__(self, modes: dict[str, int]) -> None:
        self._modes = dict(modes)
        self._acl: Any = sim.create(device_count=1)
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
            self._acl.sim.close()
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
        try:
            rt = self._acl.rt
            expect(rt.set_device(0), "acl.rt.set_device")
            streams: dict[str, int] = {}
            for mode, flags in self._modes.items():
                handle, ret = rt.create_stream_with_config(0, flags)
                expect(ret, "acl.rt.create_stream_with_config")
                streams[mode] = handle
                expect(self._acl.sim.launch_kernel(Kernel(), handle), "acl.sim.launch_kernel")
                expect(rt.synchronize_stream(handle), "acl.rt.synchronize_stream")
        except BaseException as exc:
            self._failure = exc
            return
        finally:
            self._ready.set()
        try:
            self._answer(streams)
        finally:
            for handle in streams.values():
                rt.destroy_stream(handle)
            rt.reset_device(0)

    def _answer(self, streams: dict[str, int]) -> None:
        launch, sync = self._acl.sim.launch_kernel, self._acl.rt.synchronize_stream
        jobs, go = self._jobs, self._go
        clock, cpu_clock = time.perf_counter, time.thread_time
        while True:
            go.acquire()
            while jobs:
                job = jobs.popleft()
                if job is None:
                    return
                waiter, mode, length = job
                try:
                    stamp = Stamp(length)
                    handle = streams[mode]
                    expect(launch(Kernel(fn=stamp), handle), "acl.sim.launch_kernel")
                    cpu = cpu_clock()
                    ret = sync(handle)
                    returned = clock()
                    cpu = cpu_clock() - cpu
                    expect(ret, "acl.rt.synchronize_stream")
                    ran, latency = stamp.end - stamp.start, returned - stamp.end
                    waiter.result = outcome.Value(RawSample(ran, latency, clock(), cpu))
                except Exception as exc:  # handed to the coroutine, which raises it
                    waiter.result = outcome.Error(exc)
                waiter.delivery.post((waiter,))
