"""Stream pools: failed streams replaced, closing waits or forces, bad input refused."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

import aclasync
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio

LIMIT_S = 10.0
AICORE_EXCEPTION = 507015


async def test_work_that_failed_unseen_is_raised_on_return_and_the_stream_replaced(
    rt: Any,
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            with pytest.raises(aclasync.AclError) as caught:
                async with pool.stream() as failed:
                    failed.launch(rt.sim.launch_kernel, Kernel(error=AICORE_EXCEPTION))
            assert caught.value.code == AICORE_EXCEPTION
            assert failed.closed
            async with pool.stream() as fresh:
                assert fresh is not failed
                fresh.launch(rt.sim.launch_kernel, Kernel(duration_us=100))
                await fresh.synchronize()
            stats = pool.statistics()
    assert (stats.replaced, stats.size, stats.borrowed) == (1, 1, 0)


async def test_a_failure_the_borrower_saw_leaves_a_clean_stream(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            async with pool.stream() as s:
                s.launch(rt.sim.launch_kernel, Kernel(error=AICORE_EXCEPTION))
                with pytest.raises(aclasync.AclError):
                    await s.synchronize()
            async with pool.stream() as again:
                assert again is s
                await again.synchronize()
            assert pool.statistics().replaced == 0


async def test_a_cancelled_holder_returns_its_stream_after_its_work(
    rt: Any, gate: threading.Event
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            entered = anyio.Event()
            scope = anyio.CancelScope()
            async with anyio.create_task_group() as tg:

                async def holder() -> None:
                    with scope:
                        async with pool.stream() as s:
                            s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait))
                            entered.set()
                            await anyio.sleep_forever()

                tg.start_soon(holder)
                await entered.wait()
                scope.cancel()
                # The holder's exit waits, shielded, for its gated kernel.
                for _ in range(10):
                    await anyio.lowlevel.checkpoint()
                assert pool.statistics().borrowed == 1
                gate.set()
            stats = pool.statistics()
            assert (stats.borrowed, stats.size) == (0, 1)
            async with pool.stream() as s:
                assert await s.query()


async def test_close_waits_for_borrowed_streams_and_refuses_newcomers(
    rt: Any, gate: threading.Event
) -> None:
    events: list[str] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            pool = await dev.stream_pool(1)
            release = anyio.Event()
            async with anyio.create_task_group() as tg:

                async def holder() -> None:
                    async with pool.stream() as s:
                        s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait))
                        await release.wait()
                        events.append("holder done")

                async def queued() -> None:
                    with pytest.raises(anyio.ClosedResourceError):
                        async with pool.stream():
                            pass
                    events.append("queued refused")

                async def closer() -> None:
                    await pool.aclose()
                    events.append("closed")

                tg.start_soon(holder)
                while pool.statistics().borrowed == 0:
                    await anyio.lowlevel.checkpoint()
                tg.start_soon(queued)
                while pool.statistics().waiting == 0:
                    await anyio.lowlevel.checkpoint()
                tg.start_soon(closer)
                while "queued refused" not in events:
                    await anyio.lowlevel.checkpoint()
                assert pool.closed
                with pytest.raises(anyio.ClosedResourceError):
                    async with pool.stream():
                        pass
                assert "closed" not in events
                gate.set()
                release.set()
    assert events == ["queued refused", "holder done", "closed"]


async def test_close_with_a_timeout_force_closes_with_a_clear_error(
    rt: Any, gate: threading.Event
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            pool = await dev.stream_pool(2)
            errors: list[BaseException] = []
            async with anyio.create_task_group() as tg:

                async def holder() -> None:
                    try:
                        async with pool.stream() as s:
                            s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait))
                            await s.synchronize()
                    except anyio.ClosedResourceError as exc:
                        errors.append(exc)

                tg.start_soon(holder)
                while pool.statistics().borrowed == 0:
                    await anyio.lowlevel.checkpoint()
                await pool.aclose(timeout=0.05)
            gate.set()
    assert len(errors) == 1
    assert "force-closed" in str(errors[0])
    assert "timeout=0.05" in str(errors[0])
    stats = pool.statistics()
    assert (stats.borrowed, stats.waiting) == (0, 0)


async def test_a_close_timeout_also_ends_the_wait_for_a_stream_given_back(
    rt: Any, gate: threading.Event
) -> None:
    # The borrower has left; the pool waits for the stream's work before lending it
    # again. The close's timeout used to leave that wait alone: aclose(timeout=) waited
    # for the kernel, however long.
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            pool = await dev.stream_pool(2)
            left = anyio.Event()

            async def borrower() -> None:
                # Its work was dropped: the exit says so (it returned normally once).
                with pytest.raises(anyio.ClosedResourceError, match="force-closed"):
                    async with pool.stream() as s:
                        s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait))
                left.set()

            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(borrower)
                    await anyio.wait_all_tasks_blocked()  # the borrower's exit waits
                    assert pool.statistics().borrowed == 1
                    with anyio.fail_after(LIMIT_S / 2):  # the gate is still shut
                        await pool.aclose(timeout=0.05)
                    await left.wait()
                assert pool.statistics().borrowed == 0
            finally:
                gate.set()


async def test_close_is_idempotent_and_a_device_pool_closes_its_devices(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.DevicePool([1], backend=rt, streams_per_device=3) as pool:
            assert pool.statistics().size == 3
            devices = pool.devices
        await pool.aclose()
    assert all(device.closed for device in devices)
    with pytest.raises(anyio.ClosedResourceError):
        async with pool.stream():
            pass


async def test_a_pool_must_be_opened_before_borrowing(rt: Any) -> None:
    async with aclasync.open_device(0, backend=rt) as dev:
        pool = dev.stream_pool(1)
        with pytest.raises(RuntimeError, match="not open"):
            async with pool.stream():
                pass
        await pool.aclose()


async def test_a_failed_open_closes_the_devices_it_opened(rt: Any) -> None:
    # Device 5 does not exist on a two-device runtime: set_device fails.
    opened = aclasync.DevicePool([0, 5], backend=rt)
    with pytest.raises(aclasync.AclError):
        async with opened:
            pass
    assert [device.id for device in opened.devices] == [0]
    assert opened.devices[0].closed


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"size": 0}, ValueError, "size must be >= 1"),
        ({"size": True}, TypeError, "size must be an int"),
        ({"size": 2, "flags": -1}, ValueError, "flags must be >= 0"),
        ({"size": 2, "flags": 1.0}, TypeError, "flags must be an int"),
    ],
)
async def test_stream_pool_arguments_are_checked(
    rt: Any, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    async with aclasync.open_device(0, backend=rt) as dev:
        with pytest.raises(error, match=match):
            dev.stream_pool(**kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (([],), {}, ValueError, "at least one device"),
        (([0, 0],), {}, ValueError, "distinct"),
        (([-1],), {}, ValueError, "non-negative"),
        (("01",), {}, TypeError, "iterable of ints"),
        (([0],), {"streams_per_device": 0}, ValueError, "streams_per_device must be >= 1"),
    ],
)
def test_device_pool_arguments_are_checked(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        aclasync.DevicePool(*args, **kwargs)


async def test_a_stream_its_borrower_synced_goes_back_without_another_sync(rt: Any) -> None:
    """Return skips the sync only while nothing was queued after the borrower's sync."""
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            async with pool.stream() as s:
                assert not s._settled()  # never synced
                s.launch(rt.sim.launch_kernel, Kernel(duration_us=100))
                assert not s._settled()
                await s.synchronize()
                assert s._settled()
                s.launch(rt.sim.launch_kernel, Kernel(error=AICORE_EXCEPTION))
                assert not s._settled()  # queued after the sync: return must sync
                with pytest.raises(aclasync.AclError):
                    await s.synchronize()
                assert not s._settled()  # a failing sync settles nothing
                await s.synchronize()
                assert s._settled()
                await dev.call(lambda: None)  # a call may queue work on any stream
                assert not s._settled()
            gate = threading.Event()
            with pytest.raises(aclasync.AclError) as caught:  # noqa: PT012 - raised at return
                async with pool.stream() as s:
                    await s.synchronize()
                    s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait, error=AICORE_EXCEPTION))
                    gate.set()
            assert caught.value.code == AICORE_EXCEPTION  # the return synced and saw it
            assert pool.statistics().replaced == 1


