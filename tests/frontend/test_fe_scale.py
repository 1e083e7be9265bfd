"""Many waiters and several devices: memory, not threads; devices run in parallel."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from frontend_support import Gate, ms, opened

from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio


async def test_a_thousand_waiters_on_ten_streams_add_no_threads(rt: Any) -> None:
    resumed = 0
    peak = 0

    async def sample_threads() -> None:
        nonlocal peak
        while True:
            peak = max(peak, threading.active_count())
            await anyio.sleep(0.01)

    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        streams = [await dev.create_stream() for _ in range(10)]
        baseline = threading.active_count()  # the device's worker and simulator threads
        all_resumed = anyio.Event()
        # Hold every stream until all waiters are parked, however slow the machine is.
        gate = threading.Event()
        events = []
        for s in streams:
            s.launch(kernel, Kernel(fn=lambda: gate.wait(10)))
            for _ in range(5):
                s.launch(kernel, Kernel(duration_us=ms(60)))
                events.append(await s.record_event())

        async def wait(index: int) -> None:
            nonlocal resumed
            await events[index % len(events)].synchronize()
            resumed += 1
            if resumed == 1000:
                all_resumed.set()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sample_threads)
                for i in range(1000):
                    tg.start_soon(wait, i)
                await anyio.wait_all_tasks_blocked()
                assert resumed == 0, "no event can complete before the gate opens"
                peak = max(peak, threading.active_count())
                gate.set()
                await all_resumed.wait()
                tg.cancel_scope.cancel()

    assert resumed == 1000
    assert peak <= baseline + 4, (baseline, peak)


async def test_two_devices_run_their_kernels_concurrently(rt: Any) -> None:
    # Each kernel body waits at a two-party barrier: both pass only if the two
    # devices run them at the same time (a serialised run breaks the barrier).
    barrier = threading.Barrier(2, timeout=10)
    passed: list[int] = []

    def body() -> None:
        passed.append(barrier.wait())

    async with opened(rt, 0) as dev0, opened(rt, 1) as dev1:
        assert dev0.worker_thread is not dev1.worker_thread
        s0 = await dev0.create_stream()
        s1 = await dev1.create_stream()
        s0.launch(dev0.acl.sim.launch_kernel, Kernel(fn=body))
        s1.launch(dev1.acl.sim.launch_kernel, Kernel(fn=body))
        async with anyio.create_task_group() as tg:
            tg.start_soon(s0.synchronize)
            tg.start_soon(s1.synchronize)
    assert sorted(passed) == [0, 1]


async def test_two_thousand_waiters_completing_together_all_resume(rt: Any) -> None:
    resumed = {"stream": 0, "event": 0}
    gate = Gate()
    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        streams = [await dev.create_stream() for _ in range(4)]
        events = []
        for s in streams:
            s.launch(kernel, gate.kernel())  # held until every waiter is parked
            events.append(await s.record_event())

        async def wait_stream(index: int) -> None:
            await streams[index % 4].synchronize()
            resumed["stream"] += 1

        async def wait_event(index: int) -> None:
            await events[index % 4].synchronize()
            resumed["event"] += 1

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(1000):
                    tg.start_soon(wait_stream, i)
                    tg.start_soon(wait_event, i)
                await anyio.wait_all_tasks_blocked()
                assert resumed == {"stream": 0, "event": 0}, "nothing can finish before the gate"
                gate.open()

    assert resumed == {"stream": 1000, "event": 1000}


def test_waiter_registration_is_amortised_constant_time() -> None:
    """Registering n waiters on one event looks at O(n) waiters in all, not O(n^2).

    Counted, not timed: each waiter counts how often its ``abandoned`` flag is read
    (what pruning abandoned waiters costs), with none, half or all of them abandoned.
    """
    from aclasync._lanes import Watch

    reads = 0

    class CountingWaiter:
        def __init__(self, abandoned: bool) -> None:
            self._abandoned = abandoned

        @property
        def abandoned(self) -> bool:
            nonlocal reads
            reads += 1
            return self._abandoned

    for abandon_every in (None, 2, 1):
        for n in (2_000, 20_000):
            reads = 0
            watch = Watch(1, 1, fence=False, launches=-1)
            for i in range(n):
                abandoned = abandon_every is not None and i % abandon_every == 0
                watch.add(CountingWaiter(abandoned))  # type: ignore[arg-type]
            assert reads <= 3 * n, (abandon_every, n, reads)
