"""Issue 8, item 5: nothing leaks, whatever is cancelled and whatever dies.

Leaks are counted with the simulator's own ``acl.sim.live_objects()`` and with the
process's threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import sys
import threading
import traceback
import warnings
import weakref
from typing import Any

import anyio
import pytest
from frontend_support import BreakableAcl, Gate, aclasync_threads, live_objects, opened

import aclasync

pytestmark = pytest.mark.anyio


async def test_cancelling_open_device_leaks_no_thread_and_no_device_reference(rt: Any) -> None:
    before_threads = len(aclasync_threads())
    before = live_objects(rt)
    rng = random.Random(8)
    for i in range(30):
        with anyio.CancelScope() as scope:
            if i % 3 == 0:
                scope.cancel()  # cancelled before the device is even set
            else:
                scope.deadline = anyio.current_time() + rng.uniform(0, 0.002)
            async with aclasync.open_device(0, backend=rt) as dev:
                await dev.synchronize()
                await anyio.sleep(1)
    rt.sim.close()
    assert live_objects(rt) == before
    assert len(aclasync_threads()) <= before_threads


@pytest.mark.parametrize("what", ["alloc", "alloc_host", "create_stream", "record_event"])
async def test_a_cancelled_creation_leaves_nothing_behind(rt: Any, what: str) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        before: dict[str, int] = {}
        for i in range(51):
            if i == 1:  # after one round: an event given back stays in the device's pool
                await dev.synchronize()
                before = live_objects(rt)
            with anyio.CancelScope() as scope:
                scope.cancel()
                if what == "alloc":
                    await dev.alloc(1 << 20)
                elif what == "alloc_host":
                    await dev.alloc_host(1 << 20)
                elif what == "create_stream":
                    await dev.create_stream()
                else:
                    await s.record_event()
            assert scope.cancelled_caught
        await dev.synchronize()
        after = live_objects(rt)
        # The device caches fence events (one per stream fenced while busy): a sync
        # may add one. A leak would add one per cancelled call.
        assert after.pop("events") <= before.pop("events") + 1
        assert after == before


async def test_a_second_device_on_a_held_device_releases_its_fence_events(rt: Any) -> None:
    async with opened(rt) as holder:
        await holder.synchronize()
        before = live_objects(rt)
        for _ in range(5):
            gate = Gate()
            async with opened(rt) as dev, dev.create_stream() as s:
                s.launch(dev.acl.sim.launch_kernel, gate.kernel())
                async with anyio.create_task_group() as tg:
                    tg.start_soon(s.synchronize)  # a fence event on a busy stream
                    await anyio.wait_all_tasks_blocked()
                    gate.open()
                ev = await s.record_event()
                await ev.synchronize()
            assert live_objects(rt) == before


async def test_a_dead_worker_releases_the_device_and_raises_fresh_errors(rt: Any) -> None:
    acl = BreakableAcl(rt)
    before = live_objects(rt)
    gate = Gate()
    async with aclasync.open_device(0, backend=acl) as dev:
        buffer = await dev.alloc(4096)
        host = await dev.alloc_host(4096)
        s = await dev.create_stream()
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        await s.record_event()
        acl.armed.set()
        with anyio.fail_after(5), pytest.raises(aclasync.DeviceBrokenError) as first:
            await s.synchronize()  # the worker queries the fence's event and dies
        gate.open()
        errors = [first.value]
        for _ in range(200):
            with pytest.raises(aclasync.DeviceBrokenError) as info:
                await s.synchronize()
            errors.append(info.value)
        assert len({id(e) for e in errors}) == len(errors)  # each one fresh
        assert all(isinstance(e.__cause__, RuntimeError) for e in errors)
        assert len(traceback.extract_tb(errors[-1].__traceback__)) < 30
        dev.worker_thread.join(5)
        assert live_objects(rt) == before  # released without waiting for sim.close()
        await buffer.aclose()
        await host.aclose()
        await s.aclose()
    with pytest.raises(anyio.ClosedResourceError):
        _ = buffer.ptr


class _BreaksMakingEvents(BreakableAcl):
    """Once armed, ``create_event`` raises: the worker dies making the events it keeps
    ready, a job no waiter waits for."""

    _BREAKING = frozenset({"create_event"})


async def test_a_death_nobody_saw_is_raised_by_the_close(rt: Any) -> None:
    acl = _BreaksMakingEvents(rt)

    async def die_unseen() -> None:
        async with aclasync.open_device(0, backend=acl) as dev:
            s = await dev.create_stream()
            acl.armed.set()
            with pytest.raises(anyio.WouldBlock):
                s.record_event_nowait()  # none ready yet: the worker makes some, and dies
            assert await anyio.to_thread.run_sync(acl.broke.wait, 5.0)
            await anyio.to_thread.run_sync(dev.worker_thread.join, 5)
            assert not dev.worker_thread.is_alive()

    with pytest.raises(aclasync.DeviceBrokenError):
        await die_unseen()


def _closed_with_a_wait_in_flight(
    rt: Any, wait: str, *, answered: bool = False
) -> tuple[Any, Any, Gate, weakref.ref[Any]]:
    """A device opened on a loop that is then closed with ``wait`` (``"sync"``: a
    stream's synchronize; ``"close"``: the device's close; ``"overflow"``: a stream's
    get_overflow_status) parked behind a gate, as after a shutdown cut short: the device,
    its stream, the gate and a weak reference to the loop. *answered*: the gate opens, and the
    worker answers, before the loop closes (its resumption due, never run)."""
    gate = Gate()
    box: dict[str, Any] = {}

    async def setup() -> None:
        box["dev"] = dev = await aclasync.open_device(0, backend=rt)
        stream = box["stream"] = await dev.create_stream()
        stream.launch(rt.sim.launch_kernel, gate.kernel(error=507015))

    loop = asyncio.new_event_loop()
    loop.run_until_complete(setup())
    stream, dev = box["stream"], box["dev"]
    parked = {
        "sync": stream.synchronize,
        "close": dev.aclose,
        "overflow": stream.get_overflow_status,
    }[wait]()
    task = loop.create_task(parked)
    loop.run_until_complete(asyncio.sleep(0.05))
    assert not task.done()
    if answered:
        gate.open()
        dev.worker_thread.join(10)  # the close's answer was posted: it never runs
        assert not dev.worker_thread.is_alive()
    loop.close()
    del task
    return dev, stream, gate, weakref.ref(loop)


def _close_raises_the_kernels_failure(dev: Any) -> None:
    """Close *dev* on a new loop: it raises the gated kernel's failure (507015)."""

    async def later() -> None:
        with anyio.fail_after(10), pytest.raises(aclasync.AclError) as caught:
            await dev.aclose()
        assert caught.value.code == 507015

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Task was destroyed but it is pending"
        asyncio.run(later())


