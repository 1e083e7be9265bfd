"""Issue 8, items 1 and 4: no hang after a failed record; no record_event race."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from frontend_support import Gate, opened

import aclasync
from aclasync import FailureMode
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio

AICORE = 507015
STREAM_ABORT = 107023


async def test_a_stopped_stream_gives_no_unrecorded_event_and_closes_at_once(rt: Any) -> None:
    with anyio.fail_after(5):
        async with opened(rt) as dev:
            s = await dev.create_stream()
            await s.set_failure_mode(FailureMode.STOP)
            s.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
            with pytest.raises(aclasync.AclError) as kernel:
                await s.synchronize()
            assert kernel.value.code == AICORE
            with pytest.raises(aclasync.AclError) as record:
                await s.record_event()  # no Event comes back: nothing to wait on for ever
            assert (record.value.code, record.value.api) == (STREAM_ABORT, "acl.rt.record_event")
            await s.synchronize()  # the abort was reported; the stream stays stopped
        assert not dev.worker_thread.is_alive()


async def test_a_stop_after_a_recorded_event_completes_its_waiters(rt: Any) -> None:
    gate = Gate()
    with anyio.fail_after(5):
        async with opened(rt) as dev, dev.create_stream() as s:
            await s.set_failure_mode(FailureMode.STOP)
            s.launch(dev.acl.sim.launch_kernel, gate.kernel(error=AICORE))
            ev = await s.record_event()  # recorded before the stop: dropped, so complete
            gate.open()
            await ev.synchronize(timeout=2)
            with pytest.raises(aclasync.AclError) as info:
                await s.synchronize()
            assert info.value.code == AICORE


async def test_concurrent_record_events_never_race_for_the_pool(rt: Any) -> None:
    events: list[Any] = []
    async with opened(rt) as dev, dev.create_stream() as s:
        await s.record_event()  # fills the pool (16 events) and returns one

        async def record() -> None:
            events.append(await s.record_event())

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(40):
                    tg.start_soon(record)
        assert len(events) == 40
        assert len({ev.handle for ev in events}) == 40
        for ev in events:
            await ev.synchronize()


async def test_a_request_then_a_burst_all_succeed(rt: Any) -> None:
    """The README's service shape: one request, then a burst of 100 concurrent ones."""
    done = 0
    async with opened(rt) as dev, dev.create_stream() as s:
        kernel = dev.acl.sim.launch_kernel

        async def request() -> None:
            nonlocal done
            s.launch(kernel, Kernel(duration_us=100))
            ev = await s.record_event()
            await ev.synchronize()
            await ev.aclose()
            done += 1

        with anyio.fail_after(10):
            await request()
            async with anyio.create_task_group() as tg:
                for _ in range(100):
                    tg.start_soon(request)
    assert done == 101
