"""``request``: the service pattern, a launch then its sync, back to back (issue 26).

What an asyncio service does per request: queue the work on a stream, then await it.
Four variants take turns sample by sample, in one run, per loop, stream mode and
kernel length:

- ``raw``: ``launch_kernel`` + ``synchronize_stream`` on the event loop's own thread
  (it blocks the loop: the device's and the runtime's own cost, no thread hop);
- ``thread``: a dedicated thread per program that does both and posts the result to the
  loop (two thread wake-ups: the floor of any design that keeps the loop free);
- ``thread'``: a second, identical dedicated thread, the A/A control: ``thread'`` minus
  ``thread`` is the noise each cell is judged within;
- ``aclasync``: ``stream.launch(...)`` then ``await stream.synchronize()``.

Each sample's wall time runs from the request's start to the coroutine running again;
its CPU is ``time.process_time()`` around it (the whole process, every thread). The
target: aclasync within max(20 us, the A/A difference) of the dedicated thread, p50
wall and p50 CPU, in every cell.

The concurrent form: 16 and 64 requests in flight over four streams, aclasync with
``dev.stream_pool(4)`` against four dedicated threads, one per stream, taking requests
from one queue; the two alternate in rounds (``ROUNDS``, 2 with ``--quick``; the order
alternating too), and requests/s and CPU per request are the medians over the rounds.

Last, the bound a worker's own wait keeps: while it waits for a lone FAST_SYNC
stream's sync itself, a launch on another stream reaches the runtime within one
``wait_slice_ms`` slice (p99 of the delay from ``launch()`` to the call running).

The work is the ``_workload`` module's: modelled kernels on the simulator, or
``acl.rt.memset_async`` with pyACL alone on the native backend (each dedicated thread
fills a scratch buffer of its own, as big as a stream's). On the simulator each
variant has a runtime of its own; on the native backend all share the ``acl`` module
and device 0.
"""

from __future__ import annotations

import contextlib
import queue
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import outcome

import aclasync
from aclasync import StreamFlag
from aclasync._loop import Waiter, current_delivery

from .._common import sim_runtime
from .._workload import Workload
from ._common import BenchConfig, Target, check, column, expect, make_streams, run_on_loop
from ._stats import percentile

__all__ = ["CHARTS", "RUNS_NATIVE", "run"]

#: Runs on the native backend too: its device work is pyACL alone there.
RUNS_NATIVE = True

TITLE = "Requests: a launch then its sync, against a dedicated thread"
MODES: dict[str, int] = {"default": 0, "FAST_SYNC": int(StreamFlag.FAST_SYNC)}
LENGTHS_US = (0, 200, 1_000, 10_000)
VARIANTS = ("raw", "thread", "thread'", "aclasync")
_FULL = {0: 300, 200: 300, 1_000: 200, 10_000: 60}
_QUICK = {0: 40, 200: 40, 1_000: 30, 10_000: 8}
CONCURRENCY = (16, 64)
POOL = 4
#: Rounds of the concurrent form in a full run, aclasync and the threads once each.
ROUNDS = 4
CONCURRENT_US = 200
#: aclasync - dedicated thread, p50 wall and CPU per request, or the A/A spread if larger.
TARGET_US = 20.0
#: A launch held up by the worker's own wait: one slice (1 ms), plus a thread wake-up.
SLICE_TARGET_MS = 1.25

