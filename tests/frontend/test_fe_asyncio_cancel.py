"""asyncio's own cancellation (``task.cancel()``: ``asyncio.timeout``, a ``TaskGroup``, a
server's shutdown) during a creation leaks nothing.

anyio's shields stop anyio's cancellations but not asyncio's own: a creation cut short
that way left what the worker went on to make (memory, a stream, an event, a loaded
model) on the device until the device closed, and a close cut short that way dropped
the failures it found (found by an adversarial review). The
worker is held by a gated call while the creation is cancelled, so the cancellation
always lands before the worker has answered. Runs on asyncio's loops only.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from frontend_support import failing_call

import aclasync

AICORE = 507015  # ACL_ERROR_RT_AICORE_EXCEPTION

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize(
        "anyio_backend",
        [
            pytest.param(("asyncio", {}), id="asyncio"),
            pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        ],
    ),
]


def _creations(path: str) -> dict[str, Callable[[aclasync.Device], Awaitable[Any]]]:
    return {
        "alloc": lambda dev: dev.alloc(1024),
        "alloc_host": lambda dev: dev.alloc_host(1024),
        "create_stream": lambda dev: dev.create_stream(),
        "record_event": lambda dev: dev.default_stream.record_event(),
        "load_model": lambda dev: dev.load_model(path),
    }


@pytest.mark.parametrize(
    "what", ["alloc", "alloc_host", "create_stream", "record_event", "load_model"]
)
async def test_a_creation_cancelled_by_asyncio_leaves_nothing_behind(
    rt: Any, tmp_path: Path, what: str
) -> None:
    path = str(
        rt.sim.register_model(
            tmp_path / "m.om",
            inputs=[("x", (4,), "float32")],
            outputs=[("y", (4,), "float32")],
            fn=lambda x: x,
        )
    )
    create = _creations(path)[what]
    held = threading.Event()
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            event = await dev.default_stream.record_event()
            await event.aclose()  # the device's event pool holds one from now on
            await dev.synchronize()
            before = rt.sim.live_objects()
            holding = asyncio.ensure_future(dev.call(lambda: held.wait(20)))
            task = asyncio.ensure_future(create(dev))
            await asyncio.sleep(0)  # the creation's call is queued behind the held one
            await asyncio.sleep(0)
            task.cancel()
            held.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            await holding
            await dev.synchronize()  # the release's job, queued by the cancelled task, ran
            assert rt.sim.live_objects() == before


async def test_a_stream_close_cancelled_by_asyncio_closes_it_and_its_failure_goes_on(
    rt: Any,
) -> None:
    held = threading.Event()
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            stream = await dev.create_stream()
            stream.launch(failing_call(AICORE))
            holding = asyncio.ensure_future(dev.call(lambda: held.wait(20)))
            closing = asyncio.ensure_future(stream.aclose(force=True))
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            closing.cancel()
            held.set()
            with pytest.raises(asyncio.CancelledError):
                await closing
            await holding
            assert stream.closed
            assert rt.sim.live_objects()["streams"] == 0
            with pytest.raises(aclasync.AclError) as caught:  # rule 6: the device's
                await dev.synchronize()
            assert caught.value.code == AICORE


async def test_a_device_close_cancelled_by_asyncio_closes_it_and_notes_its_failure(
    rt: Any,
) -> None:
    held = threading.Event()
    with anyio.fail_after(20):
        dev = await aclasync.open_device(0, backend=rt)
        dev.default_stream.launch(failing_call(AICORE))
        holding = asyncio.ensure_future(dev.call(lambda: held.wait(20)))
        closing = asyncio.ensure_future(dev.aclose())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        closing.cancel()
        held.set()
        with pytest.raises(asyncio.CancelledError) as caught:
            await closing
        await holding
    assert dev.closed
    assert any("507015" in note for note in getattr(caught.value, "__notes__", []))
    assert rt.sim.live_objects()["device_refs"] == 0
    assert not any(t.name == "aclasync-device0" for t in threading.enumerate())
