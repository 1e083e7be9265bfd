"""Serve a model on NPUs with Ray Serve: batched HTTP requests that await the device.

The deployment, ``Classifier``, holds one NPU per replica
(``ray_actor_options={"resources": {"NPU": 1}}``), opens it with ``aclasync.ray``'s
``NpuActor`` and loads its model with ``dev.load_model``. Requests reach it over HTTP
through Serve's proxy; ``@serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005,
max_concurrent_batches=4)`` gathers them, and each batch borrows a stream from
``dev.stream_pool(4)`` and awaits ``model.run``. The await hands the replica's event
loop back to Serve while the NPU works, so the loop gathers and starts the next batch
meanwhile: up to four batches in flight on one replica. (Serve's own advice for a
blocking handler is ``asyncio.to_thread``; ``aclasync bench serve-ray`` compares the
two.)

Several models per replica: a request with the header ``serve_multiplexed_model_id:
<tenant>`` is answered by that tenant's model, loaded on first use through
``@serve.multiplexed(max_num_models_per_replica=2)``; Serve evicts the least recently
used one beyond two, and the eviction closes it (``Model.aclose``). Replica shutdown
closes the models, the stream pool and the device.

This driver runs it on one machine without NPUs. It puts aclasync's simulated ``acl``
on the path of every process (``aclasync.sim.acl_module_path()``), so Ray detects the
simulated NPUs by itself (no ``resources=`` given), sets ``ASCEND_RT_VISIBLE_DEVICES``
per replica, and each replica's aclasync takes that ``acl`` for the native backend, as
it would take CANN's. It writes the simulated model files, starts Ray and Serve (HTTP
on 127.0.0.1 only), deploys, sends ``--requests`` requests (and five per tenant) at
``--concurrency`` at most, checks every answer against NumPy, prints the throughput,
p50/p99 latency and the most batches one replica had in flight at once, shuts Serve
and Ray down, and exits 0 only if every answer was right::

    python examples/ray_serve_app.py --replicas 2 --requests 200

On Ascend hardware the ``Classifier`` class is what carries over: start Ray where CANN
is installed and it detects the NPUs the same way; load a real ``.om`` file instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
import socket
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

import aclasync
import aclasync.sim
from aclasync.ray import NpuActor, assigned_npus

#: The model: a batch of feature vectors in, one score per class out.
MAX_BATCH, FEATURES, CLASSES = 8, 16, 4
#: Batches one replica runs at once, each on a stream of its pool.
CONCURRENT_BATCHES = 4
#: The tenants of the multiplexed route; each replica keeps two of their models at most.
TENANTS = ("amber", "birch", "cedar", "dune", "elm")
MODELS_PER_REPLICA = 2
TOLERANCE = 1e-5
#: Serve's logger: in a replica, its records go to the replica's log file.
logger = logging.getLogger("ray.serve")


# -- the models: what the simulated NPU computes, and what the client checks against --


def scores(name: str, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Model *name*: ``tanh(x @ w + b)``, with weights drawn from a seed made of the name."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    w = rng.standard_normal((FEATURES, CLASSES), dtype=np.float32)
    b = rng.standard_normal(CLASSES, dtype=np.float32)
    result: np.ndarray[Any, Any] = np.tanh(x @ w + b)
    return result


# The simulated model files name these functions ("ray_serve_app:classifier"), so that
# the replicas, in other processes, import them when they load a model.
def classifier(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return scores("classifier", x)


def amber(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return scores("amber", x)


def birch(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return scores("birch", x)


def cedar(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return scores("cedar", x)


def dune(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return scores("dune", x)


def elm(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return scores("elm", x)


def write_model_files(directory: Path, model_ms: float) -> None:
    """Write a simulated model file (``<name>.om``) per model, in the self-contained form.

    A spec file that names an importable ``"fn"`` loads in any process
    (``docs/simulator.md``, "Simulated models"); a real ``.om`` takes its place on NPUs.
    """
    for name in ("classifier", *TENANTS):
        spec = {
            "format": "aclasync.sim.model",
            "version": 1,
            "fn": f"{Path(__file__).stem}:{name}",
            "inputs": [["x", [MAX_BATCH, FEATURES], "float32"]],
            "outputs": [["scores", [MAX_BATCH, CLASSES], "float32"]],
            "duration_us": model_ms * 1000.0,
            "batch_sizes": [],
        }
        (directory / f"{name}.om").write_text(json.dumps(spec))


# -- the deployment ---------------------------------------------------------------------


class TenantModel:
    """A tenant's model as ``@serve.multiplexed`` holds it; Serve calls ``__del__`` on eviction.

    Serve evicts without knowing which batches still use the model, so a batch takes it
    with ``async with held.use() as model`` and the close waits for those batches.
    """

    def __init__(self, model: aclasync.Model, on_close: Callable[[], None]) -> None:
        self._model = model
        self._loop = asyncio.get_running_loop()
        self._on_close = on_close
        self._users = 0
        self._unused = asyncio.Event()
        self._unused.set()
        self._closed = False

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[aclasync.Model]:
        """Use the model; it stays open until the block ends."""
        self._users += 1
        self._unused.clear()
        try:
            yield self._model
        finally:
            self._users -= 1
            if not self._users:
                self._unused.set()

    async def close(self) -> None:
        """Close the model once no batch uses it. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._unused.wait()
            await self._model.aclose()
            self._on_close()

    def __del__(self) -> None:
        # Serve runs a plain __del__ in a thread of its executor and waits for it: hand
        # the close to the replica's event loop and wait too. Python calls __del__ again
        # when the object goes, on any thread: closed by then, it returns at once.
        if self._closed or self._loop.is_closed() or _on_an_event_loop():
            return
        asyncio.run_coroutine_threadsafe(self.close(), self._loop).result()


