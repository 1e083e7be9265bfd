"""Stream pools after an adversarial review: no stream is ever lost, lent dead, or
lent with another borrower's settings; closes end; the counters count what happened.

Kernels that must still run are held behind gates; asyncio's own ``task.cancel()``
(what ``asyncio.timeout``, a ``TaskGroup`` and servers use, and which passes anyio's
shields) is tested on asyncio only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pool_support import HookedAcl, holding, passing

import aclasync
from aclasync import FailureMode
from aclasync.sim import Kernel

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

pytestmark = pytest.mark.anyio

LIMIT_S = 10.0
AICORE_EXCEPTION = 507015


#: For tests of asyncio's own cancellation (task.cancel()), or of a misuse that breaks
#: a trio run itself: on asyncio's loops only.
asyncio_loops = pytest.mark.parametrize(
    "anyio_backend",
    [
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
    ],
)


def raises_value_error(stream: int) -> int:
    raise ValueError("launched call raised")


class Fatal(BaseException):
    """A launched call's ``BaseException``: it comes out as itself."""


def raises_fatal(stream: int) -> int:
    raise Fatal("launched call raised a BaseException")


def live_streams(rt: Any) -> int:
    return int(rt.sim.live_objects()["streams"])


# -- 1. any failure of the returned stream's work ------------------------------------


async def test_a_launched_call_that_raised_is_raised_on_return_and_the_stream_replaced(
    rt: Any,
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            with pytest.raises(ValueError, match="launched call raised"):
                async with pool.stream() as failed:
                    failed.launch(raises_value_error)
            async with pool.stream() as fresh:  # never hangs: the stream was replaced
                assert fresh is not failed
                await fresh.synchronize()
            stats = pool.statistics()
    assert (stats.size, stats.borrowed, stats.replaced) == (1, 0, 1)


async def test_a_raising_body_keeps_its_exception_when_a_launched_call_raised(
    rt: Any,
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            with pytest.raises(KeyError) as caught:  # noqa: PT012 - the block's exit
                async with pool.stream() as s:
                    s.launch(raises_value_error)
                    raise KeyError("the body's own error")
            notes = getattr(caught.value, "__notes__", [])
            assert any("launched call raised" in note for note in notes), notes
            async with pool.stream() as again:
                await again.synchronize()
            await dev.synchronize()  # reported once, as the note


async def test_a_base_exception_on_return_leaves_one_stream_fewer_never_a_phantom(
    rt: Any,
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(2) as pool:
            with pytest.raises(Fatal):
                async with pool.stream() as s:
                    s.launch(raises_fatal)
            stats = pool.statistics()
            assert (stats.size, stats.borrowed) == (1, 0)
            async with pool.stream() as s:  # the other stream still lends
                await s.synchronize()


# -- 2. asyncio's own cancellation passes anyio's shields ----------------------------


@asyncio_loops
async def test_asyncio_cancel_at_a_grant_gives_the_stream_back(rt: Any) -> None:
    entered: list[str] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:

            async def borrower() -> None:
                async with pool.stream():
                    entered.append("borrower")

            async def canceller() -> None:
                task.cancel()  # runs while the grant yields (asyncio runs ready tasks FIFO)

            task = asyncio.ensure_future(borrower())
            other = asyncio.ensure_future(canceller())
            with pytest.raises(asyncio.CancelledError):
                await task
            await other
            assert entered == []
            assert pool.statistics().borrowed == 0
            async with pool.stream() as s:  # the stream was given back
                await s.synchronize()
            assert pool.statistics().grants == 1  # the cancelled grant never happened


@asyncio_loops
@pytest.mark.parametrize("error", [0, AICORE_EXCEPTION])
@pytest.mark.parametrize("cancels", ["in the exit", "in the body and in the exit"])
async def test_asyncio_cancel_during_a_borrows_exit_still_recycles_the_stream(
    rt: Any, gate: threading.Event, error: int, cancels: str
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            left = anyio.Event()

            async def request() -> None:
                async with pool.stream() as s:
                    s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait, error=error))
                    if cancels == "in the exit":
                        left.set()  # and the exit waits for the gated kernel
                    else:
                        await anyio.sleep_forever()

            task = asyncio.ensure_future(request())
            await anyio.wait_all_tasks_blocked()
            if cancels != "in the exit":
                task.cancel()  # the body ends; the exit waits for the gated kernel
            await anyio.wait_all_tasks_blocked()
            assert pool.statistics().borrowed == 1
            task.cancel()
            await anyio.wait_all_tasks_blocked()
            assert not task.done()  # the exit goes on waiting for the stream's work
            gate.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            stats = pool.statistics()
            assert (stats.size, stats.borrowed, stats.replaced) == (1, 0, 1 if error else 0)
            async with pool.stream() as s:
                await s.synchronize()
            if error:  # the cancelled borrower's failure went to the device
                with pytest.raises(aclasync.AclError) as caught:
                    await dev.synchronize()
                assert caught.value.code == error
            await dev.synchronize()


@asyncio_loops
async def test_asyncio_cancel_during_a_raising_borrows_exit_keeps_the_bodys_exception(
    rt: Any, gate: threading.Event
) -> None:
    # Rule 6, as every other exit keeps it: the held cancellation was raised in place
    # of the body's exception, once the stream was back.
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:

            async def request() -> None:
                async with pool.stream() as s:
                    s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait, error=AICORE_EXCEPTION))
                    raise ValueError("the request's own")

            task = asyncio.ensure_future(request())
            await anyio.wait_all_tasks_blocked()  # the exit waits for the gated kernel
            task.cancel()
            await anyio.wait_all_tasks_blocked()
            gate.set()
            with pytest.raises(ValueError, match="the request's own") as caught:
                await task
            assert any("507015" in note for note in caught.value.__notes__)
            assert pool.statistics().size == 1
            await dev.synchronize()  # told once, as a note


