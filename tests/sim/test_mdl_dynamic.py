"""Gear models: dynamic batch, dynamic image size and dynamic dims, as ATC builds them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_io import ModelIo

from aclasync._pyacl.codes import ErrorCode

OK = 0
INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
MODEL_ID_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID)
GEAR_INVALID = int(ErrorCode.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID)
INPUT_LENGTH_INVALID = 145012  # ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID
SHAPE_INPUT = "ascend_mbatch_shape_data"


class Recorder:
    """A model body that remembers the shapes it was given."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.shapes: list[tuple[tuple[int, ...], ...]] = []

    def __call__(self, *arrays: Any) -> Any:
        self.shapes.append(tuple(a.shape for a in arrays))
        return self.fn(*arrays)


def grey(img: Any, scale: Any) -> tuple[Any, Any]:
    return img.mean(axis=1, keepdims=True) * scale[0], np.array([img.sum(dtype=np.float64)])


@pytest.fixture
def hw_model(dev0: Any, tmp_path: Path) -> tuple[Any, int, Recorder]:
    body = Recorder(grey)
    path = dev0.sim.register_model(
        tmp_path / "hw.om",
        inputs=[("img", (1, 3, -1, -1), "float32"), ("scale", (1,), "float32")],
        outputs=[("mask", (1, 1, -1, -1), "float32"), ("total", (1,), "float64")],
        fn=body,
        dynamic_hw=((4, 4), (8, 6)),
    )
    model_id, ret = dev0.mdl.load_from_file(path)
    assert ret == OK
    return dev0, model_id, body


def test_image_size_model_describes_its_gears(
    hw_model: tuple[Any, int, Recorder], check: Any
) -> None:
    acl, model_id, _ = hw_model
    io = ModelIo(acl, model_id)
    mdl, desc = acl.mdl, io.desc
    assert mdl.get_num_inputs(desc) == 3
    assert mdl.get_input_name_by_index(desc, 2) == SHAPE_INPUT
    assert check(mdl.get_input_dims(desc, 2))["dims"] == [2]
    assert check(mdl.get_input_dims(desc, 0))["dims"] == [1, 3, -1, -1]
    assert check(mdl.get_dynamic_hw(desc, -1)) == {"hwCount": 2, "hw": [[4, 4], [8, 6]]}
    assert check(mdl.get_dynamic_batch(desc)) == {"batchCount": 0, "batch": []}
    assert check(mdl.get_input_dynamic_gear_count(desc, -1)) == 0
    assert mdl.get_input_size_by_index(desc, 0) == 3 * 8 * 6 * 4, "sized for the largest gear"
    assert mdl.get_input_size_by_index(desc, 2) == 16
    assert mdl.get_output_size_by_index(desc, 0) == 8 * 6 * 4
    # ACL documents both at the largest gear before one is chosen (what ATC records as
    # the output's dims); the inputs keep -1 where they vary.
    assert check(mdl.get_output_dims(desc, 0))["dims"] == [1, 1, 8, 6]
    assert check(mdl.get_cur_output_dims(desc, 0))["dims"] == [1, 1, 8, 6], "no gear yet"
    assert check(mdl.get_input_dims_range(desc, 0)) == {"rangeCount": 0, "range": []}
    check(mdl.get_dynamic_hw(0, -1), INVALID_PARAM)


def test_image_size_model_runs_at_the_chosen_gear(
    hw_model: tuple[Any, int, Recorder], check: Any
) -> None:
    acl, model_id, body = hw_model
    io = ModelIo(acl, model_id)
    mdl = acl.mdl
    shape_index = check(mdl.get_input_index_by_name(io.desc, SHAPE_INPUT))
    check(mdl.execute(model_id, io.inputs, io.outputs), GEAR_INVALID, "no gear chosen")
    for h, w in ((8, 6), (4, 4)):
        check(mdl.set_dynamic_hw_size(model_id, io.inputs, shape_index, h, w))
        assert io.read_raw(io.inputs, shape_index, 2, np.uint64).tolist() == [h, w]
        assert check(mdl.get_cur_output_dims(io.desc, 0))["dims"] == [1, 1, h, w]
        img = np.arange(3 * h * w, dtype=np.float32).reshape(1, 3, h, w)
        io.put(0, img)
        io.put(1, np.array([0.5], np.float32))
        check(mdl.execute(model_id, io.inputs, io.outputs))
        mask, total = grey(img, np.array([0.5], np.float32))
        np.testing.assert_allclose(io.get(0, (1, 1, h, w), np.float32), mask)
        np.testing.assert_allclose(io.get(1, (1,), np.float64), total)
    assert body.shapes == [((1, 3, 8, 6), (1,)), ((1, 3, 4, 4), (1,))]


