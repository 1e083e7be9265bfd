"""Typed errors, deferred failures of queued calls, failure modes, overflow, bad arguments."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from frontend_support import Gate, Log, ms, opened

import aclasync
from aclasync import FailureMode
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio

AICORE_EXCEPTION = 507015
PARAM_INVALID = 107000


@pytest.mark.parametrize("when", ["running", "finished"])
async def test_kernel_error_is_raised_once_by_the_next_synchronize(rt: Any, when: str) -> None:
    log = Log()
    async with opened(rt) as dev, dev.create_stream() as s, dev.create_stream() as other:
        kernel = dev.acl.sim.launch_kernel
        s.launch(kernel, Kernel(duration_us=ms(30), error=AICORE_EXCEPTION))
        other.launch(kernel, Kernel(duration_us=ms(30)))
        if when == "finished":
            ev = await s.record_event()
            await ev.synchronize()  # an event wait does not report the kernel's failure

        with pytest.raises(aclasync.AclError) as info:
            await s.synchronize()
        err = info.value
        assert not isinstance(err, TimeoutError)
        assert err.code == AICORE_EXCEPTION
        assert err.name == "ACL_ERROR_RT_AICORE_EXCEPTION"
        assert err.api == "acl.rt.synchronize_stream"
        assert err.device == 0
        assert err.stream == s.handle
        assert "507015" in str(err)

        await other.synchronize()  # the failure belongs to its stream only
        await s.synchronize()  # raised once only
        s.launch(kernel, Kernel(fn=log.add("after")))
        await s.synchronize()
        assert log.snapshot() == ["after"]


@pytest.mark.parametrize("next_await", ["synchronize", "query", "record_event"])
async def test_failed_queued_call_is_raised_by_the_next_await_naming_the_api(
    rt: Any, next_await: str
) -> None:
    async with opened(rt) as dev, dev.create_stream() as s, dev.create_stream() as other:
        s.launch(dev.acl.rt.memset_async, 0xDEAD, 64, 0, 64)  # not a device address
        await other.synchronize()  # other streams are not affected

        with pytest.raises(aclasync.AclError) as info:
            await getattr(s, next_await)()
        err = info.value
        assert err.api == "acl.rt.memset_async"
        assert err.code == PARAM_INVALID
        assert err.name == "ACL_ERROR_RT_PARAM_INVALID"
        assert err.device == 0
        assert err.stream == s.handle

        await s.synchronize()  # raised once only
        assert await s.query()


async def test_exception_from_a_launched_callable_is_raised_by_the_next_await(rt: Any) -> None:
    def broken_call(stream: int) -> int:
        raise LookupError(f"no such thing on stream {stream:#x}")

    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(broken_call)
        with pytest.raises(LookupError, match="no such thing"):
            await s.synchronize()
        await s.synchronize()


async def test_stop_failure_mode_drops_the_work_after_a_failure(rt: Any) -> None:
    log = Log()
    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        async with dev.create_stream() as stop, dev.create_stream() as cont:
            await stop.set_failure_mode(FailureMode.STOP)
            await cont.set_failure_mode(FailureMode.CONTINUE)
            for stream, name in ((stop, "stop"), (cont, "continue")):
                stream.launch(kernel, Kernel(duration_us=ms(20), error=AICORE_EXCEPTION))
                stream.launch(kernel, Kernel(fn=log.add(f"{name} 1")))
                stream.launch(kernel, Kernel(fn=log.add(f"{name} 2")))

            with pytest.raises(aclasync.AclError) as info:
                await stop.synchronize()
            assert info.value.stream == stop.handle
            with pytest.raises(aclasync.AclError) as info:
                await cont.synchronize()
            assert info.value.code == AICORE_EXCEPTION
            assert log.snapshot() == ["continue 1", "continue 2"]


async def test_failure_mode_refusals_surface_as_acl_errors(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        with pytest.raises(aclasync.AclError) as info:
            await dev.default_stream.set_failure_mode(FailureMode.STOP)
        assert info.value.api == "acl.rt.set_stream_failure_mode"
        await s.set_failure_mode(FailureMode.STOP)
        await s.set_failure_mode(FailureMode.STOP)  # the mode it has: a no-op
        with pytest.raises(aclasync.AclError) as info:
            await s.set_failure_mode(FailureMode.CONTINUE)  # no way back from STOP
        assert info.value.code == 207000
        assert info.value.api == "acl.rt.set_stream_failure_mode"
        assert info.value.stream == s.handle


async def test_overflow_status_round_trip(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        kernel = dev.acl.sim.launch_kernel
        assert await s.get_overflow_switch() is False
        await s.set_overflow_switch(True)
        assert await s.get_overflow_switch() is True

        s.launch(kernel, Kernel(duration_us=ms(5)))
        assert await s.get_overflow_status() == 0
        s.launch(kernel, Kernel(duration_us=ms(5), overflow=True))
        assert await s.get_overflow_status() != 0
        assert await s.get_overflow_status() != 0  # reading does not clear it

        await s.reset_overflow_status()
        assert await s.get_overflow_status() == 0

        await s.set_overflow_switch(False)
        assert await s.get_overflow_switch() is False
        s.launch(kernel, Kernel(duration_us=ms(5), overflow=True))
        assert await s.get_overflow_status() == 0


async def test_bad_arguments_raise_type_and_value_errors(rt: Any) -> None:
    log = Log()
    async with opened(rt) as dev, dev.create_stream() as s:
        ev = await s.record_event()
        with pytest.raises(TypeError, match="callable"):
            s.launch(42)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout"):
            await s.synchronize(timeout=-1)
        with pytest.raises(ValueError, match="timeout"):
            await s.synchronize(timeout=float("nan"))
        with pytest.raises(TypeError, match="timeout"):
            await s.synchronize(timeout="1")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout"):
            await ev.synchronize(timeout=-0.5)
        with pytest.raises(ValueError, match="timeout"):
            await dev.synchronize(timeout=-1)
        with pytest.raises(TypeError, match="flags"):
            dev.create_stream(flags="fast")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="flags"):
            dev.create_stream(flags=-1)
        with pytest.raises(TypeError, match="priority"):
            dev.create_stream(priority=1.5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="Event"):
            s.wait_event("event")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="mode"):
            await s.set_failure_mode(5)
        with pytest.raises(TypeError, match="mode"):
            await s.set_failure_mode("stop")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await s.set_overflow_switch("on")  # type: ignore[arg-type]

        # None of that disturbed the stream.
        s.launch(dev.acl.sim.launch_kernel, Kernel(fn=log.add("still fine")))
        await s.synchronize()
        assert log.snapshot() == ["still fine"]


async def test_bad_open_device_arguments(rt: Any) -> None:
    with pytest.raises(ValueError, match="bogus"):
        async with aclasync.open_device(0, backend="bogus"):
            pass
    with pytest.raises(TypeError, match="pyACL"):
        async with aclasync.open_device(0, backend=object()):
            pass
    with pytest.raises(ValueError, match="device_id"):
        aclasync.open_device(-1, backend=rt)
    with pytest.raises(TypeError, match="device_id"):
        aclasync.open_device("0", backend=rt)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="options"):
        aclasync.open_device(0, backend=rt, options={"wait_slice_ms": 1})  # type: ignore[arg-type]


async def test_opening_a_missing_device_raises_and_leaves_no_worker(rt: Any) -> None:
    with anyio.fail_after(10), pytest.raises(aclasync.AclError) as info:
        async with aclasync.open_device(2, backend=rt):  # the runtime has devices 0 and 1
            pytest.fail("device 2 opened")
    assert info.value.api == "acl.rt.set_device"
    assert info.value.device == 2
    # The runtime fixture checks at teardown that no worker thread was left behind;
    # the other devices still open.
    async with opened(rt, 1) as dev:
        assert dev.id == 1


def test_objects_have_no_public_constructors() -> None:
    for cls in (aclasync.Device, aclasync.Stream, aclasync.Event):
        with pytest.raises(TypeError, match="factory"):
            cls()


async def test_concurrent_overflow_reads_each_see_their_own_point(rt: Any) -> None:
    # Both calls used the stream's one status buffer: the first could read the status
    # the second call's task wrote, after an overflow queued between the two.
    gate = Gate()
    results: dict[str, int] = {}
    async with opened(rt) as dev, dev.create_stream() as s:
        kernel = dev.acl.sim.launch_kernel
        await s.set_overflow_switch(True)

        async def read(name: str) -> None:
            results[name] = await s.get_overflow_status()

        try:
            async with anyio.create_task_group() as tg:
                s.launch(kernel, gate.kernel())  # holds the stream
                tg.start_soon(read, "before")
                await anyio.wait_all_tasks_blocked()  # its status task is queued
                s.launch(kernel, Kernel(overflow=True))
                tg.start_soon(read, "after")
                await anyio.wait_all_tasks_blocked()
                gate.open()
        finally:
            gate.open()
        assert results == {"before": 0, "after": 1}
        await s.reset_overflow_status()
