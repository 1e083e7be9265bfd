"""``sync-modes``: default vs FAST_SYNC streams, wake-up latency and CPU per sync.

Each sample launches one kernel on an otherwise idle stream and waits for it. The
kernel's ``fn`` runs on the simulated device for the modelled length (it sleeps, GIL
released, until its deadline) and stamps ``time.perf_counter()`` as its last act
(``_raw_level.Stamp``); that stamp is the completion time, on the clock the waiter
reads when it resumes. (Timing events are no help here: pyACL gives only the
difference between two events, never a host-clock time.)

Latency = waiter resumed - kernel completed. Two levels take turns, mode by mode, in
every round: the raw level (``_raw_level.RawThread``, a plain thread the coroutine
wakes per sample, which launches, calls ``synchronize_stream`` and posts the waiter)
and aclasync (``stream.launch`` then ``await stream.synchronize()``), sample by sample.
The raw thread's samples give the two terms aclasync is judged against, per loop, mode
and kernel length: ``raw`` (kernel end -> the runtime's return) and ``floor`` (its post
-> the coroutine running again, through aclasync's own wake path). ``over us`` = p50 of
aclasync - p50 of (raw + floor), each sample's two terms summed first: what aclasync
adds beyond a thread that waits and posts. (The median of a sum is not the sum of the
medians: on the simulator a FAST_SYNC wait's end -> return spreads evenly over a poll
period, 20-110 us, and the two differed by 8 us in one run.) The raw rows shown are
the first loop's. Interleaving matters on this kind of machine: run one after the
other, drift between two levels went straight into ``over`` (20 minutes apart, the
same commit gave a worst FAST_SYNC ``over`` of 53 and of 148 us on trio).

CPU per sync: ``time.thread_time()`` of the raw thread around ``synchronize_stream``
(raw level only), and ``time.process_time()`` over the samples, divided by the number
of syncs (both levels; it includes the simulator's threads, the event loop and, through
aclasync, the worker). The CPU of a long quiet wait is measured by ``_quiet_wait`` and
reported here as a second table.

With pyACL alone (the ``memset`` workload: the native backend, or ``--workload
memset``) no kernel can stamp its own end on the host's clock. Each sample then brackets
its work with two timing events (``_workload.Stopwatch``; the raw thread records its
own) and the device time between them, ``ran``, is taken off the time from the
coroutine handing the work over to it running again: latency = resumed - handed over
- ran, at both levels. The query of the events' elapsed time lies outside both levels'
windows, latency and CPU alike: aclasync's sample makes it after the coroutine resumed,
the raw thread, which must make it before it posts, times it and the coroutine takes it
off. It holds a thread wake-up before the launch as well as the one
after the wait (the loop wakes the worker or the raw thread), the same at both levels,
so ``raw+floor`` is the raw level's latency taken the same way, ``floor`` its post to
resume, ``raw`` the rest, and ``over`` = p50(aclasync) - p50(raw+floor).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import aclasync
from aclasync import StreamFlag
from aclasync.sim import Kernel

from .._workload import Stopwatch, Workload
from . import _quiet_wait
from ._common import BenchConfig, Target, check, column, run_on_loop, warm_stream
from ._raw_level import RawThread, Stamp
from ._stats import percentile, ratio

__all__ = ["RUNS_NATIVE", "run"]

#: Runs on the native backend too: its device work is pyACL alone there (``_runner``).
RUNS_NATIVE = True

TITLE = "Sync modes: completion-to-resume latency and CPU per sync"
MODES: dict[str, int] = {
    "default": 0,
    "FAST_SYNC": int(StreamFlag.FAST_SYNC),
    "FAST_LAUNCH|FAST_SYNC": int(StreamFlag.FAST_LAUNCH | StreamFlag.FAST_SYNC),
}
LENGTHS_US = (0, 100, 1_000, 10_000)
_FULL = {0: 600, 100: 600, 1_000: 300, 10_000: 100}
_QUICK = {0: 100, 100: 100, 1_000: 50, 10_000: 16}
_POLLED_US = 1_000
#: aclasync - raw - floor, p50s, worst kernel length, per loop and mode (issue 13).
OVER_TARGET_US = 20.0

#: What one mode at one kernel length gave: lists of per-sync figures and totals.
_Cell = dict[str, Any]

#: How latency is taken, with simulated kernels that stamp their own end.
STAMPED_NOTES = [
    "Latency: kernel completion (stamped by the kernel on the simulated device) to "
    "the waiter running again. 'ran us' is the kernel's measured length.",
    "raw: p50 of a plain thread's samples (woken by the loop per sample, it "
    "launches, calls synchronize_stream and posts the waiter), interleaved with "
    "that loop's rounds (the raw rows show the first loop's); floor: p50 of that "
    "thread's post to the coroutine running again, through aclasync's own wake "
    "path; raw+floor: p50 of the two summed per sample; over = p50(aclasync) - "
    "raw+floor.",
]
#: How latency is taken with pyACL alone: timing events around the work.
TIMED_NOTES = [
    "Latency (pyACL alone): from handing the work over (stream.launch, or waking the "
    "raw thread) to the waiter running again, minus 'ran us', the work's device time "
    "between two timing events recorded around it.",
    "raw: a plain thread woken by the loop per sample (it records, launches, records, "
    "calls synchronize_stream and posts the waiter); raw+floor: its latency taken the "
    "same way as aclasync's; floor: its post to the coroutine running again; raw: "
    "raw+floor - floor; over = p50(aclasync) - p50(raw+floor).",
]


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "group": ["level", "kernel_us"],
        "group_format": "{level}, {kernel_us:,} µs kernel",
        "series": "mode",
        "value": "lat_vs_default",
        "value_format": "{:.2f}x default",
        "axis": "median completion-to-resume latency, relative to a default stream",
        "unit": "ratio to default; lower is better",
        "target": 1.0,
        "target_label": "target: FAST_SYNC below 1, faster than default (kernels > 0 µs)",
        "annotate": "p50_us",
        "annotate_format": "median {:.0f} µs",
    },
    {
        "title": "what aclasync adds to a wake-up beyond the raw wait and the floor",
        "group": ["level", "kernel_us"],
        "group_format": "{level}, {kernel_us:,} µs kernel",
        "series": "mode",
        "value": "over_us",
        "value_format": "{:+.0f} µs",
        "axis": "median latency through aclasync minus a thread's that waits and posts",
        "unit": "µs; lower is better",
        "target": OVER_TARGET_US,
        "target_label": f"target: ≤ {OVER_TARGET_US:g} µs at every length",
    },
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Measure both levels (raw, then aclasync on every loop of *cfg*); return the result."""
    counts = {length: cfg.size(_FULL[length], _QUICK[length], minimum=2) for length in LENGTHS_US}
    # The issue judges >= 5 rounds. More and shorter rounds spread this VM's bursts of
    # slowness (tens of ms to seconds) evenly over both levels: with 5 rounds one burst
    # could cover most of one level's samples of one length.
    rounds = 1 if cfg.scale < 1 else (2 if cfg.quick else 15)
    levels: dict[str, dict[tuple[str, int], _Cell]] = {}
    raws: dict[str, dict[tuple[str, int], _Cell]] = {}
    quiet: list[dict[str, Any]] = []
    workload: dict[str, Any] = {}
    for loop in cfg.loops:
        cfg.progress(
            f"sync-modes [{loop}]: {sum(counts.values())} syncs per mode via aclasync, "
            "interleaved with as many on a raw thread"
        )
        levels[loop], raws[loop], workload = run_on_loop(
            loop, _aclasync_level, cfg.target, counts, rounds
        )
        quiet.extend(_quiet_wait.measure(cfg, loop))
    stamped = workload.get("kind") == "sim-kernel"
    # The raw row shown is that of the first loop's run; each loop's "over" is taken
    # against the raw samples interleaved with its own rounds.
    rows = _rows({"raw": raws[cfg.loops[0]], **levels}, raws)
    return {
        "title": TITLE,
        "columns": [
            column("level", "level"),
            column("kernel_us", "kernel us", "d"),
            column("mode", "mode"),
            column("n", "n", "d"),
            column("measured_us", "ran us", ".0f"),
            column("p50_us", "p50 us", ".1f"),
            column("p99_us", "p99 us", ".1f"),
            column("lat_vs_default", "p50/dflt", ".2f"),
            column("thread_cpu_us", "thr cpu us", ".1f"),
            column("cpu_us", "proc cpu us", ".1f"),
            column("cpu_vs_default", "cpu/dflt", ".2f"),
            column("gap_kept", "gap kept", ".2f"),
            column("raw_us", "raw us", ".1f"),
            column("floor_us", "floor us", ".1f"),
            column("raw_floor_us", "raw+floor us", ".1f"),
            column("over_us", "over us", "+.1f"),
        ],
        "rows": rows,
        "tables": [_quiet_wait.table(quiet)],
        "checks": _checks(rows, list(levels)) + _over_checks(rows) + _quiet_wait.checks(quiet),
        "charts": CHARTS,
        "workload": workload,
        "notes": [
            *(STAMPED_NOTES if stamped else TIMED_NOTES),
            "thr cpu: thread_time of the raw waiting thread per sync; proc cpu: "
            "process_time per launch+sync, all threads (the runtime's included).",
            "gap kept: (default p50 - this mode's p50) through aclasync on that loop, "
            "divided by the same gap at the raw level.",
            *_quiet_wait.NOTES,
        ],
        "params": {
            "counts": {str(k): v for k, v in counts.items()},
            "rounds": rounds,
            **_quiet_wait.params(cfg),
        },
    }