#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "title": "what a request costs through aclasync beyond a dedicated thread",
        "group": ["loop", "mode"],
        "group_format": "{loop}, {mode}",
        "series": "kernel_us",
        "series_format": "{:,} µs kernel",
        "value": "over_wall_us",
        "value_format": "{:+.0f} µs",
        "annotate": "aa_wall_us",
        "annotate_format": "A/A {:+.0f} µs",
        "axis": "p50 wall time per request, aclasync minus the dedicated thread",
        "unit": "µs; lower is better",
        "target": TARGET_US,
        "target_label": f"target: ≤ max({TARGET_US:g} µs, the A/A difference)",
    },
    {
        "title": "CPU a request costs through aclasync beyond a dedicated thread",
        "group": ["loop", "mode"],
        "group_format": "{loop}, {mode}",
        "series": "kernel_us",
        "series_format": "{:,} µs kernel",
        "value": "over_cpu_us",
        "value_format": "{:+.0f} µs",
        "annotate": "aa_cpu_us",
        "annotate_format": "A/A {:+.0f} µs",
        "axis": "p50 CPU time per request (whole process), aclasync minus the thread",
        "unit": "µs; lower is better",
        "target": TARGET_US,
        "target_label": f"target: ≤ max({TARGET_US:g} µs, the A/A difference)",
    },
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Measure every variant on every loop of *cfg*; return the result."""
    counts = {n: cfg.size(_FULL[n], _QUICK[n], minimum=2) for n in LENGTHS_US}
    rounds = 2 if cfg.quick else ROUNDS
    requests = cfg.size(2000, 300, minimum=POOL * rounds)
    # The launch delay's p99 wants hundreds of launches: of 30, it is the largest one.
    launches = cfg.size(300, 60, minimum=10)
    rows: list[dict[str, Any]] = []
    busy: list[dict[str, Any]] = []
    delays: list[dict[str, Any]] = []
    workload: dict[str, Any] = {}
    for loop in cfg.loops:
        cfg.progress(
            f"request [{loop}]: {sum(counts.values())} requests per variant and mode, "
            f"then {requests} at concurrency {CONCURRENCY} in {rounds} alternating rounds"
        )
        cells, concurrent, delay, workload = run_on_loop(
            loop, _measure, cfg.target, counts, requests, rounds, launches
        )
        rows += _rows(loop, cells)
        busy += [{"loop": loop, **row} for row in concurrent]
        delays.append({"loop": loop, **delay})
    return {
        "title": TITLE,
        "columns": [
            column("loop", "loop"),
            column("mode", "mode"),
            column("kernel_us", "kernel us", "d"),
            column("n", "n", "d"),
            *(column(f"{v}_us", f"{v} p50 us", ".0f") for v in VARIANTS),
            column("aclasync_p99_us", "aclasync p99 us", ".0f"),
            column("thread_p99_us", "thread p99 us", ".0f"),
            column("over_wall_us", "over wall us", "+.0f"),
            column("aa_wall_us", "A/A wall us", "+.0f"),
            column("thread_cpu_us", "thread cpu us", ".0f"),
            column("aclasync_cpu_us", "aclasync cpu us", ".0f"),
            column("over_cpu_us", "over cpu us", "+.0f"),
            column("aa_cpu_us", "A/A cpu us", "+.0f"),
        ],
        "rows": rows,
        "tables": [_concurrent_table(busy), _delay_table(delays)],
        "checks": _checks(rows, busy, delays),
        "charts": CHARTS,
        "notes": [
            "wall: request start to the coroutine running again; cpu: process_time around "
            "the request, every thread of the process (the runtime's included).",
            "over = p50(aclasync) - p50(thread); A/A = p50(thread') - p50(thread), two "
            "identical dedicated threads: the noise a cell is judged within.",
            "raw blocks the event loop in synchronize_stream: what the device and the "
            "runtime cost with no thread between them.",
            f"concurrent: {POOL} streams, {CONCURRENT_US} us kernels; aclasync borrows from "
            f"dev.stream_pool({POOL}), the thread design has one thread per stream taking "
            "requests from one queue; the two alternate in "
            f"{rounds} rounds of {requests // rounds} requests (order alternating), and "
            "req/s and CPU per request are the medians over the rounds.",
            f"launch delay: p50 and p99 over {launches} launches on a second stream, each "
            "while the worker waits itself for a 5 ms FAST_SYNC kernel's sync.",
        ],
        "params": {
            "counts": {str(k): v for k, v in counts.items()},
            "requests": requests,
            "rounds": rounds,
            "launches": launches,
        },
        "workload": workload,
    }


# -- the variants ----------------------------------------------------------------------


class DedicatedThreads:
    """Threads that each own a stream per mode and serve requests from one queue:
    launch the work, ``synchronize_stream``, post the waiter to its loop.

    *acl* is the runtime to share (the native one), or ``None`` for a simulator of
    their own. Use as a context manager: entry starts the threads (each sets the
    device up) and re-raises a failure of theirs; exit stops them and releases what
    they made.
    """

    def __init__(
        self, modes: dict[str, int], work: Workload, acl: Any = None, count: int = 1
    ) -> None:
        self._own = acl is None
        self._acl: Any = sim_runtime(1) if acl is None else acl
        self._modes = modes
        self._work = work
        self._jobs: queue.SimpleQueue[tuple[Waiter, str, float] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"aclasync-bench-thread{i}", daemon=True)
            for i in range(count)
        ]
        self._started = threading.Barrier(count + 1)
        self._failures: list[BaseException] = []

    def __enter__(self) -> DedicatedThreads:
        for thread in self._threads:
            thread.start()
        self._started.wait()
        if self._failures:
            self.__exit__(None, None, None)
            raise self._failures[0]
        return self

    def __exit__(self, *exc_info: object) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        if self._own:
            self._acl.sim.close()

    async def request(self, mode: str, length_us: float) -> None:
        """One request: the thread launches and syncs; cancellation abandons the wait."""
        waiter = current_delivery().new_waiter()
        self._jobs.put((waiter, mode, length_us))
        await waiter.wait()

    def _serve(self) -> None:
        with _RawDevice(self._acl, self._modes, self._work) as device:
            if not device.ready:
                self._failures.append(device.failure or RuntimeError("device set-up failed"))
            self._started.wait()
            while (job := self._jobs.get()) is not None:
                waiter, mode, length_us = job
                ret = device.request(mode, length_us)
                waiter.result = outcome.Value(None) if not ret else outcome.Error(RuntimeError(ret))
                waiter.delivery.post((waiter,))


class _RawDevice:
    """Device 0 set on the calling thread, a stream per mode and a scratch buffer:
    ``request`` runs one request's work and ``synchronize_stream`` with pyACL alone.

    A context manager that never raises on entry: ``ready`` says whether the set-up
    worked (``failure`` why not); exit releases what was made.
    """

    def __init__(self, acl: Any, modes: dict[str, int], work: Workload) -> None:
        self._acl, self._modes, self._work = acl, modes, work
        self.streams: dict[str, int] = {}
        self.scratch = 0
        self.ready = False
        self.failure: BaseException | None = None
        self._device_set = False

    def __enter__(self) -> _RawDevice:
        rt = self._acl.rt
        try:
            expect(rt.set_device(0), "acl.rt.set_device")
            self._device_set = True
            make_streams(rt, self._modes, self.streams)
            if self._work.scratch_bytes:
                self.scratch, ret = rt.malloc(self._work.scratch_bytes, 0)
                expect(ret, "acl.rt.malloc")
            for mode in self.streams:  # pays each stream's first work and first touch
                expect(self.request(mode, 0), "the warm-up request")
            self.ready = True
        except Exception as exc:  # reported by the owner, on its own thread
            self.failure = exc
        return self

    def request(self, mode: str, length_us: float) -> int:
        """One request's work on *mode*'s stream, then its sync; the first non-zero status."""
        stream = self.streams[mode]
        fn, args = self._work.work(length_us, self.scratch, acl=self._acl)
        return fn(*args, stream) or self._acl.rt.synchronize_stream(stream)

    def __exit__(self, *exc_info: object) -> None:
        rt = self._acl.rt
        if self.scratch:
            rt.free(self.scratch)
        for stream in self.streams.values():
            rt.destroy_stream(stream)
        if self._device_set:
            rt.reset_device(0)


class OnTheLoop:
    """The ``raw`` variant: device 0 set on the loop's own thread (each request blocks it).

    *acl* as for ``DedicatedThreads``. ``close()`` releases what it made.
    """

    def __init__(self, modes: dict[str, int], work: Workload, acl: Any = None) -> None:
        self._own = acl is None
        self._acl: Any = sim_runtime(1) if acl is None else acl
        self._device = _RawDevice(self._acl, modes, work).__enter__()
        if not self._device.ready:
            self.close()
            raise self._device.failure or RuntimeError("device set-up failed")

    async def request(self, mode: str, length_us: float) -> None:
        expect(self._device.request(mode, length_us), "the request")
        await anyio.lowlevel.checkpoint()

    def close(self) -> None:
        self._device.__exit__(None, None, None)
        if self._own:
            self._acl.sim.close()


# -- measuring -------------------------------------------------------------------------

#: Per (mode, length, variant): the wall and CPU seconds of each request.
_Cells = dict[tuple[str, int, str], tuple[list[float], list[float]]]


async def _measure(
    target: Target, counts: dict[int, int], requests: int, rounds: int, launches: int
) -> tuple[_Cells, list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    cells: _Cells = {}
    with target.opened(1) as acl:
        shared = acl if target.native else None
        async with aclasync.open_device(0, backend=acl) as dev:
            work = await Workload.calibrate(dev, kind=target.workload)
            on_loop = OnTheLoop(MODES, work, shared)
            try:
                with (
                    DedicatedThreads(MODES, work, shared) as first,
                    DedicatedThreads(MODES, work, shared) as second,
                ):
                    await _alternated(dev, work, on_loop, first, second, counts, cells)
            finally:
                on_loop.close()
            delay = await _slice_delay(dev, work, launches)
            concurrent = [
                await _concurrent(dev, work, shared, c, requests, rounds) for c in CONCURRENCY
            ]
            await work.aclose()
    return cells, concurrent, delay, work.describe()


async def _alternated(
    dev: aclasync.Device[Any],
    work: Workload,
    on_loop: OnTheLoop,
    first: DedicatedThreads,
    second: DedicatedThreads,
    counts: dict[int, int],
    cells: _Cells,
) -> None:
    """Every variant, sample by sample, for every length and mode; fills *cells*."""
    streams = {m: await dev.create_stream(flags=f) for m, f in MODES.items()}
    for stream in streams.values():
        await work.prepare(stream)

    async def through_aclasync(mode: str, length_us: float) -> None:
        stream = streams[mode]
        work.launch(stream, length_us)
        await stream.synchronize()

    variants: Mapping[str, Callable[[str, float], Awaitable[None]]] = {
        "raw": on_loop.request,
        "thread": first.request,
        "thread'": second.request,
        "aclasync": through_aclasync,
    }
    for length in LENGTHS_US:
        for mode in MODES:
            for variant in variants.values():  # one warm-up each
                await variant(mode, length)
            for i in range(counts[length]):
                names = VARIANTS[i % 4 :] + VARIANTS[: i % 4]  # rotate the order
                for name in names:
                    wall, cpu = await _timed(variants[name], mode, length)
                    walls, cpus = cells.setdefault((mode, length, name), ([], []))
                    walls.append(wall)
                    cpus.append(cpu)
    for stream in streams.values():
        await stream.aclose()


async def _timed(
    request: Callable[[str, float], Awaitable[None]], mode: str, length_us: float
) -> tuple[float, float]:
    cpu, start = time.process_time(), time.perf_counter()
    await request(mode, length_us)
    return time.perf_counter() - start, time.process_time() - cpu


async def _concurrent(
    dev: aclasync.Device[Any],
    work: Workload,
    shared: Any,
    concurrency: int,
    n: int,
    rounds: int,
) -> dict[str, Any]:
    """*n* requests of each at *concurrency* over POOL streams, aclasync and the threads
    alternating in *rounds* (``alternate``)."""
    async with dev.stream_pool(POOL) as pool:
        async with contextlib.AsyncExitStack() as borrowed:  # every pool stream, prepared
            for _ in range(POOL):
                await work.prepare(await borrowed.enter_async_context(pool.stream()))

        async def through_pool(mode: str, length_us: float) -> None:
            async with pool.stream() as s:
                work.launch(s, length_us)
                await s.synchronize()

        with DedicatedThreads({"default": 0}, work, shared, count=POOL) as threads:
            variants = {"aclasync": through_pool, "threads": threads.request}
            result = await alternate(variants, concurrency, n, rounds)
    return {"concurrency": concurrency, "requests": n, "rounds": rounds, **result}


async def alternate(
    variants: Mapping[str, Callable[[str, float], Awaitable[None]]],
    concurrency: int,
    n: int,
    rounds: int,
) -> dict[str, tuple[float, float]]:
    """*n* requests of each variant at *concurrency*, in *rounds* that alternate between
    the variants (the order reversed every other round), so that drift of the machine
    falls on all alike. Per variant: the medians over the rounds of requests/s and of
    CPU us per request."""
    per_round = max(1, n // rounds)
    taken: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    names = list(variants)
    for turn in range(rounds):
        for name in names if turn % 2 == 0 else names[::-1]:
            taken[name].append(await _flood(variants[name], concurrency, per_round))
    return {
        name: (
            statistics.median(rps for rps, _ in taken[name]),
            statistics.median(cpu for _, cpu in taken[name]),
        )
        for name in names
    }


async def _flood(
    request: Callable[[str, float], Awaitable[None]], concurrency: int, n: int
) -> tuple[float, float]:
    """Requests/s and CPU us per request with *concurrency* of them in flight."""
    left = n

    async def client() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await request("default", CONCURRENT_US)

    cpu, start = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(client)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return n / wall, cpu / n * 1e6


async def _slice_delay(dev: aclasync.Device[Any], work: Workload, launches: int) -> dict[str, Any]:
    """How late each of *launches* launches on one stream runs while the worker waits
    for another's sync."""
    delays: list[float] = []
    async with (
        dev.create_stream(flags=StreamFlag.FAST_SYNC) as waited,
        dev.create_stream() as other,
    ):
        await work.prepare(waited)
        ran: list[float] = []

        def stamp(stream: int) -> int:
            ran.append(time.perf_counter())
            return 0

        for _ in range(launches):
            work.launch(waited, 5_000)
            async with anyio.create_task_group() as tg:
                tg.start_soon(waited.synchronize)
                await anyio.sleep(0.001)  # the worker takes the sync and waits for it
                sent = time.perf_counter()
                other.launch(stamp)
                await other.synchronize()
            delays.append(ran.pop() - sent)
    return {
        "n": len(delays),
        "p50_ms": percentile(delays, 50) * 1e3,
        "p99_ms": percentile(delays, 99) * 1e3,
    }