def _on_an_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@serve.deployment(
    ray_actor_options={"resources": {"NPU": 1}, "num_cpus": 0},
    # Enough requests for every batch in flight to be full.
    max_ongoing_requests=MAX_BATCH * CONCURRENT_BATCHES,
)
class Classifier(NpuActor):
    """One NPU, its model, a pool of streams; batches of requests run on the NPU."""

    # Serve awaits an async __init__ before the replica takes requests (mypy wants None).
    async def __init__(self, model_dir: str) -> None:  # type: ignore[misc]
        super().__init__()  # backend None: `import acl` works, so native (or $ACLASYNC_BACKEND)
        self.model_dir = Path(model_dir)
        dev = await self.device()
        self.model = await dev.load_model(self.model_dir / "classifier.om")
        self.pool = await dev.stream_pool(CONCURRENT_BATCHES)
        self.tenants: set[TenantModel] = set()
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.npu = assigned_npus()[0]
        self.in_flight = 0
        self.loads = 0
        self.closes = 0

    async def __call__(self, request: Request) -> JSONResponse:
        try:
            x = np.asarray((await request.json())["x"], dtype=np.float32)
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
            return JSONResponse({"error": 'expected {"x": [numbers]}'}, status_code=400)
        if x.shape != (FEATURES,):
            return JSONResponse({"error": f"x must hold {FEATURES} numbers"}, status_code=400)
        if not np.isfinite(x).all():  # NaN, or beyond float32: no score to answer with
            return JSONResponse({"error": "x must hold finite float32 numbers"}, status_code=400)
        tenant = serve.get_multiplexed_model_id()
        if tenant and tenant not in TENANTS:
            return JSONResponse({"error": f"no tenant {tenant!r}"}, status_code=404)
        return JSONResponse(await self.classify(x))

    @serve.batch(
        max_batch_size=MAX_BATCH,
        batch_wait_timeout_s=0.005,
        max_concurrent_batches=CONCURRENT_BATCHES,
    )
    async def classify(self, rows: list[np.ndarray[Any, Any]]) -> list[dict[str, Any]]:
        batch = np.zeros((MAX_BATCH, FEATURES), dtype=np.float32)  # the model's fixed shape
        batch[: len(rows)] = rows
        # Serve splits batches by tenant: all rows here are for one model.
        tenant = serve.get_multiplexed_model_id()
        using = (await self.tenant_model(tenant)).use() if tenant else nullcontext(self.model)
        async with using as model, self.pool.stream() as stream:
            self.in_flight += 1
            in_flight = self.in_flight  # batches on the NPU now, this one included
            try:
                (result,) = await model.run(stream, batch)
            finally:
                self.in_flight -= 1
        facts = {
            "replica": self.replica,
            "pid": os.getpid(),
            "npu": self.npu,
            "batch": len(rows),
            "in_flight": in_flight,
            "loads": self.loads,  # tenant models loaded and closed so far
            "closes": self.closes,
        }
        return [{"scores": result[i].tolist(), **facts} for i in range(len(rows))]

    @serve.multiplexed(max_num_models_per_replica=MODELS_PER_REPLICA)
    async def tenant_model(self, tenant: str) -> TenantModel:
        dev = await self.device()
        model = await dev.load_model(self.model_dir / f"{tenant}.om")
        held = TenantModel(model, on_close=lambda: self._closed_model(held))
        self.tenants.add(held)
        self.loads += 1
        return held

    def _closed_model(self, held: TenantModel) -> None:
        self.tenants.discard(held)
        self.closes += 1

    async def __del__(self) -> None:
        # Serve awaits this when the replica shuts down gracefully.
        for held in list(self.tenants):
            await held.close()
        await self.pool.aclose()
        await self.model.aclose()
        await self.close()
        logger.info("replica %s closed its models and NPU %d", self.replica, self.npu)


