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
import anyio.to_thread
import numpy as np
import pytest
from frontend_support import ProxyAcl, failing_call

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


@pytest.fixture
def model_file(rt: Any, tmp_path: Path) -> str:
    """The path of a registered model that copies its input."""
    return str(
        rt.sim.register_model(
            tmp_path / "m.om",
            inputs=[("x", (4,), "float32")],
            outputs=[("y", (4,), "float32")],
            fn=lambda x: x,
        )
    )


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


async def _cancelled_at_every_turn(dev: aclasync.Device, awaitable: Awaitable[Any]) -> None:
    """Run *awaitable* as a task queued behind a held worker and ``task.cancel()`` it
    at every turn of the loop until it ends, the worker let go meanwhile: whenever the
    task is suspended, before or after the worker answered, a cancellation reaches it
    before it resumes. It must end cancelled."""
    held = threading.Event()
    holding = asyncio.ensure_future(dev.call(lambda: held.wait(20)))
    task = asyncio.ensure_future(awaitable)
    loop = asyncio.get_running_loop()

    def cancel_again() -> None:
        if not task.done():
            task.cancel()
            loop.call_soon(cancel_again)

    await asyncio.sleep(0)  # its job is queued behind the held call
    loop.call_soon(cancel_again)
    held.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await holding


@pytest.mark.parametrize("how", ["behind a held worker", "at every turn"])
@pytest.mark.parametrize(
    "what", ["alloc", "alloc_host", "create_stream", "record_event", "load_model"]
)
async def test_a_creation_cancelled_by_asyncio_leaves_nothing_behind(
    rt: Any, model_file: str, what: str, how: str
) -> None:
    # At every turn: once the worker had answered, the creation took its answer through
    # one more checkpoint, and a cancellation there lost what was made (a model,
    # memory) until the device closed.
    create = _creations(model_file)[what]
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            event = await dev.default_stream.record_event()
            await event.aclose()  # the device's event pool holds one from now on
            await dev.synchronize()
            before = rt.sim.live_objects()
            if how == "at every turn":
                await _cancelled_at_every_turn(dev, create(dev))
            else:
                await _cancelled_behind_a_held_worker(dev, create(dev))
            await dev.synchronize()  # the release's job, queued by the cancelled task, ran
            assert rt.sim.live_objects() == before


async def test_a_run_cancelled_while_its_set_is_made_leaves_nothing_after_the_close(
    rt: Any, model_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The datasets the worker went on to make outlived the model's close.
    making, gate = threading.Event(), threading.Event()
    create_dataset = rt.mdl.create_dataset

    def held_create_dataset() -> Any:
        making.set()
        gate.wait(20)
        return create_dataset()

    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as stream:
            model = await dev.load_model(model_file)
            monkeypatch.setattr(rt.mdl, "create_dataset", held_create_dataset)
            run = asyncio.ensure_future(model.run(stream, np.zeros(4, np.float32)))
            await anyio.to_thread.run_sync(making.wait, 10)
            run.cancel()
            gate.set()
            with pytest.raises(asyncio.CancelledError):
                await run
            await model.aclose()
            assert rt.sim.model_objects() == dict.fromkeys(
                ("models", "model_descs", "datasets", "data_buffers"), 0
            )


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
    rt: Any, model_file: str
) -> None:
    # It gave up at its first await, having forgotten its buffer sets: the model, its
    # datasets and its memory stayed on the device, and a second close did nothing.
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as stream:
            before = rt.sim.live_objects()
            model = await dev.load_model(model_file)
            await model.run(stream, np.zeros(4, dtype=np.float32))
            await _cancelled_behind_a_held_worker(dev, model.aclose())
            await dev.synchronize()
            assert model.closed
            after = rt.sim.live_objects()
            after["events"] = before["events"]  # (the device's event pool filled meanwhile)
            assert after == before


