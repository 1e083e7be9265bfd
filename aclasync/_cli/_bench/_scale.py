"""``scale``: thousands of concurrent waiters over eight simulated devices.

On each loop: open 8 devices of one ``aclasync.sim.create(device_count=8)`` runtime,
hold every device's work stream behind a *gate* kernel (its ``fn`` blocks on a
``threading.Event``), then queue one short kernel per waiter and start a task that
awaits ``stream.synchronize()`` right after it, so every waiter has its own completion
to wait for. With all waiters parked, open the gate and time until the last resumes,
while a 1 ms ticker task in the same loop records how late it wakes.

With pyACL alone (the ``memset`` workload: the native backend, or ``--workload
memset``) the gate is a blocking host callback (``_gates``: ``acl.rt.launch_callback``
and a report thread per device) and each waiter's work a fill of ``KERNEL_US``; on the
native backend the devices are as many of 8 as it has.

Memory per waiter is ``tracemalloc`` (all threads) around creating the parked waiters,
minus the cost of the same number of bare launches measured just before; it is the
Python heap a parked waiter adds (task, coroutine, waiter, the worker's watch and the
simulator's fence event), not RSS, which the tracing itself would inflate.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
import tracemalloc
from typing import Any

import anyio

import aclasync
from aclasync.sim import Kernel

from .._gates import DeviceGates
from .._workload import Workload
from ._common import BenchConfig, Progress, Target, check, column, run_on_loop, warm_stream
from ._stats import percentile

__all__ = ["RUNS_NATIVE", "run"]

#: Runs on the native backend too: its device work is pyACL alone there (``_runner``).
RUNS_NATIVE = True

TITLE = "Concurrent waiters over up to 8 devices"
DEVICES = 8
KERNEL_US = 100.0
TICK = 0.001
ONE_EVENT_WAITERS = 5_000
_GATE_TIMEOUT_S = 120.0
#: Targets: heap bytes per parked waiter (front end + simulator), ticker p99 lateness.
BYTES_TARGET = 2048
TICK_TARGET_MS = 20.0


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "title": "1 ms ticker lateness while the waiters complete",
        "group": ["loop"],
        "series": "loop",
        "value": "tick_p99_ms",
        "value_format": "p99 {:.1f} ms",
        "axis": "99th percentile of how late a 1 ms sleep wakes up",
        "unit": "ms; lower is better",
        "target": TICK_TARGET_MS,
        "target_label": f"target: p99 < {TICK_TARGET_MS:g} ms",
        "annotate": "tick_max_ms",
        "annotate_format": "max {:.1f} ms",
    },
    {
        "title": "memory per parked waiter",
        "group": ["loop"],
        "series": "loop",
        "value": "bytes_own",
        "value_format": "{:,.0f} B",
        "axis": "Python heap per parked waiter, aclasync front end + simulator",
        "unit": "bytes; lower is better",
        "target": BYTES_TARGET,
        "target_label": f"target: ≤ {BYTES_TARGET:,} bytes",
        "annotate": "bytes_per_waiter",
        "annotate_format": "{:,.0f} B with the task",
    },
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Run the waiter flood on every loop of *cfg*; return the result."""
    n = cfg.size(10_000, 2_000, minimum=DEVICES)
    devices = cfg.target.devices(DEVICES)
    rows = []
    checks = []
    workload: dict[str, Any] = {}
    for loop in cfg.loops:
        cfg.progress(f"scale [{loop}]: {n} waiters over {devices} devices")
        row, workload = run_on_loop(loop, _measure, cfg.target, devices, n, cfg.progress)
        row["loop"] = loop
        rows.append(row)
        per_device = row["aclasync_threads_per_device"]
        checks.append(
            check(
                f"aclasync-owned threads per device [{loop}]", per_device, "<= 2", per_device <= 2
            )
        )
        own = row["bytes_own"]
        checks.append(
            check(
                f"bytes per waiter, aclasync + sim, task excluded [{loop}]",
                own,
                f"<= {BYTES_TARGET}",
                own <= BYTES_TARGET,
            )
        )
        tick = row["tick_p99_ms"]
        checks.append(
            check(f"ticker p99 ms [{loop}]", tick, f"< {TICK_TARGET_MS:g}", tick < TICK_TARGET_MS)
        )
        woken = cfg.size(ONE_EVENT_WAITERS, ONE_EVENT_WAITERS)
        row.update(run_on_loop(loop, _one_event_stall, cfg.target, woken))
        stall = row["one_event_stall_ms"]
        checks.append(
            check(f"longest stall waking {woken:,} [{loop}]", stall, "<= 20", stall <= 20)
        )
    return {
        "title": TITLE,
        "columns": [
            column("loop", "loop"),
            column("waiters", "waiters", "d"),
            column("setup_s", "park s", ".2f"),
            column("complete_s", "finish s", ".3f"),
            column("device_s", "device s", ".3f"),
            column("peak_threads", "threads", "d"),
            column("threads_per_device", "thr/dev", ".2f"),
            column("threads_constant", "thr const", ".0f"),
            column("worker_threads", "aclasync thr", "d"),
            column("aclasync_threads_per_device", "acl thr/dev", ".2f"),
            column("sim_threads", "sim thr", "d"),
            column("bytes_per_waiter", "B/waiter", ".0f"),
            column("bytes_own", "aclasync+sim B", ".0f"),
            column("bytes_front_end", "B aclasync", ".0f"),
            column("bytes_sim", "B sim", ".0f"),
            column("bytes_task", "B task", ".0f"),
            column("bytes_per_launch", "B/launch", ".0f"),
            column("idle_tick_p99_ms", "idle tick p99", ".2f"),
            column("tick_p50_ms", "tick p50 ms", ".2f"),
            column("tick_p99_ms", "tick p99 ms", ".2f"),
            column("tick_max_ms", "tick max ms", ".2f"),
            column("one_event_stall_ms", "5k/1 event stall ms", ".2f"),
        ],
        "rows": rows,
        "checks": checks,
        "charts": CHARTS,
        "notes": [
            "park s: launching and parking every waiter, under tracemalloc (slower); "
            "finish s: gate opened to last waiter resumed; device s: the queued kernel "
            "time per device (a lower bound for finish s).",
            "threads: peak threading.active_count() above the count before the devices "
            "opened; thr/dev: the growth per extra open, working device (1 to 8 devices), "
            "thr const: what remains; aclasync thr / sim thr: threads by name at the peak "
            "(a device's worker and its waiting thread / the simulator's schedulers and "
            "cores); acl thr/dev: aclasync's own threads per device, the judged figure.",
            "B/waiter: tracemalloc bytes per parked waiter (its own kernel launch "
            "subtracted), split into the aclasync front end (waiter, future, the "
            "synchronize/park frames, the worker's watch), the simulator (fence event and "
            "its record task) and the task itself (anyio task-group task, loop objects, "
            "the waiting coroutine). The target applies to aclasync + sim.",
            "tick: lateness of a 1 ms anyio.sleep ticker in the same loop while the "
            "waiters complete (after a gc.collect() of the setup's garbage); idle tick: "
            "the same before any device work.",
            "5k/1 event stall: the longest a 1 ms ticker was late while 5,000 tasks "
            "parked on one event (held by a gate kernel) all resumed.",
        ],
        "params": {"waiters": n, "devices": devices, "kernel_us": KERNEL_US},
        "workload": workload,
    }