@asyncio_loops
@pytest.mark.parametrize("kind", ["stream pool", "device pool"])
async def test_asyncio_cancel_of_aclose_still_completes_the_close(rt: Any, kind: str) -> None:
    with anyio.fail_after(LIMIT_S):
        dev = await aclasync.open_device(1, backend=rt)
        before = live_streams(rt)
        if kind == "device pool":
            pool: Any = aclasync.DevicePool([0], backend=rt, streams_per_device=2)
            await pool.__aenter__()
        else:
            pool = await dev.stream_pool(2)
        release = anyio.Event()

        async def holder() -> None:
            async with pool.stream():
                await release.wait()

        held = asyncio.ensure_future(holder())
        await anyio.wait_all_tasks_blocked()
        closing = asyncio.ensure_future(pool.aclose())
        await anyio.wait_all_tasks_blocked()
        closing.cancel()
        await anyio.wait_all_tasks_blocked()
        assert not closing.done()  # still waiting for the borrowed stream
        release.set()
        await held
        with pytest.raises(asyncio.CancelledError):
            await closing
        assert live_streams(rt) == before  # every stream of the pool is closed
        if kind == "device pool":
            assert all(device.closed for device in pool.devices)
        with pytest.raises(anyio.ClosedResourceError):
            async with pool.stream():
                pass
        await dev.aclose()


# -- 3 and 7. a device that broke or closed lends no more ---------------------------


#: The calls a device's worker and waiting thread make when they look for finished work.
LOOKS = frozenset(
    {
        "query_event_status",
        "synchronize_event_with_timeout",
        "synchronize_stream_with_timeout",
        "stream_query",
        "synchronize_stream",
    }
)


def break_device0(name: str, args: tuple[Any, ...], call: Any) -> Any:
    """A hook: device 0's worker meets a fault when it looks for finished work."""
    if name in LOOKS and threading.current_thread().name.startswith("aclasync-device0"):
        raise RuntimeError("injected death of device 0")
    return call(*args)