def test_choosing_an_image_size_has_the_documented_codes(
    hw_model: tuple[Any, int, Recorder], check: Any
) -> None:
    acl, model_id, _ = hw_model
    io = ModelIo(acl, model_id)
    mdl = acl.mdl
    check(mdl.set_dynamic_hw_size(model_id, io.inputs, 2, 5, 5), GEAR_INVALID, "not a gear")
    check(mdl.set_dynamic_hw_size(model_id, io.inputs, 2, 0, 4), INVALID_PARAM, "zero height")
    check(mdl.set_dynamic_hw_size(model_id, io.inputs, 7, 4, 4), INVALID_PARAM, "no buffer 7")
    check(mdl.set_dynamic_hw_size(model_id, 0, 2, 4, 4), INVALID_PARAM, "null dataset")
    check(mdl.set_dynamic_hw_size(model_id + 9, io.inputs, 2, 4, 4), MODEL_ID_INVALID)
    check(mdl.set_dynamic_batch_size(model_id, io.inputs, 2, 4), GEAR_INVALID, "not a batch model")
    short = acl.mdl.create_dataset()
    ptr = check(acl.rt.malloc(4, 0))
    check(acl.mdl.add_dataset_buffer(short, acl.create_data_buffer(ptr, 4)))
    check(mdl.set_dynamic_hw_size(model_id, short, 0, 4, 4), INPUT_LENGTH_INVALID)
    narrow = acl.mdl.create_dataset()
    check(acl.mdl.add_dataset_buffer(narrow, acl.create_data_buffer(ptr, 8)))
    check(mdl.set_dynamic_hw_size(model_id, narrow, 0, 8, 6), what="8 bytes: two uint32")
    with pytest.raises(TypeError, match=r"acl\.mdl\.set_dynamic_hw_size args parse failed"):
        mdl.set_dynamic_hw_size(model_id, io.inputs, 2, 4)


@pytest.fixture
def dims_model(dev0: Any, tmp_path: Path) -> tuple[Any, int, Recorder]:
    body = Recorder(lambda x, y: (x * 2, y.sum(axis=1, keepdims=True)))
    path = dev0.sim.register_model(
        tmp_path / "dims.om",
        inputs=[("x", (-1, 3, -1), "float32"), ("y", (2, -1), "int32")],
        outputs=[("x2", (-1, 3, -1), "float32"), ("ysum", (2, 1), "int32")],
        fn=body,
        dynamic_dims=((1, 4, 2), (2, 8, 5)),
    )
    model_id, ret = dev0.mdl.load_from_file(path)
    assert ret == OK
    return dev0, model_id, body


def test_dims_model_lists_every_input_dim_per_gear(
    dims_model: tuple[Any, int, Recorder], check: Any
) -> None:
    acl, model_id, _ = dims_model
    io = ModelIo(acl, model_id)
    mdl, desc = acl.mdl, io.desc
    assert check(mdl.get_input_dynamic_gear_count(desc, -1)) == 2
    check(mdl.get_input_dynamic_gear_count(desc, 0), INVALID_PARAM, "the index must be -1")
    gears = check(mdl.get_input_dynamic_dims(desc, -1, 2))
    assert gears == [
        {"name": "", "dimCount": 5, "dims": [1, 3, 4, 2, 2]},
        {"name": "", "dimCount": 5, "dims": [2, 3, 8, 2, 5]},
    ]
    padded = check(mdl.get_input_dynamic_dims(desc, -1, 3))
    assert padded[2] == {"name": "", "dimCount": 0, "dims": []}
    check(mdl.get_input_dynamic_dims(desc, -1, 1), INVALID_PARAM, "fewer than the model's")
    assert mdl.get_input_dynamic_dims(desc, -1, 5000) == (None, INVALID_PARAM)
    assert check(mdl.get_dynamic_hw(desc, -1)) == {"hwCount": 0, "hw": []}
    assert check(mdl.get_input_dims(desc, 2)) == {"name": SHAPE_INPUT, "dimCount": 1, "dims": [3]}
    assert mdl.get_input_size_by_index(desc, 0) == 2 * 3 * 8 * 4
    assert mdl.get_input_size_by_index(desc, 2) == 24


