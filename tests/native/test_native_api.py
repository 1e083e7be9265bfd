"""Every public method of the front end, on the native path (the strict simulator as ``acl``).

One test per class; each counts the calls it makes (``covered``) and ends by checking
that it reached every public method and property of its class, so a method added to the
API without a native-path test fails here. Device work is held by gates: a stream held
at a gate is busy for exactly as long as the test wants.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

import aclasync
from aclasync import AclTimeoutError, FailureMode, StreamFlag
from aclasync._cli._gates import DeviceGates

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("native_acl")]

CLASSES = (
    aclasync.Device,
    aclasync.Stream,
    aclasync.Event,
    aclasync.DeviceBuffer,
    aclasync.HostBuffer,
    aclasync.Model,
    aclasync.StreamPool,
    aclasync.DevicePool,
)
#: Reached in a test, each a ``set`` of the names of what was called or read.
Covered = dict[type, set[str]]


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def _counting(fn: Callable[..., Any], seen: set[str], name: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            seen.add(name)
            return await fn(*args, **kwargs)

        return counted_async

    @functools.wraps(fn)
    def counted(*args: Any, **kwargs: Any) -> Any:
        seen.add(name)
        return fn(*args, **kwargs)

    return counted


@pytest.fixture
def covered(monkeypatch: pytest.MonkeyPatch) -> Iterator[Covered]:
    """Count which public methods and properties of ``CLASSES`` the test reaches."""
    seen: Covered = defaultdict(set)
    for cls in CLASSES:
        for name in _public(cls):
            attribute = inspect.getattr_static(cls, name)
            if isinstance(attribute, property):
                assert attribute.fget is not None
                wrapped: Any = property(_counting(attribute.fget, seen[cls], name))
            elif callable(attribute):
                wrapped = _counting(attribute, seen[cls], name)
            else:
                continue
            monkeypatch.setattr(cls, name, wrapped)
    return seen


def _all_of(covered: Covered, cls: type) -> None:
    assert _public(cls) - covered[cls] == set(), f"{cls.__name__}: not reached on the native path"


async def _wait_until(flag: Any) -> None:
    """Wait (in a thread) until the ``threading.Event`` *flag* is set; at most 10 s."""
    assert await anyio.to_thread.run_sync(flag.wait, 10)


async def test_device(covered: Covered, tmp_path: Path) -> None:
    dev = await aclasync.open_device(0)  # no backend: ACLASYNC_BACKEND=native
    try:
        assert dev.backend_name == "native"
        assert dev.id == 0
        assert not hasattr(dev.acl, "sim"), "the strict runtime: pyACL's surface only"
        assert dev.worker_thread.is_alive()
        assert not dev.closed
        assert dev.default_stream.handle == 0
        count, ret = await dev.call(dev.acl.rt.get_device_count)
        assert (count, ret) == (2, 0)
        async with dev.create_stream() as stream, DeviceGates(dev) as gates:
            gate = await gates.hold(stream)
            await _wait_until(gate.reached)
            with pytest.raises(AclTimeoutError):
                await dev.synchronize(timeout=0.05)
            gate.open()
            await dev.synchronize(timeout=10)
        buffer, host = await dev.alloc(64), await dev.alloc_host(64)
        assert (buffer.nbytes, host.nbytes) == (64, 64)
        async with dev.stream_pool(1) as pool:
            assert pool.size == 1
        async with dev.load_model(_model_file(tmp_path)) as model:
            assert model.inputs[0].nbytes == 64
        # Another library's stream and event (made here by plain calls on the worker):
        # awaited, then let go of, never destroyed by aclasync.
        foreign, ret = await dev.call(dev.acl.rt.create_stream)
        assert ret == 0
        event, ret = await dev.call(dev.acl.rt.create_event)
        assert ret == 0
        await dev.call(dev.acl.rt.record_event, event, foreign)
        wrapped, waited = dev.wrap_stream(foreign), dev.wrap_event(event)
        await waited.synchronize(timeout=10)
        await wrapped.synchronize(timeout=10)
        await waited.aclose()
        await wrapped.aclose()
        assert await dev.call(dev.acl.rt.destroy_event, event) == 0
        assert await dev.call(dev.acl.rt.destroy_stream, foreign) == 0
    finally:
        await dev.aclose()
    assert dev.closed
    _all_of(covered, aclasync.Device)


async def test_stream(covered: Covered) -> None:
    async with aclasync.open_device(0) as dev, DeviceGates(dev) as gates:
        rt = dev.acl.rt
        a = await dev.create_stream(flags=StreamFlag.FAST_SYNC, priority=3)
        b = await dev.create_stream()
        assert (a.flags, a.priority, a.device, a.closed) == (StreamFlag.FAST_SYNC, 3, dev, False)
        assert not a.wrapped
        assert a.handle != 0
        buffer, host = await dev.alloc(4096), await dev.alloc_host(4096)
        gate = await gates.hold(a)
        a.launch(rt.memset_async, buffer.ptr, 4096, 0x5A, 4096)
        done = await a.record_event()
        b.wait_event(done)  # b's copy waits, on the device, for a's fill behind the gate
        b.memcpy(host, buffer)
        try:
            later = b.record_event_nowait()
        except anyio.WouldBlock:
            later = await b.record_event()
        await _wait_until(gate.reached)
        with pytest.raises(AclTimeoutError):
            await a.synchronize(timeout=0.05)
        assert not await a.query()
        assert not await b.query()
        assert bytes(host.view()) == bytes(4096), "nothing ran behind the gate"
        gate.open()
        await b.synchronize(timeout=10)
        await later.synchronize()
        assert bytes(host.view()) == b"\x5a" * 4096
        assert await a.query()
        await b.set_failure_mode(FailureMode.STOP)
        await b.set_overflow_switch(True)
        assert await b.get_overflow_switch() is True
        assert await b.get_overflow_status() == 0
        await b.reset_overflow_status()
        # A forced close drops what is queued: the fill behind this gate never runs.
        gate = await gates.hold(a)
        a.launch(rt.memset_async, buffer.ptr, 4096, 0x11, 4096)
        await _wait_until(gate.reached)
        await a.aclose(force=True)
        gate.open()
        await dev.synchronize(timeout=10)
        b.memcpy(host, buffer)
        await b.synchronize()
        assert bytes(host.view()) == b"\x5a" * 4096, "the dropped fill did not run"
        await b.aclose()
        assert a.closed
        assert b.closed
        await done.aclose()
        await later.aclose()
    _all_of(covered, aclasync.Stream)


async def test_event(covered: Covered) -> None:
    async with aclasync.open_device(0) as dev, dev.create_stream() as stream:
        async with DeviceGates(dev) as gates:
            start = await stream.record_event(timing=True)
            gate = await gates.hold(stream)
            end = await stream.record_event(timing=True)
            assert (start.stream, start.timing, end.closed) == (stream, True, False)
            assert not start.wrapped
            assert start.handle != end.handle
            await _wait_until(gate.reached)
            assert await start.query()
            assert not await end.query()
            with pytest.raises(AclTimeoutError):
                await end.synchronize(timeout=0.05)
            held = time.perf_counter()
            await anyio.sleep(0.05)  # gives the device time to measure, held by the gate
            gate.open()
            await end.synchronize(timeout=10)
            held_ms = (time.perf_counter() - held) * 1e3
            assert await end.query()
            elapsed = await start.elapsed_time(end)
            assert 0.5 * held_ms <= elapsed <= 10 * held_ms + 100
        await start.aclose()
        await end.aclose()
        assert end.closed
    _all_of(covered, aclasync.Event)


async def test_buffers(covered: Covered) -> None:
    async with aclasync.open_device(0) as dev, dev.create_stream() as stream:
        data = np.arange(256, dtype=np.uint8)
        src, back = await dev.alloc_host(256), await dev.alloc_host(256)
        device = await dev.alloc(256)
        assert (device.device, device.nbytes, device.closed) == (dev, 256, False)
        assert (src.device, src.nbytes) == (dev, 256)
        assert device.ptr != 0
        assert src.ptr != 0
        src.view()[:] = data
        stream.memcpy(device, src)
        stream.memcpy(back, device)
        await stream.synchronize()
        assert np.array_equal(back.view(np.uint8, (16, 16)).ravel(), data)
        for buffer in (src, back, device):
            await buffer.aclose()
            assert buffer.closed
    _all_of(covered, aclasync.DeviceBuffer)
    _all_of(covered, aclasync.HostBuffer)


def _model_file(folder: Path, name: str = "double") -> Path:
    """A self-contained simulated model file (its body imported by name, as a spec file of
    another process would be): y = 2 x, 4x4 float32."""
    path = folder / f"{name}.om"
    spec = {
        "format": "aclasync.sim.model",
        "version": 1,
        "fn": "native_models:double",
        "inputs": [["x", [4, 4], "float32"]],
        "outputs": [["y", [4, 4], "float32"]],
        "duration_us": 0.0,
        "batch_sizes": [],
    }
    path.write_text(json.dumps(spec))
    return path


async def test_model(covered: Covered, tmp_path: Path) -> None:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    async with aclasync.open_device(0) as dev, dev.create_stream() as stream:
        async with dev.load_model(_model_file(tmp_path)) as model:
            assert model.id != 0
            assert [(t.name, t.shape) for t in model.inputs] == [("x", (4, 4))]
            assert [(t.name, t.shape) for t in model.outputs] == [("y", (4, 4))]
            (y,) = await model.run(stream, x)
            assert np.array_equal(y, 2 * x)
            host_in, host_out = await dev.alloc_host(64), await dev.alloc_host(64)
            dev_in, dev_out = await dev.alloc(64), await dev.alloc(64)
            host_in.view(np.float32, (4, 4))[...] = x
            async with DeviceGates(dev) as gates:
                gate = await gates.hold(stream)
                stream.memcpy(dev_in, host_in)
                model.launch(stream, [dev_in], [dev_out])
                stream.memcpy(host_out, dev_out)
                await _wait_until(gate.reached)
                assert not await stream.query()
                gate.open()
                await stream.synchronize(timeout=10)
            assert np.array_equal(host_out.view(np.float32, (4, 4)), 2 * x)
            assert not model.closed
            await model.aclose()
        assert model.closed
    _all_of(covered, aclasync.Model)


async def test_stream_pool(covered: Covered) -> None:
    async with aclasync.open_device(0) as dev, DeviceGates(dev) as gates:
        pool = await dev.stream_pool(2)
        assert (pool.size, pool.closed) == (2, False)
        lent = anyio.Event()
        release = anyio.Event()

        async def borrower() -> None:
            async with pool.stream() as stream:
                gate = await gates.hold(stream)
                if pool.statistics().borrowed == 2:
                    lent.set()
                await _wait_until(gate.reached)
                await release.wait()
                gate.open()

        async with anyio.create_task_group() as tg:
            tg.start_soon(borrower)
            tg.start_soon(borrower)
            await lent.wait()

            third: list[int] = []

            async def third_borrower() -> None:
                async with pool.stream() as stream:
                    third.append(stream.handle)

            tg.start_soon(third_borrower)
            await anyio.wait_all_tasks_blocked()
            assert pool.statistics().waiting == 1
            assert third == []
            release.set()
        stats = pool.statistics()
        assert (stats.grants, stats.waits, stats.grants_out_of_order) == (3, 1, 0)
        await pool.aclose()
        assert pool.closed
    _all_of(covered, aclasync.StreamPool)


async def test_device_pool(covered: Covered) -> None:
    async with aclasync.DevicePool([0, 1], streams_per_device=1) as pool:
        assert [dev.backend_name for dev in pool.devices] == ["native", "native"]
        assert pool.pool.size == 2
        seen = set()
        async with pool.stream() as first, pool.stream() as second:
            seen = {first.device.id, second.device.id}
            for stream in (first, second):
                dev = stream.device
                async with DeviceGates(dev) as gates:
                    gate = await gates.hold(stream)
                    await _wait_until(gate.reached)
                    assert pool.statistics().in_flight == {0: 1, 1: 1}
                    gate.open()
                    await stream.synchronize(timeout=10)
        assert seen == {0, 1}, "one grant from each device, the least busy first"
        await pool.aclose()
    _all_of(covered, aclasync.DevicePool)