# -- the driver -------------------------------------------------------------------------


def use_simulated_npus() -> None:
    """Make ``import acl`` the simulator here and in every process Ray starts from here.

    Ray detects NPUs in the process that starts the cluster; its workers inherit the
    environment. The strict simulator has pyACL's surface only, as CANN's ``acl`` has.
    """
    path = aclasync.sim.acl_module_path()
    sys.path.insert(0, path)
    here = str(Path(__file__).resolve().parent)  # the replicas import the models' functions
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [path, here, os.environ.get("PYTHONPATH")])
    )
    os.environ.setdefault("ACLASYNC_SIM_STRICT", "1")


def request_input(index: int) -> np.ndarray[Any, Any]:
    """The feature vector request number *index* sends."""
    return np.random.default_rng(index).standard_normal(FEATURES, dtype=np.float32)


@dataclasses.dataclass
class Load:
    """What a run of requests gave: wall time, latencies (s), the right answers, the wrong."""

    seconds: float = 0.0
    latencies: list[float] = dataclasses.field(default_factory=list)
    answers: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    wrong: int = 0


async def send(url: str, work: list[tuple[int, str]], concurrency: int) -> Load:
    """POST every ``(index, tenant)`` of *work*, *concurrency* at a time; check each answer."""
    load = Load()
    queue = iter(work)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:

        async def sender() -> None:
            for index, tenant in queue:
                x = request_input(index)
                headers = {"serve_multiplexed_model_id": tenant} if tenant else {}
                began = time.perf_counter()
                response = await client.post(url, json={"x": x.tolist()}, headers=headers)
                load.latencies.append(time.perf_counter() - began)
                expected = scores(tenant or "classifier", x)
                if response.status_code == 200 and np.allclose(
                    response.json()["scores"], expected, rtol=TOLERANCE, atol=TOLERANCE
                ):
                    load.answers.append(response.json())
                else:
                    load.wrong += 1
                    print(f"request {index}: HTTP {response.status_code} {response.text[:300]}")

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(sender)
        load.seconds = time.perf_counter() - started
    return load


async def send_both(url: str, requests: int, concurrency: int) -> tuple[Load, Load]:
    """The model's requests, then five per tenant (interleaved, four at a time)."""
    main = await send(url, [(i, "") for i in range(requests)], concurrency)
    tenants = [(requests + i, TENANTS[i % len(TENANTS)]) for i in range(5 * len(TENANTS))]
    return main, await send(url, tenants, min(concurrency, 4))


