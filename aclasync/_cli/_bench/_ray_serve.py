"""``serve-ray``: a Ray Serve app on an NPU, batches awaited by aclasync vs one batch vs to_thread.

Three applications run side by side on one local Ray cluster, one replica and one
simulated NPU each (``_ray_serve_app``): ``@serve.batch`` with ``max_concurrent_batches``
of 1 and of ``BATCHES`` around ``await model.run``, and ``BATCHES`` around blocking pyACL
in ``asyncio.to_thread``. Every request goes over HTTP through Serve's proxy on
127.0.0.1, from ``CONCURRENCY`` keep-alive connections in this process, and its answer
is checked. Each round loads every application in turn (the order rotates between
rounds, so drift of the machine falls on all alike); the figures pool the rounds.
Ray's and Serve's start-up are not timed. Skipped without Ray Serve; not part of
``bench --quick`` (name it to run it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import anyio

from ._common import BenchConfig, Skip, check, column
from ._http import connect
from ._stats import percentile, ratio

__all__ = ["run"]

TITLE = "Ray Serve on an NPU: concurrent batches awaited vs one batch vs to_thread"
CONCURRENCY = 64
MODEL_MS = 40.0
ROUNDS = 3
SPEEDUP_TARGET = 1.5

#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "group": ["variant"],
        "group_format": "{variant}",
        "value": "rps",
        "value_format": "{:,.0f} req/s",
        "axis": "requests answered per second, one replica",
        "unit": "req/s; higher is better",
        "annotate": "p99_ms",
        "annotate_format": "p99 {:,.0f} ms",
    }
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Deploy the three applications, load each in turn over rounds; blocks for minutes.

    Raises
    ------
    Skip
        If Ray Serve is not installed (``pip install 'aclasync[ray-serve]'``).
    """
    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.serve") is None:
        raise Skip("Ray Serve is not installed (pip install 'aclasync[ray-serve]')")
    import ray

    from ._ray_serve_app import BATCHES, DEPLOYMENTS, MAX_BATCH

    per_round = cfg.size(800, 160, minimum=2 * CONCURRENCY)
    rounds = 1 if cfg.quick or cfg.scale < 1 else ROUNDS
    # Ray prints its raylet's messages to stdout: keep it for the results.
    with contextlib.redirect_stdout(sys.stderr), _serving(cfg) as urls:
        samples: dict[str, list[_Sample]] = {name: [] for name in DEPLOYMENTS}
        names = list(DEPLOYMENTS)
        for name in names:
            cfg.progress(f"serve-ray [{name}]: warm-up")
            _load(urls[name], CONCURRENCY, 2 * CONCURRENCY)
        for turn in range(rounds):
            order = names[turn % len(names) :] + names[: turn % len(names)]
            for name in order:
                cfg.progress(
                    f"serve-ray [{name}]: {per_round} requests at concurrency {CONCURRENCY}"
                    f" (round {turn + 1} of {rounds})"
                )
                samples[name].append(_load(urls[name], CONCURRENCY, per_round))
    rows = [{"variant": name, **_pool(samples[name])} for name in names]
    by = {row["variant"]: row for row in rows}
    many, one, threaded = (by[name] for name in names)
    for row in rows:
        row["vs_one"] = ratio(row["rps"], one["rps"])
    speedup = ratio(many["rps"], one["rps"])
    vs_thread = ratio(many["rps"], threaded["rps"])
    return {
        "title": TITLE,
        "columns": [
            column("variant", "handler"),
            column("requests", "requests", "d"),
            column("rps", "requests/s", ",.1f"),
            column("p50_ms", "p50 ms", ".1f"),
            column("p99_ms", "p99 ms", ".1f"),
            column("most_in_flight", "batches at once", "d"),
            column("mean_batch", "batch size", ".1f"),
            column("vs_one", "vs 1 batch", ".2f"),
        ],
        "rows": rows,
        "checks": [
            check(
                f"requests/s, {BATCHES} batches vs 1",
                speedup,
                f">= {SPEEDUP_TARGET:g}x",
                None if speedup is None else speedup >= SPEEDUP_TARGET,
            ),
            check(
                f"p99, {BATCHES} batches vs 1",
                many["p99_ms"],
                f"<= {one['p99_ms']:.1f} ms",
                many["p99_ms"] <= one["p99_ms"],
            ),
            check(
                f"requests/s, {BATCHES} batches: aclasync vs to_thread",
                vs_thread,
                ">= 1x",
                None if vs_thread is None else vs_thread >= 1.0,
            ),
        ],
        "charts": CHARTS,
        "notes": [
            f"Ray {ray.__version__}; one replica per application, each on its own "
            f"simulated NPU; a batch of up to {MAX_BATCH} takes {MODEL_MS:g} ms of NPU "
            "time; Serve's HTTP proxy, the replicas and the client share this machine.",
            f"{CONCURRENCY} keep-alive HTTP connections, one request in flight on each; "
            f"{rounds} round{'s' if rounds > 1 else ''}, the order rotating.",
            "batches at once: the most a replica had on its NPU at one time; batch size: "
            "the mean size of the batch a request ran in (both from the answers).",
        ],
        "params": {
            "ray": ray.__version__,
            "concurrency": CONCURRENCY,
            "requests_per_round": per_round,
            "rounds": rounds,
            "model_ms": MODEL_MS,
            "max_batch_size": MAX_BATCH,
            "batches": BATCHES,
        },
    }


