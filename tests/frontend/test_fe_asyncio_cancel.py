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
import numpy as np
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


async def _cancelled_behind_a_held_worker(
    dev: aclasync.Device, awaitable: Awaitable[Any]
) -> BaseException:
    """Run *awaitable* as a task while a gated call holds the worker, cancel it with
    asyncio's own ``task.cancel()`` before the worker answers, then let the worker go;
    return the ``CancelledError`` the task raised."""
    held = threading.Event()
    holding = asyncio.ensure_future(dev.call(lambda: held.wait(20)))
    task = asyncio.ensure_future(awaitable)
    await asyncio.sleep(0)  # its job is queued behind the held call
    await asyncio.sleep(0)
    task.cancel()
    held.set()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    await holding
    return caught.value


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
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            event = await dev.default_stream.record_event()
            await event.aclose()  # the device's event pool holds one from now on
            await dev.synchronize()
            before = rt.sim.live_objects()
            await _cancelled_behind_a_held_worker(dev, create(dev))
            await dev.synchronize()  # the release's job, queued by the cancelled task, ran
            assert rt.sim.live_objects() == before


async def test_a_stream_close_cancelled_by_asyncio_closes_it_and_its_failure_goes_on(
    rt: Any,
) -> None:
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            stream = await dev.create_stream()
            stream.launch(failing_call(AICORE))
            await _cancelled_behind_a_held_worker(dev, stream.aclose(force=True))
            assert stream.closed
            assert rt.sim.live_objects()["streams"] == 0
            with pytest.raises(aclasync.AclError) as caught:  # rule 6: the device's
                await dev.synchronize()
            assert caught.value.code == AICORE


async def test_a_device_close_cancelled_by_asyncio_closes_it_and_notes_its_failure(
    rt: Any,
) -> None:
    with anyio.fail_after(20):
        dev = await aclasync.open_device(0, backend=rt)
        dev.default_stream.launch(failing_call(AICORE))
        cancelled = await _cancelled_behind_a_held_worker(dev, dev.aclose())
    assert dev.closed
    assert any("507015" in note for note in getattr(cancelled, "__notes__", []))
    assert rt.sim.live_objects()["device_refs"] == 0
    assert not any(t.name == "aclasync-device0" for t in threading.enumerate())


async def test_a_model_close_cancelled_by_asyncio_releases_everything(
    rt: Any, tmp_path: Path
) -> None:
    # It gave up at its first await, having forgotten its buffer sets: the model, its
    # datasets and its memory stayed on the device, and a second close did nothing.
    path = rt.sim.register_model(
        tmp_path / "m.om",
        inputs=[("x", (4,), "float32")],
        outputs=[("y", (4,), "float32")],
        fn=lambda x: x,
    )
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as stream:
            before = rt.sim.live_objects()
            model = await dev.load_model(path)
            await model.run(stream, np.zeros(4, dtype=np.float32))
            await _cancelled_behind_a_held_worker(dev, model.aclose())
            await dev.synchronize()
            assert model.closed
            after = rt.sim.live_objects()
            after["events"] = before["events"]  # (the device's event pool filled meanwhile)
            assert after == before