async def test_a_pool_cancelled_while_it_opens_leaves_no_stream(rt: Any) -> None:
    # The cancellation was seen after the streams were made, outside the cleanup: the
    # caller never got the pool, and its streams stayed on the device (and in every
    # device sync) until the device closed.
    held = threading.Event()
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            streams = rt.sim.live_objects()["streams"]
            async with anyio.create_task_group() as tg:
                tg.start_soon(dev.call, held.wait, LIMIT_S)  # the pool's creations queue behind it
                with anyio.CancelScope() as scope:

                    async def cancel_then_release() -> None:
                        await anyio.wait_all_tasks_blocked()
                        scope.cancel()
                        held.set()

                    tg.start_soon(cancel_then_release)
                    async with dev.stream_pool(3):
                        pytest.fail("the body of a cancelled pool ran")
            assert scope.cancelled_caught
            await dev.synchronize()
            assert rt.sim.live_objects()["streams"] == streams
            assert len(dev._state._lanes) == 1  # the default stream only


async def test_a_device_closed_under_a_borrower_leaves_its_finished_work_quiet(
    rt: Any,
) -> None:
    # The device's close waits for the borrower's work, then releases the stream: the
    # borrower's exit raised ClosedResourceError for work that had ended well (a stream
    # the borrower made is quiet then), and a borrower still waiting for the pool got
    # BrokenResourceError ("no streams left") rather than the device's closed error.
    gate = threading.Event()
    outcomes: dict[str, object] = {}
    with anyio.fail_after(LIMIT_S):
        dev = await aclasync.open_device(0, backend=rt)
        pool = await dev.stream_pool(1)

        async def borrower() -> None:
            async with pool.stream() as s:
                s.launch(rt.sim.launch_kernel, Kernel(fn=lambda: gate.wait(LIMIT_S)))
                await s.synchronize()
            outcomes["borrower"] = "done"

        async def second() -> None:
            try:
                async with pool.stream():
                    outcomes["second"] = "borrowed"
            except anyio.ClosedResourceError:
                outcomes["second"] = "closed"

        async with anyio.create_task_group() as tg:
            tg.start_soon(borrower)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(second)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(dev.aclose)
            await anyio.wait_all_tasks_blocked()
            gate.set()
    assert outcomes == {"borrower": "done", "second": "closed"}


@pytest.mark.parametrize("other_loop", ["asyncio", "trio"])
async def test_a_borrow_from_another_event_loop_is_refused(rt: Any, other_loop: str) -> None:
    # The pool's queue of borrowers is its loop's: a waiter from another loop was never
    # woken (and the owner's loop then hung in its own borrow's exit).
    outcome: list[BaseException] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:

            def borrow_elsewhere() -> None:
                async def borrow() -> None:
                    try:
                        async with pool.stream():
                            pass
                    except RuntimeError as exc:
                        outcome.append(exc)

                anyio.run(borrow, backend=other_loop)

            async with pool.stream():  # the only stream is out
                await anyio.to_thread.run_sync(borrow_elsewhere)
            async with pool.stream() as s:  # and the owner's loop goes on
                await s.synchronize()
    assert len(outcome) == 1
    assert "belongs to the event loop that opened it" in str(outcome[0])
