"""``Model.run`` on a shared stream keeps the stream's order and its events tidy, and
refuses what it cannot run, under adversarial use, on every event loop:

- a run started after overlapping runs on a stream starts after all of them;
- a model's bookkeeping per caller's stream does not grow with the streams it saw;
- a model with a dynamic output is refused before anything is made;
- a buffer set that cannot be made leaves nothing behind.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import aclasync
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio


async def test_a_run_after_overlapping_runs_starts_after_all_of_them(
    rt: Any, tmp_path: Path
) -> None:
    """Runs A (held in its body) and B overlap on a stream: both are ordered after the
    stream's work before either has queued its own wait there. Run C, started once B
    returned, must not start before A ends."""
    held = threading.Event()
    log: list[tuple[str, float]] = []

    def body(x: Any) -> Any:
        log.append(("start", float(x[0])))
        if x[0] == 1.0:
            held.wait(30)
        log.append(("end", float(x[0])))
        return x

    path = rt.sim.register_model(
        tmp_path / "held.om",
        inputs=[("x", (4,), "float32")],
        outputs=[("y", (4,), "float32")],
        fn=body,
    )
    c_returned = False
    with anyio.fail_after(30):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(path) as model,
            dev.create_stream() as stream,
            dev.create_stream() as other,
        ):
            async with anyio.create_task_group() as tg:  # three buffer sets, made now
                for _ in range(3):
                    tg.start_soon(model.run, stream, np.zeros(4, np.float32))
            kept = []
            try:
                b_done = anyio.Event()

                async def run_b() -> None:
                    await model.run(stream, np.full(4, 2.0, np.float32))
                    b_done.set()

                worker_gate = threading.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(dev.call, worker_gate.wait)  # the worker makes no events
                    while True:  # take every ready event: each record now asks the worker
                        try:
                            kept.append(other.record_event_nowait())
                        except anyio.WouldBlock:
                            break
                    tg.start_soon(model.run, stream, np.full(4, 1.0, np.float32))
                    tg.start_soon(run_b)
                    for _ in range(20):  # both runs are ordered and park on the worker
                        await anyio.lowlevel.checkpoint()
                    worker_gate.set()
                    await b_done.wait()
                    with anyio.move_on_after(1.0):  # A is held: C cannot finish
                        await model.run(stream, np.full(4, 3.0, np.float32))
                        c_returned = True
                    held.set()
            finally:
                held.set()
                for event in kept:
                    await event.aclose()
    assert not c_returned
    assert log.index(("end", 1.0)) < log.index(("start", 3.0))


async def test_a_run_starts_after_work_a_device_call_queued_on_its_stream(
    rt: Any, tmp_path: Path
) -> None:
    """A run, then a kernel queued on the caller's stream by ``dev.call`` (pyACL
    directly), then a second run: the second must not end before that kernel."""
    path = rt.sim.register_model(
        tmp_path / "same.om",
        inputs=[("x", (4,), "float32")],
        outputs=[("y", (4,), "float32")],
        fn=lambda x: x,
    )
    gate = threading.Event()
    with anyio.fail_after(30):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(path) as model,
            dev.create_stream() as stream,
        ):
            await model.run(stream, np.zeros(4, np.float32))
            held = Kernel(fn=lambda: gate.wait(30))
            assert await dev.call(lambda: dev.acl.sim.launch_kernel(held, stream.handle)) == 0
            try:
                with anyio.move_on_after(0.3) as waited:
                    await model.run(stream, np.ones(4, np.float32))
                assert waited.cancelled_caught  # it starts after the held kernel
            finally:
                gate.set()
            await stream.synchronize()


async def test_a_models_per_stream_state_does_not_grow_with_the_streams_it_ran_on(
    rt: Any, model_path: str
) -> None:
    """A stream per request, each closed after its run: the device's live events stay
    flat (each caller's stream once held one of the model's events until the model
    closed)."""
    x, bias = np.ones((4, 8), np.float32), np.zeros(8, np.float32)
    live: list[int] = []
    with anyio.fail_after(60):
        async with aclasync.open_device(0, backend=rt) as dev, dev.load_model(model_path) as model:
            for requests in (5, 45):
                for _ in range(requests):
                    async with dev.create_stream() as stream:
                        await model.run(stream, x, bias)
                live.append(rt.sim.live_objects()["events"])
    assert live[1] <= live[0] + 2, live


async def test_run_refuses_a_model_whose_output_shape_is_dynamic(rt: Any, tmp_path: Path) -> None:
    """Its size is known only after the run: ``run`` would return the staging buffer's
    stale bytes. Refused before anything is made."""

    def first(x: Any, n: Any) -> Any:
        return x[: int(n[0])]

    path = rt.sim.register_model(
        tmp_path / "dynamic_out.om",
        inputs=[("x", (8,), "float32"), ("n", (1,), "int32")],
        outputs=[("y", ((1, 8),), "float32")],
        fn=first,
    )
    x = np.arange(8, dtype=np.float32)
    runs = [(x, np.array([n], np.int32)) for n in (8, 2)]
    await _each_run_fails_leaving_nothing(rt, path, runs, ValueError, "output 'y' has a dynamic")


async def test_a_buffer_set_that_cannot_be_made_leaves_nothing_behind(
    rt: Any, tmp_path: Path
) -> None:
    """An output larger than the device's memory: each run raises the allocation's
    ``AclError`` and gives back the stream and buffers it made on the way."""

    def huge(x: Any) -> Any:
        raise AssertionError("never run: its output cannot be allocated")

    path = rt.sim.register_model(
        tmp_path / "huge.om",
        inputs=[("x", (4,), "float32")],
        outputs=[("y", (2**36,), "float32")],
        fn=huge,
    )
    runs = [(np.zeros(4, np.float32),)] * 3
    await _each_run_fails_leaving_nothing(rt, path, runs, aclasync.AclError, "207001")


async def _each_run_fails_leaving_nothing(
    rt: Any, path: Path, runs: list[tuple[Any, ...]], error: type[Exception], match: str
) -> None:
    """Run the model at *path* on each of *runs*: each raises *error*, and the runtime's
    live objects are as they were before the first."""
    async with (
        aclasync.open_device(0, backend=rt) as dev,
        dev.load_model(path) as model,
        dev.create_stream() as stream,
    ):
        before = rt.sim.live_objects()
        for arrays in runs:
            with pytest.raises(error, match=match):
                await model.run(stream, *arrays)
        assert rt.sim.live_objects() == before


async def test_a_run_waits_for_work_another_thread_queued_on_an_exported_stream(
    rt: Any, model_path: str
) -> None:
    # The second run used to chain on the first run's event alone: aclasync's counts
    # never see the other thread's kernel between the two.
    gate = threading.Event()
    started = threading.Event()
    try:
        with anyio.fail_after(20):
            async with (
                aclasync.open_device(0, backend=rt) as dev,
                dev.load_model(model_path) as model,
                dev.create_stream() as stream,
            ):
                _, handle = stream.__acl_stream__()
                x, bias = np.ones((4, 8), np.float32), np.zeros(8, np.float32)
                await model.run(stream, x, bias)

                def other_thread() -> None:
                    assert rt.rt.set_device(0) == 0
                    held = Kernel(fn=lambda: (started.set(), gate.wait(10)))
                    assert rt.sim.launch_kernel(held, handle) == 0
                    assert rt.rt.reset_device(0) == 0

                await anyio.to_thread.run_sync(other_thread)
                done = anyio.Event()

                async def second_run() -> None:
                    await model.run(stream, x, bias)
                    done.set()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(second_run)
                    assert await anyio.to_thread.run_sync(started.wait, 10)
                    await anyio.sleep(0.05)  # the kernel cannot end: the gate is shut
                    assert not done.is_set(), "the run did not wait for the other's kernel"
                    gate.set()
    finally:
        gate.set()


async def test_runs_on_a_stopped_stream_return_their_own_output(rt: Any, model_path: str) -> None:
    # The caller's stream refuses the run's ordering event (FailureMode.STOP): that
    # refusal is the stream's; the run, whose own work ran, raised it as its own.
    with anyio.fail_after(20):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(model_path) as model,
        ):
            stream = await dev.create_stream()
            await stream.set_failure_mode(aclasync.FailureMode.STOP)
            stream.launch(dev.acl.sim.launch_kernel, Kernel(error=507015))
            with pytest.raises(aclasync.AclError):
                await stream.synchronize()  # stopped, its cause reported
            x, bias = np.ones((4, 8), np.float32), np.zeros(8, np.float32)
            for _ in range(3):
                y, _total = await model.run(stream, x, bias)
                assert y.shape == (4, 8)
            with pytest.raises(aclasync.AclError) as refused:
                await stream.aclose()
            assert refused.value.code == 107023
