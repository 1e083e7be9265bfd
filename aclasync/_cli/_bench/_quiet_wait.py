"""What a long, quiet wait costs in CPU: aclasync against a raw thread (``sync-modes``).

A default-mode stream runs one long kernel (2 s; 0.5 s with ``--quick``; times
``--scale``, at least 0.2 s) and something waits for it. ``time.process_time()`` of the
whole process (every thread: the simulator's, the loop's, aclasync's workers) and the
wall time are taken around launch + wait, for:

- ``raw thread``: ``acl.rt.synchronize_stream`` on an anyio worker thread
  (``anyio.to_thread.run_sync``) while the event loop idles;
- ``aclasync``: ``stream.launch`` then ``await stream.synchronize()``;

on one device and on eight devices at once (eight threads, or eight aclasync devices),
all on one ``sim.create(device_count=8)``. The aclasync devices are opened for each
measurement only, so the raw figures carry none of aclasync's threads. The variants are
interleaved in ``REPEATS`` rounds (their order alternating) and medians are reported;
``beyond raw`` is (median CPU through aclasync - median CPU raw) / median wall x 100,
in per cent of one core.

With pyACL alone (the ``memset`` workload) the long wait is a gate instead of a kernel:
a blocking host callback (``acl.rt.launch_callback``, run by a report thread per
device, ``_gates``) that a timer opens after the same length. The stream is busy that
long and the device idle, so the wait costs what waiting costs, at both levels alike,
and no host CPU goes into work (on the simulator a fill is real host work). On the
native backend the device counts are capped at what it has.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.to_thread

import aclasync
from aclasync.sim import Kernel

from ..._conformance import Gate, ReportThread
from .._gates import DeviceGates
from .._workload import default_kind
from ._common import (
    BenchConfig,
    Target,
    check,
    column,
    expect,
    raw_close,
    raw_open,
    run_on_loop,
    warm_stream,
)
from ._stats import percentile

__all__ = ["NOTES", "TITLE", "checks", "measure", "params", "table", "wait_seconds"]

TITLE = "Quiet waits: process CPU while one long default-mode kernel runs"
DEVICE_COUNTS = (1, 8)
REPEATS = 3
#: Per cent of one core beyond the raw thread, by number of devices waiting (issue 13).
TARGETS_PCT = {1: 0.5, 8: 2.0}
RAW, ACLASYNC = "raw thread", "aclasync"
_FULL_S, _QUICK_S, _MINIMUM_S = 2.0, 0.5, 0.2

NOTES = [
    "Quiet waits: one default-mode kernel per device, waited for by a raw thread in "
    "synchronize_stream (anyio.to_thread, loop idle) or by await stream.synchronize(); "
    "process_time of the whole process over launch + wait, medians of the interleaved "
    "repeats. beyond raw = (cpu aclasync - cpu raw) / wall, in % of one core. With "
    "pyACL alone (the memset workload) the long wait is a gate instead: a blocking "
    "acl.rt.launch_callback that a timer opens after the same time.",
]

#: One measurement: process CPU seconds and wall seconds.
_Sample = tuple[float, float]


def wait_seconds(cfg: BenchConfig) -> float:
    """The kernel length for *cfg*: 2 s (quick 0.5 s) times its scale, at least 0.2 s."""
    return max(_MINIMUM_S, (_QUICK_S if cfg.quick else _FULL_S) * cfg.scale)


def params(cfg: BenchConfig) -> dict[str, Any]:
    """What the quiet-wait table ran with, for the result's ``params``."""
    return {"quiet_wait_s": wait_seconds(cfg), "quiet_repeats": REPEATS}


def measure(cfg: BenchConfig, loop: str) -> list[dict[str, Any]]:
    """Measure both variants on 1 and 8 devices on *loop*; return the table's rows.

    Blocks for about ``4 x REPEATS`` kernel lengths. Ctrl-C cancels between
    measurements (a raw thread already waiting finishes its kernel first).
    """
    seconds = wait_seconds(cfg)
    cfg.progress(
        f"sync-modes [{loop}]: quiet waits, {REPEATS} x {2 * len(DEVICE_COUNTS)} "
        f"waits on {seconds:g} s kernels"
    )
    samples = run_on_loop(loop, _measure, cfg.target, seconds)
    rows: list[dict[str, Any]] = []
    for devices in sorted({devices for _, devices in samples}):
        raw_cpu = percentile([cpu for cpu, _ in samples[(RAW, devices)]], 50)
        for variant in (RAW, ACLASYNC):
            runs = samples[(variant, devices)]
            cpu = percentile([c for c, _ in runs], 50)
            wall = percentile([w for _, w in runs], 50)
            rows.append(
                {
                    "loop": loop,
                    "devices": devices,
                    "variant": variant,
                    "n": len(runs),
                    "wall_s": wall,
                    "cpu_ms": cpu * 1e3,
                    "core_pct": cpu / wall * 100,
                    "beyond_raw_pct": None if variant == RAW else (cpu - raw_cpu) / wall * 100,
                }
            )
    return rows


