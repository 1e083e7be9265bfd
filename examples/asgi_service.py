"""An ASGI inference service (Starlette) on a pool of simulated Ascend devices.

Routes:

- ``POST /infer`` with ``{"n": K}`` borrows a stream from an ``aclasync.DevicePool``,
  runs a kernel that computes ``sum(k * k for k in range(K))`` in device memory, copies
  the answer home and returns ``{"n": K, "result": ..., "device": ...}``.
- ``GET /health`` answers ``{"status": "ok"}`` at once (503 while shutting down).
- ``GET /metrics``: Prometheus text format (requests in flight, pool grants and waits,
  grants out of arrival order, per-device streams in flight and busy time).

Run it from the repository root, after ``pip install -e '.[serve]'`` (add ``uvloop``,
``'.[serve,uvloop]'``, for ``--loop uvloop``)::

    python examples/asgi_service.py --server uvicorn --loop asyncio --port 8000
    python examples/asgi_service.py --server uvicorn --loop uvloop --port 8000
    python examples/asgi_service.py --server hypercorn --loop trio --port 8000

uvicorn runs on asyncio or uvloop; hypercorn runs here on trio only (through
``hypercorn.trio``), so ``--server hypercorn`` with another loop is a usage error.

``--port 0`` picks a free port; the first line on stdout is ``serving on http://HOST:PORT``.

A request whose kernel fails gets a 500 (its own synchronize raised the failure, so the
stream goes back to the pool clean and serves the next request). Graceful
shutdown on SIGTERM or Ctrl-C: new requests get 503 (with ``Connection: close``),
requests in flight finish within ``--drain-s`` or get 503 (their streams force-closed),
and once none is left
and no request has come for ``--linger-s`` (so that clients notice) the server stops
listening and exits 0.
The app object (``asgi_service:app``, configured by ``ACLASYNC_SERVE_*`` environment
variables) also runs under the plain ``uvicorn``/``hypercorn`` commands, but then the
server's own shutdown applies.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import logging
import math
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import numpy as np

try:
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route
except ImportError as exc:  # said plainly, not as a traceback
    raise SystemExit(
        f"asgi_service.py needs the serve extra: pip install -e '.[serve]' ({exc})"
    ) from None

import aclasync
import aclasync.sim
from aclasync.sim import Kernel, SimAcl

MAX_N = 1_000_000  # keeps the sum of squares within int64
MAX_DEVICES = 64  # the simulator's (and CANN's) limit
MAX_STREAMS = 500  # per device: within every simulated SoC's stream limit (512 at least)
MAX_KERNEL_MS = 60_000.0  # a minute, as the command line's demo allows
MAX_S = 3600.0  # the longest drain or linger
log = logging.getLogger("aclasync.serve")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """How the service runs; ``from_env`` reads ``ACLASYNC_SERVE_*`` variables."""

    devices: int = 2
    streams_per_device: int = 4
    kernel_ms: float = 10.0
    drain_s: float = 5.0
    linger_s: float = 0.5

    def __post_init__(self) -> None:
        """Refuse, with a ``ValueError`` naming it, a setting the service cannot run with."""
        for name, top in (("devices", MAX_DEVICES), ("streams_per_device", MAX_STREAMS)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ValueError(f"{name} must be an int from 1 to {top}, got {value!r}")
        for name, top in (("kernel_ms", MAX_KERNEL_MS), ("drain_s", MAX_S), ("linger_s", MAX_S)):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
            if value > top:
                raise ValueError(f"{name} must be at most {top:g}, got {value!r}")

    @classmethod
    def from_env(cls) -> ServiceConfig:
        """Read ``ACLASYNC_SERVE_DEVICES``, ``_STREAMS``, ``_KERNEL_MS``, ``_DRAIN_S`` and
        ``_LINGER_S`` (unset: the defaults); ``ValueError`` naming a bad one."""
        settings: dict[str, Any] = {}
        fields = {
            "DEVICES": ("devices", int),
            "STREAMS": ("streams_per_device", int),
            "KERNEL_MS": ("kernel_ms", float),
            "DRAIN_S": ("drain_s", float),
            "LINGER_S": ("linger_s", float),
        }
        for suffix, (name, kind) in fields.items():
            raw = os.environ.get(f"ACLASYNC_SERVE_{suffix}")
            if raw is None:
                continue
            try:
                settings[name] = kind(raw)
                cls(**{name: settings[name]})  # checked alone, to name the variable
            except ValueError as exc:
                raise ValueError(f"ACLASYNC_SERVE_{suffix}={raw!r}: {exc}") from None
        return cls(**settings)


class InferenceService:
    """The device side: the pool, per-stream buffers, in-flight tracking and draining."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.pool: aclasync.DevicePool | None = None
        self.draining = False
        self.requests: dict[int, int] = {}
        self._buffers: dict[aclasync.Stream, tuple[aclasync.DeviceBuffer, aclasync.HostBuffer]]
        self._buffers = {}
        self._in_flight: set[anyio.CancelScope] = set()
        self._idle = anyio.Event()
        self.ready = anyio.Event()
        self.last_request = -math.inf

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Open a fresh simulated runtime and the device pool; close both on exit."""
        runtime = aclasync.sim.create(device_count=self.config.devices)
        try:
            async with aclasync.DevicePool(
                range(self.config.devices),
                backend=runtime,
                streams_per_device=self.config.streams_per_device,
            ) as pool:
                self.pool = pool
                self.ready.set()
                try:
                    yield
                finally:
                    await self.close_pool()
        finally:
            self.pool = None
            runtime.sim.close()

    async def close_pool(self, timeout: float | None = None) -> None:
        """Close the pool and its devices (see ``DevicePool.aclose``); the failures their
        close raises (work nobody awaited) are logged, one line each, not a traceback."""
        if self.pool is None:
            return
        try:
            await self.pool.aclose(timeout=timeout)
        except Exception as exc:
            failures = getattr(exc, "exceptions", [exc])
            if not all(isinstance(failure, aclasync.AclError) for failure in failures):
                raise
            for failure in failures:  # the others come as its notes (docs/errors.md)
                for line in [str(failure), *getattr(failure, "__notes__", ())]:
                    log.error("device failure reported at shutdown: %s", line)

    @contextlib.contextmanager
    def tracked(self) -> Iterator[anyio.CancelScope]:
        """Count a request in flight; draining gives it a deadline through its scope."""
        scope = anyio.CancelScope()
        if self.draining:
            scope.deadline = anyio.current_time() + self.config.drain_s
        self._in_flight.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._in_flight.discard(scope)
            if self.draining and not self._in_flight:
                self._idle.set()

    async def infer(self, n: int) -> tuple[int, int]:
        """Return ``(sum of squares below n, device id)``, computed on a pooled stream."""
        assert self.pool is not None
        async with self.pool.stream() as stream:
            dev_out, host_out = await self._buffers_for(stream)
            launch_model(stream, dev_out, n, self.config.kernel_ms)
            stream.memcpy(host_out, dev_out)
            await stream.synchronize()
            return int(host_out.view(np.int64)[0]), stream.device.id

    async def drain(self) -> None:
        """Refuse new work, let requests in flight finish within ``drain_s``, then linger.

        Lingering lasts until no request has arrived for ``linger_s`` (at most
        ``drain_s + linger_s`` after the start), so that clients still sending on
        keep-alive connections get their 503 before the server closes those connections.
        """
        self.draining = True
        started = anyio.current_time()
        deadline = started + self.config.drain_s
        for scope in self._in_flight:
            scope.deadline = min(scope.deadline, deadline)
        if self._in_flight:
            with anyio.move_on_after(self.config.drain_s):
                await self._idle.wait()
        if self._in_flight:
            # Cancelled at the deadline, a request still waits (shielded) for its
            # stream's work before the pool lends the stream again: a hung kernel would
            # hold its 503 for ever. Closing the pool at once force-closes the streams
            # (their queued work is dropped; the devices' close waits for running
            # kernels, but the requests are answered first).
            await self.close_pool(timeout=0)
            await self._idle.wait()
        latest = deadline + self.config.linger_s
        while True:
            now = anyio.current_time()
            quiet_until = self.last_request + self.config.linger_s
            if now >= min(quiet_until, latest):
                return
            await anyio.sleep(min(quiet_until, latest) - now)

    def seen(self) -> None:
        """Note that a request arrived (for the quiet period of ``drain``)."""
        self.last_request = anyio.current_time()

    async def _buffers_for(
        self, stream: aclasync.Stream
    ) -> tuple[aclasync.DeviceBuffer, aclasync.HostBuffer]:
        buffers = self._buffers.get(stream)
        if buffers is None:
            device = stream.device
            buffers = (await device.alloc(8), await device.alloc_host(8))
            self._buffers[stream] = buffers
        return buffers


def launch_model(stream: aclasync.Stream, out: aclasync.DeviceBuffer, n: int, ms: float) -> None:
    """Queue the "model" on *stream*: the sum of squares of ``0 .. n-1`` into *out*.

    The seam for a real model: once ``Device.load_model`` exists this becomes
    ``model.launch(stream, inputs, outputs)`` (or ``await model.run(stream, x)``).
    """
    acl = stream.device.acl
    if not isinstance(acl, SimAcl):  # also tells the type checker acl.sim exists
        raise RuntimeError("this stand-in model runs on the simulator only")
    sim = acl.sim
    address = out.ptr

    def body() -> None:
        values = np.arange(n, dtype=np.int64)
        sim.device_array(address, 1, np.int64)[0] = np.dot(values, values)

    stream.launch(sim.launch_kernel, Kernel(duration_us=ms * 1000.0, fn=body))


def create_app(config: ServiceConfig) -> Starlette:
    """Build the Starlette app; its lifespan opens and closes the device pool."""
    service = InferenceService(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with service.running():
            yield

    def answer(status: int, body: Any) -> JSONResponse:
        service.requests[status] = service.requests.get(status, 0) + 1
        headers = {"Connection": "close"} if service.draining else None
        if status == 503:
            headers = {**(headers or {}), "Retry-After": "1"}
        return JSONResponse(body, status_code=status, headers=headers)

    async def infer(request: Request) -> Response:
        service.seen()
        if service.draining:
            return answer(503, {"error": "shutting down"})
        try:
            payload = json.loads(await request.body())
            n = payload["n"]
        except (ValueError, TypeError, KeyError, RecursionError):  # nested too deep: bad too
            return answer(400, {"error": 'expected a JSON object {"n": <int>}'})
        except ClientDisconnect:  # it hung up before its body came: nobody to answer
            return answer(400, {"error": "the client disconnected before its body arrived"})
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_N:
            return answer(400, {"error": f"n must be an integer in 0..{MAX_N}"})
        try:
            with service.tracked() as scope:
                result, device = await service.infer(n)
        except aclasync.AclError as exc:  # reported by its own sync: the stream goes on
            log.error("request n=%d: the device failed: %s", n, exc)
            return answer(500, {"error": f"the device failed: {exc}"})
        except anyio.ClosedResourceError:  # the drain closed the pool as it came in
            if not service.draining:
                raise
            return answer(503, {"error": "shutting down"})
        if scope.cancelled_caught:
            return answer(503, {"error": "shutting down: not finished within the deadline"})
        return answer(200, {"n": n, "result": result, "device": device})

    async def health(request: Request) -> Response:
        service.seen()
        if service.draining:
            return answer(503, {"status": "draining"})
        return JSONResponse({"status": "ok", "in_flight": service.in_flight})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(render_metrics(service), media_type="text/plain; version=0.0.4")

    app = Starlette(
        routes=[
            Route("/infer", infer, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.service = service
    return app


def render_metrics(service: InferenceService) -> str:
    """The service's counters in the Prometheus text exposition format."""
    lines: list[str] = []

    def metric(name: str, kind: str, doc: str, samples: list[tuple[str, float]]) -> None:
        lines.extend([f"# HELP {name} {doc}", f"# TYPE {name} {kind}"])
        lines.extend(f"{name}{labels} {value:g}" for labels, value in samples)

    metric(
        "aclasync_serve_requests_in_flight",
        "gauge",
        "Inference requests being served now.",
        [("", service.in_flight)],
    )
    metric(
        "aclasync_serve_responses_total",
        "counter",
        "Responses by HTTP status.",
        [(f'{{status="{code}"}}', count) for code, count in sorted(service.requests.items())],
    )
    if service.pool is None:
        return "\n".join(lines) + "\n"
    stats = service.pool.statistics()
    metric("aclasync_pool_grants_total", "counter", "Streams lent.", [("", stats.grants)])
    metric("aclasync_pool_waits_total", "counter", "Grants that had to queue.", [("", stats.waits)])
    metric(
        "aclasync_pool_grants_out_of_order_total",
        "counter",
        "Grants to a borrower that arrived after one served later (stays 0).",
        [("", stats.grants_out_of_order)],
    )
    metric("aclasync_pool_waiting", "gauge", "Borrowers queued now.", [("", stats.waiting)])
    metric(
        "aclasync_pool_streams_replaced_total",
        "counter",
        "Streams replaced after failed work.",
        [("", stats.replaced)],
    )
    devices = sorted(stats.capacity)
    metric(
        "aclasync_device_streams_in_flight",
        "gauge",
        "Streams of the device lent out now.",
        [(f'{{device="{d}"}}', stats.in_flight[d]) for d in devices],
    )
    metric(
        "aclasync_device_streams",
        "gauge",
        "Streams of the device in the pool.",
        [(f'{{device="{d}"}}', stats.capacity[d]) for d in devices],
    )
    metric(
        "aclasync_device_busy_stream_seconds_total",
        "counter",
        "Stream-seconds lent out; rate / streams = utilisation.",
        [(f'{{device="{d}"}}', round(stats.busy_seconds[d], 6)) for d in devices],
    )
    return "\n".join(lines) + "\n"