def report(answers: list[dict[str, Any]]) -> tuple[int, int, int]:
    """Print what each replica did, from the counters in its answers.

    Returns the most batches one replica had in flight at once, and the tenant models
    loaded and closed over all replicas.
    """
    replicas: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"requests": 0, "in_flight": 0, "loads": 0, "closes": 0}
    )
    for answer in answers:
        seen = replicas[answer["replica"]]
        seen["npu"] = answer["npu"]
        seen["requests"] += 1
        for key in ("in_flight", "loads", "closes"):  # counters only grow, but in_flight
            seen[key] = max(seen[key], answer[key])
    for name, seen in sorted(replicas.items()):
        print(
            f"replica {name} on NPU {seen['npu']}: {seen['requests']} requests, at most "
            f"{seen['in_flight']} batches in flight at once; tenant models loaded "
            f"{seen['loads']}, closed {seen['closes']}"
        )
    seen_all = replicas.values()
    return (
        max((seen["in_flight"] for seen in seen_all), default=0),
        sum(seen["loads"] for seen in seen_all),
        sum(seen["closes"] for seen in seen_all),
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2, help="replicas, one NPU each")
    parser.add_argument("--requests", type=int, default=200, help="requests to the model")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--model-ms", type=float, default=20.0, help="NPU time per batch")
    parser.add_argument("--port", type=int, default=0, help="Serve's HTTP port (0: any free)")
    args = parser.parse_args(argv)
    finite_ms = math.isfinite(args.model_ms * 1000)  # (the kernel is in µs)
    if args.replicas < 1 or args.requests < 1 or args.concurrency < 1:
        parser.error("--replicas, --requests and --concurrency must be >= 1")
    if not (finite_ms and args.model_ms >= 0):
        parser.error(f"--model-ms must be finite and >= 0, got {args.model_ms}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0 (any free port) to 65535, got {args.port}")
    if args.port and (why := cannot_listen(args.port)):  # one line, before Ray starts
        parser.exit(1, f"{parser.prog}: cannot listen on 127.0.0.1:{args.port}: {why}\n")
    use_simulated_npus()
    port = args.port or free_port()
    with tempfile.TemporaryDirectory() as model_dir:
        write_model_files(Path(model_dir), args.model_ms)
        context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        session = Path(context.address_info["session_dir"])
        try:
            resources = ray.cluster_resources()
            npus = int(resources.get("NPU", 0))
            soc = [k.partition(":")[2] for k in resources if k.startswith("accelerator_type:")]
            print(f"Ray detected {npus} NPUs ({', '.join(soc) or 'type unknown'})")
            if npus < args.replicas:
                print(f"--replicas {args.replicas} needs as many NPUs")
                return 1
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            app = Classifier.options(num_replicas=args.replicas).bind(model_dir)
            serve.run(app, route_prefix="/")
            main, tenants = anyio.run(
                send_both, f"http://127.0.0.1:{port}/", args.requests, args.concurrency
            )
        finally:
            serve.shutdown()
            ray.shutdown()
    most, loads, closes = report(main.answers + tenants.answers)
    print(
        f"{args.requests} requests at concurrency {args.concurrency}: "
        f"{args.requests / main.seconds:,.1f} requests/s, p50 "
        f"{percentile(main.latencies, 50) * 1e3:.1f} ms, p99 "
        f"{percentile(main.latencies, 99) * 1e3:.1f} ms"
    )
    print(f"most batches in flight on one replica at once: {most} (of {CONCURRENT_BATCHES})")
    print(
        f"{len(tenants.latencies)} tenant requests over {len(TENANTS)} models, at most "
        f"{MODELS_PER_REPLICA} per replica: {loads} loaded, {closes} closed on eviction"
    )
    total = len(main.latencies) + len(tenants.latencies)
    wrong = main.wrong + tenants.wrong
    print(f"verified {total - wrong}/{total} answers against NumPy")
    if wrong:
        print(f"Ray's logs are kept in {session}")
        return 1
    forget_session(session)
    return 0


def forget_session(session: Path) -> None:
    """Remove the session directory Ray left (its logs): nothing failed."""
    shutil.rmtree(session, ignore_errors=True)
    latest = session.with_name("session_latest")
    if latest.is_symlink() and Path(os.readlink(latest)) == session:
        latest.unlink(missing_ok=True)


def cannot_listen(port: int) -> str | None:
    """Why Serve could not listen on 127.0.0.1:*port* now (in use, say), or None."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Serve's proxy does
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


if __name__ == "__main__":
    sys.exit(main())
