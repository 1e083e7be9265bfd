"""``acl.mdl`` on the simulator: declared models, descriptions, datasets, execution."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aclasync._pyacl.codes import ErrorCode
from aclasync._pyacl.dtypes import DataType
from aclasync.sim import Kernel

OK = 0
INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
CONTEXT_NULL = int(ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
GE_PARAM_INVALID = int(ErrorCode.ACL_ERROR_GE_PARAM_INVALID)
PATH_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
MODEL_ID_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID)
BATCH_INVALID = int(ErrorCode.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID)
MODEL_EXECUTE = int(ErrorCode.ACL_ERROR_RT_MODEL_EXECUTE)
NOT_SUPPORTED = int(ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
H2D, D2H = 1, 2
F32 = np.dtype(np.float32)


def affine(x: Any, w: Any) -> tuple[Any, Any]:
    return x @ w + 1.0, x.sum(axis=1, dtype=np.float64)


def register_affine(acl: Any, path: Path, **kwargs: Any) -> str:
    return str(
        acl.sim.register_model(
            path,
            inputs=[("x", (2, 3), "float32"), ("w", (3, 4), "float32")],
            outputs=[("y", (2, 4), "float32"), ("rowsum", (2,), "float64")],
            fn=affine,
            **kwargs,
        )
    )


class Io:
    """Device buffers in datasets for one model, with host copies in and out."""

    def __init__(
        self, acl: Any, check: Callable[..., Any], in_sizes: list[int], out_sizes: list[int]
    ) -> None:
        self.acl, self.check = acl, check
        self.inputs = self._dataset(in_sizes)
        self.outputs = self._dataset(out_sizes)

    def _dataset(self, sizes: list[int]) -> int:
        dataset = self.acl.mdl.create_dataset()
        assert dataset
        for size in sizes:
            ptr = self.check(self.acl.rt.malloc(size, 0))
            buffer = self.acl.create_data_buffer(ptr, size)
            self.check(self.acl.mdl.add_dataset_buffer(dataset, buffer))
        return dataset

    def ptr(self, dataset: int, index: int) -> int:
        return int(self.acl.get_data_buffer_addr(self.acl.mdl.get_dataset_buffer(dataset, index)))

    def put(self, index: int, array: Any) -> None:
        data = np.ascontiguousarray(array)
        self.check(
            self.acl.rt.memcpy(
                self.ptr(self.inputs, index),
                data.nbytes,
                self.acl.util.numpy_to_ptr(data),
                data.nbytes,
                H2D,
            )
        )

    def get(self, index: int, shape: tuple[int, ...], dtype: Any) -> Any:
        out = np.zeros(shape, dtype=dtype)
        self.check(
            self.acl.rt.memcpy(
                self.acl.util.numpy_to_ptr(out),
                out.nbytes,
                self.ptr(self.outputs, index),
                out.nbytes,
                D2H,
            )
        )
        return out


@pytest.fixture
def affine_model(dev0: Any, tmp_path: Path, check: Callable[..., Any]) -> tuple[Any, int, Io]:
    path = register_affine(dev0, tmp_path / "affine.om")
    model_id = check(dev0.mdl.load_from_file(path))
    io = Io(dev0, check, [24, 48], [32, 16])
    return dev0, model_id, io


def test_register_writes_a_spec_naming_the_registration(rt: Any, tmp_path: Path) -> None:
    path = tmp_path / "affine.om"
    key = register_affine(rt, path, duration_us=50)
    document = json.loads(path.read_text())
    assert document["registration"] == key == str(path.resolve())
    assert document["inputs"] == [["x", [2, 3], "float32"], ["w", [3, 4], "float32"]]
    assert document["duration_us"] == 50.0


def test_register_into_a_missing_folder_fails_cleanly(rt: Any, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        register_affine(rt, tmp_path / "no" / "such" / "dir.om")
    assert rt.sim.model_objects()["models"] == 0
    assert rt.rt.set_device(0) == 0
    _, ret = rt.mdl.load_from_file(str(tmp_path / "no" / "such" / "dir.om"))
    assert ret == PATH_INVALID


def test_register_never_overwrites_an_existing_file(
    rt: Any, tmp_path: Path, check: Callable[..., Any]
) -> None:
    path = tmp_path / "existing.om"
    path.write_bytes(b"\x00not a spec")
    register_affine(rt, path)
    assert path.read_bytes() == b"\x00not a spec"
    assert rt.rt.set_device(0) == 0
    check(rt.mdl.load_from_file(str(path)))  # the registration answers for the path


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"fn": 3}, TypeError),
        ({"inputs": [("x", (2,))]}, TypeError),
        ({"inputs": [("x", (2,), "complex64")]}, ValueError),
        ({"outputs": []}, ValueError),
        ({"batch_sizes": (2,)}, ValueError),  # shapes lack the -1 batch dimension
        (
            {"batch_sizes": (0,), "inputs": [("x", (-1,), "f4")], "outputs": [("y", (-1,), "f4")]},
            ValueError,
        ),
        ({"duration_us": -1.0}, ValueError),
    ],
)
def test_bad_registrations_are_refused(
    rt: Any, tmp_path: Path, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    args: dict[str, Any] = {
        "inputs": [("x", (2,), "f4")],
        "outputs": [("y", (2,), "f4")],
        "fn": np.negative,
    }
    args.update(kwargs)
    with pytest.raises(error):
        rt.sim.register_model(tmp_path / "bad.om", **args)
    assert not (tmp_path / "bad.om").exists()


def test_description_reports_the_declaration(
    affine_model: tuple[Any, int, Io], check: Callable[..., Any]
) -> None:
    acl, model_id, _ = affine_model
    mdl = acl.mdl
    desc = mdl.create_desc()
    check(mdl.get_desc(desc, model_id))
    assert (mdl.get_num_inputs(desc), mdl.get_num_outputs(desc)) == (2, 2)
    assert [mdl.get_input_name_by_index(desc, i) for i in range(2)] == ["x", "w"]
    assert mdl.get_output_name_by_index(desc, 1) == "rowsum"
    assert check(mdl.get_input_dims(desc, 1)) == {"name": "w", "dimCount": 2, "dims": [3, 4]}
    assert check(mdl.get_output_dims(desc, 0))["dims"] == [2, 4]
    assert check(mdl.get_cur_output_dims(desc, 0))["dims"] == [2, 4]
    assert mdl.get_input_data_type(desc, 0) == DataType.FLOAT
    assert mdl.get_output_data_type(desc, 1) == DataType.DOUBLE
    assert (mdl.get_input_size_by_index(desc, 1), mdl.get_output_size_by_index(desc, 1)) == (48, 16)
    assert check(mdl.get_input_index_by_name(desc, "w")) == 1
    assert check(mdl.get_output_index_by_name(desc, "y")) == 0
    assert check(mdl.get_dynamic_batch(desc)) == {"batchCount": 0, "batch": []}
    # bad indexes and names: the C conventions (0, "", -1, 100000)
    assert mdl.get_input_size_by_index(desc, 2) == 0
    assert mdl.get_input_name_by_index(desc, 5) == ""
    assert mdl.get_output_data_type(desc, 9) == DataType.UNDEFINED
    check(mdl.get_input_dims(desc, 2), INVALID_PARAM)
    check(mdl.get_input_index_by_name(desc, "nope"), INVALID_PARAM)
    # a description is a copy: it still answers after the model is unloaded
    check(mdl.unload(model_id))
    assert mdl.get_num_inputs(desc) == 2
    check(mdl.get_desc(desc, model_id), MODEL_ID_INVALID)
    check(mdl.destroy_desc(desc))
    check(mdl.destroy_desc(desc), INVALID_PARAM)
    assert mdl.get_num_inputs(desc) == 0


def test_execute_computes_on_device_memory(
    affine_model: tuple[Any, int, Io], check: Callable[..., Any]
) -> None:
    acl, model_id, io = affine_model
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    io.put(0, x)
    io.put(1, w)
    check(acl.mdl.execute(model_id, io.inputs, io.outputs))
    y, rowsum = affine(x, w)
    np.testing.assert_array_equal(io.get(0, (2, 4), np.float32), y)
    np.testing.assert_array_equal(io.get(1, (2,), np.float64), rowsum)


def test_execute_async_runs_in_stream_order(
    affine_model: tuple[Any, int, Io], check: Callable[..., Any]
) -> None:
    acl, model_id, io = affine_model
    stream = check(acl.rt.create_stream())
    gate = threading.Event()
    x = np.full((2, 3), 7, dtype=np.float32)
    io.put(0, np.zeros((2, 3), np.float32))
    io.put(1, np.eye(3, 4, dtype=np.float32))

    def write_x() -> None:  # runs on the device before the model, once released
        assert gate.wait(10)
        acl.sim.device_array(io.ptr(io.inputs, 0), (2, 3), np.float32)[...] = x

    check(acl.sim.launch_kernel(Kernel(fn=write_x), stream))
    check(acl.mdl.execute_async(model_id, io.inputs, io.outputs, stream))
    check(
        acl.rt.synchronize_stream_with_timeout(stream, 20),
        int(ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT),
    )
    gate.set()
    check(acl.rt.synchronize_stream(stream))
    np.testing.assert_array_equal(
        io.get(0, (2, 4), np.float32), affine(x, np.eye(3, 4, dtype=np.float32))[0]
    )
    check(acl.rt.destroy_stream(stream))


def test_static_inputs_are_size_checked_as_ge_does(
    dev0: Any, tmp_path: Path, check: Callable[..., Any]
) -> None:
    # GE (davinci_model.cc, CheckUserAndModelSize): a bigger input buffer only logs a
    # warning; a smaller one fails only when more than 64 bytes short. Ascend's BERT
    # sample feeds 1,192 bytes to a 1,200-byte input and runs on a card.
    path = dev0.sim.register_model(
        tmp_path / "sum.om",
        inputs=[("x", (40,), "float32")],
        outputs=[("total", (1,), "float64")],
        fn=lambda x: np.array([x.sum(dtype=np.float64)]),
    )
    model_id = check(dev0.mdl.load_from_file(str(path)))
    for size, expected in ((160, 780.0), (400, 780.0), (156, 741.0), (96, 276.0)):
        io = Io(dev0, check, [size], [8])
        data = np.arange(size // 4, dtype=np.float32)  # 0, 1, ...: fills the buffer
        io.put(0, data)
        check(dev0.mdl.execute(model_id, io.inputs, io.outputs))
        # the model reads its 40 values: a short buffer's missing ones are zeros
        assert io.get(0, (1,), np.float64)[0] == expected, size
    too_short = Io(dev0, check, [95], [8])  # 65 bytes short
    check(dev0.mdl.execute(model_id, too_short.inputs, too_short.outputs), GE_PARAM_INVALID)


def test_static_outputs_are_size_checked_as_ge_does(
    dev0: Any, tmp_path: Path, check: Callable[..., Any]
) -> None:
    # The same check holds for outputs: a buffer up to 64 bytes short runs (what does
    # not fit is not written here; on a card it lands in the allocation's padding).
    path = dev0.sim.register_model(
        tmp_path / "ramp.om",
        inputs=[("x", (1,), "float32")],
        outputs=[("y", (20,), "float32")],  # 80 bytes
        fn=lambda x: np.arange(20, dtype=np.float32) + x[0],
    )
    model_id = check(dev0.mdl.load_from_file(str(path)))
    for size in (80, 120, 72, 16):
        io = Io(dev0, check, [4], [size])
        io.put(0, np.array([1.0], dtype=np.float32))
        check(dev0.mdl.execute(model_id, io.inputs, io.outputs))
        kept = min(size, 80) // 4
        np.testing.assert_array_equal(io.get(0, (kept,), np.float32), np.arange(kept) + 1.0)
    too_short = Io(dev0, check, [4], [15])  # 65 bytes short
    check(dev0.mdl.execute(model_id, too_short.inputs, too_short.outputs), GE_PARAM_INVALID)


def test_bad_ids_sizes_and_buffers_get_codes(
    affine_model: tuple[Any, int, Io], check: Callable[..., Any]
) -> None:
    acl, model_id, io = affine_model
    mdl = acl.mdl
    check(mdl.execute_async(model_id + 100, io.inputs, io.outputs, 0), MODEL_ID_INVALID)
    check(mdl.execute(model_id, 12345, io.outputs), INVALID_PARAM)
    check(mdl.execute(model_id, io.inputs, 0), INVALID_PARAM)
    check(
        mdl.execute_async(model_id, io.inputs, io.outputs, 999),
        int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID),
    )
    empty = mdl.create_dataset()
    check(mdl.execute(model_id, empty, io.outputs), GE_PARAM_INVALID)  # missing buffers
    # (Buffers too small: test_static_inputs/outputs_are_size_checked_as_ge_does.)
    host = acl.mdl.create_dataset()  # a host pointer where device memory belongs
    for size in (24, 48):
        ptr = check(acl.rt.malloc_host(size))
        check(mdl.add_dataset_buffer(host, acl.create_data_buffer(ptr, size)))
    check(mdl.execute(model_id, host, io.outputs), GE_PARAM_INVALID)
    check(mdl.unload(model_id))
    check(mdl.execute(model_id, io.inputs, io.outputs), MODEL_ID_INVALID)
    check(mdl.unload(model_id), MODEL_ID_INVALID)


def test_calls_without_a_context(rt: Any, tmp_path: Path, check: Callable[..., Any]) -> None:
    path = register_affine(rt, tmp_path / "m.om")
    check(rt.mdl.load_from_file(path), CONTEXT_NULL)
    check(rt.mdl.execute(1, 1, 1), CONTEXT_NULL)


def test_failing_body_surfaces_as_model_execute(
    dev0: Any, tmp_path: Path, check: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(x: Any) -> Any:
        raise RuntimeError("boom")

    def wrong_shape(x: Any) -> Any:
        return x[:1]

    for name, fn in (("broken", broken), ("shape", wrong_shape)):
        path = dev0.sim.register_model(
            tmp_path / f"{name}.om", inputs=[("x", (2,), "f4")], outputs=[("y", (2,), "f4")], fn=fn
        )
        model_id = check(dev0.mdl.load_from_file(path))
        io = Io(dev0, check, [8], [8])
        check(dev0.mdl.execute(model_id, io.inputs, io.outputs), MODEL_EXECUTE)
        check(dev0.rt.synchronize_stream(0))  # the synchronous failure does not linger
        stream = check(dev0.rt.create_stream())
        check(dev0.mdl.execute_async(model_id, io.inputs, io.outputs, stream))
        check(dev0.rt.synchronize_stream(stream), MODEL_EXECUTE)
        check(dev0.rt.destroy_stream(stream))
    assert "simulated model body failed" in caplog.text


def test_load_from_mem_and_file_errors(
    dev0: Any, tmp_path: Path, check: Callable[..., Any]
) -> None:
    path = Path(register_affine(dev0, tmp_path / "m.om"))
    data = path.read_bytes()
    model_id = check(dev0.mdl.load_from_mem(dev0.util.bytes_to_ptr(data), len(data)))
    desc = dev0.mdl.create_desc()
    check(dev0.mdl.get_desc(desc, model_id))
    assert dev0.mdl.get_output_name_by_index(desc, 1) == "rowsum"
    check(dev0.mdl.load_from_mem(0, 10), INVALID_PARAM)
    check(dev0.mdl.load_from_mem(dev0.util.bytes_to_ptr(data), 0), INVALID_PARAM)
    junk = b"\x89OM\x00" * 8
    check(dev0.mdl.load_from_mem(dev0.util.bytes_to_ptr(junk), len(junk)), GE_PARAM_INVALID)
    check(dev0.mdl.load_from_file(str(tmp_path / "missing.om")), PATH_INVALID)
    (tmp_path / "junk.om").write_bytes(junk)
    check(dev0.mdl.load_from_file(str(tmp_path / "junk.om")), GE_PARAM_INVALID)


def test_spec_naming_a_function_loads_anywhere(
    make_rt: Callable[..., Any], tmp_path: Path, check: Callable[..., Any]
) -> None:
    spec = {
        "format": "aclasync.sim.model",
        "version": 1,
        "fn": "numpy:negative",
        "inputs": [["x", [3], "int32"]],
        "outputs": [["y", [3], "int32"]],
    }
    path = tmp_path / "neg.om"
    path.write_text(json.dumps(spec))
    acl = make_rt()
    assert acl.rt.set_device(0) == 0
    assert _negate_with(acl, check, path, [1, -2, 3]) == [-1, 2, -3]
    registered_elsewhere = tmp_path / "other.om"
    registered_elsewhere.write_text(json.dumps({**spec, "fn": None, "registration": "/nowhere.om"}))
    check(acl.mdl.load_from_file(str(registered_elsewhere)), GE_PARAM_INVALID)
    bad_fn = tmp_path / "badfn.om"
    bad_fn.write_text(json.dumps({**spec, "fn": "numpy:no_such_function"}))
    check(acl.mdl.load_from_file(str(bad_fn)), GE_PARAM_INVALID)


def test_register_model_names_an_importable_function_in_its_file(
    make_rt: Callable[..., Any], tmp_path: Path, check: Callable[..., Any]
) -> None:
    """The file ``register_model`` writes serves a runtime without the registration (as
    another process is) when its function can be imported by name; a lambda's cannot."""
    declared = {"inputs": [("x", (3,), "int32")], "outputs": [("y", (3,), "int32")]}
    writer = make_rt()
    named = Path(writer.sim.register_model(tmp_path / "neg.om", fn=np.negative, **declared))
    local = Path(writer.sim.register_model(tmp_path / "lam.om", fn=lambda x: -x, **declared))
    assert json.loads(named.read_text())["fn"] == "numpy:negative"
    assert "fn" not in json.loads(local.read_text())
    reader = make_rt()  # another runtime: it has neither registration
    assert reader.rt.set_device(0) == 0
    assert _negate_with(reader, check, named, [4, -5, 6]) == [-4, 5, -6]
    check(reader.mdl.load_from_file(str(local)), GE_PARAM_INVALID)


