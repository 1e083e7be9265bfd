"""An asyncio HTTP service that awaits a (simulated) Ascend device without blocking.

``GET /infer?n=K`` runs a kernel on the device that computes the sum of the squares of
0 .. K-1 in device memory, copies the answer home and returns it; the kernel takes
``--kernel-ms`` of device time. The handler *awaits* the device, so while requests wait
the event loop keeps serving: ``GET /health`` answers at once, however many inferences
are in flight. Requests share a small pool of streams, which run concurrently.

Standard library only (``asyncio.start_server`` and a minimal HTTP/1.1 parser)::

    python examples/web_service.py --port 8080
    curl 'http://127.0.0.1:8080/infer?n=1000'
    curl  http://127.0.0.1:8080/health
    python examples/web_service.py --self-test
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

import aclasync
import aclasync.sim
from aclasync.sim import Kernel

MAX_N = 1_000_000  # keeps the sum of squares within int64
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


@dataclasses.dataclass
class Lane:
    """A stream with its own device and pinned host buffer for one answer."""

    stream: aclasync.Stream
    dev_out: aclasync.DeviceBuffer
    host_out: aclasync.HostBuffer


class InferenceService:
    """The device side: a pool of stream lanes that requests borrow one at a time."""

    def __init__(self, device: aclasync.Device, lanes: list[Lane], kernel_ms: float) -> None:
        self._device = device
        self._kernel_us = kernel_ms * 1000.0
        self._idle: asyncio.Queue[Lane] = asyncio.Queue()
        for lane in lanes:
            self._idle.put_nowait(lane)

    async def infer(self, n: int) -> int:
        """Return sum(k * k for k in range(n)), computed by a kernel on the device."""
        lane = await self._idle.get()
        try:
            out = lane.dev_out.ptr
            sim = self._device.acl.sim

            def body() -> None:
                values = np.arange(n, dtype=np.int64)
                sim.device_array(out, 1, np.int64)[0] = np.dot(values, values)

            lane.stream.launch(sim.launch_kernel, Kernel(duration_us=self._kernel_us, fn=body))
            lane.stream.memcpy(lane.host_out, lane.dev_out)
            # The event loop is free while the device works: this only awaits.
            await lane.stream.synchronize(timeout=30.0)
            return int(lane.host_out.view(np.int64)[0])
        finally:
            self._idle.put_nowait(lane)


@contextlib.asynccontextmanager
async def open_service(lanes: int, kernel_ms: float) -> AsyncIterator[InferenceService]:
    """Open a simulated device with *lanes* streams; close everything on exit."""
    runtime = aclasync.sim.create(device_count=1)
    try:
        async with aclasync.open_device(0, backend=runtime) as device:
            pool = []
            for _ in range(lanes):
                stream = await device.create_stream()
                pool.append(Lane(stream, await device.alloc(8), await device.alloc_host(8)))
            yield InferenceService(device, pool, kernel_ms)
    finally:
        runtime.sim.close()


async def handle(
    service: InferenceService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Serve one HTTP/1.1 request on a connection, then close it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        status, body = await route(service, method, target)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        status, body = 400, {"error": "malformed request"}
    payload = json.dumps(body).encode()
    writer.write(
        f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
        + payload
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


async def route(service: InferenceService, method: str, target: str) -> tuple[int, Any]:
    """Answer ``method target`` with a status and a JSON-ready body."""
    url = urlsplit(target)
    if url.path not in ("/health", "/infer"):
        return 404, {"error": f"no route {url.path}"}
    if method != "GET":
        return 405, {"error": "only GET"}
    if url.path == "/health":
        return 200, {"status": "ok"}
    values = parse_qs(url.query).get("n", [])
    if len(values) != 1 or not values[0].isdigit() or int(values[0]) > MAX_N:
        return 400, {"error": f"n must be one integer in 0..{MAX_N}"}
    n = int(values[0])
    started = time.perf_counter()
    result = await service.infer(n)
    return 200, {"n": n, "result": result, "ms": round((time.perf_counter() - started) * 1e3, 2)}


async def serve(host: str, port: int, lanes: int, kernel_ms: float) -> None:
    """Serve forever on *host*:*port*."""
    async with open_service(lanes, kernel_ms) as service:
        server = await asyncio.start_server(
            lambda r, w: handle(service, r, w), host, port, backlog=1024
        )
        async with server:
            print(f"serving on http://{host}:{port} (GET /infer?n=K, GET /health)", flush=True)
            await server.serve_forever()


async def get(port: int, target: str) -> tuple[int, Any, float]:
    """Send ``GET target`` to 127.0.0.1:*port*; return status, JSON body and seconds."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = response.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body), time.perf_counter() - started


async def self_test(requests: int, lanes: int, kernel_ms: float, health_limit_ms: float) -> bool:
    """Fire concurrent /infer requests and /health probes at a fresh server; check both."""
    async with open_service(lanes, kernel_ms) as service:
        server = await asyncio.start_server(lambda r, w: handle(service, r, w), "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            started = time.perf_counter()
            inferences = [
                asyncio.ensure_future(get(port, f"/infer?n={1000 * (i + 1)}"))
                for i in range(requests)
            ]
            probes = []
            while not all(task.done() for task in inferences):
                probes.append(await get(port, "/health"))
                await asyncio.sleep(0.005)  # probe pacing, not synchronisation
            answers = [task.result() for task in inferences]
            wall = time.perf_counter() - started
            bad_status = await get(port, "/infer?n=x")
    wrong = [
        i
        for i, (status, body, _) in enumerate(answers)
        if status != 200 or body["result"] != sum(k * k for k in range(1000 * (i + 1)))
    ]
    latencies = sorted(seconds * 1e3 for _, _, seconds in probes)
    sequential = requests * kernel_ms / 1e3
    checks = {
        f"{requests} /infer answers correct": not wrong,
        f"{len(probes)} /health probes all 200 during inference": bool(probes)
        and all(status == 200 for status, _, _ in probes),
        f"/health max latency {max(latencies, default=0):.1f} ms < {health_limit_ms} ms": bool(
            latencies
        )
        and max(latencies) < health_limit_ms,
        f"wall {wall:.2f} s < sequential device time {sequential:.2f} s": wall < sequential,
        "malformed n answered 400": bad_status[0] == 400,
    }
    print(
        f"{requests} inferences in {wall:.3f} s on {lanes} streams; /health median "
        f"{statistics.median(latencies) if latencies else float('nan'):.2f} ms"
    )
    for what, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAIL'}] {what}")
    return all(checks.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--lanes", type=int, default=4, help="concurrent streams (default 4)")
    parser.add_argument("--kernel-ms", type=float, default=100.0, help="device time per request")
    parser.add_argument("--self-test", action="store_true", help="load-test a private server")
    parser.add_argument("--requests", type=int, default=20, help="self-test /infer requests")
    parser.add_argument(
        "--health-limit-ms", type=float, default=50.0, help="self-test /health latency bound"
    )
    args = parser.parse_args(argv)
    if args.lanes < 1 or args.requests < 1 or args.kernel_ms < 0:
        parser.error("--lanes and --requests must be >= 1, --kernel-ms >= 0")
    if args.self_test:
        ok = asyncio.run(self_test(args.requests, args.lanes, args.kernel_ms, args.health_limit_ms))
        return 0 if ok else 1
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.host, args.port, args.lanes, args.kernel_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
