"""Issue 8, item 6: right answers at the edges (closing, timeouts, bad arguments)."""

from __future__ import annotations

import functools
from typing import Any

import anyio
import numpy as np
import pytest
from frontend_support import Gate, opened

import aclasync
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio


async def test_closing_an_event_fails_its_pending_wait_even_if_the_handle_is_reused(
    rt: Any,
) -> None:
    gate = Gate()
    outcome: list[BaseException | None] = []
    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        ev = await s.record_event()

        async def wait() -> None:
            try:
                await ev.synchronize()
            except anyio.ClosedResourceError as exc:
                outcome.append(exc)
            else:
                outcome.append(None)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            await ev.aclose()
            again = await s.record_event()  # takes the pooled handle back
            assert again.handle == ev.handle
        assert len(outcome) == 1
        assert isinstance(outcome[0], anyio.ClosedResourceError)
        with pytest.raises(anyio.ClosedResourceError):
            await ev.synchronize()
        gate.open()
        await again.synchronize()


async def test_waits_pending_on_a_force_closed_stream_do_not_return_ok(rt: Any) -> None:
    gate = Gate()
    results: list[BaseException | None] = []
    async with opened(rt) as dev:
        s = await dev.create_stream()
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        for _ in range(100):
            s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=100))
        ev = await s.record_event()

        async def wait(aw: Any) -> None:
            try:
                await aw()
            except anyio.ClosedResourceError as exc:
                results.append(exc)
            else:
                results.append(None)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait, s.synchronize)
                tg.start_soon(wait, ev.synchronize)
                await anyio.wait_all_tasks_blocked()
                await s.aclose(force=True)
        finally:
            gate.open()
        assert len(results) == 2
        assert all(isinstance(r, anyio.ClosedResourceError) for r in results)
        with pytest.raises(anyio.ClosedResourceError):
            await ev.synchronize()  # its work was dropped: not "complete"


async def test_buffers_are_unusable_after_the_device_closed(rt: Any) -> None:
    async with opened(rt) as dev:
        buffer = await dev.alloc(64)
        host = await dev.alloc_host(64)
        assert buffer.ptr
        assert host.view().nbytes == 64
    with pytest.raises(anyio.ClosedResourceError):
        _ = buffer.ptr
    with pytest.raises(anyio.ClosedResourceError):
        _ = host.ptr
    with pytest.raises(anyio.ClosedResourceError):
        host.view()
    await buffer.aclose()  # quiet: the device freed it
    assert buffer.closed
    assert host.closed


async def test_memcpy_copies_each_way_but_refuses_host_to_host(rt: Any) -> None:
    # CANN's aclrtMemcpyAsync does not copy host to host on a host with cards: code
    # tested here would fail there.
    async with opened(rt) as dev, dev.create_stream() as s:
        upload, download = await dev.alloc_host(32), await dev.alloc_host(32)
        a, b = await dev.alloc(32), await dev.alloc(32)
        upload.view(np.uint8)[...] = np.arange(32, dtype=np.uint8)
        s.memcpy(a, upload)
        s.memcpy(b, a)
        s.memcpy(download, b)
        with pytest.raises(ValueError, match="two host buffers"):
            s.memcpy(download, upload)
        await s.synchronize()
        assert download.view(np.uint8).tolist() == list(range(32))


async def test_memcpy_refuses_another_devices_memory_at_the_call(rt: Any) -> None:
    # The copy would otherwise write device 1's memory from device 0's stream, or fail
    # later as a bare 107000 from the sync.
    async with opened(rt) as d0, opened(rt, 1) as d1, d0.create_stream() as s:
        here, there, host = await d0.alloc(32), await d1.alloc(32), await d0.alloc_host(32)
        for dst, src in ((there, host), (host, there), (here, there), (there, here)):
            with pytest.raises(ValueError, match="memory of another device"):
                s.memcpy(dst, src)
        s.memcpy(here, host)
        await s.synchronize()


@pytest.mark.parametrize("timeout", [0, 1e-9])
async def test_a_zero_timeout_polls_once(rt: Any, timeout: float) -> None:
    gate = Gate()
    async with opened(rt) as dev, dev.create_stream() as s:
        await s.synchronize(timeout=timeout)  # idle stream
        await dev.synchronize(timeout=timeout)
        ev = await s.record_event()
        await ev.synchronize()
        await ev.synchronize(timeout=timeout)  # completed event
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        busy = await s.record_event()
        with pytest.raises(aclasync.AclTimeoutError) as info:
            await s.synchronize(timeout=timeout)
        assert info.value.code == 507046
        with pytest.raises(aclasync.AclTimeoutError) as info:
            await busy.synchronize(timeout=timeout)
        assert info.value.code == 507047
        gate.open()
        await s.synchronize()


async def test_bad_arguments_are_clear_errors(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        with pytest.raises(TypeError, match="timing"):
            await s.record_event(timing="yes")  # type: ignore[arg-type]
        for priority, kind in ((-1, ValueError), (8, ValueError), ("1", TypeError)):
            with pytest.raises(kind, match="priority"):
                dev.create_stream(priority=priority)  # type: ignore[arg-type]
        assert (await dev.create_stream(priority=7)).priority == 7

        async def coroutine_function() -> int:
            return 1

        with pytest.raises(TypeError, match="coroutine function"):
            await dev.call(coroutine_function)
        with pytest.raises(TypeError, match="coroutine function"):
            await dev.call(functools.partial(coroutine_function))
        with pytest.raises(TypeError, match="returned a coroutine"):
            await dev.call(lambda: coroutine_function())  # closed, never left un-awaited
        assert await dev.call(lambda: 5) == 5


async def test_concurrent_device_closes_both_wait_for_the_worker(rt: Any) -> None:
    gate = Gate()
    finished: list[bool] = []
    dev = await aclasync.open_device(0, backend=rt).__aenter__()
    dev.default_stream.launch(dev.acl.sim.launch_kernel, gate.kernel())

    async def close() -> None:
        await dev.aclose()
        finished.append(dev.worker_thread.is_alive())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(close)
            tg.start_soon(close)
            await anyio.wait_all_tasks_blocked()
            assert finished == []
            gate.open()
    assert finished == [False, False]


async def test_a_stream_close_racing_the_device_close_is_quiet(rt: Any) -> None:
    gate = Gate()
    async with opened(rt) as dev:
        s = await dev.create_stream()
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.aclose)  # waits for the gate
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(dev.aclose)
            await anyio.wait_all_tasks_blocked()
            gate.open()
    await s.aclose()  # and after the device closed: quiet too
