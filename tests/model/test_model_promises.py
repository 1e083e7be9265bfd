"""``Model`` keeps its promises under adversarial use (issue 20), on every event loop.

- a run whose own execution failed never returns output, even on a stream that other
  runs keep busy;
- ``aclose`` while runs are making their buffer sets: those runs raise
  ``ClosedResourceError`` and nothing outlives the model;
- failed and cancelled runs give their buffer sets back, so the pool stays at its peak
  concurrency (or ``pool_size``);
- a model whose device worker died is released with the device.
"""

from __future__ import annotations

import random
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest
from model_support import BreakingAcl

import aclasync
from aclasync._pyacl.codes import ErrorCode
from aclasync.sim import Kernel

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

pytestmark = pytest.mark.anyio

MODEL_EXECUTE = ErrorCode.ACL_ERROR_RT_MODEL_EXECUTE
TRIALS = 200
NO_OBJECTS = {"models": 0, "model_descs": 0, "datasets": 0, "data_buffers": 0}


def picky(x: Any) -> Any:
    """Fails on a negative first element, as a model's kernel fault would."""
    if x[0] < 0:
        raise ValueError("negative input")
    return x + 1.0


@pytest.fixture
def picky_path(rt: Any, tmp_path: Path) -> str:
    return str(
        rt.sim.register_model(
            tmp_path / "picky.om",
            inputs=[("x", (4,), "float64")],
            outputs=[("y", (4,), "float64")],
            fn=picky,
            duration_us=200,
        )
    )


async def test_a_failing_run_never_returns_output_on_a_shared_stream(
    rt: Any, picky_path: str
) -> None:
    """A failing and a good run started together on one stream, 200 times."""
    stale = wrong = 0
    with anyio.fail_after(60):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(picky_path) as model,
            dev.create_stream() as stream,
        ):
            # Free buffer sets for every trial's two runs, so that neither run makes
            # one (a failed run may set its set aside).
            async with anyio.create_task_group() as tg:
                for _ in range(TRIALS + 2):
                    tg.start_soon(model.run, stream, np.zeros(4))

            for trial in range(TRIALS):
                outcome: dict[str, Any] = {}

                async def run(name: str, x: Any) -> None:
                    try:
                        outcome[name] = (await model.run(stream, x))[0]  # noqa: B023
                    except aclasync.AclError as exc:
                        outcome[name] = exc  # noqa: B023

                good = np.full(4, float(trial))
                # Both runs queue their work behind a held kernel, and the worker takes
                # all of it in one go: the failing run's point is then reached while the
                # good run keeps the stream busy.
                kernel_gate, worker_gate = threading.Event(), threading.Event()
                stream.launch(dev.acl.sim.launch_kernel, Kernel(fn=kernel_gate.wait))
                async with anyio.create_task_group() as tg:
                    tg.start_soon(dev.call, worker_gate.wait)
                    tg.start_soon(run, "bad", np.full(4, -1.0))
                    tg.start_soon(run, "good", good)
                    for _ in range(20):  # both runs queue their work and park
                        await anyio.lowlevel.checkpoint()
                    worker_gate.set()
                    kernel_gate.set()
                if not isinstance(outcome["bad"], aclasync.AclError):
                    stale += 1
                else:
                    assert outcome["bad"].code == MODEL_EXECUTE
                if not isinstance(outcome["good"], np.ndarray) or not np.array_equal(
                    outcome["good"], good + 1.0
                ):
                    wrong += 1
    assert (stale, wrong) == (0, 0)


async def test_aclose_while_runs_make_their_buffer_sets(rt: Any, picky_path: str) -> None:
    """Runs that had no buffer set when the model closed raise ``ClosedResourceError``;
    every dataset and buffer they made goes with the model."""
    with anyio.fail_after(30):
        async with aclasync.open_device(0, backend=rt) as dev:
            before = dict(rt.sim.live_objects())
            for count in (10, 50):
                model = await dev.load_model(picky_path)
                stream = await dev.create_stream()
                results: list[Any] = []

                async def run(x: Any) -> None:
                    try:
                        results.append((await model.run(stream, x))[0])  # noqa: B023
                    except anyio.ClosedResourceError as exc:
                        results.append(exc)  # noqa: B023
                    except aclasync.AclError as exc:
                        results.append(exc)  # noqa: B023

                async with anyio.create_task_group() as tg:
                    for i in range(count):
                        tg.start_soon(run, np.full(4, float(i)))
                    await anyio.lowlevel.checkpoint()
                    await model.aclose()
                assert len(results) == count
                assert not [r for r in results if isinstance(r, aclasync.AclError)]
                assert any(isinstance(r, anyio.ClosedResourceError) for r in results)
                assert rt.sim.model_objects() == NO_OBJECTS
                await stream.aclose()
                assert dict(rt.sim.live_objects()) == before
        assert dict(rt.sim.live_objects())["memory_regions"] == 0


