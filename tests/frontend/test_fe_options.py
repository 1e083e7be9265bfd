"""WorkerOptions: validation, and placing the worker on the loop's CPU."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import aclasync

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"wait_slice_ms": 0}, ValueError),
        ({"wait_slice_ms": 0.5}, TypeError),
        ({"busy_poll_us": 0}, ValueError),
        ({"fast_sync_poll_us": -1}, ValueError),
        ({"busy_window_ms": -1}, ValueError),
        ({"inline_fast_sync": 1}, TypeError),
        ({"cpu": 10_000}, ValueError),
        # Accepted once, then the worker died at its first wait:
        ({"wait_slice_ms": 2**31}, ValueError),  # pyACL's int32 milliseconds
        ({"busy_poll_us": float("inf")}, ValueError),  # beyond a lock's timeout
        ({"busy_poll_us": 1e17}, ValueError),
        ({"fast_sync_poll_us": float("inf")}, ValueError),
        ({"cpu": 0.0}, TypeError),  # 0.0 in sched_getaffinity() is True
        ({"cpu": True}, TypeError),
        ({"busy_poll_us": True}, TypeError),
    ],
)
def test_bad_options_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        aclasync.WorkerOptions(**kwargs)


@pytest.mark.parametrize("value", [True, False])
def test_the_removed_waiting_thread_option_says_why(value: bool) -> None:
    gone = re.escape("WorkerOptions(waiting_thread=...) is gone: every device now has")
    with pytest.raises(TypeError, match=gone):
        aclasync.WorkerOptions(waiting_thread=value)  # type: ignore[call-arg]


async def test_options_must_be_worker_options(rt: Any) -> None:
    with pytest.raises(TypeError, match="WorkerOptions"):
        aclasync.open_device(0, backend=rt, options={"cpu": 0})  # type: ignore[arg-type]


@pytest.fixture
def restore_affinity() -> Iterator[None]:
    saved = os.sched_getaffinity(0)
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved)


@pytest.mark.usefixtures("restore_affinity")
async def test_cpu_loop_puts_loop_and_worker_on_one_cpu(rt: Any) -> None:
    options = aclasync.WorkerOptions(cpu="loop")
    with anyio.fail_after(10):
        async with aclasync.open_device(0, backend=rt, options=options) as dev:
            loop_cpus = os.sched_getaffinity(0)
            async with dev.create_stream() as s:
                await s.synchronize()  # the worker has started and pinned itself
                worker_cpus = os.sched_getaffinity(dev.worker_thread.native_id)
    assert len(loop_cpus) == 1
    assert worker_cpus == loop_cpus


@pytest.mark.usefixtures("restore_affinity")
async def test_an_explicit_cpu_pins_only_the_worker(rt: Any) -> None:
    before = os.sched_getaffinity(0)
    cpu = min(before)
    options = aclasync.WorkerOptions(cpu=cpu)
    with anyio.fail_after(10):
        async with aclasync.open_device(0, backend=rt, options=options) as dev:
            await dev.default_stream.synchronize()
            assert os.sched_getaffinity(dev.worker_thread.native_id) == {cpu}
            assert os.sched_getaffinity(0) == before