class _HeldSetDevice(ProxyAcl):
    """``set_device`` waits for ``release`` (at most 5 s; ``timed_out`` says if it did)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.reached = threading.Event()
        self.release = threading.Event()
        self.timed_out = False

    def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
        if name == "set_device":
            self.reached.set()
            self.timed_out = not self.release.wait(5)


async def test_an_open_cancelled_by_asyncio_never_blocks_the_loop(rt: Any) -> None:
    # The cancelled open joined the worker's thread on the loop's thread, so the loop
    # stood still until set_device returned (on a card that can take seconds).
    acl = _HeldSetDevice(rt)
    with anyio.fail_after(20):
        task = asyncio.ensure_future(aclasync.open_device(0, backend=acl))
        await anyio.to_thread.run_sync(acl.reached.wait, 5)
        task.cancel()
        await asyncio.sleep(0.05)  # the loop goes on while set_device is held
        assert not acl.timed_out
        acl.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert rt.sim.live_objects()["device_refs"] == 0
    assert not any(t.name == "aclasync-device0" for t in threading.enumerate())


async def test_to_completion_keeps_the_callers_cancellation_whatever_the_work_raised() -> None:
    # What the work raised left the loop, and the cancellation it held was lost; and a
    # cancellation landing after the work ended, before the caller resumed, was taken
    # for the work's own (its result dropped, a pool's close skipped).
    from aclasync._loop import to_completion

    release = asyncio.Event()

    async def failing() -> None:
        await release.wait()
        raise ValueError("the work's own failure")

    task = asyncio.ensure_future(to_completion(failing))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    release.set()
    ended, cancelled = await task
    assert isinstance(cancelled, asyncio.CancelledError)
    with pytest.raises(ValueError, match="the work's own failure"):
        ended.unwrap()

    async def value() -> int:
        return 7

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(to_completion(value))
    loop.call_soon(task.cancel)  # after the work's task ended, before the caller resumed
    loop.call_soon(task.cancel)
    ended, cancelled = await task
    assert ended.unwrap() == 7
    assert isinstance(cancelled, asyncio.CancelledError)


@pytest.mark.parametrize("what", ["device pool", "model"])
async def test_a_close_cancelled_at_every_turn_closes_everything(
    rt: Any, model_file: str, what: str
) -> None:
    with anyio.fail_after(20):
        if what == "device pool":
            pool = aclasync.DevicePool([0, 1], backend=rt, streams_per_device=2)
            await pool.__aenter__()
            await _cancelled_at_every_turn(pool.devices[0], pool.aclose())
            assert all(device.closed for device in pool.devices)
        else:
            async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as stream:
                model = await dev.load_model(model_file)
                await model.run(stream, np.zeros(4, dtype=np.float32))
                await _cancelled_at_every_turn(dev, model.aclose())
                assert model.closed
                assert rt.sim.model_objects()["models"] == 0
    assert {k: v for k, v in rt.sim.live_objects().items() if v} == {}


async def test_a_failed_release_of_a_cancelled_creation_is_a_note_on_the_cancellation(
    rt: Any,
) -> None:
    # The release's AclError replaced the cancellation.
    class FailingFree(ProxyAcl):
        def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
            if name == "free":
                self.inner.rt.free(*args)
                raise aclasync.AclError.from_status(107000, "acl.rt.free")

    acl = FailingFree(rt)
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=acl) as dev:
            cancelled = await _cancelled_behind_a_held_worker(dev, dev.alloc(1024))
    assert any("107000" in note for note in getattr(cancelled, "__notes__", []))


async def test_a_run_cancelled_while_its_set_failed_to_be_made_raises_the_cancellation(
    rt: Any, model_file: str
) -> None:
    # The making's AclError (no stream left: 207005) replaced the cancellation, so an
    # asyncio.timeout around the run raised it instead of TimeoutError.
    class HeldStreamMaking(ProxyAcl):
        def __init__(self, inner: Any) -> None:
            super().__init__(inner)
            self.armed, self.reached, self.release = False, threading.Event(), threading.Event()

        def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
            if self.armed and name == "create_stream_with_config":
                self.reached.set()
                self.release.wait(20)
                raise aclasync.AclError.from_status(207005, "acl.rt.create_stream_with_config")

    acl = HeldStreamMaking(rt)
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=acl) as dev, dev.create_stream() as stream:
            model = await dev.load_model(model_file)
            acl.armed = True
            run = asyncio.ensure_future(model.run(stream, np.zeros(4, np.float32)))
            await anyio.to_thread.run_sync(acl.reached.wait, 10)
            run.cancel()
            await asyncio.sleep(0.01)
            acl.release.set()
            with pytest.raises(asyncio.CancelledError):
                await run
            acl.armed = False
            await model.aclose()


async def test_a_model_close_cancelled_keeps_its_cancellation_when_a_release_fails(
    rt: Any, tmp_path: Path
) -> None:
    # A buffer's failed release made the close raise that AclError: the cancellation
    # was lost (and what the close had found with it).
    started, gate = threading.Event(), threading.Event()

    def held(x: Any) -> Any:
        started.set()
        gate.wait(20)
        return x

    class FailingFree(ProxyAcl):
        armed = False

        def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
            if self.armed and name == "free":
                self.inner.rt.free(*args)
                raise aclasync.AclError.from_status(107000, "acl.rt.free")

    path = rt.sim.register_model(
        tmp_path / "held.om",
        inputs=[("x", (4,), "float32")],
        outputs=[("y", (4,), "float32")],
        fn=held,
    )
    acl = FailingFree(rt)
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=acl) as dev, dev.create_stream() as stream:
            model = await dev.load_model(path)
            run = asyncio.ensure_future(model.run(stream, np.zeros(4, np.float32)))
            await anyio.to_thread.run_sync(started.wait, 10)
            acl.armed = True
            closer = asyncio.ensure_future(model.aclose())
            await asyncio.sleep(0.01)  # it waits for the run
            closer.cancel()
            gate.set()
            await run
            with pytest.raises(asyncio.CancelledError):
                await closer
            acl.armed = False
            with pytest.raises(aclasync.AclError) as handed:  # given to the device
                await dev.synchronize()
            assert handed.value.code == 107000
