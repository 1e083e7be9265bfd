"""``launch``: how fast work can be queued on a stream.

Three ways of queueing N empty pieces of work and waiting for them, in one run (an
empty kernel ``k`` on the simulator, ``acl.sim.launch_kernel(k, h)``; the smallest
``memset_async`` of the workload with pyACL alone, ``_workload``):

- ``raw``: the call N times on one thread, then ``acl.rt.synchronize_stream(h)``;
- ``aclasync``: ``stream.launch(call, ...)`` N times, then one
  ``await stream.synchronize()``;
- ``to_thread``: one ``await anyio.to_thread.run_sync(...)`` per launch (``set_context``
  plus the launch), then one for the sync; measured on a smaller N and given as a rate.

The rate is N over the time from the first launch to the sync's return, so it includes
the simulated device draining the queue (the same work in every variant).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.to_thread

import aclasync

from .._workload import Workload
from ._common import BenchConfig, Target, check, column, expect, raw_close, raw_open, run_on_loop
from ._stats import percentile, ratio

__all__ = ["RUNS_NATIVE", "run"]

#: Runs on the native backend too: its device work is pyACL alone there (``_runner``).
RUNS_NATIVE = True

TITLE = "Queued launch rate"
RAW, ACLASYNC, NAIVE = "raw (1 thread)", "aclasync", "to_thread per launch"


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "group": ["loop"],
        "series": "variant",
        "value": "vs_raw",
        "value_format": "{:.2f}x raw",
        "axis": "queued launch rate, relative to raw pyACL calls on one thread",
        "unit": "ratio to raw, log scale; higher is better",
        "log": True,
        "target": 0.5,
        "target_label": "target for aclasync: ≥ 0.5 of raw (and ≥ 30 times to_thread)",
        "annotate": "per_s",
        "annotate_format": "{:,.0f} launches/s",
    }
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Measure launch rates on every loop of *cfg*; return the result."""
    n = cfg.size(20_000, 10_000, minimum=10)
    n_naive = cfg.size(2_000, 300, minimum=5)
    repeats = 3 if cfg.quick else 9
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    for loop in cfg.loops:
        cfg.progress(
            f"launch [{loop}]: {repeats} x ({n} raw, {n} aclasync, {n_naive} to_thread) launches"
        )
        seconds, enqueue, workload = run_on_loop(loop, _measure, cfg.target, n, n_naive, repeats)
        counts = {RAW: n, ACLASYNC: n, NAIVE: n_naive}
        rates = {name: counts[name] / percentile(values, 50) for name, values in seconds.items()}
        for name, rate in rates.items():
            rows.append(
                {
                    "loop": loop,
                    "variant": name,
                    "n": counts[name],
                    "per_s": rate,
                    "us_each": 1e6 / rate,
                    "enqueue_us": percentile(enqueue, 50) / n * 1e6 if name == ACLASYNC else None,
                    "vs_raw": ratio(rate, rates[RAW]),
                    "vs_naive": ratio(rate, rates[NAIVE]),
                }
            )
        vs_raw = ratio(rates[ACLASYNC], rates[RAW])
        vs_naive = ratio(rates[ACLASYNC], rates[NAIVE])
        checks.append(check(f"aclasync / raw [{loop}]", vs_raw, ">= 0.5", _at_least(vs_raw, 0.5)))
        checks.append(
            check(f"aclasync / to_thread [{loop}]", vs_naive, ">= 30", _at_least(vs_naive, 30))
        )
    return {
        "title": TITLE,
        "columns": [
            column("loop", "loop"),
            column("variant", "variant"),
            column("n", "n", "d"),
            column("per_s", "launches/s", ",.0f"),
            column("us_each", "us each", ".2f"),
            column("enqueue_us", "enqueue us", ".2f"),
            column("vs_raw", "/raw", ".2f"),
            column("vs_naive", "/to_thread", ".1f"),
        ],
        "rows": rows,
        "checks": checks,
        "charts": CHARTS,
        "notes": [
            "Rates are N / (first launch .. sync returned), median of the repeats; "
            "'enqueue us' is what one stream.launch() call costs the event loop.",
        ],
        "params": {"n": n, "n_naive": n_naive, "repeats": repeats},
        "workload": workload,
    }


async def _measure(
    target: Target, n: int, n_naive: int, repeats: int
) -> tuple[dict[str, list[float]], list[float], dict[str, Any]]:
    with target.opened(1) as acl:
        return await _measure_on(acl, target, n, n_naive, repeats)


async def _measure_on(
    acl: Any, target: Target, n: int, n_naive: int, repeats: int
) -> tuple[dict[str, list[float]], list[float], dict[str, Any]]:
    rt = acl.rt
    seconds: dict[str, list[float]] = {RAW: [], ACLASYNC: [], NAIVE: []}
    enqueue: list[float] = []
    async with aclasync.open_device(0, backend=acl) as dev, dev.create_stream() as stream:
        work = await Workload.calibrate(dev, kind=target.workload)
        # One piece of empty work, as (call, args): queued as call(*args, stream); all
        # three variants' fills (if fills) go to one small buffer, never at once.
        launch, args = work.work(0, await _scratch(dev, work))
        stream.launch(launch, *args)
        await stream.synchronize()
        context, handle = await anyio.to_thread.run_sync(raw_open, acl, 0)

        def raw(count: int) -> float:
            expect(rt.set_context(context), "acl.rt.set_context")
            failed = 0
            start = time.perf_counter()
            for _ in range(count):
                failed |= launch(*args, handle)
            failed |= rt.synchronize_stream(handle)
            elapsed = time.perf_counter() - start
            expect(failed, "launch / acl.rt.synchronize_stream")
            return elapsed

        def naive_launch() -> int:
            rt.set_context(context)
            ret: int = launch(*args, handle)
            return ret

        def naive_sync() -> int:
            rt.set_context(context)
            ret: int = rt.synchronize_stream(handle)
            return ret

        async def naive(count: int) -> float:
            start = time.perf_counter()
            for _ in range(count):
                expect(await anyio.to_thread.run_sync(naive_launch), "launch")
            expect(await anyio.to_thread.run_sync(naive_sync), "acl.rt.synchronize_stream")
            return time.perf_counter() - start

        async def via_aclasync(count: int) -> tuple[float, float]:
            start = time.perf_counter()
            for _ in range(count):
                stream.launch(launch, *args)
            queued = time.perf_counter()
            await stream.synchronize()
            return time.perf_counter() - start, queued - start

        raw(max(1, n // 10))  # warm-up, not recorded
        await via_aclasync(max(1, n // 10))
        await naive(max(1, n_naive // 10))
        for _ in range(repeats):
            seconds[RAW].append(await anyio.to_thread.run_sync(raw, n))
            total, queued = await via_aclasync(n)
            seconds[ACLASYNC].append(total)
            enqueue.append(queued)
            seconds[NAIVE].append(await naive(n_naive))
        await anyio.to_thread.run_sync(raw_close, acl, 0, context, handle)
        await work.aclose()
    return seconds, enqueue, work.describe()


async def _scratch(dev: aclasync.Device[Any], work: Workload) -> int:
    """A buffer for the empty work of every variant (none for simulated kernels); the
    device frees it on close."""
    if not work.scratch_bytes:
        return 0
    return (await dev.alloc(work.scratch_bytes)).ptr


def _at_least(value: float | None, target: float) -> bool | None:
    return None if value is None else value >= target