async def test_a_dead_devices_streams_are_dropped_and_the_others_lend(
    rt: Any, gate: threading.Event
) -> None:
    acl = HookedAcl(rt)
    with anyio.fail_after(LIMIT_S):
        async with aclasync.DevicePool([0, 1], backend=acl, streams_per_device=1) as pool:
            async with pool.stream() as a, pool.stream() as b:
                for s in (a, b):  # both go back settled
                    s.launch(rt.sim.launch_kernel, Kernel(duration_us=10))
                    await s.synchronize()
            dead = pool.devices[0]
            acl.hook = break_device0
            dead.default_stream.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait))
            with pytest.raises(aclasync.DeviceBrokenError):
                await dead.default_stream.synchronize()
            gate.set()
            lent_by = []
            for _ in range(3):
                async with pool.stream() as s:
                    s.launch(rt.sim.launch_kernel, Kernel(duration_us=10))
                    await s.synchronize()
                    lent_by.append(s.device.id)
            assert lent_by == [1, 1, 1]
            assert pool.statistics().capacity == {0: 0, 1: 1}
            acl.hook = passing


async def test_a_closed_devices_streams_are_never_lent(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.DevicePool([0, 1], backend=rt, streams_per_device=2) as pool:
            await pool.devices[0].aclose()
            for _ in range(4):
                async with pool.stream() as s:
                    assert (s.device.id, s.closed) == (1, False)
                    await s.synchronize()
            stats = pool.statistics()
    assert (stats.capacity, stats.grants) == ({0: 0, 1: 2}, 4)


async def test_a_pool_whose_device_closed_refuses_borrowers_as_closed(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        dev = await aclasync.open_device(0, backend=rt)
        pool = await dev.stream_pool(1)
        await dev.aclose()
        for _ in range(2):  # the first finds the closed stream, the second none left
            with pytest.raises(anyio.ClosedResourceError, match="Device 0"):
                async with pool.stream():
                    pytest.fail("a closed stream was lent")
        await pool.aclose()


# -- 4. a close's timeout bounds it even when a borrower shields its wait ------------


@pytest.mark.parametrize("awaits", ["its stream", "something else"])
async def test_a_close_timeout_bounds_it_when_a_borrower_shields_its_wait(
    rt: Any, gate: threading.Event, awaits: str
) -> None:
    # The close returned only when the shielded borrower did (or never, had that
    # borrow waited for the closing task), and the borrower's exit then returned
    # normally though its queued work was gone. Now the close ends at its timeout,
    # with the kernel still held, and the exit raises.
    release = anyio.Event()
    outcome: list[BaseException] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            pool = await dev.stream_pool(1)

            async def holder() -> None:
                try:
                    async with pool.stream() as s:
                        s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait))
                        with anyio.CancelScope(shield=True):
                            await (s.synchronize() if awaits == "its stream" else release.wait())
                except BaseException as exc:
                    outcome.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(holder)
                await anyio.wait_all_tasks_blocked()
                await pool.aclose(timeout=0.05)
                assert not gate.is_set()
                assert pool.closed
                release.set()
            gate.set()
        [error] = outcome  # (the body's own, from its wait, or the exit's)
        assert isinstance(error, anyio.ClosedResourceError)
        assert "force" in str(error)
        assert pool.statistics().borrowed == 0
        assert live_streams(rt) == 0


# -- 5. a close from inside the caller's own borrow ----------------------------------