# -- reporting ---------------------------------------------------------------------------


def _rows(loop: str, cells: _Cells) -> list[dict[str, Any]]:
    rows = []
    for mode in MODES:
        for length in LENGTHS_US:
            wall = {v: percentile(cells[(mode, length, v)][0], 50) * 1e6 for v in VARIANTS}
            cpu = {v: percentile(cells[(mode, length, v)][1], 50) * 1e6 for v in VARIANTS}
            rows.append(
                {
                    "loop": loop,
                    "mode": mode,
                    "kernel_us": length,
                    "n": len(cells[(mode, length, "aclasync")][0]),
                    **{f"{v}_us": wall[v] for v in VARIANTS},
                    "aclasync_p99_us": percentile(cells[(mode, length, "aclasync")][0], 99) * 1e6,
                    "thread_p99_us": percentile(cells[(mode, length, "thread")][0], 99) * 1e6,
                    "over_wall_us": wall["aclasync"] - wall["thread"],
                    "aa_wall_us": wall["thread'"] - wall["thread"],
                    "thread_cpu_us": cpu["thread"],
                    "aclasync_cpu_us": cpu["aclasync"],
                    "over_cpu_us": cpu["aclasync"] - cpu["thread"],
                    "aa_cpu_us": cpu["thread'"] - cpu["thread"],
                }
            )
    return rows


