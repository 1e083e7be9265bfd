"""``Model`` at its edges (found by an adversarial review): cancelled runs whose work
failed, a cancelled close, a device closed before the model, streams used once, and
tensors ``run`` cannot carry as arrays. The model's body is held behind gates."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pytest

import aclasync
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio

LIMIT_S = 10.0
MODEL_EXECUTE = 507011


class HeldModel:
    """A model body: a run whose ``x[0]`` is in ``held`` waits for ``release(v)``;
    one in ``failing`` fails on the device."""

    def __init__(self) -> None:
        self.held: dict[int, threading.Event] = {}
        self.started: dict[int, threading.Event] = {}
        self.failing: set[int] = set()

    def hold(self, value: int, *, fail: bool = False) -> None:
        self.held[value], self.started[value] = threading.Event(), threading.Event()
        if fail:
            self.failing.add(value)

    def body(self, x: Any) -> Any:
        value = int(x.flat[0])
        if value in self.held:
            self.started[value].set()
            self.held[value].wait(LIMIT_S)
        if value in self.failing:
            raise RuntimeError(f"the model fails for {value}")
        return x * 2

    async def started_run(self, value: int) -> None:
        assert await anyio.to_thread.run_sync(self.started[value].wait, LIMIT_S)

    def release(self, value: int) -> None:
        self.held[value].set()

    def release_all(self) -> None:
        for event in self.held.values():
            event.set()


@pytest.fixture
def held() -> Any:
    model = HeldModel()
    yield model
    model.release_all()


def register(rt: Any, tmp_path: Path, held: HeldModel, shape: tuple[int, ...] = (4,)) -> str:
    return str(
        rt.sim.register_model(
            tmp_path / "held.om",
            inputs=[("x", shape, "float32")],
            outputs=[("y", shape, "float32")],
            fn=held.body,
        )
    )


def x(value: float) -> Any:
    return np.full(4, value, np.float32)


async def _cancelled_failing_run(
    dev: Any, model: Any, stream: Any, held: HeldModel, *, fail: bool = True
) -> None:
    """A run whose caller is cancelled while the model holds it, and which then fails
    (unless not *fail*)."""
    held.hold(1, fail=fail)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(model.run, stream, x(1))
            await held.started_run(1)
            scope.cancel()
    held.release(1)


async def test_a_device_closed_before_the_model_raises_an_abandoned_runs_failure(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # A later run took the failure off the abandoned run's stream, for the model's close
    # to raise; the device closed first, and nothing raised it.
    path = register(rt, tmp_path, held)
    dev = await aclasync.open_device(0, backend=rt)
    stream = await dev.create_stream()
    model = await dev.load_model(path)
    with anyio.fail_after(LIMIT_S):
        await _cancelled_failing_run(dev, model, stream, held)
        await stream.synchronize()  # its work has ended
        (y,) = await model.run(stream, x(2))  # looks at the abandoned run's set
        assert (y == 4).all()
        await stream.aclose()
        with pytest.raises(aclasync.AclError) as caught:
            await dev.aclose()
        assert caught.value.code == MODEL_EXECUTE
        await model.aclose()  # the device reported it: nothing left here


async def test_a_cancelled_model_close_lets_the_cancellation_go_on(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # errors.md, rule 6: the failure its close found escaped the cancel scope in place
    # of the cancellation; it goes to the device.
    path = register(rt, tmp_path, held)
    held.hold(0, fail=True)
    async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as stream:
        model = await dev.load_model(path)
        a, b = await dev.alloc(16), await dev.alloc(16)  # zeros: x[0] == 0
        model.launch(stream, [a], [b])
        await held.started_run(0)
        with anyio.fail_after(LIMIT_S):
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(model.aclose)
                    await anyio.wait_all_tasks_blocked()
                    scope.cancel()
                    held.release(0)
            assert scope.cancelled_caught
            with pytest.raises(aclasync.AclError) as caught:
                await dev.synchronize()
            assert caught.value.code == MODEL_EXECUTE
        await a.aclose()
        await b.aclose()


async def test_a_failed_abandoned_run_does_not_grow_the_pool(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # Its set counted as busy for good once the look at it took the failure.
    path = register(rt, tmp_path, held)
    async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as stream:
        model = await dev.load_model(path)
        with anyio.fail_after(LIMIT_S):
            await _cancelled_failing_run(dev, model, stream, held)
            await stream.synchronize()
            for value in (2, 3, 4):
                (y,) = await model.run(stream, x(value))
                assert (y == 2 * value).all()
        assert rt.sim.model_objects()["datasets"] == 2  # one set: its input and output
        with pytest.raises(aclasync.AclError):
            await model.aclose()


async def test_pool_size_caps_the_sets_when_cancelled_runs_hold_theirs(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # A cancelled run gives its place in the queue back while its set stays busy: the
    # runs let past then each counted only the sets already made, and made one each
    # (2n - 1 sets, each with a stream of the device's, for pool_size=n).
    path = register(rt, tmp_path, held)
    held.hold(1)
    async with (
        aclasync.open_device(0, backend=rt) as dev,
        dev.create_stream() as first,
        dev.create_stream() as second,
        dev.load_model(path, pool_size=2) as model,
    ):
        with anyio.fail_after(LIMIT_S):
            with anyio.CancelScope() as scope:

                async def cancel_once_started() -> None:
                    await held.started_run(1)
                    scope.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_once_started)
                    await model.run(first, x(1))
            results: dict[float, Any] = {}

            async def run(value: float) -> None:
                (results[value],) = await model.run(second, x(value))

            async with anyio.create_task_group() as tg:
                for value in (10, 11):
                    tg.start_soon(run, value)
                await anyio.wait_all_tasks_blocked()
                held.release(1)  # one of them waits for the cancelled run's set
            assert all((y == 2 * value).all() for value, y in results.items())
            assert len(results) == 2
            assert rt.sim.model_objects()["datasets"] == 2 * 2  # two sets, no third


async def test_a_run_on_a_closed_stream_is_refused_before_it_takes_a_set(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # It made a whole set (kept until the model's close), or with pool_size waited for
    # one behind unrelated work, before the closed stream refused it.
    path = register(rt, tmp_path, held)
    async with aclasync.open_device(0, backend=rt) as dev:
        model = await dev.load_model(path, pool_size=1)
        stream = await dev.create_stream()
        await stream.aclose()
        with anyio.fail_after(LIMIT_S), pytest.raises(anyio.ClosedResourceError):
            await model.run(stream, x(1))
        assert rt.sim.model_objects()["datasets"] == 0
        await model.aclose()


async def test_streams_a_model_launched_on_are_not_kept(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # A stream per request, closed and dropped, stayed referenced until the model closed.
    path = register(rt, tmp_path, held)
    async with aclasync.open_device(0, backend=rt) as dev, dev.load_model(path) as model:
        a, b = await dev.alloc(16), await dev.alloc(16)
        gone = []
        for _ in range(20):
            stream = await dev.create_stream()
            model.launch(stream, [a], [b])
            await stream.aclose()
            gone.append(weakref.ref(stream))
            del stream
        gc.collect()
        assert [ref for ref in gone if ref() is not None] == []
        await a.aclose()
        await b.aclose()


async def test_a_close_waits_for_work_on_a_stream_collected_unclosed(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # Streams are held weakly; one a helper made and dropped still had the model's
    # execute queued behind a kernel, and the close unloaded the model under it.
    path = register(rt, tmp_path, held)
    gate = threading.Event()
    async with aclasync.open_device(0, backend=rt) as dev:
        model = await dev.load_model(path)
        a, b = await dev.alloc(16), await dev.alloc(16)

        async def enqueue() -> None:
            stream = await dev.create_stream()
            stream.launch(rt.sim.launch_kernel, Kernel(fn=gate.wait))
            model.launch(stream, [a], [b])

        with anyio.fail_after(LIMIT_S):
            await enqueue()
            gc.collect()
            async with anyio.create_task_group() as tg:
                tg.start_soon(model.aclose)
                await anyio.wait_all_tasks_blocked()
                try:
                    assert rt.sim.live_objects()["models"] == 1, "unloaded under queued work"
                finally:
                    gate.set()
            assert rt.sim.live_objects()["models"] == 0
        await a.aclose()
        await b.aclose()


async def test_a_tensor_without_bytes_is_refused_by_run(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    path = register(rt, tmp_path, held, shape=(0, 4))
    async with (
        aclasync.open_device(0, backend=rt) as dev,
        dev.create_stream() as stream,
        dev.load_model(path) as model,
    ):
        with pytest.raises(ValueError, match="tensor 'x' has no bytes"):
            await model.run(stream, np.zeros((0, 4), np.float32))


class _Patched:
    """The simulator with some calls of one namespace (``rt``, ``mdl``) replaced."""

    def __init__(self, inner: Any, namespace: str, **calls: Any) -> None:
        self._inner = inner
        setattr(self, namespace, _Calls(getattr(inner, namespace), calls))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Calls:
    def __init__(self, inner: Any, calls: dict[str, Any]) -> None:
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str) -> Any:
        return self._calls.get(name) or getattr(self._inner, name)


async def test_a_tensor_whose_size_is_not_its_shapes_is_refused_by_run(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # It failed with a numpy reshape error, after the model had run for an output.
    path = register(rt, tmp_path, held)
    # As an AIPP image input does (1.5 bytes per pixel): a size other than the shape's.
    sizes = rt.mdl.get_input_size_by_index
    backend = _Patched(rt, "mdl", get_input_size_by_index=lambda d, i: sizes(d, i) + 8)
    async with (
        aclasync.open_device(0, backend=backend) as dev,
        dev.create_stream() as stream,
        dev.load_model(path) as model,
    ):
        with pytest.raises(ValueError, match="takes a 24-byte buffer, not its shape's"):
            await model.run(stream, x(1))


@pytest.mark.parametrize("order", ["model_first", "device_first"])
async def test_a_model_and_its_device_closing_at_once_raise_a_failure_once(
    rt: Any, tmp_path: Path, held: HeldModel, order: str
) -> None:
    # The model's close took the failure off the stream, then met the closed device and
    # returned quietly: neither close raised it.
    path = register(rt, tmp_path, held)
    raised: list[BaseException] = []

    async def close(closer: Any) -> None:
        try:
            await closer()
        except aclasync.AclError as exc:
            raised.append(exc)

    dev = await aclasync.open_device(0, backend=rt)
    stream = await dev.create_stream()
    model = await dev.load_model(path)
    with anyio.fail_after(LIMIT_S):
        await model.run(stream, x(2))  # a buffer set exists
        held.hold(0, fail=True)
        a, b = await dev.alloc(16), await dev.alloc(16)  # zeros: x[0] == 0
        model.launch(stream, [a], [b])
        await held.started_run(0)
        closers = [model.aclose, dev.aclose]
        async with anyio.create_task_group() as tg:
            for closer in closers if order == "model_first" else closers[::-1]:
                tg.start_soon(close, closer)
                await anyio.wait_all_tasks_blocked()
            held.release(0)
    assert [exc.code for exc in raised] == [MODEL_EXECUTE]


async def test_a_failing_look_at_an_abandoned_runs_set_does_not_spin(
    rt: Any, tmp_path: Path, held: HeldModel
) -> None:
    # The look was asked again after every failure it met, which never ends when the
    # query itself fails: the run spun, keeping a copy of the error per round trip.
    path = register(rt, tmp_path, held)
    failing = threading.Event()  # a device fault: stream_query answers 507899

    def stream_query(stream: int) -> tuple[int, int]:
        return (0, 507899) if failing.is_set() else rt.rt.stream_query(stream)

    backend = _Patched(rt, "rt", stream_query=stream_query)
    async with aclasync.open_device(0, backend=backend) as dev, dev.create_stream() as stream:
        model = await dev.load_model(path)
        with anyio.fail_after(LIMIT_S):
            await _cancelled_failing_run(dev, model, stream, held, fail=False)
            await stream.synchronize()
            failing.set()
            (y,) = await model.run(stream, x(2))  # on a new set: the old one looks busy
            assert (y == 4).all()
            failing.clear()
        with pytest.raises(aclasync.AclError) as caught:  # the look's failure, once
            await model.aclose()
        assert caught.value.api == "acl.rt.stream_query"


@pytest.mark.parametrize("later", ["asyncio", "trio"])
def test_a_pooled_model_refuses_another_loop_clearly(rt: Any, model_path: str, later: str) -> None:
    # Its pool_size queue is its loop's: on trio a bare "no running event loop" from
    # anyio's internals, and from another thread's loop a run that waited for ever.
    bias, x = np.ones(8, dtype=np.float32), np.zeros((4, 8), dtype=np.float32)
    box: dict[str, Any] = {}

    async def load() -> None:
        dev = box["dev"] = await aclasync.open_device(0, backend=rt)
        box["model"] = await dev.load_model(model_path, pool_size=1)
        box["stream"] = await dev.create_stream()
        await box["model"].run(box["stream"], x, bias)  # its own loop: fine

    async def elsewhere() -> None:
        with pytest.raises(RuntimeError, match="belongs to the event loop that loaded it"):
            await box["model"].run(box["stream"], x, bias)
        await box["model"].aclose()  # (a close from another loop is fine)
        await box["dev"].aclose()

    anyio.run(load, backend="asyncio")
    anyio.run(elsewhere, backend=later)