@pytest.mark.parametrize("timeout", [None, 0.1])
@pytest.mark.parametrize("kind", ["stream pool", "device pool"])
async def test_aclose_from_inside_the_callers_own_borrow_raises_at_once(
    rt: Any, timeout: float | None, kind: str
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(1, backend=rt) as dev:
            if kind == "device pool":
                pool: Any = aclasync.DevicePool([0], backend=rt)
                await pool.__aenter__()
            else:
                pool = await dev.stream_pool(1)
            async with pool.stream() as s:
                with pytest.raises(RuntimeError, match="inside one of the calling task's"):
                    await pool.aclose(timeout=timeout)
                await s.synchronize()  # nothing was closed
            async with pool.stream() as s:  # the pool still lends
                await s.synchronize()
            await pool.aclose()


# -- 6. a forced close closes every stream, whatever they raise -----------------------


async def test_a_forced_close_closes_every_stream_whatever_they_raise(rt: Any) -> None:
    outcome: dict[str, object] = {}
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            before = live_streams(rt)
            pool = await dev.stream_pool(3)  # one lent, two free: all three closed

            async def holder() -> None:
                with pytest.raises(anyio.ClosedResourceError):  # noqa: PT012 - the exit
                    async with pool.stream() as s:
                        s.launch(raises_value_error)
                        await dev.call(lambda: None)  # the worker has run it
                        await anyio.sleep_forever()

            async with anyio.create_task_group() as tg:
                tg.start_soon(holder)
                await anyio.wait_all_tasks_blocked()
                try:
                    await pool.aclose(timeout=0.05)
                except ValueError as exc:
                    outcome["aclose"] = exc
            assert isinstance(outcome.get("aclose"), ValueError)
            assert live_streams(rt) == before  # none of the three was left open
            assert repr(pool).endswith(" closed>")
            await pool.aclose()  # and the close is complete


# -- 8. a pool closed before it was opened --------------------------------------------


async def test_a_pool_closed_before_it_opened_never_opens(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            before = live_streams(rt)
            pool = dev.stream_pool(2)
            await pool.aclose()
            with pytest.raises(anyio.ClosedResourceError):
                await pool
            assert live_streams(rt) == before
        devices = aclasync.DevicePool([1], backend=rt, streams_per_device=2)
        await devices.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            async with devices:
                pytest.fail("a closed device pool opened")
        assert devices.devices == ()
        assert live_streams(rt) == before


# -- 9. an exit in another task than the entry ----------------------------------------


@asyncio_loops
async def test_a_borrow_exited_in_another_task_still_returns_its_stream(rt: Any) -> None:
    # (On trio, exiting a cancel scope in another task corrupts the run itself.)
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            borrow = pool.stream()
            entered = anyio.Event()

            async def enter() -> None:
                await borrow.__aenter__()
                entered.set()

            async def leave() -> None:
                await entered.wait()
                with pytest.raises(RuntimeError, match="different task"):
                    await borrow.__aexit__(None, None, None)
                with pytest.raises(RuntimeError, match="exited once"):
                    await borrow.__aexit__(None, None, None)

            # Plain tasks: the entering one ends with the lease still open (the misuse).
            await asyncio.gather(enter(), leave())
            assert pool.statistics().borrowed == 0
            async with pool.stream() as a:
                await a.synchronize()
            assert pool.statistics().size == 1


# -- 10. a borrower's settings never reach the next ------------------------------------


@pytest.mark.parametrize("setting", ["failure mode STOP", "overflow switch on"])
async def test_a_reconfigured_stream_is_replaced_before_the_next_borrower(
    rt: Any, setting: str
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            async with pool.stream() as s:
                if setting == "failure mode STOP":
                    await s.set_failure_mode(FailureMode.STOP)
                else:
                    await s.set_overflow_switch(True)
                await s.synchronize()
            async with pool.stream() as fresh:
                assert fresh is not s
                assert not await fresh.get_overflow_switch()
                await fresh.set_failure_mode(FailureMode.CONTINUE)  # not STOP: allowed
            stats = pool.statistics()
    assert (stats.size, stats.replaced) == (1, 1)


# -- 11. the counters count what happened ----------------------------------------------


async def test_waits_counts_only_borrowers_that_got_a_stream(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            async with pool.stream(), anyio.create_task_group() as tg:

                async def impatient() -> None:
                    async with pool.stream():
                        pytest.fail("a cancelled waiter was served")

                for _ in range(3):
                    tg.start_soon(impatient)
                await anyio.wait_all_tasks_blocked()
                assert pool.statistics().waiting == 3
                tg.cancel_scope.cancel()  # all three give up waiting
            async with pool.stream():  # one more, served at once
                pass
            stats = pool.statistics()
    assert (stats.grants, stats.waits, stats.waiting) == (2, 0, 0)


@asyncio_loops
async def test_a_grant_passed_on_from_a_cancelled_waiter_counts_once(rt: Any) -> None:
    # (trio never cancels a waiter whose wake-up is already scheduled: it is served.)
    served: list[str] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:

            async def borrower(name: str) -> None:
                async with pool.stream():
                    served.append(name)

            async with pool.stream():
                first = asyncio.ensure_future(borrower("first"))
                await anyio.wait_all_tasks_blocked()
                second = asyncio.ensure_future(borrower("second"))
                await anyio.wait_all_tasks_blocked()
            first.cancel()  # granted the stream on return; cancelled before it resumes
            with pytest.raises(asyncio.CancelledError):
                await first
            await second
            stats = pool.statistics()
    assert served == ["second"]
    assert (stats.grants, stats.waits, stats.grants_out_of_order) == (2, 1, 0)


async def test_replaced_counts_only_streams_whose_successor_was_made(rt: Any) -> None:
    acl = HookedAcl(rt)
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=acl) as dev, dev.stream_pool(1) as pool:
            acl.hook = holding(returning={("create_stream_with_config", None): (0, 107000)})
            with pytest.raises(ExceptionGroup):
                async with pool.stream() as s:
                    s.launch(rt.sim.launch_kernel, Kernel(error=AICORE_EXCEPTION))
            stats = pool.statistics()
            assert (stats.size, stats.replaced) == (0, 0)
            with pytest.raises(anyio.BrokenResourceError, match="no streams left"):
                async with pool.stream():
                    pass
            acl.hook = passing


async def test_a_pools_close_in_a_cancelled_scope_closes_it_then_raises(rt: Any) -> None:
    # Every awaited method checkpoints (docs/api): a trio loop whose only awaits are
    # closes can still be cancelled.
    async with aclasync.open_device(0, backend=rt) as dev:
        pool = await dev.stream_pool(2)
        for _ in "ab":  # the close, then a second (idempotent) one
            with anyio.CancelScope() as scope:
                scope.cancel()
                await pool.aclose()
                pytest.fail("the close checkpoints")
            assert pool.closed
        assert dev.acl.sim.live_objects()["streams"] == 0


# -- a second review: the forced close says so, is bounded, closes all -------------------


async def test_a_forced_close_from_a_task_the_borrow_waits_for_returns(rt: Any) -> None:
    # A child task of the borrowing task closes the pool: the close waited for the
    # borrow, which waited for the child (a deadlock no timeout ended).
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            pool = await dev.stream_pool(1)

            async def borrow_and_close_from_a_child() -> None:
                async with pool.stream(), anyio.create_task_group() as children:
                    children.start_soon(functools.partial(pool.aclose, timeout=0.05))
                    await anyio.sleep_forever()

            with pytest.raises(anyio.ClosedResourceError):
                await borrow_and_close_from_a_child()
            assert pool.closed


async def test_a_forced_close_closes_every_stream_whatever_a_launched_call_raised(
    rt: Any,
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            pool = await dev.stream_pool(3)

            async def holder() -> None:
                with contextlib.suppress(anyio.ClosedResourceError):
                    async with pool.stream() as s:
                        s.launch(raises_fatal)
                        await anyio.sleep_forever()

            async with anyio.create_task_group() as tg:
                tg.start_soon(holder)
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(Fatal):
                    await pool.aclose(timeout=0.05)
            assert pool.closed
            assert live_streams(rt) == 0


async def test_a_stream_its_borrower_closed_is_replaced(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            async with pool.stream() as s:
                await s.aclose()
            stats = pool.statistics()
            assert (stats.size, stats.replaced) == (1, 1)
            async with pool.stream() as fresh:
                assert fresh is not s
                assert not fresh.closed
                await fresh.synchronize()


@asyncio_loops
async def test_a_borrows_exit_ends_under_a_storm_of_cancellations(
    rt: Any, gate: threading.Event
) -> None:
    # Each of asyncio's cancellations started the exit's wait for the stream's work
    # again: under a cancellation at every turn of the loop it never ended.
    loop = asyncio.get_running_loop()
    async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
        launched = asyncio.Event()

        async def borrower() -> None:
            async with pool.stream() as s:
                s.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait))
                launched.set()

        task = asyncio.ensure_future(borrower())
        await launched.wait()  # it leaves the block: its exit waits for the held kernel
        storm_ends = loop.time() + 2.0

        def cancel_again() -> None:
            if not task.done() and loop.time() < storm_ends:
                task.cancel()
                loop.call_soon(cancel_again)

        loop.call_soon(cancel_again)
        loop.call_later(0.05, gate.set)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), 10)
        assert loop.time() < storm_ends  # it ended during the storm
        async with pool.stream() as again:  # and the stream came back
            await again.synchronize()