def table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The quiet-wait rows as an extra table of a result (``title/columns/rows``)."""
    return {
        "title": TITLE,
        "columns": [
            column("loop", "loop"),
            column("devices", "devices", "d"),
            column("variant", "variant"),
            column("n", "n", "d"),
            column("wall_s", "wall s", ".3f"),
            column("cpu_ms", "cpu ms", ".1f"),
            column("core_pct", "% core", ".2f"),
            column("beyond_raw_pct", "beyond raw %", "+.2f"),
        ],
        "rows": rows,
    }


def checks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One check per loop and device count: aclasync's CPU beyond raw, % of a core."""
    found = []
    for row in rows:
        value = row["beyond_raw_pct"]
        if value is None:
            continue
        target = TARGETS_PCT.get(row["devices"], TARGETS_PCT[max(DEVICE_COUNTS)])
        found.append(
            check(
                f"quiet wait CPU beyond raw, {row['devices']} device(s) [{row['loop']}] "
                "(% of a core)",
                value,
                f"<= {target:g}",
                value <= target,
            )
        )
    return found


async def _measure(target: Target, seconds: float) -> dict[tuple[str, int], list[_Sample]]:
    count = target.devices(max(DEVICE_COUNTS))
    counts = sorted({min(devices, count) for devices in DEVICE_COUNTS})
    acl = target.runtime(count)
    gated = (target.workload or default_kind(acl)) != "sim-kernel"
    raw = [await anyio.to_thread.run_sync(raw_open, acl, device) for device in range(count)]
    reporters = [await _raw_reporter(acl, *pair) for pair in raw] if gated else []
    samples: dict[tuple[str, int], list[_Sample]] = {}
    try:
        for repeat in range(REPEATS):
            for devices in counts:
                order = (RAW, ACLASYNC) if (repeat + devices) % 2 else (ACLASYNC, RAW)
                for variant in order:
                    if variant == RAW:
                        sample = await _raw_waits(acl, raw[:devices], reporters, seconds)
                    else:
                        sample = await _aclasync_waits(acl, devices, seconds, gated)
                    samples.setdefault((variant, devices), []).append(sample)
    finally:
        with anyio.CancelScope(shield=True):
            for (context, stream), reporter in zip(raw, reporters, strict=False):
                await anyio.to_thread.run_sync(_raw_unsubscribe, acl, context, stream, reporter)
            for device, (context, stream) in enumerate(raw):
                await anyio.to_thread.run_sync(raw_close, acl, device, context, stream)
            target.release(acl)
    return samples


async def _raw_reporter(acl: Any, context: int, stream: int) -> ReportThread:
    """A report thread for a raw stream, subscribed to it (the gates' callbacks)."""
    reporter = ReportThread(acl, context)
    reporter.start()

    def subscribe() -> None:
        expect(acl.rt.set_context(context), "acl.rt.set_context")
        expect(acl.rt.subscribe_report(reporter.ident, stream), "acl.rt.subscribe_report")

    await anyio.to_thread.run_sync(subscribe)
    return reporter


def _raw_unsubscribe(acl: Any, context: int, stream: int, reporter: ReportThread) -> None:
    acl.rt.set_context(context)
    acl.rt.unsubscribe_report(reporter.ident, stream)
    reporter.stop()


async def _raw_waits(
    acl: Any, streams: list[tuple[int, int]], reporters: list[ReportThread], seconds: float
) -> _Sample:
    """One raw thread per (context, stream) launches the work and blocks until it ends:
    a kernel of *seconds*, or, with *reporters*, a gate a timer opens after *seconds*."""
    rt = acl.rt

    def wait(context: int, stream: int) -> None:
        expect(rt.set_context(context), "acl.rt.set_context")
        if reporters:
            gate = Gate()
            expect(gate.launch(acl, stream), "acl.rt.launch_callback")
            timer = threading.Timer(seconds, gate.open)
            timer.start()
        else:
            kernel = Kernel(duration_us=seconds * 1e6)
            expect(acl.sim.launch_kernel(kernel, stream), "acl.sim.launch_kernel")
        expect(rt.synchronize_stream(stream), "acl.rt.synchronize_stream")

    run_sync = anyio.to_thread.run_sync
    return await _timed([functools.partial(run_sync, wait, *pair) for pair in streams])


async def _aclasync_waits(acl: Any, devices: int, seconds: float, gated: bool) -> _Sample:
    """Open *devices* aclasync devices, warm a stream on each, then time one quiet wait
    (a kernel, or with *gated* a gate that a timer opens, as ``_raw_waits``)."""
    async with contextlib.AsyncExitStack() as stack:
        streams = []
        gates = []
        for device in range(devices):
            dev = await stack.enter_async_context(aclasync.open_device(device, backend=acl))
            stream = await stack.enter_async_context(dev.create_stream())
            await warm_stream(stream)
            if gated:
                gates.append(await stack.enter_async_context(DeviceGates(dev)))
                await gates[-1].subscribe(stream)
            streams.append(stream)

        async def wait(index: int) -> None:
            stream = streams[index]
            if gated:
                gate = gates[index].hold_nowait(stream)
                timer = threading.Timer(seconds, gate.open)
                timer.start()
            else:
                stream.launch(acl.sim.launch_kernel, Kernel(duration_us=seconds * 1e6))
            await stream.synchronize()

        return await _timed([functools.partial(wait, index) for index in range(devices)])


async def _timed(waits: list[Callable[[], Coroutine[Any, Any, object]]]) -> _Sample:
    """Run *waits* at once; return (process CPU s, wall s) from start to the last end."""
    cpu, wall = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as group:
        for wait in waits:
            group.start_soon(wait)
    return time.process_time() - cpu, time.perf_counter() - wall