async def test_failed_runs_give_their_buffer_sets_back(rt: Any, picky_path: str) -> None:
    with anyio.fail_after(30):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(picky_path) as model,
            dev.create_stream() as stream,
        ):
            for _ in range(200):
                with pytest.raises(aclasync.AclError):
                    await model.run(stream, np.full(4, -1.0))
            # one run at a time: one set (an input and an output dataset)
            assert rt.sim.model_objects()["datasets"] == 2
            (y,) = await model.run(stream, np.ones(4))
            assert y.tolist() == [2.0] * 4


async def test_cancelled_runs_give_their_buffer_sets_back(rt: Any, tmp_path: Path) -> None:
    """300 runs under random deadlines on a pool of two sets keep at most two sets."""
    path = rt.sim.register_model(
        tmp_path / "slow.om",
        inputs=[("x", (4,), "float64")],
        outputs=[("y", (4,), "float64")],
        fn=picky,
        duration_us=300,
    )
    chooser = random.Random(20)
    with anyio.fail_after(60):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(path, pool_size=2) as model,
            dev.create_stream() as stream,
        ):

            async def one(index: int) -> None:
                with anyio.move_on_after(chooser.uniform(0, 0.001)):
                    x = np.full(4, float(index))
                    (y,) = await model.run(stream, x)
                    assert y.tolist() == (x + 1.0).tolist()

            for batch in range(0, 300, 4):  # four at a time: deadlines end mid-run
                async with anyio.create_task_group() as tg:
                    for index in range(batch, batch + 4):
                        tg.start_soon(one, index)
            assert rt.sim.model_objects()["datasets"] <= 2 * 2
            (y,) = await model.run(stream, np.ones(4))
            assert y.tolist() == [2.0] * 4


async def test_a_dead_workers_model_is_released_with_the_device(rt: Any, picky_path: str) -> None:
    acl = BreakingAcl(rt)
    with anyio.fail_after(30):
        async with aclasync.open_device(0, backend=acl) as dev:
            model = await dev.load_model(picky_path)
            stream = await dev.create_stream()
            (y,) = await model.run(stream, np.ones(4))
            assert y.tolist() == [2.0] * 4
            gate = threading.Event()
            stream.launch(dev.acl.sim.launch_kernel, Kernel(fn=gate.wait))
            acl.armed.set()
            try:
                with pytest.raises(aclasync.DeviceBrokenError):
                    await stream.synchronize()
            finally:
                gate.set()
            with pytest.raises(aclasync.DeviceBrokenError):
                await model.run(stream, np.ones(4))
            await model.aclose()  # a broken device: only marks it closed
            assert model.closed
    dev.worker_thread.join(10)
    assert rt.sim.model_objects() == NO_OBJECTS
    assert dict(rt.sim.live_objects())["memory_regions"] == 0


async def test_a_cancelled_runs_failure_is_raised_by_the_models_close(
    rt: Any, tmp_path: Path
) -> None:
    """Nobody awaited it, so the close reports it (as a stream's close does)."""
    started, gate = threading.Event(), threading.Event()

    def held_then_broken(x: Any) -> Any:
        started.set()
        assert gate.wait(10)
        raise RuntimeError("device fault")

    path = rt.sim.register_model(
        tmp_path / "late.om",
        inputs=[("x", (2,), "f4")],
        outputs=[("y", (2,), "f4")],
        fn=held_then_broken,
    )
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as stream:
            model = await dev.load_model(path)
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(model.run, stream, np.zeros(2, dtype=np.float32))
                    assert await anyio.to_thread.run_sync(started.wait, 10)
                    scope.cancel()
            gate.set()
            with pytest.raises(aclasync.AclError) as failure:
                await model.aclose()
            assert failure.value.code == MODEL_EXECUTE
            assert rt.sim.model_objects() == NO_OBJECTS
            await stream.synchronize()  # reported once, by the model's close


async def test_aclose_reports_the_failure_of_every_stream_launch_used(
    rt: Any, picky_path: str
) -> None:
    # It raised one stream's failure and dropped the other's, which it had consumed.
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            model = await dev.load_model(picky_path)
            streams = [await dev.create_stream() for _ in range(2)]
            host = await dev.alloc_host(32)
            host.view(np.float64, (4,))[...] = -1.0  # picky fails on it
            for stream in streams:
                x = await dev.alloc(32)
                stream.memcpy(x, host)
                model.launch(stream, [x], [await dev.alloc(32)])
            with pytest.raises(ExceptionGroup) as failures:
                await model.aclose()
            assert sorted(e.stream for e in failures.value.exceptions) == sorted(
                s.handle for s in streams
            )
            for stream in streams:
                await stream.synchronize()  # each reported once
            await dev.synchronize()