def _concurrent_table(busy: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [
        {
            "loop": row["loop"],
            "concurrency": row["concurrency"],
            "aclasync_rps": row["aclasync"][0],
            "threads_rps": row["threads"][0],
            "aclasync_cpu_us": row["aclasync"][1],
            "threads_cpu_us": row["threads"][1],
        }
        for row in busy
    ]
    return {
        "title": f"Concurrent requests over {POOL} streams ({CONCURRENT_US} us kernels)",
        "columns": [
            column("loop", "loop"),
            column("concurrency", "in flight", "d"),
            column("aclasync_rps", "aclasync req/s", ".0f"),
            column("threads_rps", "threads req/s", ".0f"),
            column("aclasync_cpu_us", "aclasync cpu us/req", ".0f"),
            column("threads_cpu_us", "threads cpu us/req", ".0f"),
        ],
        "rows": rows,
    }


def _delay_table(delays: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "title": "A launch on one stream while the worker waits for another's FAST_SYNC sync",
        "columns": [
            column("loop", "loop"),
            column("n", "n", "d"),
            column("p50_ms", "launch delay p50 ms", ".3f"),
            column("p99_ms", "p99 ms", ".3f"),
        ],
        "rows": delays,
    }


def _checks(
    rows: list[dict[str, Any]], busy: list[dict[str, Any]], delays: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    checks = []
    for row in rows:
        where = f"{row['mode']}, {row['kernel_us']} us [{row['loop']}]"
        for kind in ("wall", "cpu"):
            over, spread = row[f"over_{kind}_us"], abs(row[f"aa_{kind}_us"])
            bound = max(TARGET_US, spread)
            checks.append(
                check(
                    f"aclasync - thread, p50 {kind} per request, {where}",
                    over,
                    f"<= {bound:.0f} (max of {TARGET_US:g} and the A/A spread)",
                    over <= bound,
                )
            )
    for row in busy:
        where = f"{row['concurrency']} in flight [{row['loop']}]"
        (rps, cpu), (thread_rps, thread_cpu) = row["aclasync"], row["threads"]
        checks.append(
            check(f"aclasync / threads req/s, {where}", rps / thread_rps, ">= 1", rps >= thread_rps)
        )
        checks.append(
            check(
                f"aclasync / threads CPU per request, {where}",
                cpu / thread_cpu,
                "< 1",
                cpu < thread_cpu,
            )
        )
    for row in delays:
        p99 = row["p99_ms"]
        checks.append(
            check(
                f"launch delay behind the worker's own wait, p99 ms [{row['loop']}]",
                p99,
                f"<= {SLICE_TARGET_MS:g}",
                p99 <= SLICE_TARGET_MS,
            )
        )
    return checks
