"""Stream.record_event_nowait: events recorded without a round trip, and failed records."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest
from frontend_support import Gate, Log, live_objects, ms, opened, worker_caught_up

import aclasync
from aclasync import FailureMode
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio

AICORE = 507015
STREAM_ABORT = 107023


async def _ready(dev: Any, s: aclasync.Stream, *, timing: bool = False) -> aclasync.Event:
    """A nowait record, once the device has events ready (it has none when opened)."""
    try:
        return s.record_event_nowait(timing=timing)
    except anyio.WouldBlock:
        await worker_caught_up(dev)  # the refill the miss asked for has run
        return s.record_event_nowait(timing=timing)


async def test_a_nowait_event_orders_another_stream_and_can_be_waited_on(rt: Any) -> None:
    gate = Gate()
    log = Log()
    with anyio.fail_after(10):
        async with opened(rt) as dev, dev.create_stream() as a, dev.create_stream() as b:
            kernel = dev.acl.sim.launch_kernel
            a.launch(kernel, gate.kernel())
            a.launch(kernel, Kernel(fn=log.add("a")))
            ev = await _ready(dev, a)
            b.wait_event(ev)
            b.launch(kernel, Kernel(fn=log.add("b")))
            assert not await ev.query()
            assert not await b.query()  # held behind the event, device-side
            gate.open()
            await b.synchronize()
            assert log.snapshot() == ["a", "b"]
            await ev.synchronize()
            assert await ev.query()
            await ev.aclose()


async def test_nowait_timing_events_measure_the_work_between_them(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        untimed = await _ready(dev, s)
        start = await _ready(dev, s, timing=True)
        with pytest.raises(ValueError, match="timing=True"):
            await untimed.elapsed_time(start)
        s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=ms(5)))
        end = await _ready(dev, s, timing=True)
        assert end.timing
        assert not untimed.timing
        assert await start.elapsed_time(end) >= 4.0  # the model runs it at least 5 ms


async def test_nowait_says_would_block_until_events_are_ready_and_never_races(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        with pytest.raises(anyio.WouldBlock):
            s.record_event_nowait()  # a device starts with none ready
        await worker_caught_up(dev)
        events = []
        for _ in range(1000):  # take them all: then the next one says so, cleanly
            try:
                events.append(s.record_event_nowait())
            except anyio.WouldBlock:
                break
        assert events, "the miss did not make the device ready any events"
        assert len({ev.handle for ev in events}) == len(events)
        for ev in events:
            await ev.synchronize()
            await ev.aclose()
        # Given-back events are ready again for the next records.
        again = s.record_event_nowait()
        assert again.handle in {ev.handle for ev in events}
        await again.synchronize()


async def test_a_failed_nowait_record_is_reported_once_and_its_event_never_hangs(
    rt: Any,
) -> None:
    with anyio.fail_after(10):
        async with opened(rt) as dev:
            s = await dev.create_stream()
            await s.set_failure_mode(FailureMode.STOP)
            await _ready(dev, s)  # events ready; this one is recorded
            s.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
            with pytest.raises(aclasync.AclError) as kernel:
                await s.synchronize()
            assert kernel.value.code == AICORE
            ev = s.record_event_nowait()  # queued: the stopped stream will refuse it
            with pytest.raises(aclasync.AclError) as first:
                await ev.synchronize()  # the stream's failure, reported here, once
            assert (first.value.code, first.value.api) == (STREAM_ABORT, "acl.rt.record_event")
            await s.synchronize()  # reported: the stream has nothing more to say
            with pytest.raises(aclasync.AclError) as again:
                await ev.synchronize(timeout=5)  # still never recorded: at once, fresh
            assert again.value.code == STREAM_ABORT
            assert again.value is not first.value
            assert any("never recorded" in note for note in again.value.__notes__)
            with pytest.raises(aclasync.AclError):
                await ev.query()
            await ev.aclose()
        assert not dev.worker_thread.is_alive()


async def test_nowait_events_are_all_released_when_the_device_closes(rt: Any) -> None:
    before = live_objects(rt)
    async with opened(rt) as dev, dev.create_stream() as s:
        held = [await _ready(dev, s) for _ in range(3)]  # never closed by the user
        await held[-1].synchronize()
    rt.sim.close()
    assert live_objects(rt)["events"] == before["events"]


async def test_nowait_on_a_closed_stream_raises_closed(rt: Any) -> None:
    async with opened(rt) as dev:
        s = await dev.create_stream()
        await s.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            s.record_event_nowait()
        with pytest.raises(TypeError):
            dev.default_stream.record_event_nowait(timing="yes")  # type: ignore[arg-type]


async def test_a_stream_never_waits_for_an_event_whose_record_failed(rt: Any) -> None:
    # Its handle goes back to the pool and may be another event's, recorded behind
    # unrelated work: a wait_event on it ordered the stream behind that work.
    gate = Gate()
    try:
        with anyio.fail_after(10):
            async with opened(rt) as dev:
                s, t, other = [await dev.create_stream() for _ in range(3)]
                await s.set_failure_mode(FailureMode.STOP)
                await _ready(dev, s)  # events ready
                s.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
                with pytest.raises(aclasync.AclError):
                    await s.synchronize()  # stopped
                other.launch(dev.acl.sim.launch_kernel, gate.kernel())
                unknown = s.record_event_nowait()  # refused on the worker, later
                t.wait_event(unknown)  # its failure is not known yet: t's to report
                with pytest.raises(aclasync.AclError) as failure:
                    await t.synchronize(timeout=5)  # never behind other's held kernel
                assert failure.value.code == STREAM_ABORT
                assert any("never recorded" in note for note in failure.value.__notes__)
                with pytest.raises(aclasync.AclError) as known:
                    t.wait_event(unknown)  # known now: raised at once
                assert known.value.code == STREAM_ABORT
                await t.synchronize(timeout=5)
                gate.open()
                for stream in (s, t, other):
                    with contextlib.suppress(aclasync.AclError):
                        await stream.aclose()
    finally:
        gate.open()