def test_a_loop_closed_with_a_wait_in_flight_is_not_kept_alive(rt: Any) -> None:
    # Its delivery kept the waiter the worker answered, and through it the loop.
    dev, _, gate, loop = _closed_with_a_wait_in_flight(rt, "sync")

    async def later() -> None:
        gate.open()
        with pytest.raises(aclasync.AclError):  # the kernel's failure, for the device
            await dev.aclose()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Task was destroyed but it is pending"
        asyncio.run(later())
        gc.collect()
    assert loop() is None


def test_a_close_cut_short_by_its_loop_is_finished_by_the_next(rt: Any) -> None:
    # The first close's loop was closed before it resumed: the next close waited for
    # it for ever; it now returns once the device is released, with what was left.
    dev, _, gate, _ = _closed_with_a_wait_in_flight(rt, "close")
    before = len(aclasync_threads())
    gate.open()
    _close_raises_the_kernels_failure(dev)
    assert live_objects(rt)["streams"] == 0
    assert len(aclasync_threads()) < before


def test_a_close_finished_by_the_next_leaves_the_first_loop_to_be_collected(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker kept the first close's stop job (its submit refuses work after it),
    # and with it its waiter, the closing task and the closed loop, for as long as the
    # device was referenced.
    dev, _, gate, loop_ref = _closed_with_a_wait_in_flight(rt, "close")
    gate.open()
    _close_raises_the_kernels_failure(dev)
    _forget_anyio_tasks_of(loop_ref)
    # The never-resumed close, collected, cannot exit its cancel scope outside its loop:
    # pytest would keep that unraisable error, whose frames hold the loop.
    monkeypatch.setattr(sys, "unraisablehook", lambda _: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Task was destroyed but it is pending"
        gc.collect()
    assert loop_ref() is None
    assert dev.closed


def _forget_anyio_tasks_of(loop_ref: weakref.ref[Any]) -> None:
    """anyio (4.x) keeps the state of a task whose cancel scope never exited, here the
    close its closed loop never resumed, for good: its map's values refer to their
    keys. Drop that loop's entries, to see what aclasync itself keeps."""
    from anyio._backends import _asyncio as anyio_asyncio

    states = getattr(anyio_asyncio, "_task_states", {})
    loop = loop_ref()
    for task in [task for task in list(states.keys()) if task.get_loop() is loop]:
        del states[task]
    del loop


def test_a_loop_closed_with_a_drain_due_drops_what_comes_next() -> None:
    # Answers posted after the loop closed, while a resumption it had been asked for
    # was still due, piled up for ever (holding their tasks, and the loop).
    from aclasync import _loop

    loop = asyncio.new_event_loop()
    delivery = _loop._AsyncioDelivery(loop)
    first, second = _loop.Waiter(delivery), _loop.Waiter(delivery)
    delivery.post([first])  # a drain is now due on the loop
    loop.close()
    with pytest.raises(RuntimeError):
        delivery.post([second])
    assert delivery.dead
    assert not delivery._pending


async def test_events_collected_unclosed_go_back_to_the_pool(rt: Any) -> None:
    # The documented pattern awaits a request's event and drops it: each one stayed
    # out of the pool, a runtime event, until the device closed.
    async with opened(rt) as dev, dev.create_stream() as stream:
        done = await stream.record_event()
        await done.synchronize()
        del done
        gc.collect()
        before = live_objects(rt)["events"]
        for _ in range(100):
            done = await stream.record_event()
            await done.synchronize()
            del done  # (collected at once: nothing else refers to it)
        assert live_objects(rt)["events"] <= before + 2


def test_a_close_answered_just_before_its_loop_closed_is_finished_by_the_next(
    rt: Any,
) -> None:
    # Its delivery was not yet known dead (nothing was posted after the close): the
    # next close returned quietly and the kernel's failure was lost.
    dev, *_ = _closed_with_a_wait_in_flight(rt, "close", answered=True)
    _close_raises_the_kernels_failure(dev)


@pytest.mark.parametrize("later_loop", ["asyncio", "trio"])
def test_an_overflow_read_cut_short_by_its_loop_leaves_the_next_one_its_turn(
    rt: Any, later_loop: str
) -> None:
    # The read held the stream's overflow turn (one status buffer per stream) and its
    # loop closed before it ended the turn: every later read waited for ever.
    dev, stream, gate, _ = _closed_with_a_wait_in_flight(rt, "overflow")

    async def later() -> None:
        gate.open()
        with anyio.fail_after(10):
            with pytest.raises(aclasync.AclError):  # the gated kernel's failure
                await stream.synchronize()
            assert await stream.get_overflow_status() == 0
        await dev.aclose()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        anyio.run(later, backend=later_loop)
        gc.collect()  # the cut-short read's coroutine, closed: its late end is harmless


def test_two_later_closes_report_what_a_cut_short_close_left_once(rt: Any) -> None:
    # Both later closes (two loops, two threads) found the first one's loop gone and
    # both reported what it left. Each is held right after that look until the other
    # has looked too.
    dev, _, gate, _ = _closed_with_a_wait_in_flight(rt, "close")
    gate.open()
    dev.worker_thread.join(10)
    delivery = dev._state._stop[0].delivery
    both = threading.Barrier(2, timeout=2)

    class Held(type(delivery)):  # type: ignore[misc]
        def gone(self) -> bool:
            answer = bool(super().gone())
            with contextlib.suppress(threading.BrokenBarrierError):
                both.wait()
            return answer

    delivery.__class__ = Held
    results: list[Any] = []

    def closer() -> None:
        async def close() -> None:
            try:
                await dev.aclose()
                results.append("quiet")
            except aclasync.AclError as exc:
                results.append(exc.code)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            asyncio.run(close())

    threads = [threading.Thread(target=closer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert sorted(results, key=str) == [507015, "quiet"]
