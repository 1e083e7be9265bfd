"""A DevicePool opens and closes by the error rule (found by an adversarial review).

- the close of ``async with`` never replaces the exception ending the block (rule 6);
- ``aclose`` reports what the pool's close and every device's close found, and
  asyncio's own cancellation of it is raised once it is complete;
- an open that fails keeps its error through a cancellation of its clean-up;
- a close while the pool opens waits for the opening, which fails and leaves nothing;
- a bad ``timeout`` closes nothing.

Device work that must still run is held behind gates; asyncio's own ``task.cancel()``
is tested on asyncio's loops only.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from typing import Any

import anyio
import pytest
from pool_support import HeldCall, HookedAcl, holding

import aclasync
from aclasync.sim import Kernel

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

pytestmark = pytest.mark.anyio

LIMIT_S = 10.0
AICORE = 507015  # ACL_ERROR_RT_AICORE_EXCEPTION
VECTOR_CORE = 507011  # another failure, told apart by its code

asyncio_loops = pytest.mark.parametrize(
    "anyio_backend",
    [
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
    ],
)


def mentioned(exc: BaseException | None) -> str:
    """Everything *exc* says: itself, its notes, its group's members, its chain."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__context__, e.__cause__, *getattr(e, "exceptions", [])]
    return " ".join(repr(e) + " ".join(getattr(e, "__notes__", [])) for e in seen)


def fail_device(pool: aclasync.DevicePool, rt: Any, code: int = AICORE) -> None:
    """Leave a failure nobody was told of on the pool's first device."""
    pool.devices[0].default_stream.launch(rt.sim.launch_kernel, Kernel(error=code))


async def test_the_blocks_own_exception_survives_a_devices_failure(rt: Any) -> None:
    pool = aclasync.DevicePool([0, 1], backend=rt)
    with anyio.fail_after(LIMIT_S), pytest.raises(KeyError) as caught:  # noqa: PT012
        async with pool:
            fail_device(pool, rt)
            await pool.devices[1].synchronize()
            raise KeyError("the body's own error")
    assert str(AICORE) in " ".join(getattr(caught.value, "__notes__", []))
    assert rt.sim.live_objects()["device_refs"] == 0


async def test_a_cancelled_block_stays_cancelled_despite_a_devices_failure(rt: Any) -> None:
    pool = aclasync.DevicePool([0], backend=rt)
    with anyio.fail_after(LIMIT_S):
        with anyio.move_on_after(0.01) as scope:
            async with pool:
                fail_device(pool, rt)
                await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert rt.sim.live_objects()["device_refs"] == 0


