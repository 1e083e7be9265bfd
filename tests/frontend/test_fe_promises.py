"""Event loops, STOP streams and device syncs keep their promises (issue 21).

- an event loop that used aclasync is freed once it ends;
- a stream stopped by ``FailureMode.STOP`` reports the kernel failure that stopped it
  before the refusals that follow it;
- ``Device.synchronize`` waits for the other streams when one is force-closed meanwhile;
- numpy integers are timeouts; cross-device event use raises pyACL's code.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest
from frontend_support import Gate

import aclasync
import aclasync.sim
from aclasync import FailureMode
from aclasync.sim import Kernel

AICORE_EXCEPTION = 507015
STREAM_ABORT = 107023
PARAM_INVALID = 107000
LIMIT_S = 10.0

BACKENDS = [
    pytest.param(("asyncio", {}), id="asyncio"),
    pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
    pytest.param(("trio", {}), id="trio"),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_event_loop_that_used_aclasync_is_freed(backend: tuple[str, dict[str, Any]]) -> None:
    """Each run's loop (or trio run) is collected once it ended."""
    rt = aclasync.sim.create(device_count=1)
    refs: list[weakref.ref[Any]] = []

    async def use_a_device() -> None:
        if backend[0] == "trio":
            import trio.lowlevel

            refs.append(weakref.ref(trio.lowlevel.current_trio_token()))
        else:
            refs.append(weakref.ref(asyncio.get_running_loop()))
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as s:
            s.launch(rt.sim.launch_kernel, Kernel(duration_us=50))
            await s.synchronize()

    try:
        for _ in range(20):
            anyio.run(use_a_device, backend=backend[0], backend_options=backend[1])
        gc.collect()
        alive = [ref for ref in refs if ref() is not None]
        assert alive == []
    finally:
        rt.sim.close()


pytestmark_async = pytest.mark.anyio


async def _stopped_stream(dev: aclasync.Device) -> aclasync.Stream:
    """A STOP stream whose kernel failed on the device, unseen by the worker."""
    s = await dev.create_stream()
    await s.set_failure_mode(FailureMode.STOP)
    s.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE_EXCEPTION))
    # Poll until the failed kernel ended (nothing syncs the stream meanwhile).
    while not await s.query():  # noqa: ASYNC110 - a device state, not an event
        await anyio.sleep(0.001)
    return s


def _code(exc: BaseException | None) -> int | None:
    return exc.code if isinstance(exc, aclasync.AclError) else None


async def _raised(wait: Callable[[], Awaitable[Any]]) -> BaseException | None:
    try:
        await wait()
    except aclasync.AclError as exc:
        return exc
    return None


