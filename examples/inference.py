"""Serve concurrent inference requests with an offline model, using aclasync's public API.

An inference service loads its model once and answers many requests at a time. Here
the model is a tiny two-layer perceptron written in numpy and registered with the
simulator (``acl.sim.register_model``), which writes the model file the service
loads; on Ascend hardware the same service code would load a real ``.om`` file.

The service opens one device, loads the model (``async with dev.load_model(path)``) and
serves ``--requests`` concurrent requests over ``--streams`` streams, each with
``await model.run(stream, x)``. Every answer is checked against the same perceptron
computed on the host; the run prints its throughput, the p50/p99 latency of a request
and whether anything (model, dataset, buffer, memory) was left behind after closing.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import tempfile
import time
from typing import Any

import anyio
import numpy as np

import aclasync
import aclasync.sim

#: Shapes of the perceptron: a batch of feature vectors in, one logit per class out.
BATCH, FEATURES, HIDDEN, CLASSES = 8, 32, 64, 10
#: How close the device's answer must be to the host's (same float32 operations).
TOLERANCE = 1e-5

Params = tuple[np.ndarray[Any, Any], ...]


def make_params() -> Params:
    """The perceptron's weights and biases, fixed by a seed."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((FEATURES, HIDDEN), dtype=np.float32) / np.float32(FEATURES**0.5)
    b1 = rng.standard_normal(HIDDEN, dtype=np.float32)
    w2 = rng.standard_normal((HIDDEN, CLASSES), dtype=np.float32) / np.float32(HIDDEN**0.5)
    b2 = rng.standard_normal(CLASSES, dtype=np.float32)
    return w1, b1, w2, b2


def mlp(params: Params, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The model: ``relu(x @ w1 + b1) @ w2 + b2``; the simulated device runs this too."""
    w1, b1, w2, b2 = params
    hidden = np.maximum(x @ w1 + b1, np.float32(0))
    logits: np.ndarray[Any, Any] = hidden @ w2 + b2
    return logits


def request_input(request: int) -> np.ndarray[Any, Any]:
    """The batch that request number *request* sends."""
    return np.random.default_rng(request + 1).standard_normal((BATCH, FEATURES), dtype=np.float32)


async def serve(args: argparse.Namespace, model_path: str, runtime: Any) -> dict[str, Any]:
    """Load the model on device 0 and serve every request; return latencies and checks."""
    params = make_params()
    latencies: list[float] = []
    wrong: list[int] = []

    async def handle(model: aclasync.Model, stream: aclasync.Stream, request: int) -> None:
        x = request_input(request)
        started = time.perf_counter()
        (logits,) = await model.run(stream, x)
        latencies.append(time.perf_counter() - started)
        if not np.allclose(logits, mlp(params, x), rtol=TOLERANCE, atol=TOLERANCE):
            wrong.append(request)

    async with (
        aclasync.open_device(0, backend=runtime) as dev,
        contextlib.AsyncExitStack() as stack,
    ):
        streams = [
            await stack.enter_async_context(dev.create_stream()) for _ in range(args.streams)
        ]
        # Two buffer sets per stream keep every stream busy; further requests wait for a
        # set instead of allocating one each.
        async with dev.load_model(model_path, pool_size=2 * args.streams) as model:
            started = time.perf_counter()
            with anyio.fail_after(args.timeout):
                async with anyio.create_task_group() as tg:
                    for request in range(args.requests):
                        tg.start_soon(handle, model, streams[request % args.streams], request)
            seconds = time.perf_counter() - started
    return {"seconds": seconds, "latencies": latencies, "wrong": wrong}


async def main(args: argparse.Namespace) -> int:
    """Register the model in a temporary directory, serve, and print the figures."""
    runtime = aclasync.sim.create(device_count=1)
    try:
        with tempfile.TemporaryDirectory() as directory:
            model_path = runtime.sim.register_model(
                os.path.join(directory, "mlp.om"),
                inputs=[("x", (BATCH, FEATURES), "float32")],
                outputs=[("logits", (BATCH, CLASSES), "float32")],
                fn=functools.partial(mlp, make_params()),
                duration_us=args.model_us,
            )
            result = await serve(args, model_path, runtime)
        left = runtime.sim.live_objects()
    finally:
        runtime.sim.close()
    latencies_ms = np.array(result["latencies"]) * 1e3
    p50, p99 = np.percentile(latencies_ms, [50, 99])
    print(
        f"served {args.requests} requests over {args.streams} streams on {args.loop}: "
        f"{args.requests / result['seconds']:.0f} requests/s, "
        f"latency p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    )
    checked = len(result["latencies"])
    wrong = result["wrong"]
    print(f"verified {checked - len(wrong)}/{args.requests} outputs against the host")
    kinds = ("models", "model_descs", "datasets", "data_buffers", "memory_regions", "streams")
    leaks = {kind: left[kind] for kind in kinds if left[kind]}
    print(f"left behind after close: {leaks or 'nothing'}")
    return 1 if wrong or leaks or checked != args.requests else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests (default 1000)")
    parser.add_argument("--streams", type=int, default=4, help="streams (default 4)")
    parser.add_argument(
        "--model-us", type=float, default=500.0, help="device time per execution (default 500)"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for all requests")
    parser.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args(argv)
    if not (1 <= args.requests <= 100_000 and 1 <= args.streams <= 64):
        parser.error("--requests must be 1 to 100000 and --streams 1 to 64")
    if not (0 <= args.model_us <= 1e6 and 0 < args.timeout < 3600):
        parser.error("--model-us must be 0 to 1e6 and --timeout above 0 and below 3600")
    return args


if __name__ == "__main__":
    options = parse_args()
    sys.exit(anyio.run(main, options, backend=options.loop))
