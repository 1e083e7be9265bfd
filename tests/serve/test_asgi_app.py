"""The ASGI example's app in process (its lifespan entered here, requests through
httpx's ASGI transport), on every loop: what a request sees when the device fails, when
its client hangs up, and when a drain meets a kernel that does not end. The model seam
(``launch_model``) is swapped for a kernel that faults or is held behind a gate, so
nothing races time.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from serve_support import EXAMPLE

from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio

AICORE_EXCEPTION = 507015
FAULT, HELD = 13, 14  # the n that fault, or are held, on the device
LIMIT_S = 10.0


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("asgi_service_in_process", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


class HeldKernels:
    """The gate the held model waits behind: ``started`` once one runs."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.opened = threading.Event()

    def body(self) -> None:
        self.started.set()
        self.opened.wait(LIMIT_S)


@pytest.fixture
def gate() -> Iterator[HeldKernels]:
    held = HeldKernels()
    yield held
    held.opened.set()  # never leave a simulator thread held


@pytest.fixture
def example(gate: HeldKernels, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example, its model faulting or held by *n*."""
    module = load_example()
    normal = module.launch_model

    def launch_model(stream: Any, out: Any, n: int, ms: float) -> None:
        launch = stream.device.acl.sim.launch_kernel
        if n == FAULT:
            stream.launch(launch, Kernel(error=AICORE_EXCEPTION))
        elif n == HELD:
            stream.launch(launch, Kernel(fn=gate.body))
        else:
            normal(stream, out, n, ms)

    monkeypatch.setattr(module, "launch_model", launch_model)
    return module


@pytest.fixture
async def served(example: ModuleType) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The app (one device, one stream) with its lifespan entered, and a client."""
    config = example.ServiceConfig(
        devices=1, streams_per_device=1, kernel_ms=0.1, drain_s=0.2, linger_s=0.0
    )
    app = example.create_app(config)
    with anyio.fail_after(LIMIT_S):
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                yield app, client


def infer_scope() -> dict[str, Any]:
    """The ASGI scope of a ``POST /infer``, for a request driven message by message."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/infer",
        "raw_path": b"/infer",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


async def responses(client: httpx.AsyncClient) -> dict[str, float]:
    lines = (await client.get("/metrics")).text.splitlines()
    prefix = "aclasync_serve_responses_total{status="
    return {
        line[len(prefix) + 1 : line.index('"}')]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith(prefix)
    }


async def test_a_device_failure_is_a_counted_500_and_the_service_goes_on(
    served: tuple[Any, httpx.AsyncClient],
) -> None:
    _, client = served
    failed = await client.post("/infer", json={"n": FAULT})
    assert failed.status_code == 500
    assert "507015" in failed.json()["error"]
    again = await client.post("/infer", json={"n": 5})
    assert (again.status_code, again.json()["result"]) == (200, 30)
    assert await responses(client) == {"200": 1.0, "500": 1.0}


async def test_a_client_that_hangs_up_mid_body_is_answered_quietly(
    served: tuple[Any, httpx.AsyncClient],
) -> None:
    # Starlette raises ClientDisconnect from request.body(): it escaped the handler
    # as "Exception in ASGI application", with a traceback in the server's log.
    app, client = served
    messages = iter(
        [
            {"type": "http.request", "body": b'{"n"', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = infer_scope()
    await app(scope, receive, send)
    assert sent[0]["status"] == 400
    assert await responses(client) == {"400": 1.0}


async def test_a_drain_answers_a_request_whose_kernel_never_ends(
    served: tuple[Any, httpx.AsyncClient], gate: HeldKernels
) -> None:
    # Cancelled at the drain's deadline, the request still waited (shielded) for its
    # stream's work: its 503 came only when the kernel ended. The drain now
    # force-closes the pool's streams at the deadline.
    app, client = served
    service = app.state.service
    answers: list[int] = []
    answered = anyio.Event()

    async def request() -> None:
        answers.append((await client.post("/infer", json={"n": HELD})).status_code)
        answered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(request)
        assert await anyio.to_thread.run_sync(gate.started.wait, LIMIT_S)
        tg.start_soon(service.drain)
        with anyio.fail_after(LIMIT_S):
            await answered.wait()  # the gate is shut: only the drain can answer it
        assert answers == [503]
        assert not gate.opened.is_set()
        gate.opened.set()  # the devices' close (in the drain) waits for the kernel


async def test_a_request_whose_body_comes_after_the_drain_closed_the_pool_is_a_503(
    served: tuple[Any, httpx.AsyncClient], gate: HeldKernels
) -> None:
    # It passed the draining check, then read its body while the drain's deadline
    # force-closed the pool: ClosedResourceError escaped (a bare, uncounted 500).
    app, client = served
    service = app.state.service
    body_may_come, answered = anyio.Event(), anyio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await body_may_come.wait()
        return {"type": "http.request", "body": b'{"n": 5}', "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        answered.set()

    scope = infer_scope()
    held = anyio.Event()

    async def held_request() -> None:
        await client.post("/infer", json={"n": HELD})
        held.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(held_request)
        assert await anyio.to_thread.run_sync(gate.started.wait, LIMIT_S)
        tg.start_soon(app, scope, receive, send)
        await anyio.wait_all_tasks_blocked()  # it waits for its body
        tg.start_soon(service.drain)
        with anyio.fail_after(LIMIT_S):
            await held.wait()  # the drain's deadline passed: the pool is closed
        body_may_come.set()
        with anyio.fail_after(LIMIT_S):
            await answered.wait()
        gate.opened.set()
    assert sent[0]["status"] == 503


async def test_every_devices_failure_is_logged_at_shutdown(
    example: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    # The pool's close raises one device's failure with the others as its notes: one
    # line was logged, the others dropped.
    config = example.ServiceConfig(
        devices=2, streams_per_device=1, kernel_ms=0.1, drain_s=0.2, linger_s=0.0
    )
    app = example.create_app(config)
    with anyio.fail_after(LIMIT_S):
        async with app.router.lifespan_context(app):
            for device in app.state.service.pool.devices:  # failures nobody awaits
                device.default_stream.launch(
                    device.acl.sim.launch_kernel, Kernel(error=AICORE_EXCEPTION)
                )
    logged = [r.getMessage() for r in caplog.records if "at shutdown" in r.getMessage()]
    assert len(logged) == 2
    assert all("507015" in line for line in logged)
