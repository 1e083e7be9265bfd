"""``sync-modes``: default vs FAST_SYNC streams, wake-up latency and CPU per sync.

Each sample launches one kernel on an otherwise idle stream and waits for it. The
kernel's ``fn`` runs on the simulated device for the modelled length (it sleeps, GIL
released, until its deadline) and stamps ``time.perf_counter()`` as its last act. A
kernel whose ``duration_us`` is 0 completes as soon as its ``fn`` returns, on the same
simulator thread and under one lock acquisition, so that stamp *is* the completion
time, on the clock the waiter reads when it resumes. (Timing events are no help here:
pyACL gives only the difference between two events, never a host-clock time.)

Latency = waiter resumed - kernel completed. The floor of that latency on each loop is
the one-way wake of a coroutine by a plain thread through the library's own wake path
(``_floor.BareThread``, sleeping as long as the kernel runs, at least 100 us, so that
the loop has been parked as long), measured per kernel length in the same rounds;
``over us`` is what aclasync adds beyond the raw level and that floor. The raw level
(a thread calling ``synchronize_stream``) is measured inside each loop's rounds too,
mode by mode right before aclasync, and each loop's ``over`` is taken against its own
raw samples: run one after the other, drift of the machine between the raw level and
the last loop went straight into ``over`` (20 minutes apart, the same commit gave a
worst FAST_SYNC ``over`` of 53 and of 148 us on trio). The raw row shown is the first
loop's.

CPU per sync: ``time.thread_time()`` of the waiting thread around ``synchronize_stream``
(raw level only), and ``time.process_time()`` over the whole launch-and-wait, divided by
the number of syncs (both levels; it includes the simulator's threads and, through
aclasync, the worker and the event loop). The CPU of a long quiet wait is measured by
``_quiet_wait`` and reported here as a second table.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import anyio.from_thread
import anyio.to_thread

import aclasync
from aclasync import StreamFlag, sim
from aclasync.sim import Kernel

from . import _quiet_wait
from ._common import BenchConfig, check, column, expect, run_on_loop
from ._floor import BareThread
from ._stats import percentile, ratio

__all__ = ["run"]

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
#: The floor thread's shortest sleep before it posts: long enough for the loop to park.
#: For a kernel length above it, the thread sleeps that long, so that the loop has been
#: parked as long as it is while the kernel runs (a CPU idle for longer wakes slower).
_FLOOR_DELAY_S = 100e-6
#: aclasync - raw - floor, p50s, worst kernel length, per loop and mode (issue 13).
OVER_TARGET_US = 20.0

#: What one mode at one kernel length gave: lists of per-sync figures and totals.
_Cell = dict[str, Any]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Measure both levels (raw, then aclasync on every loop of *cfg*); return the result."""
    counts = {length: cfg.size(_FULL[length], _QUICK[length], minimum=2) for length in LENGTHS_US}
    # The issue judges >= 5 rounds. More and shorter rounds spread this VM's bursts of
    # slowness (tens of ms to seconds) evenly over raw, aclasync and the floor: with 5
    # rounds one burst could cover most of one level's samples of one length.
    rounds = 1 if cfg.scale < 1 else (2 if cfg.quick else 15)
    per_floor = max(3, cfg.size(250, 50, minimum=5) // rounds)  # floor samples per round
    levels: dict[str, dict[tuple[str, int], _Cell]] = {}
    raws: dict[str, dict[tuple[str, int], _Cell]] = {}
    floors: dict[str, dict[int, float]] = {}
    quiet: list[dict[str, Any]] = []
    for loop in cfg.loops:
        cfg.progress(
            f"sync-modes [{loop}]: {sum(counts.values())} syncs per mode via aclasync, "
            "interleaved with as many on a raw thread"
        )
        levels[loop], raws[loop], floor = run_on_loop(
            loop, _aclasync_level, counts, rounds, per_floor
        )
        floors[loop] = {length: percentile(values, 50) for length, values in floor.items()}
        quiet.extend(_quiet_wait.measure(cfg, loop))
    # The raw row shown is that of the first loop's run; each loop's "over" is taken
    # against the raw samples interleaved with its own rounds.
    rows = _rows({"raw": raws[cfg.loops[0]], **levels}, raws, floors)
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
            column("over_us", "over us", "+.1f"),
        ],
        "rows": rows,
        "tables": [_quiet_wait.table(quiet)],
        "checks": _checks(rows, list(levels)) + _over_checks(rows) + _quiet_wait.checks(quiet),
        "charts": [
            {
                "group": ["level", "kernel_us"],
                "group_format": "{level}, {kernel_us:,} µs kernel",
                "series": "mode",
                "value": "lat_vs_default",
                "axis": "median completion-to-resume latency, relative to a default stream",
                "unit": "ratio to default; lower is better",
                "target": 1.0,
                "target_label": "target: FAST_SYNC below 1, faster than default (kernels > 0 µs)",
                "annotate": "p50_us",
                "annotate_format": "{:.0f} µs",
            },
            {
                "title": "what aclasync adds to a wake-up beyond the raw wait and the floor",
                "group": ["level", "kernel_us"],
                "group_format": "{level}, {kernel_us:,} µs kernel",
                "series": "mode",
                "value": "over_us",
                "axis": "median latency through aclasync minus raw minus the thread-to-loop floor",
                "unit": "µs; lower is better",
                "target": OVER_TARGET_US,
                "target_label": f"target: ≤ {OVER_TARGET_US:g} µs at every length",
                "annotate": "over_us",
                "annotate_format": "{:+.0f} µs",
            },
        ],
        "notes": [
            "Latency: kernel completion (stamped by the kernel on the simulated device) to "
            "the waiter running again. 'ran us' is the kernel's measured length.",
            "thr cpu: thread_time of the raw waiting thread per sync; proc cpu: "
            "process_time per launch+sync, all threads (simulator included).",
            "gap kept: (default p50 - this mode's p50) through aclasync on that loop, "
            "divided by the same gap at the raw level.",
            "floor: p50 of a plain thread's post (after sleeping the kernel's length, at "
            "least 100 us) to the coroutine "
            "running again, through aclasync's own wake path, interleaved with that loop's "
            "rounds; raw: p50 of a raw thread's samples, interleaved the same way (the "
            "raw rows show the first loop's); over = p50(aclasync) - raw - floor.",
            *_quiet_wait.NOTES,
        ],
        "params": {
            "counts": {str(k): v for k, v in counts.items()},
            "rounds": rounds,
            "floor_samples_per_round": per_floor,
            "floor_delay_us": _FLOOR_DELAY_S * 1e6,
            **_quiet_wait.params(cfg),
        },
    }