async def _measure(
    target: Target, count: int, n: int, progress: Progress
) -> tuple[dict[str, Any], dict[str, Any]]:
    with target.opened(count) as acl:
        return await _measure_on(acl, target, count, n, progress)


async def _measure_on(
    acl: Any, target: Target, count: int, n: int, progress: Progress
) -> tuple[dict[str, Any], dict[str, Any]]:
    gate = threading.Event()
    base_threads = threading.active_count()
    idle_ticks = await _idle_ticks(0.2)
    async with contextlib.AsyncExitStack() as stack:
        devices = []
        loads: list[Workload] = []
        active = []  # threads running once 1, 2, ... devices are open and working
        for i in range(count):
            dev = await stack.enter_async_context(aclasync.open_device(i, backend=acl))
            devices.append(dev)
            loads.append(await Workload.calibrate(dev, kind=target.workload))
            for _ in range(2):
                stream = await stack.enter_async_context(dev.create_stream())
                await warm_stream(stream)
            active.append(threading.active_count())
        work = [await stack.enter_async_context(dev.create_stream()) for dev in devices]
        probes = [await stack.enter_async_context(dev.create_stream()) for dev in devices]
        for stream in (*work, *probes):
            await warm_stream(stream)
        # One object each for every launch, as a program that launches the same kernel
        # does: (call, args), queued as call(*args, stream).
        empty, kernel = [], []
        for load, stream in zip(loads, work, strict=True):
            await load.prepare(stream)
            empty.append(load.work_for(stream, 0))
            kernel.append(load.work_for(stream, KERNEL_US))
        held = []
        if loads[0].kind == "sim-kernel":
            for stream in work:
                stream.launch(acl.sim.launch_kernel, Kernel(fn=lambda: gate.wait(_GATE_TIMEOUT_S)))
        else:
            for dev, stream in zip(devices, work, strict=True):
                gates = await stack.enter_async_context(DeviceGates(dev))
                held.append(await gates.hold(stream))

        def open_gate() -> None:
            gate.set()
            for each in held:
                each.open()

        # Pushed last, so it runs first on every way out (Ctrl-C included): closing a
        # stream waits for its queued work, which waits for the gate.
        stack.callback(open_gate)
        progress(f"scale: the gate is shut; parking {n} waiters")

        async def barrier() -> None:
            # A device worker runs jobs in order: once an idle stream's sync comes back,
            # everything submitted to that device before it has been handled.
            for probe in probes:
                await probe.synchronize()

        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for i in range(n):
                fn, args = empty[i % count]
                work[i % count].launch(fn, *args)
            await barrier()
            launched = tracemalloc.take_snapshot()
            launch_cost = _by_component(before, launched)
            del before
            parked = 0
            finished = 0
            all_parked = anyio.Event()
            all_done = anyio.Event()

            async def waiter(stream: aclasync.Stream, fn: Any, args: tuple[Any, ...]) -> None:
                nonlocal parked, finished
                stream.launch(fn, *args)  # here, so each waiter has its own work
                parked += 1
                if parked == n:
                    all_parked.set()
                await stream.synchronize()
                finished += 1
                if finished == n:
                    all_done.set()

            async with anyio.create_task_group() as tg:
                started = time.perf_counter()
                for i in range(n):
                    tg.start_soon(waiter, work[i % count], *kernel[i % count])
                await all_parked.wait()
                await barrier()
                setup = time.perf_counter() - started
                waiter_cost = _by_component(launched, tracemalloc.take_snapshot())
                del launched
                tracemalloc.stop()
                # Setup garbage (the snapshots above hold many GC-tracked objects) is
                # collected now, so the timed phase pays only for its own collections.
                gc.collect()
                peak = threading.active_count()
                names = [thread.name for thread in threading.enumerate()]
                ticks: list[float] = []
                threads: list[int] = []
                tg.start_soon(_tick, all_done, ticks, threads)
                opened = time.perf_counter()
                open_gate()
                with anyio.fail_after(_GATE_TIMEOUT_S):
                    await all_done.wait()
                complete = time.perf_counter() - opened
        finally:
            if tracemalloc.is_tracing():
                tracemalloc.stop()
    peak = max([peak, *threads])
    own_threads = sum(name.startswith("aclasync-device") for name in names)
    per_waiter = {key: (waiter_cost[key] - launch_cost[key]) / n for key in waiter_cost}
    growth = (active[-1] - active[0]) / (count - 1) if count > 1 else None
    row = {
        "waiters": n,
        "setup_s": setup,
        "complete_s": complete,
        "device_s": n / count * KERNEL_US / 1e6,
        "peak_threads": peak - base_threads,
        "threads_per_device": growth,
        "threads_constant": None if growth is None else active[0] - base_threads - growth,
        "worker_threads": own_threads,
        "sim_threads": sum(name.startswith("aclasync-sim-") for name in names),
        "aclasync_threads_per_device": own_threads / count,
        "bytes_per_launch": sum(launch_cost.values()) / n,
        "bytes_per_waiter": sum(per_waiter.values()),
        "bytes_front_end": per_waiter["aclasync"],
        "bytes_sim": per_waiter["sim"],
        "bytes_own": per_waiter["aclasync"] + per_waiter["sim"],
        "bytes_task": per_waiter["task"],
        "idle_tick_p99_ms": percentile(idle_ticks, 99) * 1e3,
        "tick_p50_ms": percentile(ticks, 50) * 1e3,
        "tick_p99_ms": percentile(ticks, 99) * 1e3,
        "tick_max_ms": max(ticks) * 1e3,
        "ticks": len(ticks),
    }
    return row, loads[0].describe()


