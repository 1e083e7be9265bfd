"""The app ``bench serve`` measures, served two ways: aclasync and the naive thread hop.

Run as ``python -m aclasync._cli._bench._serve_app --mode aclasync|naive --port 0``: it
prints ``serving on http://HOST:PORT`` and serves uvicorn on asyncio until SIGTERM.

- ``aclasync``: ``POST /infer`` borrows a stream from ``Device.stream_pool``, launches
  the kernel and awaits ``stream.synchronize()``.
- ``naive``: the same kernel on a raw stream taken from a ``queue.Queue``, inside
  ``anyio.to_thread.run_sync`` around a blocking ``acl.rt.synchronize_stream``, with
  anyio's default thread limiter (40).

Both compute ``sum(k * k for k in range(n))`` in the kernel and return it. ``GET /health``
answers at once; ``GET /stats`` reports the most threads seen alive.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import socket
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import aclasync
from aclasync.sim import Kernel

from .._common import sim_runtime
from ._common import expect

__all__ = ["build_app", "main"]


def kernel(n: int, duration_us: float, into: list[int]) -> Kernel:
    """The benchmark's "model": the sum of squares below *n*, after *duration_us*."""
    return Kernel(duration_us=duration_us, fn=lambda: into.append(sum(k * k for k in range(n))))


def build_app(mode: str, streams: int, kernel_us: float) -> Starlette:
    """The Starlette app for *mode* (``"aclasync"`` or ``"naive"``)."""
    threads_max = [threading.active_count()]
    infer: Callable[[int], Any] = _unset

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        nonlocal infer
        runtime = sim_runtime(1)
        try:
            if mode == "aclasync":
                async with (
                    aclasync.open_device(0, backend=runtime) as dev,
                    dev.stream_pool(streams) as pool,
                ):

                    async def infer_async(n: int) -> int:
                        into: list[int] = []
                        async with pool.stream() as s:
                            s.launch(runtime.sim.launch_kernel, kernel(n, kernel_us, into))
                            await s.synchronize()
                        return into[0]

                    infer = infer_async
                    yield
            else:
                context, lanes = await anyio.to_thread.run_sync(_raw_open, runtime, streams)

                def blocking(n: int) -> int:
                    rt = runtime.rt
                    expect(rt.set_context(context), "acl.rt.set_context")
                    stream = lanes.get()
                    try:
                        into: list[int] = []
                        ret = runtime.sim.launch_kernel(kernel(n, kernel_us, into), stream)
                        expect(ret, "acl.sim.launch_kernel")
                        expect(rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
                        return into[0]
                    finally:
                        lanes.put(stream)

                async def infer_naive(n: int) -> int:
                    return await anyio.to_thread.run_sync(blocking, n)

                infer = infer_naive
                yield
        finally:
            runtime.sim.close()

    async def infer_route(request: Request) -> Response:
        n = int(json.loads(await request.body())["n"])
        result = await infer(n)
        threads_max[0] = max(threads_max[0], threading.active_count())
        return JSONResponse({"n": n, "result": result})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def stats(request: Request) -> Response:
        return JSONResponse({"threads_max": threads_max[0]})

    return Starlette(
        routes=[
            Route("/infer", infer_route, methods=["POST"]),
            Route("/health", health),
            Route("/stats", stats),
        ],
        lifespan=lifespan,
    )


async def _unset(n: int) -> int:
    raise RuntimeError("the app has not started")


def _raw_open(runtime: Any, streams: int) -> tuple[int, queue.Queue[int]]:
    rt = runtime.rt
    expect(rt.set_device(0), "acl.rt.set_device")
    context, ret = rt.get_context()
    expect(ret, "acl.rt.get_context")
    lanes: queue.Queue[int] = queue.Queue()
    for _ in range(streams):
        stream, ret = rt.create_stream_with_config(0, 0)
        expect(ret, "acl.rt.create_stream_with_config")
        lanes.put(stream)
    return int(context), lanes


def main(argv: list[str] | None = None) -> None:
    """Serve the app on uvicorn (asyncio) until SIGTERM; blocks."""
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["aclasync", "naive"], required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--kernel-us", type=float, default=2000.0)
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(2048)
    print(f"serving on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    app = build_app(args.mode, args.streams, args.kernel_us)
    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