class _Stamp:
    """A kernel body that runs for *length* seconds and stamps when it finished."""

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


def _new_cell() -> _Cell:
    return {"latency": [], "ran": [], "thread_cpu": 0.0, "process_cpu": 0.0}


def _merge(
    cell: _Cell, latencies: list[float], ran: list[float], thread_cpu: float, process_cpu: float
) -> None:
    cell["latency"].extend(latencies)
    cell["ran"].extend(ran)
    cell["thread_cpu"] += thread_cpu
    cell["process_cpu"] += process_cpu


class _RawLevel:
    """The raw level: a thread calling ``launch_kernel`` then ``synchronize_stream``.

    Its own simulated runtime and one stream per mode; ``wait`` runs on whichever
    worker thread ``anyio.to_thread`` gives it (it makes the context current first),
    as a synchronous program would. Cancellation (Ctrl-C) is seen between samples.
    """

    def __init__(self) -> None:
        self._acl = acl = sim.create(device_count=1)
        rt = acl.rt
        expect(rt.set_device(0), "acl.rt.set_device")
        context, ret = rt.get_context()
        expect(ret, "acl.rt.get_context")
        self._context = context
        self._streams: dict[str, int] = {}
        for mode, flags in MODES.items():
            handle, ret = rt.create_stream_with_config(0, flags)
            expect(ret, "acl.rt.create_stream_with_config")
            expect(acl.sim.launch_kernel(Kernel(), handle), "acl.sim.launch_kernel")
            expect(rt.synchronize_stream(handle), "acl.rt.synchronize_stream")
            self._streams[mode] = handle

    def close(self) -> None:
        rt = self._acl.rt
        rt.set_context(self._context)
        for handle in self._streams.values():
            rt.destroy_stream(handle)
        rt.reset_device(0)
        self._acl.sim.close()

    def wait(self, mode: str, length: int, n: int) -> tuple[list[float], list[float], float, float]:
        acl = self._acl
        rt = acl.rt
        expect(rt.set_context(self._context), "acl.rt.set_context")
        handle = self._streams[mode]
        latencies, ran = [], []
        thread_cpu = 0.0
        cpu_start = time.process_time()
        for _ in range(n):
            anyio.from_thread.check_cancelled()
            stamp = _Stamp(length / 1e6)
            expect(acl.sim.launch_kernel(Kernel(fn=stamp), handle), "acl.sim.launch_kernel")
            before = time.thread_time()
            ret = rt.synchronize_stream(handle)
            resumed = time.perf_counter()
            thread_cpu += time.thread_time() - before
            expect(ret, "acl.rt.synchronize_stream")
            latencies.append(resumed - stamp.end)
            ran.append(stamp.end - stamp.start)
        return latencies, ran, thread_cpu, time.process_time() - cpu_start