@pytestmark_async
@pytest.mark.parametrize(
    ("refused", "waiter"),
    [
        ("launch", "stream"),
        ("launch", "device"),
        ("record_event_nowait", "stream"),
        ("record_event_nowait", "device"),
        ("record_event_nowait", "event"),
    ],
)
async def test_a_stopped_stream_reports_its_cause_before_the_refusals(
    rt: Any, refused: str, waiter: str
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            s = await _stopped_stream(dev)
            event = None
            if refused == "launch":
                s.launch(rt.sim.launch_kernel, Kernel())
            else:
                while event is None:
                    try:
                        event = s.record_event_nowait()
                    except anyio.WouldBlock:
                        await anyio.sleep(0.001)
            if waiter == "stream":
                wait: Callable[[], Awaitable[Any]] = s.synchronize
            elif waiter == "device":
                wait = dev.synchronize
            else:
                assert event is not None
                wait = event.synchronize
            first = await _raised(wait)
            assert _code(first) == AICORE_EXCEPTION, first
            second = await _raised(s.synchronize)
            assert _code(second) == STREAM_ABORT, second
            assert await _raised(s.synchronize) is None
            if event is not None:
                await event.aclose()
            await s.aclose()


@pytestmark_async
async def test_work_a_stopped_stream_refuses_after_a_quiet_sync_is_still_reported(
    rt: Any,
) -> None:
    """The cause is reported, a sync sees only the stop (107023: nothing to report),
    then a launch is refused: that refusal is reported, once, by the next await."""
    ran: list[int] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            s = await _stopped_stream(dev)
            assert _code(await _raised(s.synchronize)) == AICORE_EXCEPTION
            assert await _raised(s.synchronize) is None  # quiet: nothing queued since
            s.launch(rt.sim.launch_kernel, Kernel(fn=lambda: ran.append(1)))
            assert _code(await _raised(s.synchronize)) == STREAM_ABORT
            s.launch(rt.sim.launch_kernel, Kernel(fn=lambda: ran.append(1)))
            assert await _raised(s.synchronize) is None  # reported once, not once each
            await s.aclose()
    assert ran == []


@pytestmark_async
async def test_a_stopped_stream_refusing_a_fences_event_reports_its_cause_first(
    rt: Any,
) -> None:
    """A sync's fence, then a launch behind it, in one worker batch: the fence's
    event is recorded before the launch, and the stopped stream refuses it too."""
    worker_gate = threading.Event()
    codes: list[int | None] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            s = await _stopped_stream(dev)

            async def sync() -> None:
                codes.append(_code(await _raised(s.synchronize)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(dev.call, worker_gate.wait)  # the worker takes no job
                await anyio.sleep(0.01)
                tg.start_soon(sync)  # its fence is queued
                await anyio.sleep(0.01)
                s.launch(rt.sim.launch_kernel, Kernel())  # behind it: closes the fence
                worker_gate.set()
            for _ in range(3):
                await sync()
            await s.aclose()
    assert codes == [AICORE_EXCEPTION, STREAM_ABORT, None, None]


@pytestmark_async
async def test_a_pool_replaces_a_stream_that_stopped(rt: Any) -> None:
    """A borrower stops its pool stream and catches the cause itself; the next
    borrower gets a stream that runs its work."""
    ran: list[int] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            async with pool.stream() as s:
                await s.set_failure_mode(FailureMode.STOP)
                s.launch(rt.sim.launch_kernel, Kernel(error=AICORE_EXCEPTION))
                assert _code(await _raised(s.synchronize)) == AICORE_EXCEPTION
            async with pool.stream() as s:
                s.launch(rt.sim.launch_kernel, Kernel(fn=lambda: ran.append(1)))
                await s.synchronize()
            assert pool.statistics().replaced == 1
    assert ran == [1]


@pytestmark_async
async def test_device_synchronize_waits_for_the_rest_when_a_stream_is_force_closed(
    rt: Any,
) -> None:
    gate_a, gate_b = Gate(), Gate()
    done = threading.Event()
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            a = await dev.create_stream()
            b = await dev.create_stream()
            a.launch(rt.sim.launch_kernel, gate_a.kernel())
            b.launch(rt.sim.launch_kernel, gate_b.kernel())
            b.launch(rt.sim.launch_kernel, Kernel(fn=done.set))
            outcome: list[Any] = []

            async def device_sync() -> None:
                try:
                    await dev.synchronize()
                    outcome.append("done" if done.is_set() else "early")
                except BaseException as exc:
                    outcome.append(exc)

            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(device_sync)
                    await anyio.lowlevel.checkpoint()
                    await dev.call(lambda: None)  # its fences have reached the worker
                    await a.aclose(force=True)
                    gate_b.open()
            finally:
                gate_a.open()
                gate_b.open()
            assert outcome == ["done"]
            await b.aclose()


@pytestmark_async
async def test_numpy_integers_are_timeouts(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as s:
            for timeout in (np.int64(1), np.int32(2), np.float32(1.5), np.float64(1.0)):
                await s.synchronize(timeout=timeout)
                await dev.synchronize(timeout=timeout)
                event = await s.record_event()
                await event.synchronize(timeout=timeout)
                await event.aclose()
            with pytest.raises(ValueError, match="timeout"):
                await s.synchronize(timeout=np.int64(-1))
            with pytest.raises(TypeError, match="timeout"):
                await s.synchronize(timeout=np.bool_(True))


@pytestmark_async
async def test_events_of_another_device_raise_pyacls_code(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with (
            aclasync.open_device(0, backend=rt) as zero,
            aclasync.open_device(1, backend=rt) as one,
            zero.create_stream() as s0,
            one.create_stream() as s1,
        ):
            foreign = await s1.record_event(timing=True)
            own = await s0.record_event(timing=True)
            with pytest.raises(aclasync.AclError) as waited:
                s0.wait_event(foreign)
            assert waited.value.code == PARAM_INVALID
            assert waited.value.api == "acl.rt.stream_wait_event"
            with pytest.raises(aclasync.AclError) as timed:
                await own.elapsed_time(foreign)
            assert timed.value.code == PARAM_INVALID
            assert timed.value.api == "acl.rt.event_elapsed_time"
            await s0.synchronize()  # nothing was queued, nothing to report
            await foreign.aclose()
            await own.aclose()