def test_dims_model_runs_with_the_dims_chosen(
    dims_model: tuple[Any, int, Recorder], check: Any
) -> None:
    acl, model_id, body = dims_model
    io = ModelIo(acl, model_id)
    mdl = acl.mdl
    check(mdl.execute(model_id, io.inputs, io.outputs), GEAR_INVALID, "no dims chosen")
    gears = check(mdl.get_input_dynamic_dims(io.desc, -1, 2))
    check(mdl.set_input_dynamic_dims(model_id, io.inputs, 2, gears[1]))  # as mmdeploy does
    assert io.read_raw(io.inputs, 2, 3, np.uint64).tolist() == [2, 8, 5]
    assert check(mdl.get_cur_output_dims(io.desc, 0))["dims"] == [2, 3, 8]
    x = np.linspace(0, 1, 2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
    y = np.arange(10, dtype=np.int32).reshape(2, 5)
    io.put(0, x)
    io.put(1, y)
    check(mdl.execute(model_id, io.inputs, io.outputs))
    np.testing.assert_array_equal(io.get(0, (2, 3, 8), np.float32), x * 2)
    np.testing.assert_array_equal(io.get(1, (2, 1), np.int32), y.sum(axis=1, keepdims=True))
    assert body.shapes == [((2, 3, 8), (2, 5))]


def test_choosing_dims_has_the_documented_codes(
    dims_model: tuple[Any, int, Recorder], check: Any
) -> None:
    acl, model_id, _ = dims_model
    io = ModelIo(acl, model_id)
    mdl = acl.mdl

    def choose(dims: list[int], count: int | None = None) -> int:
        entry = {"name": "", "dimCount": len(dims) if count is None else count, "dims": dims}
        return int(mdl.set_input_dynamic_dims(model_id, io.inputs, 2, entry))

    check(choose([1, 3, 4, 2, 9]), GEAR_INVALID, "not a gear")
    check(choose([1, 3, 4, 2]), INPUT_LENGTH_INVALID, "four dims for five")
    check(choose([], 0), INVALID_PARAM, "dimCount 0")
    check(choose([1, 3, 4, 2, 2]))
    with pytest.raises(TypeError, match="argument 4 is not dict"):
        mdl.set_input_dynamic_dims(model_id, io.inputs, 2, [1, 3, 4, 2, 2])
    with pytest.raises(TypeError, match="not list of int"):
        choose([1, 3, "4", 2, 2])
    with pytest.raises(TypeError, match="not list of int"):
        choose([1, 3], 5)
    with pytest.raises(TypeError, match="The dims of parameter 4 is not a list"):
        mdl.set_input_dynamic_dims(model_id, io.inputs, 2, {"dimCount": 1, "dims": (1,)})


def test_set_input_dynamic_dims_checks_the_dims_as_ge_does(
    dims_model: tuple[Any, int, Recorder], tmp_path: Path, check: Any
) -> None:
    """GE's ``GetCurDynamicDims``: the count of all inputs' dims and every fixed dim must
    match (145012, "Static dims should be same"); only then is the gear looked at."""
    acl, model_id, _ = dims_model
    io = ModelIo(acl, model_id)
    mdl = acl.mdl

    def choose(dims: list[int], model: int = model_id) -> int:
        entry = {"name": "", "dimCount": len(dims), "dims": dims}
        return int(mdl.set_input_dynamic_dims(model, io.inputs, 2, entry))

    check(choose([1, 3, 4, 2, 2, 1]), INPUT_LENGTH_INVALID, "six dims for five")
    check(choose([1, 9, 4, 2, 2]), INPUT_LENGTH_INVALID, "x's fixed 3 given 9")
    check(choose([1, 3, 4, 7, 2]), INPUT_LENGTH_INVALID, "y's fixed 2 given 7")
    check(choose([1, 0, 4, 2, 2]), INPUT_LENGTH_INVALID, "a zero where 3 is fixed")
    check(choose([0, 3, 4, 2, 2]), GEAR_INVALID, "zero is no gear value, and no 100000")
    check(choose([1, 3, 4, 2, 2], model_id + 9), MODEL_ID_INVALID)
    assert check(mdl.get_cur_output_dims(io.desc, 0))["dims"] == [2, 3, 8], "the largest gear"
    assert check(mdl.get_output_dims(io.desc, 0))["dims"] == [2, 3, 8]
    static = acl.sim.register_model(
        tmp_path / "static.om",
        inputs=[("x", (2, 3), "float32")],
        outputs=[("y", (2, 3), "float32")],
        fn=np.negative,
    )
    static_id = check(mdl.load_from_file(static))
    check(choose([2, 3], static_id), INPUT_LENGTH_INVALID, "no gears: no dims to match")


@pytest.mark.parametrize("count", ["missing", "5", -1, None, 2**64, 5.0])
def test_a_dim_count_that_is_no_size_t_fails_as_the_wrapper_does(
    dims_model: tuple[Any, int, Recorder], count: Any
) -> None:
    """``PyLong_AsSize_t`` leaves its error pending and the count at ``SIZE_MAX``: the
    dims loop reads the first dim, then its ``PyErr_Occurred`` check raises ValueError;
    with no first ``int`` dim the loop's TypeError comes first."""
    acl, model_id, _ = dims_model
    io = ModelIo(acl, model_id)

    def choose(dims: list[Any]) -> Any:
        entry: dict[str, Any] = {"name": "", "dims": dims}
        if count != "missing":
            entry["dimCount"] = count
        return acl.mdl.set_input_dynamic_dims(model_id, io.inputs, 2, entry)

    with pytest.raises(ValueError, match=r"^PyLong_AsLongLong failed$"):
        choose([1, 3, 4, 2, 2])
    with pytest.raises(TypeError, match=r"^the dims of fourth parameter is not list of int$"):
        choose([])
    with pytest.raises(TypeError, match=r"^the dims of fourth parameter is not list of int$"):
        choose(["1", 3, 4, 2, 2])


def test_dims_entries_are_read_in_the_wrappers_order(
    dims_model: tuple[Any, int, Recorder],
) -> None:
    acl, model_id, _ = dims_model
    io = ModelIo(acl, model_id)

    def choose(entry: dict[str, Any]) -> Any:
        return acl.mdl.set_input_dynamic_dims(model_id, io.inputs, 2, entry)

    with pytest.raises(ValueError, match="PyLong_AsLongLong failed"):
        choose({"dimCount": 7, "dims": [1, 2**70]})  # before the list runs out
    with pytest.raises(RuntimeError, match="PyUnicode_AsUTF8String failed"):
        choose({"name": None, "dimCount": 5, "dims": [1, 3, 4, 2, 2]})


def test_gear_buffer_length_is_checked_before_the_model(
    dev0: Any, tmp_path: Path, hw_model: tuple[Any, int, Recorder], check: Any
) -> None:
    """``GeExecutor::SetDynamicBatchSize`` / ``SetDynamicImageSize`` check the gear
    buffer's length (145012) before they ask for the model or its gears."""
    acl, hw_id, _ = hw_model
    path = dev0.sim.register_model(
        tmp_path / "batch.om",
        inputs=[("x", (-1, 2), "float32")],
        outputs=[("y", (-1, 2), "float32")],
        fn=np.negative,
        batch_sizes=(1, 4),
    )
    batch_id = check(dev0.mdl.load_from_file(path))
    ptr = check(acl.rt.malloc(16, 0))
    short: dict[int, int] = {}
    for size in (2, 6):
        short[size] = acl.mdl.create_dataset()
        check(acl.mdl.add_dataset_buffer(short[size], acl.create_data_buffer(ptr, size)))
    mdl = acl.mdl
    check(mdl.set_dynamic_batch_size(batch_id + 99, short[2], 0, 4), INPUT_LENGTH_INVALID)
    check(mdl.set_dynamic_batch_size(batch_id, short[2], 0, 3), INPUT_LENGTH_INVALID)
    check(mdl.set_dynamic_batch_size(batch_id, short[2], 0, 0), INVALID_PARAM, "zero first")
    check(mdl.set_dynamic_hw_size(hw_id + 99, short[6], 0, 4, 4), INPUT_LENGTH_INVALID)
    check(mdl.set_dynamic_hw_size(hw_id, short[6], 0, 5, 5), INPUT_LENGTH_INVALID)
    check(mdl.set_dynamic_hw_size(hw_id, short[6], 9, 4, 4), INVALID_PARAM, "no buffer 9")


def test_batch_model_reports_the_current_batch(dev0: Any, tmp_path: Path, check: Any) -> None:
    path = dev0.sim.register_model(
        tmp_path / "batch.om",
        inputs=[("x", (-1, 2), "float32")],
        outputs=[("y", (-1, 2), "float32")],
        fn=lambda x: x + 1,
        batch_sizes=(2, 8),
    )
    model_id = check(dev0.mdl.load_from_file(path))
    io = ModelIo(dev0, model_id)
    assert check(dev0.mdl.get_input_dims(io.desc, 0))["dims"] == [-1, 2]
    for read in (dev0.mdl.get_output_dims, dev0.mdl.get_cur_output_dims):
        assert check(read(io.desc, 0))["dims"] == [8, 2], "no batch chosen: the largest"
    for batch in (8, 2):
        check(dev0.mdl.set_dynamic_batch_size(model_id, io.inputs, 1, batch))
        assert check(dev0.mdl.get_cur_output_dims(io.desc, 0))["dims"] == [batch, 2]
    assert check(dev0.mdl.get_output_dims(io.desc, 0))["dims"] == [8, 2], "whatever was chosen"
    check(dev0.mdl.set_dynamic_hw_size(model_id, io.inputs, 1, 2, 2), GEAR_INVALID)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"dynamic_hw": ((4, 4),), "batch_sizes": (1,)}, ValueError),
        ({"dynamic_hw": ((4, 4),), "inputs": [("x", (1, -1), "f4")]}, ValueError),
        ({"dynamic_hw": ((4,),)}, ValueError),
        ({"dynamic_hw": ((4, 4), (4, 4))}, ValueError),
        ({"dynamic_hw": (4, 4)}, TypeError),
        ({"dynamic_dims": ((1, 2, 3),)}, ValueError),  # two -1 among the inputs
        ({"dynamic_dims": ((1,), (1, 2))}, ValueError),
        ({"dynamic_hw": ((4, 4),), "outputs": [("y", (-1, -1, -1), "f4")]}, ValueError),
        ({"dynamic_dims": ((2,),), "inputs": [("x", (1, (1, 4)), "f4")]}, ValueError),
        ({"inputs": [("x", ((4, 2), 3), "f4")]}, ValueError),
        ({"inputs": [("x", ((1, 2, 3), 3), "f4")]}, TypeError),
    ],
)
def test_bad_dynamic_declarations_are_refused(
    rt: Any, tmp_path: Path, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    args: dict[str, Any] = {
        "inputs": [("x", (1, -1, -1), "f4")],
        "outputs": [("y", (1, 2), "f4")],
        "fn": np.negative,
    }
    args.update(kwargs)
    with pytest.raises(error):
        rt.sim.register_model(tmp_path / "bad.om", **args)
    assert not (tmp_path / "bad.om").exists()


def test_a_spec_file_carries_the_gears(make_rt: Callable[..., Any], tmp_path: Path) -> None:
    spec = {
        "format": "aclasync.sim.model",
        "version": 1,
        "fn": "numpy:negative",
        "inputs": [["x", [1, -1, -1], "float32"]],
        "outputs": [["y", [1, -1, -1], "float32"]],
        "dynamic_hw": [[2, 3], [4, 5]],
    }
    path = tmp_path / "neg.om"
    path.write_text(json.dumps(spec))
    acl = make_rt()
    assert acl.rt.set_device(0) == 0
    model_id, ret = acl.mdl.load_from_file(str(path))
    assert ret == OK
    io = ModelIo(acl, model_id)
    assert acl.mdl.get_dynamic_hw(io.desc, -1) == ({"hwCount": 2, "hw": [[2, 3], [4, 5]]}, 0)
    assert acl.mdl.set_dynamic_hw_size(model_id, io.inputs, 1, 2, 3) == OK
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    io.put(0, x)
    assert acl.mdl.execute(model_id, io.inputs, io.outputs) == OK
    np.testing.assert_array_equal(io.get(0, (1, 2, 3), np.float32), -x)
    written = tmp_path / "written.om"
    acl.sim.register_model(
        written,
        inputs=[("x", (-1, 2), "f4")],
        outputs=[("y", (-1, 2), "f4")],
        fn=np.negative,
        dynamic_dims=((1,), (3,)),
    )
    assert json.loads(written.read_text())["dynamic_dims"] == [[1], [3]]