def _by_component(first: tracemalloc.Snapshot, second: tracemalloc.Snapshot) -> dict[str, float]:
    """Bytes allocated between two snapshots: the simulator, the rest of aclasync, and
    everything else: the task that waits (the loop's and anyio's task objects and the
    benchmark's own coroutine), which any concurrent code pays, waiting or not."""
    totals = {"aclasync": 0.0, "sim": 0.0, "task": 0.0}
    for diff in second.compare_to(first, "filename"):
        name = diff.traceback[0].filename.replace("\\", "/")
        if "/aclasync/sim/" in name:
            totals["sim"] += diff.size_diff
        elif "/aclasync/" in name:
            totals["aclasync"] += diff.size_diff
        else:
            totals["task"] += diff.size_diff
    return totals


async def _tick(stop: anyio.Event, lateness: list[float], threads: list[int]) -> None:
    """Sleep 1 ms at a time until *stop* is set, recording how late each wake-up is."""
    while True:  # at least one tick, however fast the waiters finish
        start = time.perf_counter()
        await anyio.sleep(TICK)
        lateness.append(time.perf_counter() - start - TICK)
        threads.append(threading.active_count())
        if stop.is_set():
            return


async def _one_event_stall(target: Target, n: int) -> dict[str, Any]:
    """Park *n* tasks on one event behind a gate; open it; the longest stall."""
    gate = threading.Event()
    with target.opened(1) as acl:
        async with aclasync.open_device(0, backend=acl) as dev, dev.create_stream() as stream:
            held = None
            try:
                async with contextlib.AsyncExitStack() as stack:
                    if (await Workload.calibrate(dev, kind=target.workload)).kind == "sim-kernel":
                        gated = Kernel(fn=lambda: gate.wait(_GATE_TIMEOUT_S))
                        stream.launch(acl.sim.launch_kernel, gated)
                    else:
                        gates = await stack.enter_async_context(DeviceGates(dev))
                        held = await gates.hold(stream)
                    event = await stream.record_event()
                    resumed = 0
                    all_done = anyio.Event()

                    async def waiter() -> None:
                        nonlocal resumed
                        await event.synchronize()
                        resumed += 1
                        if resumed == n:
                            all_done.set()

                    async with anyio.create_task_group() as tg:
                        for _ in range(n):
                            tg.start_soon(waiter)
                        await anyio.wait_all_tasks_blocked()
                        gc.collect()
                        ticks: list[float] = []
                        tg.start_soon(_tick, all_done, ticks, [])
                        await anyio.sleep(0.01)  # the ticker runs before the wake-up starts
                        gate.set()
                        if held is not None:
                            held.open()
                        with anyio.fail_after(_GATE_TIMEOUT_S):
                            await all_done.wait()
            finally:
                gate.set()
                if held is not None:
                    held.open()
    return {"one_event_stall_ms": max(ticks) * 1e3}


async def _idle_ticks(seconds: float) -> list[float]:
    lateness: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        await anyio.sleep(TICK)
        lateness.append(time.perf_counter() - start - TICK)
    return lateness
