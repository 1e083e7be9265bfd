"""``soak``: mixed load on four simulated devices for a while; does anything grow?

On each loop: open 4 devices of one ``aclasync.sim.create(device_count=4)`` runtime
and run, per device, a few client tasks in a loop: launches, event records and waits,
stream and device syncs with and without timeouts, waits cancelled on purpose,
buffer allocations and copies, short-lived streams, a deliberately failing call now
and then (whose ``AclError`` is expected), ``Model.run`` calls on the client's
stream (succeeding, failing: expected, and cancelled) and stream-pool borrowers
(succeeding, failing, raising and cancelled); meanwhile a thread runs short event
loops of the same kind one after another, each using a device once. A 1 ms ticker
in the same loop records how late it wakes. RSS (``/proc/self/statm``) and live threads are sampled
at the start, at half time and at the end; ``acl.sim.live_objects()`` before the
devices open and after everything closed.

Targets: RSS flat over the second half (growth under 5 MiB), the runtime holding
exactly what it held before, and no unexpected error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import numpy as np

import aclasync
from aclasync import sim
from aclasync.sim import Kernel

from .._common import sim_runtime
from .._loops import temporary_directory
from ._common import BenchConfig, check, column, run_on_loop
from ._stats import percentile

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import BaseExceptionGroup

__all__ = ["run"]

TITLE = "Soak: mixed load on 4 devices"
DEVICES = 4
CLIENTS_PER_DEVICE = 4
#: What the deliberately failing call returns (ACL_ERROR_RT_PARAM_INVALID), and what a
#: failing model run raises (ACL_ERROR_RT_MODEL_EXECUTE).
EXPECTED_CODES = frozenset({107000, 507011})
FAILING_CALL_CODE = 107000
_RSS_GROWTH_LIMIT_MIB = 5.0


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "group": ["loop"],
        "group_format": "{loop}",
        "value": "stall_p99_ms",
        "value_format": "p99 {:.1f} ms",
        "axis": "99th percentile of how late a 1 ms sleep wakes up under mixed load",
        "unit": "ms; lower is better",
        "annotate": "stall_max_ms",
        "annotate_format": "max {:,.0f} ms",
    }
]

#: Seconds per loop without ``--seconds`` (``bench --help`` says so too).
SECONDS, QUICK_SECONDS = 30.0, 3.0


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Run the soak on every loop of *cfg* (``cfg.seconds`` each); return the result."""
    seconds = cfg.seconds if cfg.seconds is not None else (QUICK_SECONDS if cfg.quick else SECONDS)
    rows = []
    checks = []
    for loop in cfg.loops:
        cfg.progress(f"soak [{loop}]: {seconds:g} s of mixed load on {DEVICES} devices")
        row = run_on_loop(loop, _soak, seconds, loop, cfg.progress)
        row["loop"] = loop
        rows.append(row)
        growth = row["rss_end_mib"] - row["rss_half_mib"]
        checks.append(
            check(
                f"RSS growth over the second half, MiB [{loop}]",
                growth,
                f"< {_RSS_GROWTH_LIMIT_MIB:g}",
                growth < _RSS_GROWTH_LIMIT_MIB,
            )
        )
        left = row["objects_left_count"]
        checks.append(check(f"runtime objects left over [{loop}]", left, "== 0", left == 0))
        unexpected = row["unexpected_errors"]
        checks.append(check(f"unexpected errors [{loop}]", unexpected, "== 0", unexpected == 0))
    return {
        "title": TITLE,
        "columns": [
            column("loop", "loop"),
            column("seconds", "s", ".1f"),
            column("operations", "ops", "d"),
            column("rss_start_mib", "RSS start MiB", ".1f"),
            column("rss_half_mib", "RSS half MiB", ".1f"),
            column("rss_end_mib", "RSS end MiB", ".1f"),
            column("threads_start", "thr start", "d"),
            column("threads_end", "thr end", "d"),
            column("model_runs", "model runs", "d"),
            column("borrows", "pool borrows", "d"),
            column("loops", "loops run", "d"),
            column("objects_left", "objects left", ""),
            column("stall_p99_ms", "stall p99 ms", ".2f"),
            column("stall_max_ms", "stall max ms", ".2f"),
            column("expected_errors", "expected err", "d"),
            column("unexpected_errors", "unexpected", "d"),
            column("errors", "errors by type", ""),
        ],
        "rows": rows,
        "checks": checks,
        "charts": CHARTS,
        "notes": [
            "RSS from /proc/self/statm: at the start (devices open), at half time and at "
            "the end; threads: live at the start, and at the end those plus any the run "
            "started and left (one of the start that ended meanwhile, an idle anyio "
            "worker say, is not counted).",
            "objects left: what acl.sim.live_objects() counts after every device and "
            "model closed, beyond what it counted before they opened.",
            "stall: lateness of a 1 ms anyio.sleep ticker in the same loop.",
            f"expected errors: the AclError {FAILING_CALL_CODE} of the deliberately failing "
            "call, 507011 of failing model runs (from the run, or from the model's close "
            "for a cancelled one) and the AclTimeoutError of timed waits; anything else "
            "is unexpected and listed by type.",
        ],
        "params": {"seconds": seconds, "devices": DEVICES, "clients": CLIENTS_PER_DEVICE},
    }


