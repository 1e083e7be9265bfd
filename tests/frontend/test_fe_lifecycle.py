"""Resources: creating and closing streams, events and devices; use after close."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from frontend_support import Gate, Log, aclasync_threads, ms, opened

import aclasync
from aclasync import StreamFlag
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio


async def test_create_stream_by_await_and_by_async_with(rt: Any) -> None:
    log = Log()
    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        s = await dev.create_stream()
        assert isinstance(s, aclasync.Stream)
        assert s.handle != 0
        assert s.device is dev
        assert not s.closed
        s.launch(kernel, Kernel(duration_us=ms(5), fn=log.add("awaited")))
        await s.synchronize()
        await s.aclose()
        assert s.closed
        await s.aclose()  # idempotent

        async with dev.create_stream(flags=StreamFlag.FAST_SYNC, priority=2) as s2:
            assert s2.flags == StreamFlag.FAST_SYNC
            assert s2.priority == 2
            assert s2.handle not in (0, s.handle)
            s2.launch(kernel, Kernel(duration_us=ms(5), fn=log.add("context")))
            await s2.synchronize()
        assert s2.closed
        assert log.snapshot() == ["awaited", "context"]


async def test_use_after_close_raises_closed_resource_error(rt: Any) -> None:
    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        live = await dev.create_stream()
        s = await dev.create_stream()
        ev = await s.record_event()
        await s.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            s.launch(kernel, Kernel())
        with pytest.raises(anyio.ClosedResourceError):
            await s.synchronize()
        with pytest.raises(anyio.ClosedResourceError):
            await s.record_event()
        with pytest.raises(anyio.ClosedResourceError):
            await s.query()
        with pytest.raises(anyio.ClosedResourceError):
            await s.set_overflow_switch(True)

        await ev.aclose()
        await ev.aclose()  # idempotent
        with pytest.raises(anyio.ClosedResourceError):
            await ev.synchronize()
        with pytest.raises(anyio.ClosedResourceError):
            await ev.query()
        with pytest.raises(anyio.ClosedResourceError):
            live.wait_event(ev)

        async with await live.record_event() as scoped:
            await scoped.synchronize()
        with pytest.raises(anyio.ClosedResourceError):
            await scoped.query()
        kept = await live.record_event()

    assert dev.closed
    assert live.closed
    for fail in (
        lambda: live.launch(kernel, Kernel()),
        lambda: dev.default_stream.launch(kernel, Kernel()),
    ):
        with pytest.raises(anyio.ClosedResourceError):
            fail()
    for wait in (
        live.synchronize,
        kept.synchronize,
        dev.synchronize,
        dev.create_stream,
        dev.default_stream.synchronize,
    ):
        with pytest.raises(anyio.ClosedResourceError):
            await wait()
    await live.aclose()  # closing again after the device is gone is harmless
    await kept.aclose()


async def test_aclose_waits_for_queued_work(rt: Any) -> None:
    log = Log()
    gate = Gate()
    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        s = await dev.create_stream()
        s.launch(kernel, gate.kernel())
        s.launch(kernel, Kernel(fn=log.add("last")))
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.aclose)
            await anyio.wait_all_tasks_blocked()
            assert log.snapshot() == []  # still waiting for the gate
            gate.open()
        assert log.snapshot() == ["last"]
        assert s.closed


async def test_cancelled_aclose_still_closes_and_keeps_queued_work(rt: Any) -> None:
    log = Log()
    gate = Gate()
    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        s = await dev.create_stream()
        s.launch(kernel, gate.kernel())
        s.launch(kernel, Kernel(fn=log.add("last")))
        with anyio.CancelScope() as scope:
            scope.cancel()
            await s.aclose()
        assert scope.cancelled_caught
        assert s.closed
        with pytest.raises(anyio.ClosedResourceError):
            await s.synchronize()
        gate.open()
        await dev.synchronize()
    assert log.snapshot() == ["last"]


async def test_a_cancelled_close_does_not_hold_the_device_for_its_streams_work(
    rt: Any,
) -> None:
    # The request-timeout pattern: `async with create_stream()` cancelled while its exit
    # waits. The destroy that follows used to block the device worker in the stream's
    # sync until its kernel ended, stalling every other stream of the device.
    gate = Gate()
    try:
        with anyio.fail_after(10):
            async with opened(rt) as dev, dev.create_stream() as other:
                kernel = dev.acl.sim.launch_kernel
                before = dev.acl.sim.live_objects()["streams"]
                with anyio.CancelScope() as scope:
                    async with dev.create_stream() as s:
                        s.launch(kernel, gate.kernel())
                        s.launch(kernel, Kernel(error=507015))
                        await anyio.to_thread.run_sync(gate.started.wait, 10)
                        scope.cancel()  # the exit's wait is cancelled
                assert scope.cancelled_caught
                other.launch(kernel, Kernel())
                await other.synchronize(timeout=5)  # with the gate still closed
                assert dev.acl.sim.live_objects()["streams"] == before + 1
                failures: list[BaseException] = []

                async def device_sync() -> None:  # waits for the closing stream's work too
                    with pytest.raises(aclasync.AclError) as failure:
                        await dev.synchronize()
                    failures.append(failure.value)  # its failure is the device's

                async with anyio.create_task_group() as tg:
                    tg.start_soon(device_sync)
                    await anyio.sleep(0.05)  # the kernel cannot end: the gate is shut
                    assert failures == []
                    gate.open()
                assert [getattr(e, "code", None) for e in failures] == [507015]
                while dev.acl.sim.live_objects()["streams"] != before:  # noqa: ASYNC110
                    await anyio.sleep(0.005)  # destroyed once its work ended
                await dev.synchronize()  # reported once
    finally:
        gate.open()


async def test_forced_aclose_drops_queued_work_without_waiting(rt: Any) -> None:
    log = Log()
    gate = Gate()
    try:
        with anyio.fail_after(10):
            async with opened(rt) as dev:
                kernel = dev.acl.sim.launch_kernel
                s = await dev.create_stream()
                s.launch(kernel, gate.kernel())
                s.launch(kernel, Kernel(fn=log.add("queued")))
                await anyio.to_thread.run_sync(gate.started.wait, 10)
                await s.aclose(force=True)  # returns with the gate still closed
                assert s.closed
                await s.aclose(force=True)  # idempotent
                gate.open()  # the running kernel ends; the dropped one never runs
    finally:
        gate.open()
    assert log.snapshot() == []


async def test_default_stream(rt: Any) -> None:
    log = Log()
    async with opened(rt) as dev:
        ds = dev.default_stream
        assert ds.handle == 0
        assert dev.default_stream is ds
        ds.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=ms(30), fn=log.add("ran")))
        ev = await ds.record_event()
        await ds.synchronize()
        assert log.snapshot() == ["ran"]
        assert await ev.query()
        assert await ds.query()
        await ds.aclose()  # only marks the object closed
        assert ds.closed
        with pytest.raises(anyio.ClosedResourceError):
            await ds.synchronize()
        async with dev.create_stream() as s:  # the device itself is still fine
            await s.synchronize()
    # Leaving did not fail: aclasync never tried to destroy stream 0.


async def test_leaving_the_device_waits_for_work_and_joins_every_thread(rt: Any) -> None:
    log = Log()
    gate = Gate()
    before = set(aclasync_threads())  # other runtimes' threads, if any

    async with opened(rt) as dev:
        worker = dev.worker_thread
        assert worker.is_alive()
        assert worker.name.startswith("aclasync-device")
        assert isinstance(worker, threading.Thread)
        started = [t.name for t in aclasync_threads() if t not in before]
        assert any(name.startswith("aclasync-sim-dev0") for name in started)

        s = await dev.create_stream()  # left open on purpose
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        s.launch(dev.acl.sim.launch_kernel, Kernel(fn=log.add("finished")))
        await s.record_event()  # an event left open too
        async with anyio.create_task_group() as tg:
            tg.start_soon(dev.aclose)  # what leaving does; it waits for the gate
            await anyio.wait_all_tasks_blocked()
            assert log.snapshot() == []
            assert worker.is_alive()
            gate.open()

    assert not worker.is_alive()
    assert [t for t in aclasync_threads() if t not in before] == []
    assert log.snapshot() == ["finished"]


async def test_waiters_pending_while_the_device_closes_do_not_see_internal_errors(
    rt: Any,
) -> None:
    outcomes: dict[str, str] = {}

    async def wait(name: str, fn: Any) -> None:
        try:
            await fn()
        except anyio.ClosedResourceError:
            outcomes[name] = "closed"
        except Exception as exc:
            outcomes[name] = repr(exc)
        else:
            outcomes[name] = "done"

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg, aclasync.open_device(0, backend=rt) as dev:
            s = await dev.create_stream()
            gate = Gate()
            s.launch(dev.acl.sim.launch_kernel, gate.kernel())
            ev = await s.record_event()
            tg.start_soon(wait, "stream", s.synchronize)
            tg.start_soon(wait, "event", ev.synchronize)
            await anyio.wait_all_tasks_blocked()
            gate.open()

    # Leaving waits for the queued work, so finishing normally is right; a
    # ClosedResourceError is acceptable too. A runtime error from the teardown is not.
    assert set(outcomes) == {"stream", "event"}
    assert set(outcomes.values()) <= {"done", "closed"}, outcomes


async def test_device_attributes(rt: Any) -> None:
    async with opened(rt, 1) as dev:
        assert isinstance(dev, aclasync.Device)
        assert dev.id == 1
        assert dev.acl is rt
        assert dev.backend_name == "SimAcl"
        assert not dev.closed
        assert "1" in repr(dev)
    assert dev.closed