def _negate_with(acl: Any, check: Callable[..., Any], path: Path, values: list[int]) -> Any:
    """Load the three-int32 model at *path*, execute it on *values*: its output."""
    model_id = check(acl.mdl.load_from_file(str(path)))
    io = Io(acl, check, [12], [12])
    io.put(0, np.array(values, np.int32))
    check(acl.mdl.execute(model_id, io.inputs, io.outputs))
    return io.get(0, (3,), np.int32).tolist()


@pytest.mark.slow
def test_spec_serves_another_process(tmp_path: Path) -> None:
    path = tmp_path / "neg.om"
    path.write_text(
        json.dumps(
            {
                "format": "aclasync.sim.model",
                "version": 1,
                "fn": "numpy:negative",
                "inputs": [["x", [2], "float64"]],
                "outputs": [["y", [2], "float64"]],
            }
        )
    )
    script = textwrap.dedent(
        f"""
        import numpy as np
        from aclasync.sim import create
        acl = create()
        assert acl.rt.set_device(0) == 0
        model_id, ret = acl.mdl.load_from_file({str(path)!r})
        assert ret == 0, ret
        datasets = []
        for _ in range(2):
            ptr, ret = acl.rt.malloc(16, 0)
            ds = acl.mdl.create_dataset()
            acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, 16))
            datasets.append((ds, ptr))
        x = np.array([1.5, -4.0])
        acl.rt.memcpy(datasets[0][1], 16, acl.util.numpy_to_ptr(x), 16, 1)
        assert acl.mdl.execute(model_id, datasets[0][0], datasets[1][0]) == 0
        out = np.zeros(2)
        acl.rt.memcpy(acl.util.numpy_to_ptr(out), 16, datasets[1][1], 16, 2)
        print(out.tolist())
        acl.sim.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[-1.5, 4.0]"


def test_dynamic_batch(dev0: Any, tmp_path: Path, check: Callable[..., Any]) -> None:
    path = dev0.sim.register_model(
        tmp_path / "dyn.om",
        inputs=[("x", (-1, 2), "float32")],
        outputs=[("y", (-1, 2), "float32")],
        fn=lambda x: x * 3,
        batch_sizes=(1, 4),
    )
    mdl = dev0.mdl
    model_id = check(mdl.load_from_file(path))
    desc = mdl.create_desc()
    check(mdl.get_desc(desc, model_id))
    assert check(mdl.get_dynamic_batch(desc)) == {"batchCount": 2, "batch": [1, 4]}
    assert mdl.get_num_inputs(desc) == 2
    index = check(mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data"))
    assert index == 1
    assert check(mdl.get_input_dims(desc, 0))["dims"] == [-1, 2]
    assert mdl.get_input_size_by_index(desc, 0) == 4 * 2 * 4  # sized for the largest batch
    io = Io(dev0, check, [32, mdl.get_input_size_by_index(desc, 1)], [32])
    check(mdl.execute(model_id, io.inputs, io.outputs), BATCH_INVALID)  # no batch chosen
    check(mdl.set_dynamic_batch_size(model_id, io.inputs, index, 3), BATCH_INVALID)
    check(mdl.set_dynamic_batch_size(model_id, io.inputs, index, 0), INVALID_PARAM)
    check(mdl.set_dynamic_batch_size(model_id, io.inputs, 7, 4), INVALID_PARAM)
    check(mdl.set_dynamic_batch_size(model_id, io.inputs, index, 4))
    written = np.zeros(1, np.uint64)
    check(dev0.rt.memcpy(dev0.util.numpy_to_ptr(written), 8, io.ptr(io.inputs, index), 8, D2H))
    assert written[0] == 4
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    io.put(0, x)
    check(mdl.execute(model_id, io.inputs, io.outputs))
    np.testing.assert_array_equal(io.get(0, (4, 2), np.float32), x * 3)
    assert check(mdl.get_cur_output_dims(desc, 0))["dims"] == [4, 2]
    static = register_affine(dev0, tmp_path / "static.om")
    static_id = check(mdl.load_from_file(static))
    check(mdl.set_dynamic_batch_size(static_id, io.inputs, 0, 1), BATCH_INVALID)


def test_data_buffers_and_datasets(rt: Any, check: Callable[..., Any]) -> None:
    buffer = rt.create_data_buffer(0x1234, 64)
    assert (
        rt.get_data_buffer_addr(buffer),
        rt.get_data_buffer_size(buffer),
        rt.get_data_buffer_size_v2(buffer),
    ) == (0x1234, 64, 64)
    check(rt.update_data_buffer(buffer, 0x5678, 32))
    assert (rt.get_data_buffer_addr(buffer), rt.get_data_buffer_size_v2(buffer)) == (0x5678, 32)
    assert rt.create_data_buffer(0, 8) == 0
    assert rt.create_data_buffer(0, 0) != 0  # an empty buffer is allowed
    dataset = rt.mdl.create_dataset()
    assert check(rt.mdl.add_dataset_buffer(dataset, buffer)) == dataset
    check(rt.mdl.add_dataset_buffer(dataset, 42), INVALID_PARAM)
    assert rt.mdl.get_dataset_num_buffers(dataset) == 1
    assert rt.mdl.get_dataset_buffer(dataset, 0) == buffer
    assert rt.mdl.get_dataset_buffer(dataset, 1) == 0
    assert rt.sim.model_objects() == {
        "models": 0,
        "model_descs": 0,
        "datasets": 1,
        "data_buffers": 2,
    }
    check(rt.mdl.destroy_dataset(dataset))
    check(rt.mdl.destroy_dataset(dataset), INVALID_PARAM)
    assert rt.get_data_buffer_size(buffer) == 32  # destroying a dataset keeps its buffers
    check(rt.destroy_data_buffer(buffer))
    check(rt.destroy_data_buffer(buffer), INVALID_PARAM)
    assert rt.get_data_buffer_addr(buffer) == 0
    with pytest.raises(TypeError):
        rt.create_data_buffer("0x10", 8)


def test_get_data_buffer_size_is_a_uint32(rt: Any, check: Callable[..., Any]) -> None:
    """``aclGetDataBufferSize`` returns ``uint32_t``: a size of 4 GiB + 5 reads 5."""
    buffer = rt.create_data_buffer(0x1000, 2**32 + 5)
    assert rt.get_data_buffer_size(buffer) == 5
    assert rt.get_data_buffer_size_v2(buffer) == 2**32 + 5
    check(rt.destroy_data_buffer(buffer))


def read_device(acl: Any, check: Callable[..., Any], ptr: int, shape: Any, dtype: Any) -> Any:
    out = np.zeros(shape, dtype=dtype)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, ptr, out.nbytes, D2H))
    return out


def test_execute_gives_output_buffers_without_memory_device_memory(
    affine_model: tuple[Any, int, Io], check: Callable[..., Any]
) -> None:
    """ACL's synchronous ``ModelExecute`` ``aclrtMalloc``s an output whose buffer has no
    address (the output's size) and updates the buffer; the caller frees the memory."""
    acl, model_id, io = affine_model
    mdl = acl.mdl
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.ones((3, 4), np.float32)
    io.put(0, x)
    io.put(1, w)
    outputs = mdl.create_dataset()
    buffers = [acl.create_data_buffer(0, 0) for _ in range(2)]
    for buffer in buffers:
        check(mdl.add_dataset_buffer(outputs, buffer))
    regions = acl.sim.live_objects()["memory_regions"]
    stream = check(acl.rt.create_stream())
    check(mdl.execute_async(model_id, io.inputs, outputs, stream), GE_PARAM_INVALID)
    assert acl.get_data_buffer_addr(buffers[0]) == 0, "the asynchronous path allocates nothing"
    check(mdl.execute(model_id + 100, io.inputs, outputs), INVALID_PARAM, "no outputs described")
    assert acl.sim.live_objects()["memory_regions"] == regions
    check(mdl.execute(model_id, io.inputs, outputs))
    ptrs = [acl.get_data_buffer_addr(b) for b in buffers]
    assert all(ptrs)
    assert [acl.get_data_buffer_size_v2(b) for b in buffers] == [32, 16]
    assert acl.sim.live_objects()["memory_regions"] == regions + 2
    y, rowsum = affine(x, w)
    np.testing.assert_array_equal(read_device(acl, check, ptrs[0], (2, 4), np.float32), y)
    np.testing.assert_array_equal(read_device(acl, check, ptrs[1], (2,), np.float64), rowsum)
    for ptr in ptrs:
        check(acl.rt.free(ptr))
    assert acl.sim.live_objects()["memory_regions"] == regions
    check(acl.rt.destroy_stream(stream))


def test_execute_gives_a_dynamic_shape_output_memory_of_its_real_size(
    dev0: Any, tmp_path: Path, check: Callable[..., Any]
) -> None:
    path = dev0.sim.register_model(
        tmp_path / "shape.om",
        inputs=[("x", (1, -1), "float32")],
        outputs=[("y", (1, -1), "float32")],
        fn=np.negative,
    )
    mdl = dev0.mdl
    model_id = check(mdl.load_from_file(path))
    desc = mdl.create_desc()
    check(mdl.get_desc(desc, model_id))
    assert mdl.get_output_size_by_index(desc, 0) == 0, "unbounded"
    io = Io(dev0, check, [12], [])
    x = np.array([[1, 2, 3]], np.float32)
    io.put(0, x)
    described = dev0.create_tensor_desc(0, [1, 3], 2)
    check(mdl.set_dataset_tensor_desc(io.inputs, described, 0))
    buffer = dev0.create_data_buffer(0, 0)
    check(mdl.add_dataset_buffer(io.outputs, buffer))
    regions = dev0.sim.live_objects()["memory_regions"]
    check(mdl.execute(model_id, io.inputs, io.outputs))
    ptr = dev0.get_data_buffer_addr(buffer)
    assert ptr != 0
    assert dev0.get_data_buffer_size_v2(buffer) == 12
    assert dev0.sim.live_objects()["memory_regions"] == regions + 1
    np.testing.assert_array_equal(read_device(dev0, check, ptr, (1, 3), np.float32), -x)
    check(dev0.rt.free(ptr))
    assert dev0.sim.live_objects()["memory_regions"] == regions


def test_a_null_dataset_is_reported_before_the_model_id(
    affine_model: tuple[Any, int, Io], check: Callable[..., Any]
) -> None:
    """``ModelExecute`` checks its datasets (``model.cpp``) before GE looks at the id."""
    acl, model_id, io = affine_model
    stream = check(acl.rt.create_stream())
    check(acl.mdl.execute(model_id + 100, 0, io.outputs), INVALID_PARAM)
    check(acl.mdl.execute(model_id + 100, io.inputs, 0), INVALID_PARAM)
    check(acl.mdl.execute_async(model_id + 100, 0, io.outputs, stream), INVALID_PARAM)
    check(acl.mdl.execute_async(model_id + 100, io.inputs, 0, stream), INVALID_PARAM)
    check(acl.mdl.execute(model_id + 100, io.inputs, io.outputs), MODEL_ID_INVALID)
    check(acl.rt.destroy_stream(stream))


def test_a_failed_get_desc_leaves_the_description_empty(
    affine_model: tuple[Any, int, Io], tmp_path: Path, check: Callable[..., Any]
) -> None:
    """``aclmdlGetDesc*`` call ``modelDesc->Clear()`` before the id or file is looked at."""
    acl, model_id, _ = affine_model
    mdl = acl.mdl
    desc = mdl.create_desc()
    junk = b"\x89OM\x00" * 8
    failures = [
        (lambda: mdl.get_desc(desc, model_id + 100), MODEL_ID_INVALID),
        (lambda: mdl.get_desc_from_file(desc, str(tmp_path / "missing.om")), PATH_INVALID),
        (lambda: mdl.get_desc_from_mem(desc, acl.util.bytes_to_ptr(junk), 32), GE_PARAM_INVALID),
    ]
    for fail, code in failures:
        check(mdl.get_desc(desc, model_id))
        check(fail(), code)
        assert mdl.get_num_inputs(desc) == 0
        assert mdl.get_output_size_by_index(desc, 0) == 0
        check(mdl.get_input_dims(desc, 0), INVALID_PARAM)
    check(mdl.get_desc(desc, model_id))
    check(mdl.get_desc_from_mem(desc, 0, 32), INVALID_PARAM)
    assert mdl.get_num_inputs(desc) == 2, "the null check comes before the clearing"