def _new_cell() -> _Cell:
    return {
        "latency": [],
        "raw": [],
        "ran": [],
        "floor": [],
        "raw_floor": [],
        "thread_cpu": 0.0,
        "process_cpu": 0.0,
    }


async def _aclasync_level(
    target: Target, counts: dict[int, int], rounds: int
) -> tuple[dict[tuple[str, int], _Cell], dict[tuple[str, int], _Cell], dict[str, Any]]:
    """Every mode and length through aclasync and on the raw thread, interleaved.

    Returns the aclasync cells, the raw cells (whose ``floor`` lists hold the raw
    thread's post-to-resume times, and ``raw_floor`` each sample's latency plus that)
    and what the workload was.
    """
    with target.opened(1) as acl:
        async with aclasync.open_device(0, backend=acl) as dev:
            work = await Workload.calibrate(dev, kind=target.workload)
            stamped = work.kind == "sim-kernel"
            shared = acl if target.native else None
            with RawThread(MODES, None if stamped else work, shared) as raw:
                cells, raw_cells = await _interleaved(dev, work, raw, counts, rounds)
            await work.aclose()
    return cells, raw_cells, work.describe()


async def _interleaved(
    dev: aclasync.Device[Any],
    work: Workload,
    raw: RawThread,
    counts: dict[int, int],
    rounds: int,
) -> tuple[dict[tuple[str, int], _Cell], dict[tuple[str, int], _Cell]]:
    cells: dict[tuple[str, int], _Cell] = {}
    raw_cells: dict[tuple[str, int], _Cell] = {}
    streams = {mode: await dev.create_stream(flags=flags) for mode, flags in MODES.items()}
    watch = None if work.kind == "sim-kernel" else await Stopwatch.create(dev)
    for stream in streams.values():
        await warm_stream(stream)
        await work.prepare(stream)
    await dev.synchronize()
    for length in LENGTHS_US:
        n = max(1, counts[length] // rounds)
        for _ in range(rounds):
            for mode, stream in streams.items():
                raw_cell = raw_cells.setdefault((mode, length), _new_cell())
                cell = cells.setdefault((mode, length), _new_cell())
                for _ in range(n):  # sample by sample, so that drift hits both
                    if watch is None:
                        await _raw_sample(raw, mode, length, raw_cell)
                        await _aclasync_sample(stream, dev.acl.sim.launch_kernel, length, cell)
                    else:
                        await _raw_timed_sample(raw, mode, length, raw_cell)
                        await _aclasync_timed_sample(stream, work, watch, length, cell)
    if watch is not None:
        await watch.aclose()
    for stream in streams.values():
        await stream.aclose()
    return cells, raw_cells


async def _raw_sample(raw: RawThread, mode: str, length: int, cell: _Cell) -> None:
    cpu_start = time.process_time()
    sample, resumed = await raw.sample(mode, length / 1e6)
    cell["process_cpu"] += time.process_time() - cpu_start
    cell["latency"].append(sample.latency)
    cell["raw"].append(sample.latency)
    cell["ran"].append(sample.ran)
    floor = resumed - sample.posted
    cell["floor"].append(floor)
    cell["raw_floor"].append(sample.latency + floor)
    cell["thread_cpu"] += sample.thread_cpu


async def _aclasync_sample(
    stream: aclasync.Stream, launch: Callable[..., int], length: int, cell: _Cell
) -> None:
    cpu_start = time.process_time()
    stamp = Stamp(length / 1e6)
    stream.launch(launch, Kernel(fn=stamp))
    await stream.synchronize()
    resumed = time.perf_counter()
    cell["process_cpu"] += time.process_time() - cpu_start
    cell["latency"].append(resumed - stamp.end)
    cell["ran"].append(stamp.end - stamp.start)


async def _raw_timed_sample(raw: RawThread, mode: str, length: int, cell: _Cell) -> None:
    cpu_start = time.process_time()
    handed = time.perf_counter()
    sample, resumed = await raw.sample(mode, length / 1e6)
    # The thread's event query (before its post) is taken off both, as aclasync's
    # sample queries its events after its window: neither level pays for it.
    cell["process_cpu"] += time.process_time() - cpu_start - sample.query_cpu
    latency = resumed - handed - sample.ran - sample.query
    floor = resumed - sample.posted
    cell["latency"].append(latency)
    cell["raw"].append(latency - floor)
    cell["ran"].append(sample.ran)
    cell["floor"].append(floor)
    cell["raw_floor"].append(latency)
    cell["thread_cpu"] += sample.thread_cpu


async def _aclasync_timed_sample(
    stream: aclasync.Stream, work: Workload, watch: Stopwatch, length: int, cell: _Cell
) -> None:
    cpu_start = time.process_time()
    handed = time.perf_counter()
    watch.start(stream)
    work.launch(stream, length)
    watch.stop(stream)
    await stream.synchronize()
    resumed = time.perf_counter()
    cell["process_cpu"] += time.process_time() - cpu_start
    ran = await watch.elapsed_us() / 1e6
    cell["latency"].append(resumed - handed - ran)
    cell["ran"].append(ran)


def _rows(
    levels: dict[str, dict[tuple[str, int], _Cell]],
    raws: dict[str, dict[tuple[str, int], _Cell]],
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for level, cells in levels.items():
        raw = raws.get(level, levels["raw"])
        for length in LENGTHS_US:
            base = cells[("default", length)]
            base_p50 = percentile(base["latency"], 50)
            base_cpu = base["process_cpu"] / len(base["latency"])
            raw_default_p50 = percentile(raw[("default", length)]["latency"], 50)
            for mode in MODES:
                cell = cells[(mode, length)]
                n = len(cell["latency"])
                p50 = percentile(cell["latency"], 50)
                cpu = cell["process_cpu"] / n
                raw_p50 = percentile(raw[(mode, length)]["raw"], 50)
                raw_latency_p50 = percentile(raw[(mode, length)]["latency"], 50)
                floor = raw_floor = None
                if level != "raw":
                    floor = percentile(raw[(mode, length)]["floor"], 50)
                    raw_floor = percentile(raw[(mode, length)]["raw_floor"], 50)
                gap_kept = None
                if level != "raw" and mode != "default":
                    gap_kept = ratio(base_p50 - p50, raw_default_p50 - raw_latency_p50)
                rows.append(
                    {
                        "level": level,
                        "kernel_us": length,
                        "mode": mode,
                        "n": n,
                        "measured_us": percentile(cell["ran"], 50) * 1e6,
                        "p50_us": p50 * 1e6,
                        "p99_us": percentile(cell["latency"], 99) * 1e6,
                        "lat_vs_default": ratio(p50, base_p50),
                        "thread_cpu_us": cell["thread_cpu"] / n * 1e6 if level == "raw" else None,
                        "cpu_us": cpu * 1e6,
                        "cpu_vs_default": ratio(cpu, base_cpu),
                        "gap_kept": gap_kept,
                        "raw_us": None if level == "raw" else raw_p50 * 1e6,
                        "floor_us": None if floor is None else floor * 1e6,
                        "raw_floor_us": None if raw_floor is None else raw_floor * 1e6,
                        "over_us": None if raw_floor is None else (p50 - raw_floor) * 1e6,
                    }
                )
    return rows


def _checks(rows: list[dict[str, Any]], levels: list[str]) -> list[dict[str, Any]]:
    """FAST_SYNC must wake sooner at every non-zero length, and cost more CPU once there
    is a real wait to poll through (kernels of 1 ms and more; a 0 us kernel ends before
    the first poll). Through aclasync a 0 us kernel has finished before the sync reaches
    the device, so no wait mode is involved and its row is not judged."""
    checks = []
    for level in levels:
        fast = [r for r in rows if r["level"] == level and r["mode"] == "FAST_SYNC"]
        latency = [
            r["lat_vs_default"]
            for r in fast
            if r["lat_vs_default"] is not None and r["kernel_us"] > 0
        ]
        cpu = [
            r["cpu_vs_default"]
            for r in fast
            if r["cpu_vs_default"] is not None and r["kernel_us"] >= _POLLED_US
        ]
        worst = max(latency, default=None)
        least = min(cpu, default=None)
        checks.append(
            check(
                f"FAST_SYNC p50 / default p50, worst non-zero length [{level}]",
                worst,
                "< 1",
                None if worst is None else worst < 1,
            )
        )
        checks.append(
            check(
                f"FAST_SYNC CPU / default CPU, kernels >= 1 ms [{level}]",
                least,
                "> 1",
                None if least is None else least > 1,
            )
        )
    return checks


def _over_checks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """aclasync - raw - floor at its worst kernel length, per loop and mode (issue 13)."""
    worst: dict[tuple[str, str], float] = {}
    for row in rows:
        if row["over_us"] is not None:
            key = (row["level"], row["mode"])
            worst[key] = max(worst.get(key, row["over_us"]), row["over_us"])
    return [
        check(
            f"aclasync - raw - floor, p50s, worst length, {mode} [{level}] (us)",
            value,
            f"<= {OVER_TARGET_US:g}",
            value <= OVER_TARGET_US,
        )
        for (level, mode), value in worst.items()
    ]