def _rss_mib() -> float:
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except OSError:  # not Linux: report nothing rather than a wrong figure
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


async def _soak(seconds: float, loop: str, progress: Callable[[str], None]) -> dict[str, Any]:
    acl = sim_runtime(DEVICES)
    before = dict(acl.sim.live_objects())
    errors: Counter[str] = Counter()
    counts = {"operations": 0, "expected": 0, "model_runs": 0, "borrows": 0, "loops": 0}
    stop = anyio.Event()
    ticks: list[float] = []
    samples: dict[str, Any] = {}

    def expected(exc: BaseException) -> bool:
        if isinstance(exc, aclasync.AclTimeoutError) or (
            isinstance(exc, aclasync.AclError) and exc.code in EXPECTED_CODES
        ):
            counts["expected"] += 1
            return True
        return False

    def count(exc: BaseException) -> None:
        leaves = exc.exceptions if isinstance(exc, BaseExceptionGroup) else (exc,)
        for leaf in leaves:
            if not expected(leaf):
                errors[type(leaf).__name__] += 1

    async def client(
        dev: aclasync.Device[sim.SimAcl],
        model: aclasync.Model,
        pool: aclasync.StreamPool,
        seed: int,
    ) -> None:
        rng = random.Random(seed)
        async with dev.create_stream() as stream:
            host = await dev.alloc_host(4096)
            device = await dev.alloc(4096)
            try:
                while not stop.is_set():
                    try:
                        choice = rng.randrange(12)
                        if choice < 2:
                            counts["model_runs"] += 1
                            await _model_run(model, stream, rng)
                        elif choice == 2:
                            counts["borrows"] += 1
                            await _borrow(dev, pool, rng)
                        else:
                            await _operation(dev, stream, host, device, rng)
                    except Exception as exc:  # counted, never hidden
                        count(exc)
                    counts["operations"] += 1
            finally:
                await host.aclose()
                await device.aclose()

    # A failing model body is logged by the simulator: expected here, so kept quiet.
    quiet = _quiet_logger("aclasync.sim")
    with quiet, temporary_directory() as folder:
        path = acl.sim.register_model(
            f"{folder}/soak.om",
            inputs=[("x", (MODEL_WIDTH,), "float32")],
            outputs=[("y", (MODEL_WIDTH,), "float32")],
            fn=_model_body,
            duration_us=100,
        )
        devices = []
        try:
            for i in range(DEVICES):
                devices.append(await aclasync.open_device(i, backend=acl))
            models, pools = [], []
            for dev in devices:
                # A device starts its waiting thread at its first wait the worker does
                # not take itself (a wait longer than a slice): start them all now, so
                # that the thread count compares like with like.
                async with dev.create_stream() as warm:
                    warm.launch(acl.sim.launch_kernel, Kernel(duration_us=5000))
                    await warm.synchronize()
                models.append(await dev.load_model(path))
                pools.append(await dev.stream_pool(2))
            samples["rss_start"] = _rss_mib()
            at_start = set(threading.enumerate())
            started = time.perf_counter()
            loops_done = threading.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_ticker, stop, ticks)
                for i, dev in enumerate(devices):
                    for j in range(CLIENTS_PER_DEVICE):
                        tg.start_soon(client, dev, models[i], pools[i], i * 100 + j)
                # Event loops that come and go, each using a device once: none may stay.
                loops = threading.Thread(
                    target=_repeated_loops, args=(loop, devices[0], loops_done, counts, count)
                )
                loops.start()
                try:
                    await anyio.sleep(seconds / 2)
                    samples["rss_half"] = _rss_mib()
                    progress(f"soak [{loop}]: half way, RSS {samples['rss_half']:.0f} MiB")
                    await anyio.sleep(seconds / 2)
                finally:  # a cancelled run (Ctrl-C) ends the thread too
                    loops_done.set()
                with anyio.CancelScope(shield=True):
                    while loops.is_alive():  # noqa: ASYNC110 - a thread's end is not awaitable
                        await anyio.sleep(0.005)
                loops.join()
                stop.set()
            elapsed = time.perf_counter() - started
            for pool in pools:
                await pool.aclose()
            for model in models:  # raises the failures of cancelled runs
                try:
                    await model.aclose()
                except Exception as exc:
                    count(exc)
            samples["rss_end"] = _rss_mib()
            stayed = [t for t in threading.enumerate() if t not in at_start]
            samples["threads_start"] = len(at_start)
            samples["threads_end"] = len(at_start) + len(stayed)
        finally:
            with anyio.CancelScope(shield=True):  # interrupted: close every one all the same
                for dev in devices:  # raises what cancelled borrowers left to the device
                    try:
                        await dev.aclose()
                    except Exception as exc:
                        count(exc)
    after = dict(acl.sim.live_objects())
    acl.sim.close()
    left = {k: after.get(k, 0) - before.get(k, 0) for k in {*before, *after}}
    return {
        "seconds": elapsed,
        "operations": counts["operations"],
        "model_runs": counts["model_runs"],
        "borrows": counts["borrows"],
        "loops": counts["loops"],
        "rss_start_mib": samples["rss_start"],
        "rss_half_mib": samples["rss_half"],
        "rss_end_mib": samples["rss_end"],
        "threads_start": samples["threads_start"],
        "threads_end": samples["threads_end"],
        "objects_left": ", ".join(f"{k}: {n:+d}" for k, n in sorted(left.items()) if n) or "-",
        "objects_left_count": sum(abs(n) for n in left.values()),
        "stall_p99_ms": percentile(ticks, 99) * 1e3,
        "stall_max_ms": max(ticks) * 1e3,
        "expected_errors": counts["expected"],
        "unexpected_errors": sum(errors.values()),
        "errors": ", ".join(f"{name}: {n}" for name, n in sorted(errors.items())) or "-",
    }