async def test_aclose_reports_the_pools_failure_and_the_devices(rt: Any) -> None:
    # The device's failure replaced the one the pool's forced close found.
    pool = aclasync.DevicePool([0], backend=rt)
    await pool.__aenter__()
    holds = anyio.Event()

    async def borrower() -> None:
        with pytest.raises(anyio.ClosedResourceError):  # noqa: PT012 - the exit raises
            async with pool.stream() as s:
                s.launch(rt.sim.launch_kernel, Kernel(error=AICORE))
                await pool.devices[0].synchronize()  # it ended, unreported
                holds.set()
                await anyio.sleep_forever()

    with anyio.fail_after(LIMIT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(borrower)
            await holds.wait()
            fail_device(pool, rt, VECTOR_CORE)
            with pytest.raises(ExceptionGroup) as caught:
                await pool.aclose(timeout=0)
    codes = sorted(e.code for e in caught.value.exceptions if isinstance(e, aclasync.AclError))
    assert codes == [VECTOR_CORE, AICORE]


@asyncio_loops
async def test_a_cancelled_aclose_raises_the_cancellation_once_closed(
    rt: Any, gate: threading.Event
) -> None:
    pool = aclasync.DevicePool([0], backend=rt)
    await pool.__aenter__()
    fail_device(pool, rt)
    lent = anyio.Event()
    give_back = anyio.Event()

    async def borrower() -> None:
        async with pool.stream():
            lent.set()
            await give_back.wait()

    with anyio.fail_after(LIMIT_S):
        holder = asyncio.ensure_future(borrower())
        await lent.wait()
        closer = asyncio.ensure_future(pool.aclose())
        await asyncio.sleep(0.01)  # it waits for the borrowed stream
        closer.cancel()
        await asyncio.sleep(0.01)
        assert not closer.done()
        give_back.set()
        await holder
        with pytest.raises(asyncio.CancelledError) as caught:
            await closer
    assert str(AICORE) in " ".join(getattr(caught.value, "__notes__", []))
    assert rt.sim.live_objects()["device_refs"] == 0


@asyncio_loops
async def test_a_failed_open_keeps_its_error_through_a_timeout_of_its_clean_up(
    rt: Any,
) -> None:
    # Device 2 cannot be opened; the timeout expires while device 1 is released.
    reset = HeldCall("reset_device", 1)
    acl = HookedAcl(rt, holding(reset, returning={("set_device", 2): 107001}))
    pool = aclasync.DevicePool([0, 1, 2], backend=acl)

    with anyio.fail_after(LIMIT_S):
        timed_out = await _timed_out_in_its_clean_up(pool, reset)
    assert "107001" in mentioned(timed_out)
    assert rt.sim.live_objects()["device_refs"] == 0


async def _timed_out_in_its_clean_up(
    opening: contextlib.AbstractAsyncContextManager[Any], held: HeldCall
) -> TimeoutError:
    """Enter *opening* under ``asyncio.timeout``; let the timeout expire while *held*
    holds its clean-up, then release it; return the ``TimeoutError`` it ended with.
    The timeout is made to expire once the clean-up is reached (a fixed 50 ms could
    pass before the opening failed on a loaded machine: then it never failed)."""
    timeout = asyncio.timeout(None)

    async def open_with_timeout() -> None:
        async with timeout, opening:
            pytest.fail("it opened")

    opener = asyncio.ensure_future(open_with_timeout())
    await held.wait_reached()
    timeout.reschedule(asyncio.get_running_loop().time())  # expires now, in the clean-up
    await asyncio.sleep(0.01)  # (its callback is due at once: it runs first)
    held.release()
    with pytest.raises(TimeoutError) as caught:
        await opener
    return caught.value


async def test_aclose_while_the_pool_opens_waits_and_nothing_is_left(rt: Any) -> None:
    # The close returned at once, having closed device 0 only; the opening then opened
    # device 1 after the close "completed".
    opening = HeldCall("set_device", 1)
    acl = HookedAcl(rt, holding(opening))
    pool = aclasync.DevicePool([0, 1], backend=acl)
    closed = anyio.Event()
    outcome: list[BaseException] = []

    async def opener() -> None:
        try:
            async with pool:
                pytest.fail("the pool opened after its close")
        except anyio.ClosedResourceError as exc:
            outcome.append(exc)

    async def closer() -> None:
        await pool.aclose()
        closed.set()

    with anyio.fail_after(LIMIT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(opener)
            await opening.wait_reached()
            tg.start_soon(closer)
            await anyio.sleep(0.01)
            assert not closed.is_set()  # it waits for the opening
            opening.release()
    assert "closed while it opened" in str(outcome[0])
    assert {k: v for k, v in rt.sim.live_objects().items() if v} == {}


async def test_a_bad_timeout_closes_nothing(rt: Any) -> None:
    with pytest.raises(TypeError):
        await aclasync.DevicePool([0], backend=rt).aclose(timeout="soon")  # type: ignore[arg-type]
    with anyio.fail_after(LIMIT_S):
        async with aclasync.DevicePool([0], backend=rt) as pool:
            with pytest.raises(ValueError, match="timeout"):
                await pool.aclose(timeout=-1)
            assert not pool.pool.closed
            async with pool.stream() as s:
                await s.synchronize()


@asyncio_loops
async def test_a_stream_pools_failed_open_keeps_its_error_through_a_timeout(rt: Any) -> None:
    # The same for a StreamPool: its third stream cannot be made, and the timeout
    # expires while the first two are destroyed.
    destroy = HeldCall("destroy_stream")
    made = 0

    def third_refused(name: str, args: tuple[Any, ...], call: Any) -> Any:
        nonlocal made
        if name == "create_stream_with_config":
            made += 1
            if made == 3:
                return 0, 207000
        if destroy.matches(name, args):
            destroy.hold()
        return call(*args)

    acl = HookedAcl(rt)
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=acl) as dev:
            acl.hook = third_refused

            timed_out = await _timed_out_in_its_clean_up(dev.stream_pool(3), destroy)
            assert "207000" in mentioned(timed_out)
            assert rt.sim.live_objects()["streams"] == 0


@asyncio_loops
async def test_a_cancelled_aclose_keeps_its_cancellation_when_a_devices_close_fails(
    rt: Any,
) -> None:
    # Cancelled while device 0's release was held, whose close then raised its failure:
    # the close raised that AclError and the cancellation was lost.
    reset = HeldCall("reset_device", 0)
    acl = HookedAcl(rt)
    pool = aclasync.DevicePool([0], backend=acl)
    with anyio.fail_after(LIMIT_S):
        await pool.__aenter__()
        fail_device(pool, rt)
        acl.hook = holding(reset)
        closer = asyncio.ensure_future(pool.aclose())
        await reset.wait_reached()
        closer.cancel()
        reset.release()
        with pytest.raises(asyncio.CancelledError) as caught:
            await closer
    assert str(AICORE) in " ".join(getattr(caught.value, "__notes__", []))
    assert rt.sim.live_objects()["device_refs"] == 0


async def test_aclose_in_a_cancelled_scope_stays_cancelled_despite_a_failure(rt: Any) -> None:
    # `finally: await pool.aclose()` in a cancelled scope let the device's AclError out
    # of the scope (a Device's close raises the cancellation, the failure as a note).
    pool = aclasync.DevicePool([0], backend=rt)
    with anyio.fail_after(LIMIT_S):
        with anyio.CancelScope() as scope:
            await pool.__aenter__()
            try:
                fail_device(pool, rt)
                scope.cancel()
                await anyio.sleep_forever()
            finally:
                await pool.aclose()
    assert scope.cancelled_caught
    assert rt.sim.live_objects()["device_refs"] == 0


async def test_a_keyboard_interrupt_a_close_meets_is_raised_as_itself(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a cancelled scope it became a note on the cancellation, which the scope
    # swallowed: Ctrl-C was lost.
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            pool = await dev.stream_pool(2)
            async with pool.stream() as one:
                pass
            close = one.aclose

            async def interrupted(**kwargs: Any) -> None:
                await close(**kwargs)
                raise KeyboardInterrupt("Ctrl-C")

            monkeypatch.setattr(one, "aclose", interrupted)
            with pytest.raises(KeyboardInterrupt), anyio.CancelScope() as scope:  # noqa: PT012
                try:
                    scope.cancel()
                    await anyio.sleep_forever()
                finally:
                    await pool.aclose()
            assert pool.closed
    assert rt.sim.live_objects()["streams"] == 0
