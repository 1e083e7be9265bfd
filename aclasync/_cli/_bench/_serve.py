"""``serve``: one HTTP app served two ways, aclasync vs the naive ``to_thread`` hop.

Each way runs as its own uvicorn (asyncio) server process (``_serve_app``); this
process drives it with a minimal HTTP client (``_http``) at concurrency 1, 16, 64 and
256 and reports requests/s, p50/p99 latency, ``/health`` p99 (timed from a thread of
its own while the load runs) and the most threads the server had alive. The naive way
wraps a blocking ``acl.rt.synchronize_stream`` in ``anyio.to_thread.run_sync`` with
anyio's default limiter of 40 threads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ._common import BenchConfig, Skip, check, column
from ._http import connect
from ._stats import percentile, ratio

__all__ = ["run"]

TITLE = "ASGI service: aclasync vs to_thread(synchronize_stream)"
CONCURRENCY = (1, 16, 64, 256)
MODES = ("aclasync", "naive")
STREAMS = 8
KERNEL_US = 2000.0
START_LIMIT_S = 30.0
#: Rounds per concurrency level in a full run (both servers in each, order alternating).
ROUNDS = 3


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "title": "POST /infer throughput, aclasync vs a naive to_thread handler",
        "group": ["concurrency"],
        "group_format": "{concurrency} concurrent",
        "series": "mode",
        "value": "rps",
        "value_format": "{:,.0f} req/s",
        "axis": "requests served per second",
        "unit": "req/s; higher is better",
        "annotate": "p99_ms",
        "annotate_format": "p99 {:,.0f} ms",
    },
    {
        "title": "GET /health latency while /infer is loaded",
        "group": ["concurrency"],
        "group_format": "{concurrency} concurrent",
        "series": "mode",
        "value": "health_p99_ms",
        "value_format": "p99 {:.1f} ms",
        "axis": "99th percentile of GET /health latency under load",
        "unit": "ms; lower is better",
        "target": 20.0,
        "target_label": "target from 64 concurrent: <= 20 ms",
    },
]

#: The table's columns: one row per server and level. The servers' thread counts are
#: whole-run figures, so they go in a note (``threads_note``), not in a column.
COLUMNS = [
    column("mode", "handler"),
    column("concurrency", "concurrency", "d"),
    column("requests", "requests", "d"),
    column("seconds", "seconds", ".2f"),
    column("rps", "requests/s", ",.1f"),
    column("p50_ms", "p50 ms", ".2f"),
    column("p99_ms", "p99 ms", ".2f"),
    column("health_p99_ms", "/health p99 ms", ".2f"),
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Serve the app both ways at once and load them in turn, interleaved; blocks.

    Both servers run side by side for the whole benchmark. Each concurrency level is
    split into ``ROUNDS`` rounds, and in each round both servers get their share of
    requests, in alternating order, so that drift of the machine (other jobs, CPU
    frequency) falls on both alike. Figures pool the rounds.
    """
    missing = [m for m in ("starlette", "uvicorn", "httpx") if importlib.util.find_spec(m) is None]
    if missing:
        raise Skip(f"needs {', '.join(missing)}: pip install 'aclasync[serve]'")
    per_level = cfg.size(2000, 48, minimum=8)
    rounds = 1 if cfg.quick or cfg.scale < 1 else ROUNDS
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        urls = {mode: stack.enter_context(_Server(mode)) for mode in MODES}
        for url in urls.values():
            _load(url, 1, 8)  # warm-up: imports, first launch
        for concurrency in CONCURRENCY:
            count = max(per_level // rounds, concurrency)
            samples: dict[str, list[_Sample]] = {mode: [] for mode in MODES}
            for turn in range(rounds):
                order = MODES if turn % 2 == 0 else MODES[::-1]
                for mode in order:
                    cfg.progress(
                        f"serve [{mode}]: {count} requests at concurrency {concurrency}"
                        f" (round {turn + 1} of {rounds})"
                    )
                    samples[mode].append(_load(urls[mode], concurrency, count))
            for mode in MODES:
                rows.append({"mode": mode, "concurrency": concurrency, **_pool(samples[mode])})
        threads = {mode: _threads(url) for mode, url in urls.items()}
    return {
        "title": TITLE,
        "columns": COLUMNS,
        "rows": rows,
        "checks": _checks(rows),
        "charts": CHARTS,
        "notes": [
            f"1 simulated device, {STREAMS} streams, {KERNEL_US / 1000:g} ms kernels; "
            "uvicorn on asyncio; client and server on the same machine; both servers "
            f"run side by side and each level alternates between them ({rounds} "
            f"round{'s' if rounds > 1 else ''}).",
            threads_note(threads),
        ],
        "threads": threads,
        "params": {
            "requests_per_level": per_level,
            "rounds": rounds,
            "concurrency": list(CONCURRENCY),
            "streams": STREAMS,
            "kernel_us": KERNEL_US,
        },
    }


def threads_note(threads: dict[str, int]) -> str:
    """The one line for the servers' thread counts, taken over the whole run (the
    servers serve every level; to_thread's idle threads outlive a level)."""
    counts = ", ".join(f"{mode} {count}" for mode, count in threads.items())
    return (
        f"threads, the most alive in each server process over the whole run (all levels): {counts}."
    )


def _checks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by = {(row["mode"], row["concurrency"]): row for row in rows}
    checks = []
    for concurrency in CONCURRENCY:
        ours, naive = by[("aclasync", concurrency)], by[("naive", concurrency)]
        floor = 0.95 if concurrency == 1 else 1.0
        speed = ratio(ours["rps"], naive["rps"])
        checks.append(
            check(
                f"requests/s vs naive at concurrency {concurrency}",
                speed,
                f">= {floor}x",
                None if speed is None else speed >= floor,
            )
        )
        if concurrency >= 64:
            checks.append(
                check(
                    f"p99 below naive at concurrency {concurrency}",
                    ours["p99_ms"],
                    f"< {naive['p99_ms']:.2f} ms",
                    ours["p99_ms"] < naive["p99_ms"],
                )
            )
            health = ours["health_p99_ms"]
            checks.append(
                check(
                    f"/health p99 at concurrency {concurrency}",
                    health,
                    "<= 20 ms",
                    None if health is None else health <= 20.0,
                )
            )
    return checks


class _Server:
    """Start ``_serve_app`` in *mode* on a free port; yield its URL; SIGTERM it at exit."""

    def __init__(self, mode: str) -> None:
        self._mode = mode
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__

    def __enter__(self) -> str:
        command = [sys.executable, "-m", "aclasync._cli._bench._serve_app", "--mode", self._mode]
        command += ["--streams", str(STREAMS), "--kernel-us", str(KERNEL_US)]
        root = str(Path(__file__).resolve().parents[3])
        path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().decode()
        found = re.search(r"serving on (http://\S+)", line)
        if not found:
            self.__exit__()
            raise RuntimeError(f"the {self._mode} server did not start: {self._stderr()}")
        return found.group(1)

    def __exit__(self, *exc_info: object) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=START_LIMIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and process.stdout is not None:
            process.stdout.close()
        self._log.close()

    def _stderr(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]


def _load(url: str, concurrency: int, count: int) -> _Sample:
    """Send *count* checked ``/infer`` requests at *concurrency*; time them and /health."""
    import httpx

    latencies: list[float] = []
    health: list[float] = []
    stop = threading.Event()

    probe_failures: list[Exception] = []

    def probe() -> None:
        try:
            with httpx.Client(timeout=60.0) as http:
                while not stop.is_set():
                    began = time.perf_counter()
                    http.get(f"{url}/health").raise_for_status()
                    health.append(time.perf_counter() - began)
                    stop.wait(0.01)
        except Exception as exc:  # reported by the load below (a Ctrl-C ends it first)
            probe_failures.append(exc)

    prober = threading.Thread(target=probe, name="aclasync-bench-health")

    async def drive() -> float:
        # Every connection is open before the clock and the /health probe start: the
        # figures are those of the service under load, not of its accept loop taking
        # a burst of new connections.
        remaining = list(range(count))
        go = anyio.Event()

        async def worker(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            async with await connect(url) as http:
                task_status.started()
                await go.wait()
                while remaining:
                    n = remaining.pop() % 200
                    began = time.perf_counter()
                    status, body = await http.post("/infer", b'{"n": %d}' % n)
                    latencies.append(time.perf_counter() - began)
                    if (
                        status != 200
                        or json.loads(body)["result"] != (n - 1) * n * (2 * n - 1) // 6
                    ):
                        raise RuntimeError(f"n={n}: HTTP {status} {body[:200]!r}")

        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                await tg.start(worker)
            prober.start()
            started = time.perf_counter()
            go.set()
        return time.perf_counter() - started

    try:
        seconds = anyio.run(drive)
    finally:
        stop.set()
        if prober.is_alive():
            prober.join()
    if probe_failures:
        raise RuntimeError(f"GET /health failed under load: {probe_failures[0]!r}")
    return _Sample(count, seconds, latencies, health)


@dataclasses.dataclass(frozen=True)
class _Sample:
    """One load of one server: its request count, wall time and latencies (seconds)."""

    count: int
    seconds: float
    latencies: list[float]
    health: list[float]


def _pool(samples: list[_Sample]) -> dict[str, Any]:
    """The figures of several loads of one server taken together."""
    count = sum(sample.count for sample in samples)
    seconds = sum(sample.seconds for sample in samples)
    latencies = [x for sample in samples for x in sample.latencies]
    health = [x for sample in samples for x in sample.health]
    return {
        "requests": count,
        "seconds": seconds,
        "rps": count / seconds,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "health_p99_ms": percentile(health, 99) * 1e3 if health else None,
    }


def _threads(url: str) -> int:
    import httpx

    response = httpx.get(f"{url}/stats", timeout=30.0)
    response.raise_for_status()
    return int(response.json()["threads_max"])
