"""A cancellation storm: hundreds of operations cancelled at random points, then
leak accounting of simulator objects and threads after close (issue 8)."""

from __future__ import annotations

import random
import sys
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from frontend_support import aclasync_threads, live_objects

import aclasync
from aclasync import StreamFlag
from aclasync.sim import Kernel

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

pytestmark = pytest.mark.anyio

#: What a failing call in the storm returns (its failure must not break anything).
BAD = 107001


async def _one_operation(dev: Any, streams: list[Any], rng: random.Random) -> None:
    kernel = dev.acl.sim.launch_kernel
    choice = rng.randrange(9)
    s = rng.choice(streams)
    if choice == 0:
        async with dev.create_stream() as extra:
            extra.launch(kernel, Kernel(duration_us=rng.uniform(0, 300)))
            await extra.synchronize()
    elif choice == 1:
        buffer = await dev.alloc(rng.choice([64, 4096, 1 << 20]))
        await buffer.aclose()
    elif choice == 2:
        host = await dev.alloc_host(4096)
        await host.aclose()
    elif choice == 3:
        s.launch(kernel, Kernel(duration_us=rng.uniform(0, 500)))
        timing = rng.random() < 0.5
        try:
            ev = s.record_event_nowait(timing=timing)  # the demo's way, when one is ready
        except anyio.WouldBlock:
            ev = await s.record_event(timing=timing)
        try:
            await ev.synchronize(timeout=rng.choice([None, 0, 0.001]))
        finally:
            await ev.aclose()
    elif choice == 4:
        s.launch(kernel, Kernel(duration_us=rng.uniform(0, 500)))
        await s.synchronize(timeout=rng.choice([None, 0, 0.0005]))
    elif choice == 5:
        await dev.synchronize(timeout=rng.choice([None, 0.001]))
    elif choice == 6:
        await s.query()
    elif choice == 7:
        s.launch(lambda *_: BAD)  # a failing call: reported to someone, never lost
    else:
        await dev.call(lambda: None)


async def test_a_cancellation_storm_leaves_nothing_behind(rt: Any) -> None:
    threads_before = len(aclasync_threads())
    fresh = live_objects(rt)
    rng = random.Random(20261130)
    failures: list[BaseException] = []

    async def storm_device(device_id: int) -> None:
        try:
            async with aclasync.open_device(device_id, backend=rt) as dev:
                streams = [dev.default_stream]
                for flags in (0, 0, StreamFlag.FAST_SYNC):  # lone FAST_SYNC waits: the worker's
                    streams.append(await dev.create_stream(flags=flags))

                async def operation(seed: int) -> None:
                    local = random.Random(seed)
                    with anyio.move_on_after(local.uniform(0, 0.003)):
                        try:
                            await _one_operation(dev, streams, local)
                        except (aclasync.AclError, ExceptionGroup) as exc:
                            failures.append(exc)

                async with anyio.create_task_group() as tg:
                    for _ in range(200):
                        tg.start_soon(operation, rng.random())
                        if rng.random() < 0.2:
                            await anyio.lowlevel.checkpoint()
        except (aclasync.AclError, ExceptionGroup) as exc:
            failures.append(exc)  # what the close found unreported

    async def cancelled_opens() -> None:
        for _ in range(20):
            with anyio.move_on_after(rng.uniform(0, 0.002)):
                async with aclasync.open_device(1, backend=rt) as dev:
                    await dev.synchronize()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(storm_device, 0)
            tg.start_soon(cancelled_opens)
    assert all(
        isinstance(leaf, (aclasync.AclError, aclasync.AclTimeoutError))
        for exc in failures
        for leaf in (exc.exceptions if isinstance(exc, ExceptionGroup) else [exc])
    )
    assert live_objects(rt) == fresh  # every device closed: nothing left in the runtime
    rt.sim.close()
    assert len(aclasync_threads()) <= threads_before
