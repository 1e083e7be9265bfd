"""``overhead``: the round trip of one sync on an idle stream.

Ways of waiting for an idle stream, measured in one run and in interleaved rounds (so
that a noisy moment on a shared machine hits them all alike); the bare thread and
aclasync, judged against each other, alternate sample by sample:

- ``raw``: ``acl.rt.synchronize_stream(h)`` in a loop on one thread (no event loop);
- ``bare thread``: no runtime call at all, only the hand-over of a waiter to a
  dedicated plain thread and its wake-up back on the loop (``_floor.BareThread``):
  the floor of any worker round trip;
- ``aclasync``: ``await stream.synchronize()``;
- ``bare thread, same-CPU`` and ``aclasync same-CPU``: the loop thread, the bare thread
  and the device worker all pinned to one CPU (``WorkerOptions(cpu=...)``), sample by
  sample: an opt-in placement for small machines, and its own floor;
- ``bare thread, placed`` and ``aclasync, placed``: the bare thread and the device
  worker both pinned to one CPU, the loop thread to another, sample by sample: the
  pair the ``aclasync - bare thread`` check is taken on, since left to the scheduler
  one of the two threads may share the loop's CPU for a whole run and the other not;
- ``to_thread``: the naive ``await anyio.to_thread.run_sync(...)`` of ``set_context``
  plus ``synchronize_stream``;
- ``asyncio.to_thread``: the same through the standard library (asyncio and uvloop).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread

import aclasync

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
from ._floor import BareThread
from ._stats import ratio, summarize

__all__ = ["RUNS_NATIVE", "run"]

#: Runs on the native backend too: its device work is pyACL alone there (``_runner``).
RUNS_NATIVE = True

TITLE = "Idle-stream sync round trip"
TARGET = 0.7  # aclasync / naive to_thread, medians
BARE_TARGET_US = 5.0  # aclasync - bare thread, medians

RAW, BARE, ACLASYNC, BARE_PLACED, ACLASYNC_PLACED, BARE_PINNED, PINNED, NAIVE, STDLIB = (
    "raw (1 thread)",
    "bare thread",
    "aclasync",
    "bare thread, placed",
    "aclasync, placed",
    "bare thread, same-CPU",
    "aclasync same-CPU",
    "to_thread (naive)",
    "asyncio.to_thread",
)
#: Each placed variant's bare thread, placed alike ("vs bare us"); every other
#: variant's is BARE (nothing pinned).
_BARE_OF = {
    BARE_PLACED: BARE_PLACED,
    ACLASYNC_PLACED: BARE_PLACED,
    BARE_PINNED: BARE_PINNED,
    PINNED: BARE_PINNED,
}

_Batch = Callable[[int, list[int]], Awaitable[None]]


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "group": ["loop"],
        "series": "variant",
        "value": "vs_naive",
        "value_format": "{:.2f}x naive",
        "axis": "median time of one idle-stream sync, relative to naive to_thread",
        "unit": "ratio to naive; lower is better",
        "target": TARGET,
        "target_label": f"target for aclasync: ≤ {TARGET:g} of naive",
        "annotate": "median_us",
        "annotate_format": "median {:.0f} µs",
    }
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Measure the idle-stream round trip on every loop of *cfg*; return the result."""
    rounds = cfg.size(10, 5, minimum=1)
    per_round = cfg.size(2000, 400, minimum=5)
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    for loop in cfg.loops:
        cfg.progress(f"overhead [{loop}]: {rounds} rounds x {per_round} round trips per variant")
        samples = run_on_loop(loop, _measure, cfg.target, loop, rounds, per_round)
        medians = {name: summarize(vals, scale=1e-3)["median"] for name, vals in samples.items()}
        naive, raw = medians[NAIVE], medians[RAW]
        # Judged with the threads placed alike when the machine allows it: left to the
        # scheduler, one thread may share the loop's CPU and the other not, for a whole
        # run (same code: +62 us in one run, -3 in the next, on uvloop).
        judged = ACLASYNC_PLACED if ACLASYNC_PLACED in samples else ACLASYNC
        for variant, values in samples.items():
            stats = summarize(values, scale=1e-3)
            bare = medians[_BARE_OF.get(variant, BARE)]
            rows.append(
                {
                    "loop": loop,
                    "variant": variant,
                    "n": len(values),
                    "median_us": stats["median"],
                    "p99_us": stats["p99"],
                    "vs_naive": ratio(stats["median"], naive),
                    "vs_raw": ratio(stats["median"], raw),
                    "vs_bare_us": stats["median"] - bare,
                }
            )
            if variant == ACLASYNC:
                value = ratio(stats["median"], naive)
                ok = None if value is None else value <= TARGET
                checks.append(check(f"aclasync / naive median [{loop}]", value, "<= 0.7", ok))
            if variant == judged:
                above = stats["median"] - bare
                placed = ", placed alike" if judged == ACLASYNC_PLACED else ""
                checks.append(
                    check(
                        f"aclasync - bare thread{placed}, medians, us [{loop}]",
                        above,
                        f"<= {BARE_TARGET_US:g}",
                        above <= BARE_TARGET_US,
                    )
                )
    return {
        "title": TITLE,
        "columns": [
            column("loop", "loop"),
            column("variant", "variant"),
            column("n", "n", "d"),
            column("median_us", "median us", ".1f"),
            column("p99_us", "p99 us", ".1f"),
            column("vs_naive", "/naive", ".2f"),
            column("vs_raw", "/raw", ".1f"),
            column("vs_bare_us", "vs bare us", "+.1f"),
        ],
        "rows": rows,
        "checks": checks,
        "charts": CHARTS,
        "notes": [
            "Each sample is one `synchronize` of an idle stream, timed with perf_counter_ns "
            "around the await (or the raw call); variants alternate in rounds, and the "
            "bare thread and aclasync sample by sample within a round.",
            "same-CPU pins the loop thread, the worker and the bare thread to one CPU for "
            "that pair only.",
            "bare thread: a waiter handed to a dedicated plain thread, which posts it back "
            "at once (no runtime call): the floor of a worker round trip. 'vs bare us' is "
            "the median minus the median of the bare thread placed alike (the placed one "
            "for the placed rows, the same-CPU one for the same-CPU rows).",
            "placed: the loop thread on one CPU, the device worker and the bare thread both "
            "on another, alternating sample by sample; the aclasync - bare thread check is "
            "taken there, where both threads are placed alike.",
        ],
        "params": {"rounds": rounds, "per_round": per_round},
        "workload": {"kind": "none", "what": "idle streams: no device work is timed"},
    }