#: For ``uvicorn --app-dir examples asgi_service:app`` and the like.
if __name__ != "__main__":
    # Imported by a server (``uvicorn asgi_service:app``; hypercorn reads the module's
    # globals, so the app is built here): a bad ACLASYNC_SERVE_* variable fails the
    # import with a ValueError naming it. Run as a script, the options configure it.
    app = create_app(ServiceConfig.from_env())


# -- running it under a server, with the graceful shutdown described above -----------------


async def serve(args: argparse.Namespace, sock: socket.socket) -> None:
    """Serve on *sock* until SIGTERM/SIGINT, then drain and stop; blocks."""
    config = ServiceConfig(
        devices=args.devices,
        streams_per_device=args.streams,
        kernel_ms=args.kernel_ms,
        drain_s=args.drain_s,
        linger_s=args.linger_s,
    )
    application = create_app(config)
    service: InferenceService = application.state.service
    host, port = sock.getsockname()[:2]
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:
            if args.server == "uvicorn":
                stop = await start_uvicorn(tg, application, sock, args.access_log)
            else:
                stop = await start_hypercorn(tg, application, sock, args.access_log)
            print(f"serving on http://{host}:{port}", flush=True)
            async for signum in signals:
                print(f"{signal.Signals(signum).name}: draining", flush=True)
                break
            async with anyio.create_task_group() as draining:
                draining.start_soon(ignore_more, signals)
                await service.drain()
                draining.cancel_scope.cancel()
            stop()
    print("stopped", flush=True)


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket; ``port=0`` binds a free port.

    The protocol is named explicitly: asyncio sets TCP_NODELAY only on sockets whose
    ``proto`` is IPPROTO_TCP, and without it a keep-alive client waits ~40 ms (Nagle
    plus delayed ACK) for every response sent in two writes.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


