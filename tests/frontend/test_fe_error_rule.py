"""The error-delivery rule (README "Errors"): every failure reported exactly once.

Issue 8, items 2 and 3: failures lost after an abandoned wait, at close, across
streams, and reported one await late. Every kernel is held by a ``Gate`` where the
order of events matters, so nothing here races the device against the host.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from frontend_support import Gate, failing_call, opened, worker_caught_up

import aclasync
from aclasync.sim import Kernel

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

pytestmark = pytest.mark.anyio

AICORE = 507015
PARAM_INVALID = 107000
BAD_A = 107001
BAD_B = 107002


async def _abandon_timeout0(dev: Any, s: Any) -> None:
    with contextlib.suppress(aclasync.AclTimeoutError):
        await s.synchronize(timeout=0)  # on an idle stream it completes (and reports)


async def _abandon_short_timeout(dev: Any, s: Any) -> None:
    with contextlib.suppress(aclasync.AclTimeoutError):
        await s.synchronize(timeout=0.005)


async def _abandon_cancel_scope(dev: Any, s: Any) -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        await s.synchronize()
    assert scope.cancelled_caught


async def _abandon_device_timeout(dev: Any, s: Any) -> None:
    with contextlib.suppress(aclasync.AclTimeoutError):
        await dev.synchronize(timeout=0.005)


async def _code_of(awaitable: Awaitable[None]) -> int | None:
    """The code of the AclError *awaitable* raises, or None if it returns."""
    try:
        await awaitable
    except aclasync.AclError as exc:
        return exc.code
    return None


ABANDONS: dict[str, Callable[[Any, Any], Awaitable[None]]] = {
    "timeout=0": _abandon_timeout0,
    "timeout=0.005": _abandon_short_timeout,
    "cancel scope": _abandon_cancel_scope,
    "device timeout": _abandon_device_timeout,
}


@pytest.mark.parametrize("when", ["running", "finished"])
@pytest.mark.parametrize("abandon", list(ABANDONS))
async def test_an_abandoned_wait_never_eats_a_kernel_failure(
    rt: Any, abandon: str, when: str
) -> None:
    gate = Gate()
    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(dev.acl.sim.launch_kernel, gate.kernel(error=AICORE))
        if when == "finished":
            gate.open()
            ev = await s.record_event()
            await ev.synchronize()  # event waits do not collect kernel failures
        first = await _code_of(ABANDONS[abandon](dev, s))  # abandoned, or it completed
        gate.open()
        second = await _code_of(s.synchronize())
        assert sorted([first, second], key=str) == [AICORE, None]  # exactly once
        await s.synchronize()


async def test_a_cancelled_sync_on_a_clean_stream_does_not_eat_a_later_failure(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        kernel = dev.acl.sim.launch_kernel
        for _ in range(5):
            gate = Gate()
            s.launch(kernel, gate.kernel())
            with anyio.CancelScope() as scope:
                scope.cancel()
                await s.synchronize()  # its fence stays with the worker
            s.launch(kernel, Kernel(error=AICORE))
            gate.open()
            with pytest.raises(aclasync.AclError) as info:
                await s.synchronize()
            assert info.value.code == AICORE


@pytest.mark.parametrize("what", ["kernel", "launch"])
async def test_stream_close_raises_what_is_unreported(rt: Any, what: str) -> None:
    async with opened(rt) as dev:
        s = await dev.create_stream()
        if what == "kernel":
            s.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
        else:
            s.launch(failing_call(BAD_A))
        with pytest.raises(aclasync.AclError) as info:
            await s.aclose()
        assert info.value.code == (AICORE if what == "kernel" else BAD_A)
        assert info.value.stream == s.handle
        await s.aclose()  # idempotent, and nothing is raised twice


async def test_stream_context_exit_raises_what_is_unreported(rt: Any) -> None:
    async with opened(rt) as dev:
        with pytest.raises(aclasync.AclError) as info:
            async with dev.create_stream() as s:
                s.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
        assert info.value.code == AICORE


async def test_device_exit_raises_what_is_unreported(rt: Any) -> None:
    with pytest.raises(aclasync.AclError) as info:
        async with opened(rt) as dev:
            dev.default_stream.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
    assert info.value.code == AICORE


async def test_device_exit_reports_failures_of_a_stream_left_open(rt: Any) -> None:
    handles = []

    async def leave_a_failure() -> None:
        async with opened(rt) as dev:
            s = await dev.create_stream()
            handles.append(s.handle)
            s.launch(failing_call(BAD_A))

    with pytest.raises(aclasync.AclError) as info:
        await leave_a_failure()
    assert (info.value.code, info.value.stream) == (BAD_A, handles[0])


async def test_two_streams_failures_come_out_of_device_syncs_oldest_first(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s1, dev.create_stream() as s2:
        s1.launch(failing_call(BAD_A))
        s2.launch(failing_call(BAD_B))
        with pytest.raises(aclasync.AclError) as first:
            await dev.synchronize()
        with pytest.raises(aclasync.AclError) as second:
            await dev.synchronize()
        await dev.synchronize()
        assert (first.value.code, first.value.stream) == (BAD_A, s1.handle)
        assert (second.value.code, second.value.stream) == (BAD_B, s2.handle)


async def test_two_failing_launches_are_raised_by_two_awaits_in_order(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(failing_call(BAD_A))
        s.launch(failing_call(BAD_B))
        with pytest.raises(aclasync.AclError) as first:
            await s.synchronize()
        with pytest.raises(aclasync.AclError) as second:
            await s.synchronize()
        await s.synchronize()
        assert (first.value.code, second.value.code) == (BAD_A, BAD_B)


async def _query(s: Any) -> None:
    await s.query()


async def _record(s: Any) -> None:
    await s.record_event()


async def _overflow_switch(s: Any) -> None:
    await s.set_overflow_switch(True)


async def _get_switch(s: Any) -> None:
    await s.get_overflow_switch()


@pytest.mark.parametrize("await_", [_query, _record, _overflow_switch, _get_switch])
async def test_the_first_completed_await_on_the_stream_raises_a_launch_failure(
    rt: Any, await_: Callable[[Any], Awaitable[None]]
) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(failing_call(BAD_A))
        with pytest.raises(aclasync.AclError) as info:
            await await_(s)
        assert info.value.code == BAD_A
        await s.synchronize()


async def test_an_event_wait_is_an_await_on_its_stream(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        ev = await s.record_event()
        s.launch(failing_call(BAD_A))
        await worker_caught_up(dev)
        with pytest.raises(aclasync.AclError) as info:
            await ev.synchronize()
        assert info.value.code == BAD_A
        await ev.synchronize()


async def test_several_failures_left_at_close_come_as_one_group_in_order(rt: Any) -> None:
    async with opened(rt) as dev:
        s = await dev.create_stream()
        s.launch(failing_call(BAD_A))
        s.launch(failing_call(BAD_B))
        s.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
        with pytest.raises(ExceptionGroup) as info:
            await s.aclose()
        codes = [e.code for e in info.value.exceptions]  # type: ignore[attr-defined]
        assert codes == [BAD_A, BAD_B, AICORE]


async def test_an_exception_in_flight_gets_the_failures_as_notes(rt: Any) -> None:
    async def fail_in_stream(dev: Any) -> None:
        async with dev.create_stream() as s:
            s.launch(failing_call(BAD_A))
            raise KeyError("the user's own error")

    async def fail_in_device() -> None:
        async with opened(rt) as dev:
            dev.default_stream.launch(failing_call(BAD_B))
            raise KeyError("the user's own error")

    async with opened(rt) as dev:
        with pytest.raises(KeyError) as info:
            await fail_in_stream(dev)
        notes = getattr(info.value, "__notes__", [])
        assert len(notes) == 1
        assert str(BAD_A) in notes[0]
        await dev.synchronize()  # reported (as a note) once: not again

    with pytest.raises(KeyError) as info:
        await fail_in_device()
    assert any(str(BAD_B) in note for note in getattr(info.value, "__notes__", []))


async def test_a_cancellation_in_flight_is_never_replaced_by_a_close(rt: Any) -> None:
    notes: list[str] = []
    async with opened(rt) as dev:
        with anyio.CancelScope() as scope:
            try:
                async with dev.create_stream() as s:
                    s.launch(failing_call(BAD_A))
                    await worker_caught_up(dev)
                    scope.cancel()
                    await anyio.sleep(5)
            except anyio.get_cancelled_exc_class() as exc:
                notes = list(getattr(exc, "__notes__", []))
                raise
        assert scope.cancelled_caught
        # Not as a note on the cancellation, which its scope swallowed: the failure
        # went to the device, whose next sync raises it, once.
        assert notes == []
        with pytest.raises(aclasync.AclError) as info:
            await dev.synchronize()
        assert info.value.code == BAD_A
        await dev.synchronize()


async def test_a_cancelled_stream_close_hands_later_failures_to_the_device(rt: Any) -> None:
    gate = Gate()
    handles = []

    async def cancel_a_close() -> None:
        async with opened(rt) as dev:
            s = await dev.create_stream()
            handles.append(s.handle)
            s.launch(dev.acl.sim.launch_kernel, gate.kernel(error=AICORE))
            with anyio.CancelScope() as scope:
                scope.cancel()
                await s.aclose()  # waits for the gate: cancelled, destroyed later
            assert s.closed
            gate.open()

    with pytest.raises(aclasync.AclError) as info:
        await cancel_a_close()
    assert (info.value.code, info.value.stream) == (AICORE, handles[0])


async def test_an_await_whose_own_call_fails_leaves_queued_failures(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        await s.set_failure_mode(aclasync.FailureMode.STOP)
        s.launch(failing_call(BAD_A))
        with pytest.raises(aclasync.AclError) as own:
            await s.set_failure_mode(aclasync.FailureMode.CONTINUE)  # no way back: 207000
        assert own.value.api == "acl.rt.set_stream_failure_mode"
        with pytest.raises(aclasync.AclError) as queued:
            await s.synchronize()
        assert queued.value.code == BAD_A


def _native_group(backend: str) -> Any:
    """A task group of the running library's own: trio's nursery raises its tasks'
    ``Cancelled`` as one group when its scope is cancelled."""
    if backend == "trio":
        import trio

        return trio.open_nursery()
    return anyio.create_task_group()


@pytest.mark.parametrize("holder", ["stream", "borrow"])
async def test_a_cancelled_body_that_raised_a_group_gives_its_failures_to_the_device(
    rt: Any, holder: str, anyio_backend_name: str
) -> None:
    # Rule 6: a cancelled body's failures go to the device. The exits took a group of
    # trio's Cancelled for an exception of the program's, put the failure on it as a
    # note, and the scope dropped the group, note and all: reported nowhere.
    async with opened(rt) as dev:
        with anyio.CancelScope() as scope:
            async with contextlib.AsyncExitStack() as stack:
                if holder == "stream":
                    s = await stack.enter_async_context(dev.create_stream())
                else:
                    pool = await stack.enter_async_context(dev.stream_pool(1))
                    s = await stack.enter_async_context(pool.stream())
                s.launch(failing_call(BAD_A))
                await worker_caught_up(dev)  # known before the exit runs
                async with _native_group(anyio_backend_name) as group:
                    group.start_soon(anyio.sleep_forever)
                    await anyio.lowlevel.checkpoint()
                    scope.cancel()
                    await anyio.sleep_forever()
        assert scope.cancelled_caught
        with pytest.raises(aclasync.AclError) as caught:
            await dev.synchronize()
        assert caught.value.code == BAD_A
        await dev.synchronize()  # once


@pytest.mark.parametrize("holder", ["stream", "default", "buffer", "host", "event"])
async def test_an_exit_in_a_cancelled_scope_never_replaces_the_blocks_exception(
    rt: Any, holder: str
) -> None:
    # Rule 6. The exits waited (or checkpointed) in the cancelled scope and raised its
    # Cancelled in place of the block's exception, which the scope then swallowed.
    gate = Gate()
    async with opened(rt) as dev:
        makers = {
            "stream": dev.create_stream,
            "default": lambda: dev.default_stream,
            "buffer": lambda: dev.alloc(64),
            "host": lambda: dev.alloc_host(64),
            "event": dev.default_stream.record_event,
        }
        resource = makers[holder]()
        if not isinstance(resource, aclasync.Stream):
            resource = await resource
        if isinstance(resource, aclasync.Stream):
            resource.launch(rt.sim.launch_kernel, gate.kernel())  # its exit has to wait
        with pytest.raises(ValueError, match="the block's own"), anyio.CancelScope() as scope:  # noqa: PT012
            async with resource:
                scope.cancel()
                raise ValueError("the block's own")
        gate.open()
        await dev.synchronize()


@pytest.mark.parametrize("holder", ["stream", "device"])
async def test_ctrl_c_ending_a_block_tells_the_failures_of_work_that_ended(
    rt: Any, holder: str
) -> None:
    # The exits Ctrl-C ends do not wait for work (it may never end), and they told
    # nothing of work that had already failed: its failure was lost for a program that
    # never closes the device again. They look once first.
    with pytest.raises(KeyboardInterrupt) as caught:  # noqa: PT012
        async with opened(rt) as dev:
            s = await dev.create_stream()
            s.launch(rt.sim.launch_kernel, Kernel(error=AICORE))
            handle = s.handle
            while (await dev.call(lambda: dev.acl.rt.stream_query(handle)))[0]:  # noqa: ASYNC110
                await anyio.sleep(0.001)  # (the runtime's own look: it reports nothing)
            if holder == "stream":
                async with s:
                    raise KeyboardInterrupt
            raise KeyboardInterrupt
    assert any(str(AICORE) in note for note in caught.value.__notes__)