async def _aclasync_level(
    counts: dict[int, int], rounds: int, per_floor: int
) -> tuple[dict[tuple[str, int], _Cell], dict[tuple[str, int], _Cell], dict[int, list[float]]]:
    """Every mode and length through aclasync and raw, and the loop's floor, interleaved.

    Returns the aclasync cells, the raw cells and the floor samples (seconds) per
    kernel length.
    """
    acl = sim.create(device_count=1)
    cells: dict[tuple[str, int], _Cell] = {}
    raw_cells: dict[tuple[str, int], _Cell] = {}
    floor: dict[int, list[float]] = {length: [] for length in LENGTHS_US}
    raw = await anyio.to_thread.run_sync(_RawLevel)
    try:
        await _aclasync_and_raw(acl, counts, rounds, (cells, raw_cells), raw, per_floor, floor)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(raw.close)
    return cells, raw_cells, floor


async def _aclasync_and_raw(
    acl: Any,
    counts: dict[int, int],
    rounds: int,
    into: tuple[dict[tuple[str, int], _Cell], dict[tuple[str, int], _Cell]],
    raw: _RawLevel,
    per_floor: int,
    floor: dict[int, list[float]],
) -> None:
    with contextlib.ExitStack() as stack:
        bares = {
            length: stack.enter_context(BareThread(delay=max(_FLOOR_DELAY_S, length / 1e6)))
            for length in LENGTHS_US
        }
        for bare in bares.values():
            await bare.round_trip()  # warm-up, not recorded
        async with aclasync.open_device(0, backend=acl) as dev:
            launch = acl.sim.launch_kernel
            await _aclasync_rounds(dev, launch, counts, rounds, into, raw, bares, per_floor, floor)


async def _aclasync_rounds(
    dev: aclasync.Device,
    launch: Callable[..., int],
    counts: dict[int, int],
    rounds: int,
    into: tuple[dict[tuple[str, int], _Cell], dict[tuple[str, int], _Cell]],
    raw: _RawLevel,
    bares: dict[int, BareThread],
    per_floor: int,
    floor: dict[int, list[float]],
) -> None:
    """Per length, *rounds* rounds of: each mode on the raw thread then through
    aclasync, then *per_floor* floor samples (so drift falls on all three alike)."""
    cells, raw_cells = into
    streams = {mode: await dev.create_stream(flags=flags) for mode, flags in MODES.items()}
    for stream in streams.values():
        stream.launch(launch, Kernel())
        await stream.synchronize()
    for length in LENGTHS_US:
        n = max(1, counts[length] // rounds)
        for _ in range(rounds):
            for mode, stream in streams.items():
                measured = await anyio.to_thread.run_sync(raw.wait, mode, length, n)
                _merge(raw_cells.setdefault((mode, length), _new_cell()), *measured)
                latencies, ran = [], []
                cpu_start = time.process_time()
                for _ in range(n):
                    stamp = _Stamp(length / 1e6)
                    stream.launch(launch, Kernel(fn=stamp))
                    await stream.synchronize()
                    latencies.append(time.perf_counter() - stamp.end)
                    ran.append(stamp.end - stamp.start)
                cell = cells.setdefault((mode, length), _new_cell())
                _merge(cell, latencies, ran, 0.0, time.process_time() - cpu_start)
            for _ in range(per_floor):
                posted = await bares[length].round_trip()
                floor[length].append(time.perf_counter() - posted)
    for stream in streams.values():
        await stream.aclose()


def _rows(
    levels: dict[str, dict[tuple[str, int], _Cell]],
    raws: dict[str, dict[tuple[str, int], _Cell]],
    floors: dict[str, dict[int, float]],
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for level, cells in levels.items():
        raw = raws.get(level, levels["raw"])
        for length in LENGTHS_US:
            floor = floors[level][length] if level in floors else None
            base = cells[("default", length)]
            base_p50 = percentile(base["latency"], 50)
            base_cpu = base["process_cpu"] / len(base["latency"])
            raw_default_p50 = percentile(raw[("default", length)]["latency"], 50)
            for mode in MODES:
                cell = cells[(mode, length)]
                n = len(cell["latency"])
                p50 = percentile(cell["latency"], 50)
                cpu = cell["process_cpu"] / n
                raw_p50 = percentile(raw[(mode, length)]["latency"], 50)
                gap_kept = None
                if level != "raw" and mode != "default":
                    gap_kept = ratio(base_p50 - p50, raw_default_p50 - raw_p50)
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
                        "over_us": None if floor is None else (p50 - raw_p50 - floor) * 1e6,
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