async def _measure(target: Target, loop: str, rounds: int, per_round: int) -> dict[str, list[int]]:
    with target.opened(1) as acl:
        return await _measure_on(acl, loop, rounds, per_round)


async def _measure_on(acl: Any, loop: str, rounds: int, per_round: int) -> dict[str, list[int]]:
    rt = acl.rt
    cpu = _pin_cpu()
    placed = [BARE_PLACED, ACLASYNC_PLACED, BARE_PINNED, PINNED] if cpu is not None else []
    names = [RAW, BARE, ACLASYNC, *placed, NAIVE]
    samples: dict[str, list[int]] = {name: [] for name in names}
    if loop != "trio":
        samples[STDLIB] = []
    async with aclasync.open_device(0, backend=acl) as dev:
        stream = await dev.create_stream()
        await warm_stream(stream)
        context, handle = await anyio.to_thread.run_sync(raw_open, acl, 0)

        def naive_call() -> int:
            rt.set_context(context)
            ret: int = rt.synchronize_stream(handle)
            return ret

        def raw_loop(n: int) -> list[int]:
            expect(rt.set_context(context), "acl.rt.set_context")
            sync, clock = rt.synchronize_stream, time.perf_counter_ns
            out = []
            failed = 0
            for _ in range(n):
                start = clock()
                failed |= sync(handle)
                out.append(clock() - start)
            expect(failed, "acl.rt.synchronize_stream")
            return out

        async def raw_batch(n: int, out: list[int]) -> None:
            out.extend(await anyio.to_thread.run_sync(raw_loop, n))

        async def naive_batch(n: int, out: list[int]) -> None:
            clock, to_thread = time.perf_counter_ns, anyio.to_thread.run_sync
            for _ in range(n):
                start = clock()
                expect(await to_thread(naive_call), "acl.rt.synchronize_stream")
                out.append(clock() - start)

        async def stdlib_batch(n: int, out: list[int]) -> None:
            import asyncio

            clock = time.perf_counter_ns
            for _ in range(n):
                start = clock()
                expect(await asyncio.to_thread(naive_call), "acl.rt.synchronize_stream")
                out.append(clock() - start)

        bare = BareThread()  # started below
        batches: dict[str, _Batch] = {
            RAW: raw_batch,
            BARE: _pair(bare, stream, samples[ACLASYNC], loop_cpu=None),
            NAIVE: naive_batch,
        }
        if loop != "trio":
            batches[STDLIB] = stdlib_batch
        async with contextlib.AsyncExitStack() as stack:
            stack.enter_context(bare)
            if cpu is not None:
                options = aclasync.WorkerOptions(cpu=cpu)
                pinned_dev = await stack.enter_async_context(
                    aclasync.open_device(0, backend=acl, options=options)
                )
                pinned = await stack.enter_async_context(pinned_dev.create_stream())
                placed_bare = stack.enter_context(BareThread(cpu=cpu))
                batches[BARE_PLACED] = _pair(
                    placed_bare, pinned, samples[ACLASYNC_PLACED], loop_cpu=_other_cpu(cpu)
                )
                batches[BARE_PINNED] = _pair(placed_bare, pinned, samples[PINNED], loop_cpu=cpu)
            order = [RAW, BARE, BARE_PLACED, BARE_PINNED, NAIVE, STDLIB]
            batches = {name: batches[name] for name in order if name in batches}
            for batch in batches.values():  # warm-up, not recorded
                await batch(max(1, per_round // 5), [])
            samples[ACLASYNC].clear()
            if cpu is not None:
                samples[ACLASYNC_PLACED].clear()
                samples[PINNED].clear()
            for _ in range(rounds):
                for name, batch in batches.items():
                    await batch(per_round, samples[name])
        await anyio.to_thread.run_sync(raw_close, acl, 0, context, handle)
        await stream.aclose()
    return samples


@contextlib.contextmanager
def _loop_thread_on(cpu: int | None) -> Iterator[None]:
    """Run the calling (loop) thread on *cpu* only meanwhile; None leaves it as it is
    (``sched_*affinity`` is Linux-only; callers pass a CPU only where it exists)."""
    if cpu is None:
        yield
        return
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})  # pid 0: this thread only
    try:
        yield
    finally:
        os.sched_setaffinity(0, previous)


def _pair(
    bare: BareThread, stream: aclasync.Stream, ours: list[int], *, loop_cpu: int | None
) -> _Batch:
    """The bare thread and aclasync sample by sample, since they are judged against each
    other (<= 5 us apart) and the machine's drift between blocks would decide it. The
    bare thread's samples go to ``out``, aclasync's to *ours*; with *loop_cpu*, the loop
    thread runs on that CPU meanwhile."""

    async def batch(n: int, out: list[int]) -> None:
        with _loop_thread_on(loop_cpu):
            clock, trip, sync = time.perf_counter_ns, bare.round_trip, stream.synchronize
            for _ in range(n):
                start = clock()
                await trip()
                middle = clock()
                await sync()
                out.append(middle - start)
                ours.append(clock() - middle)

    return batch


def _other_cpu(cpu: int) -> int:
    """A CPU of this process other than *cpu* (``_pin_cpu`` found at least two)."""
    return min(c for c in os.sched_getaffinity(0) if c != cpu)


def _pin_cpu() -> int | None:
    """The CPU for the same-CPU variant, or None where pinning is impossible or moot."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1] if len(cpus) > 1 else None