async def test_a_cancelled_run_does_not_hold_up_a_run_on_another_stream(
    rt: Any, picky_path: str
) -> None:
    # The cancelled run's set still waits for the held stream; the next run took that
    # set and waited for the held kernel, though the pool could grow.
    gate = threading.Event()
    try:
        with anyio.fail_after(20):
            async with (
                aclasync.open_device(0, backend=rt) as dev,
                dev.load_model(picky_path) as model,
                dev.create_stream() as held,
                dev.create_stream() as idle,
            ):
                (y,) = await model.run(held, np.zeros(4))  # one clean set
                held.launch(dev.acl.sim.launch_kernel, Kernel(fn=gate.wait))
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(model.run, held, np.zeros(4))
                        await anyio.wait_all_tasks_blocked()  # queued behind the kernel
                        scope.cancel()
                with anyio.fail_after(5):  # the gate is still shut
                    (y,) = await model.run(idle, np.ones(4))
                assert y.tolist() == [2.0] * 4
                gate.set()
    finally:
        gate.set()


async def test_aclose_releases_everything_when_a_stream_it_waits_for_is_force_closed(
    rt: Any, picky_path: str
) -> None:
    gate = threading.Event()
    try:
        with anyio.fail_after(20):
            async with aclasync.open_device(0, backend=rt) as dev:
                model = await dev.load_model(picky_path)
                stream = await dev.create_stream()
                x, out = await dev.alloc(32), await dev.alloc(32)
                model.launch(stream, [x], [out])
                stream.launch(dev.acl.sim.launch_kernel, Kernel(fn=gate.wait))
                async with anyio.create_task_group() as tg:
                    tg.start_soon(model.aclose)
                    await anyio.wait_all_tasks_blocked()  # it waits for the stream
                    await stream.aclose(force=True)
                assert model.closed
                assert rt.sim.model_objects() == NO_OBJECTS
                gate.set()
    finally:
        gate.set()


async def test_a_chained_run_cancelled_at_its_last_record_gives_back_every_event(
    rt: Any, picky_path: str
) -> None:
    with anyio.fail_after(30):
        async with aclasync.open_device(0, backend=rt) as dev:
            handles = dev._state.worker.handles  # the events users (and runs) hold
            model = await dev.load_model(picky_path)
            stream, blocker = await dev.create_stream(), await dev.create_stream()
            for _ in range(5):
                await model.run(stream, np.zeros(4))  # the next run chains on this one
                gate = threading.Event()
                blocker.launch(lambda _s, gate=gate: (gate.wait(10), 0)[1])  # worker held
                taken = []
                while True:  # the ready events used up: the run's record is a round trip
                    try:
                        taken.append(blocker.record_event_nowait())
                    except anyio.WouldBlock:
                        break
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(model.run, stream, np.ones(4))
                        await anyio.wait_all_tasks_blocked()  # parked in its record
                        scope.cancel()
                        gate.set()
                for event in taken:
                    await event.aclose()
            await model.aclose()
            await stream.aclose()
            await blocker.aclose()
            assert len(handles._events) == 0


async def test_aclose_refuses_a_run_waiting_for_a_cancelled_runs_set(
    rt: Any, tmp_path: Path
) -> None:
    # With pool_size=1, a run waiting for the set a cancelled run left busy took it
    # once that work ended and returned output after the close had begun.
    started, gate = threading.Event(), threading.Event()

    def held(x: Any) -> Any:
        if x[0] == 1:
            started.set()
            gate.wait(20)
        return x + 1.0

    path = rt.sim.register_model(
        tmp_path / "held.om",
        inputs=[("x", (4,), "float64")],
        outputs=[("y", (4,), "float64")],
        fn=held,
    )
    with anyio.fail_after(20):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.create_stream() as first,
            dev.create_stream() as second,
        ):
            model = await dev.load_model(path, pool_size=1)
            with anyio.CancelScope() as scope:  # the first run: cancelled, its set busy
                async with anyio.create_task_group() as tg:
                    tg.start_soon(model.run, first, np.ones(4))
                    await anyio.to_thread.run_sync(started.wait, 10)
                    scope.cancel()
            outcome: list[BaseException | list[Any]] = []

            async def waiting_run() -> None:
                try:
                    outcome.append(await model.run(second, np.full(4, 2.0)))
                except anyio.ClosedResourceError as exc:
                    outcome.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(waiting_run)
                await anyio.wait_all_tasks_blocked()  # it waits for the busy set
                tg.start_soon(model.aclose)
                await anyio.wait_all_tasks_blocked()
                gate.set()
            assert isinstance(outcome[0], anyio.ClosedResourceError), outcome
    assert rt.sim.model_objects() == NO_OBJECTS