@contextlib.contextmanager
def _serving(cfg: BenchConfig) -> Any:
    """A local Ray cluster with Serve and the three applications: their URLs by variant.

    At the end, Serve and Ray are shut down, and Ray's session directory removed.
    """
    import ray
    from ray import serve

    import aclasync.ray  # noqa: F401 - quiets Ray's NPU detection where there is no acl

    from ._ray_serve_app import DEPLOYMENTS, write_model

    logging.getLogger("ray.serve").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="aclasync-bench-") as folder:
        path = Path(folder) / "model.om"
        write_model(path, MODEL_MS * 1000.0)
        cfg.progress("serve-ray: starting Ray and Serve, deploying three applications")
        context = ray.init(
            num_cpus=2,
            resources={"NPU": len(DEPLOYMENTS)},
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
        )
        session = cast(Any, context).address_info["session_dir"]  # a RayContext
        try:
            port = _free_port()
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            urls = {}
            for index, (name, deployment) in enumerate(DEPLOYMENTS.items()):
                serve.run(deployment.bind(str(path)), name=f"app{index}", route_prefix=f"/{index}")
                urls[name] = f"http://127.0.0.1:{port}/{index}"
            yield urls
        finally:
            try:
                cast(Any, serve).shutdown()  # untyped
            finally:
                ray.shutdown()
                shutil.rmtree(session, ignore_errors=True)


def _load(url: str, concurrency: int, count: int) -> _Sample:
    """Send *count* checked requests over *concurrency* connections; time them."""
    base, _, path = url.removeprefix("http://").partition("/")
    target = f"/{path}"

    async def drive() -> _Sample:
        sample = _Sample()
        remaining = list(range(count))
        go = anyio.Event()

        async def worker(*, task_status: Any) -> None:
            async with await connect(f"http://{base}") as http:
                task_status.started()
                await go.wait()
                while remaining:
                    x = remaining.pop() % 1000
                    began = time.perf_counter()
                    status, body = await http.post(target, b'{"x": %d}' % x)
                    sample.latencies.append(time.perf_counter() - began)
                    answer = json.loads(body) if status == 200 else {}
                    if answer.get("y") != 2 * x + 1:
                        raise RuntimeError(f"{url} x={x}: HTTP {status} {body[:200]!r}")
                    sample.most_in_flight = max(sample.most_in_flight, answer["in_flight"])
                    sample.batch_sizes.append(answer["batch"])

        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                await tg.start(worker)
            began = time.perf_counter()
            go.set()
        sample.seconds = time.perf_counter() - began
        return sample

    return anyio.run(drive)


class _Sample:
    """One load of one application: wall time, latencies (s), most batches at once."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.latencies: list[float] = []
        self.most_in_flight = 0
        self.batch_sizes: list[int] = []


def _pool(samples: list[_Sample]) -> dict[str, Any]:
    count = sum(len(sample.latencies) for sample in samples)
    seconds = sum(sample.seconds for sample in samples)
    latencies = [x for sample in samples for x in sample.latencies]
    return {
        "requests": count,
        "seconds": seconds,
        "rps": count / seconds,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "most_in_flight": max(sample.most_in_flight for sample in samples),
        "mean_batch": sum(b for s in samples for b in s.batch_sizes) / count,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
