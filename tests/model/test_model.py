"""``Model``: load, run and launch through ``acl.mdl`` on every event loop."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from model_support import RecordingAcl, scale_shift

import aclasync
from aclasync._pyacl.codes import ErrorCode

pytestmark = pytest.mark.anyio

NO_OBJECTS = {"models": 0, "model_descs": 0, "datasets": 0, "data_buffers": 0}


def inputs(seed: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((4, 8)).astype(np.float32),
        rng.standard_normal(8).astype(np.float32),
    )


def assert_outputs(outputs: list[Any], x: Any, bias: Any) -> None:
    y, total = scale_shift(x, bias)
    assert [o.dtype for o in outputs] == [np.float32, np.int64]
    np.testing.assert_array_equal(outputs[0], y)
    np.testing.assert_array_equal(outputs[1], total)


async def test_run_returns_the_outputs_and_pools_buffers(rt: Any, model_path: str) -> None:
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            async with dev.load_model(model_path) as model, dev.create_stream() as stream:
                assert [t.name for t in model.inputs] == ["x", "bias"]
                assert model.outputs[1] == aclasync.TensorInfo(
                    "total", (4,), np.dtype(np.int64), 32
                )
                for seed in range(5):
                    x, bias = inputs(seed)
                    outputs = await model.run(stream, x, bias)
                    assert_outputs(outputs, x, bias)
                # five runs one after another used one pooled set of buffers
                assert rt.sim.model_objects()["datasets"] == 2
            assert model.closed
            assert rt.sim.model_objects() == NO_OBJECTS


async def test_models_on_one_device_keep_their_own_buffers(rt: Any, model_path: str) -> None:
    # Two models loaded on one device each pool buffer sets; closing one (as a server
    # evicting a model does) must leave the other's datasets alone.
    x, bias = inputs(2)
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as stream:
            async with dev.load_model(model_path) as kept:
                first = await dev.load_model(model_path)
                assert_outputs(await first.run(stream, x, bias), x, bias)
                assert_outputs(await kept.run(stream, x, bias), x, bias)
                await first.aclose()
                assert rt.sim.model_objects()["datasets"] == 2  # kept's set, both datasets
                assert_outputs(await kept.run(stream, x, bias), x, bias)
            assert rt.sim.model_objects() == NO_OBJECTS


async def test_arguments_are_checked_before_anything_is_queued(rt: Any, model_path: str) -> None:
    backend = RecordingAcl(rt)
    x, bias = inputs(1)
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=backend) as dev:
            async with dev.load_model(model_path) as model, dev.create_stream() as stream:
                before = backend.recorded()
                with pytest.raises(ValueError, match="takes 2 inputs"):
                    await model.run(stream, x)
                with pytest.raises(ValueError, match=r"'x' must have shape \(4, 8\)"):
                    await model.run(stream, x[:2], bias)
                with pytest.raises(TypeError, match="'bias' must have dtype float32"):
                    await model.run(stream, x, bias.astype(np.float64))
                small = await dev.alloc(16)
                with pytest.raises(ValueError, match="'x' needs 128 bytes"):
                    model.launch(stream, [small, small], [small, small])
                with pytest.raises(ValueError, match="takes 2 buffers"):
                    model.launch(stream, [small], [small, small])
                with pytest.raises(TypeError, match=r"aclasync\.Stream"):
                    await model.run(0, x, bias)  # type: ignore[arg-type]
                await stream.synchronize()
                queued = [
                    call
                    for call in backend.recorded()[len(before) :]
                    if call[0] == "mdl" or call == ("rt", "memcpy_async")
                ]
                assert queued == []
            with pytest.raises(anyio.ClosedResourceError):
                await model.run(stream, x, bias)


async def test_model_calls_acl_mdl_and_never_acl_sim(rt: Any, model_path: str) -> None:
    backend = RecordingAcl(rt)
    x, bias = inputs(2)
    with anyio.fail_after(20):
        async with (
            aclasync.open_device(0, backend=backend) as dev,
            dev.load_model(model_path) as model,
            dev.create_stream() as stream,
        ):
            assert_outputs(await model.run(stream, x, bias), x, bias)
            buffers = [await dev.alloc(t.nbytes) for t in (*model.inputs, *model.outputs)]
            model.launch(stream, buffers[:2], buffers[2:])
            await stream.synchronize()
    namespaces = {namespace for namespace, _ in backend.recorded()}
    assert "sim" not in namespaces
    used = set(backend.recorded())
    for call in ("load_from_file", "get_desc", "execute_async", "destroy_dataset", "unload"):
        assert ("mdl", call) in used
    assert ("", "create_data_buffer") in used
    assert ("", "destroy_data_buffer") in used
    assert rt.sim.model_objects() == NO_OBJECTS


async def test_launch_runs_on_device_buffers_in_stream_order(rt: Any, model_path: str) -> None:
    x, bias = inputs(3)
    with anyio.fail_after(20):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(model_path) as model,
            dev.create_stream() as stream,
        ):
            host = [await dev.alloc_host(t.nbytes) for t in (*model.inputs, *model.outputs)]
            device = [await dev.alloc(t.nbytes) for t in (*model.inputs, *model.outputs)]
            host[0].view(np.float32, (4, 8))[...] = x
            host[1].view(np.float32, (8,))[...] = bias
            stream.memcpy(device[0], host[0])
            stream.memcpy(device[1], host[1])
            model.launch(stream, device[:2], device[2:])
            stream.memcpy(host[2], device[2])
            stream.memcpy(host[3], device[3])
            await stream.synchronize()
            assert_outputs(
                [host[2].view(np.float32, (4, 8)), host[3].view(np.int64, (4,))], x, bias
            )
    assert rt.sim.model_objects() == NO_OBJECTS


async def test_a_failing_model_raises_and_the_model_stays_usable(rt: Any, tmp_path: Path) -> None:
    def picky(x: Any) -> Any:
        if x[0] < 0:
            raise ValueError("negative input")
        return x + 1

    path = rt.sim.register_model(
        tmp_path / "picky.om", inputs=[("x", (2,), "f8")], outputs=[("y", (2,), "f8")], fn=picky
    )
    with anyio.fail_after(20):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(path) as model,
            dev.create_stream() as stream,
        ):
            with pytest.raises(aclasync.AclError) as failure:
                await model.run(stream, np.array([-1.0, 0.0]))
            assert failure.value.code == ErrorCode.ACL_ERROR_RT_MODEL_EXECUTE
            (out,) = await model.run(stream, np.array([1.0, 2.0]))
            assert out.tolist() == [2.0, 3.0]
    assert rt.sim.model_objects() == NO_OBJECTS


async def test_load_errors(rt: Any, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            with pytest.raises(aclasync.AclError) as failure:
                await dev.load_model(tmp_path / "missing.om")
            assert failure.value.code == ErrorCode.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID
            assert failure.value.api == "acl.mdl.load_from_file"
            with pytest.raises(TypeError, match="path"):
                dev.load_model(42)
    assert rt.sim.model_objects() == NO_OBJECTS


async def test_cancelled_run_leaves_nothing_behind(rt: Any, tmp_path: Path) -> None:
    started, gate = threading.Event(), threading.Event()

    def held(x: Any) -> Any:
        started.set()
        assert gate.wait(10)
        return -x

    path = rt.sim.register_model(
        tmp_path / "held.om", inputs=[("x", (3,), "i4")], outputs=[("y", (3,), "i4")], fn=held
    )
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            async with dev.load_model(path) as model, dev.create_stream() as stream:
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(model.run, stream, np.arange(3, dtype=np.int32))
                        assert await anyio.to_thread.run_sync(started.wait, 10)
                        scope.cancel()
                assert scope.cancelled_caught
                gate.set()
                (out,) = await model.run(stream, np.array([4, 5, 6], dtype=np.int32))
                assert out.tolist() == [-4, -5, -6]
            assert rt.sim.model_objects() == NO_OBJECTS


async def test_aclose_is_idempotent(rt: Any, model_path: str) -> None:
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=rt) as dev:
            model = await dev.load_model(model_path)
            await model.aclose()
            await model.aclose()
            assert rt.sim.model_objects() == NO_OBJECTS


async def test_aclose_waits_for_launched_work_and_raises_its_error(rt: Any, tmp_path: Path) -> None:
    gate = threading.Event()

    def held_then_broken(x: Any) -> Any:
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
            source, target = await dev.alloc(8), await dev.alloc(8)
            model.launch(stream, [source], [target])
            assert not await stream.query()  # held on the device
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, gate.set)
                with pytest.raises(aclasync.AclError) as failure:
                    await model.aclose()
            assert failure.value.code == ErrorCode.ACL_ERROR_RT_MODEL_EXECUTE
            assert model.closed
            assert rt.sim.model_objects() == NO_OBJECTS
            await stream.synchronize()  # the error was delivered once, by aclose


async def test_a_model_with_a_type_numpy_lacks_loads_and_launches_but_does_not_run(
    rt: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # load_model refused a bf16 model (common on 910B) with "ACL data type 27 has no
    # numpy equivalent", so even launch, which needs no numpy dtype, was out of reach.
    path = rt.sim.register_model(
        tmp_path / "half.om",
        inputs=[("x", (4,), "float16")],
        outputs=[("y", (4,), "float16")],
        fn=lambda x: x,
    )
    bf16 = 27  # ACL_BF16: the simulator's models cannot declare it; the description can
    monkeypatch.setattr(rt.mdl, "get_input_data_type", lambda desc, index: bf16)
    with anyio.fail_after(20):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(path) as model,
            dev.create_stream() as stream,
        ):
            (x,) = model.inputs
            assert (x.dtype, x.data_type, x.nbytes) == (None, bf16, 8)
            assert model.outputs[0].dtype == np.dtype(np.float16)
            with pytest.raises(ValueError, match="ACL data type 27, which numpy has no dtype"):
                await model.run(stream, np.zeros(4, np.float16))
            source, target = await dev.alloc(8), await dev.alloc(8)
            model.launch(stream, [source], [target])
            await stream.synchronize()