async def ignore_more(signals: Any) -> None:
    """Consume further signals while draining: the first one already asked to stop."""
    async for signum in signals:
        print(f"{signal.Signals(signum).name}: already draining", flush=True)


async def start_uvicorn(
    tg: Any, application: Starlette, sock: socket.socket, access_log: bool
) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # serve() owns the signals, so that it can drain first

    config = uvicorn.Config(application, lifespan="on", log_level="info", access_log=access_log)
    server = Server(config)
    tg.start_soon(server.serve, [sock])
    # The socket already listens; serving starts once the lifespan opened the devices.
    await application.state.service.ready.wait()
    return lambda: setattr(server, "should_exit", True)


async def start_hypercorn(
    tg: Any, application: Starlette, sock: socket.socket, access_log: bool
) -> Any:
    import hypercorn.config
    import hypercorn.trio

    config = hypercorn.config.Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = "-" if access_log else None
    config.graceful_timeout = 1.0
    stopped = anyio.Event()
    await tg.start(
        lambda task_status: hypercorn.trio.serve(
            application,  # type: ignore[arg-type]
            config,
            shutdown_trigger=stopped.wait,
            task_status=task_status,
        )
    )
    return stopped.set


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["uvicorn", "hypercorn"], default="uvicorn")
    parser.add_argument("--loop", choices=["asyncio", "uvloop", "trio"], default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--streams", type=int, default=4, help="streams per device")
    parser.add_argument("--kernel-ms", type=float, default=10.0)
    parser.add_argument("--drain-s", type=float, default=5.0)
    parser.add_argument("--linger-s", type=float, default=0.5)
    parser.add_argument(
        "--access-log", action="store_true", help="log every request (costs CPU per request)"
    )
    args = parser.parse_args(argv)
    loop = args.loop or ("trio" if args.server == "hypercorn" else "asyncio")
    if (args.server == "hypercorn") != (loop == "trio"):
        parser.error(
            f"--server {args.server} --loop {loop}: uvicorn runs on asyncio or uvloop, "
            "hypercorn (served here with hypercorn.trio) runs on trio only"
        )
    missing = [
        name
        for name in (args.server, "uvloop" if loop == "uvloop" else "")
        if name and importlib.util.find_spec(name) is None
    ]
    if missing:
        extras = "serve,uvloop" if "uvloop" in missing else "serve"
        parser.error(
            f"--server {args.server} --loop {loop} needs {' and '.join(missing)}: "
            f"pip install -e '.[{extras}]'"
        )
    for name, top in (("devices", MAX_DEVICES), ("streams", MAX_STREAMS)):
        if not 1 <= getattr(args, name) <= top:
            parser.error(f"--{name} must be from 1 to {top}")
    for name, top in (("kernel_ms", MAX_KERNEL_MS), ("drain_s", MAX_S), ("linger_s", MAX_S)):
        value, option = getattr(args, name), f"--{name.replace('_', '-')}"
        if not (math.isfinite(value) and value >= 0):
            parser.error(f"{option} must be finite and >= 0, got {value}")
        if value > top:
            parser.error(f"{option} must be at most {top:g}, got {value}")
    backend = "trio" if loop == "trio" else "asyncio"
    options = {"use_uvloop": True} if loop == "uvloop" else {}
    try:  # before the service starts: a port in use is one line, not a traceback
        sock = listen(args.host, args.port)
    except OSError as exc:
        parser.exit(
            1, f"{parser.prog}: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}\n"
        )
    anyio.run(serve, args, sock, backend=backend, backend_options=options)  # the server closes it
    return 0


if __name__ == "__main__":
    sys.exit(main())