MODEL_WIDTH = 256


async def _borrow(
    dev: aclasync.Device[sim.SimAcl], pool: aclasync.StreamPool, rng: random.Random
) -> None:
    """A pool borrower: succeeding, failing (expected), raising or cancelled mid-way
    (its failure goes to the device, whose syncs and close raise it: expected)."""
    kind = rng.randrange(4)
    with anyio.move_on_after(rng.uniform(0, 0.0005) if kind == 3 else None):
        try:
            async with pool.stream() as s:
                s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=rng.uniform(10, 200)))
                if kind:
                    s.launch(_failing_call)
                if kind == 2:
                    raise LookupError("a borrower's own error")
                await s.synchronize()
        except LookupError as exc:
            if not any(str(FAILING_CALL_CODE) in note for note in getattr(exc, "__notes__", [])):
                raise AssertionError("a raising borrower lost its stream's failure") from exc


def _repeated_loops(
    loop: str,
    dev: aclasync.Device[sim.SimAcl],
    done: threading.Event,
    counts: dict[str, int],
    count: Callable[[BaseException], None],
) -> None:
    """Run short event loops of kind *loop*, one after another, each syncing a stream
    of *dev* (opened on another loop) once, until *done*."""

    async def use() -> None:
        async with dev.create_stream() as s:
            s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=50))
            await s.synchronize()

    while not done.is_set():
        try:
            run_on_loop(loop, use)
        except Exception as exc:
            count(exc)
        counts["loops"] += 1


@contextlib.contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    """Silence a logger below CRITICAL for the block."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _model_body(x: Any) -> Any:
    """The soak's model: fails on a negative first element, as a faulting model would."""
    if x[0] < 0:
        raise ValueError("negative input")
    return x * 2.0


async def _model_run(model: aclasync.Model, stream: aclasync.Stream, rng: random.Random) -> None:
    """A run on the client's stream: a quarter fail, a quarter are cancelled mid-way."""
    x = np.full(MODEL_WIDTH, -1.0 if rng.random() < 0.25 else 1.0, dtype=np.float32)
    if rng.random() < 0.25:
        with anyio.move_on_after(rng.uniform(0, 0.0003)):  # abandoned on purpose
            await model.run(stream, x)
        return
    (y,) = await model.run(stream, x)
    if y[0] != 2.0:
        raise AssertionError(f"model run returned {y[:4]}, expected 2.0")


async def _operation(
    dev: aclasync.Device[sim.SimAcl],
    stream: aclasync.Stream,
    host: aclasync.HostBuffer,
    device: aclasync.DeviceBuffer,
    rng: random.Random,
) -> None:
    launch = dev.acl.sim.launch_kernel
    choice = rng.randrange(10)
    if choice < 3:
        for _ in range(rng.randint(1, 8)):
            stream.launch(launch, Kernel(duration_us=rng.uniform(10, 200)))
        await stream.synchronize(timeout=rng.choice([None, 1.0]))
    elif choice == 3:
        stream.launch(launch, Kernel(duration_us=rng.uniform(10, 300)))
        event = await stream.record_event()
        await event.synchronize()
        await event.aclose()
    elif choice == 4:
        stream.launch(launch, Kernel(duration_us=2000))
        with anyio.move_on_after(rng.uniform(0, 0.001)):  # abandoned on purpose
            await stream.synchronize()
    elif choice == 5:
        stream.memcpy(device, host)
        stream.memcpy(host, device)
        await stream.synchronize()
    elif choice == 6:
        async with dev.create_stream() as extra:
            extra.launch(launch, Kernel(duration_us=50))
            await extra.synchronize()
    elif choice == 7:
        buffer = await dev.alloc(rng.choice([256, 65536, 1 << 20]))
        await buffer.aclose()
    elif choice == 8:
        stream.launch(_failing_call)
        await stream.synchronize()
    else:
        await dev.synchronize(timeout=1.0)


def _failing_call(*_: Any) -> int:
    return FAILING_CALL_CODE


async def _ticker(stop: anyio.Event, lateness: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await anyio.sleep(0.001)
        lateness.append(time.perf_counter() - start - 0.001)
