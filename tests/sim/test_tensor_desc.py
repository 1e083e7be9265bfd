"""Tensor descriptions, datasets' descriptions, and dynamic-shape models that fill them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_io import ModelIo

from aclasync._pyacl.codes import ErrorCode

OK = 0
INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
API_NOT_SUPPORT = int(ErrorCode.ACL_ERROR_API_NOT_SUPPORT)
MODEL_EXECUTE = int(ErrorCode.ACL_ERROR_RT_MODEL_EXECUTE)
ACL_FLOAT, ACL_INT32, ACL_FLOAT16 = 0, 3, 1
NCHW, ND = 0, 2


def test_a_description_reports_what_it_was_made_with(rt: Any, check: Any) -> None:
    desc = rt.create_tensor_desc(ACL_FLOAT, [1, 3, 224, 224], NCHW)
    assert desc != 0
    assert (rt.get_tensor_desc_type(desc), rt.get_tensor_desc_format(desc)) == (ACL_FLOAT, NCHW)
    assert rt.get_tensor_desc_num_dims(desc) == 4
    assert [rt.get_tensor_desc_dim(desc, i) for i in range(4)] == [1, 3, 224, 224]
    assert check(rt.get_tensor_desc_dim_v2(desc, 3)) == 224
    assert rt.get_tensor_desc_element_count(desc) == 3 * 224 * 224
    assert rt.get_tensor_desc_size(desc) == 3 * 224 * 224 * 4
    assert rt.get_tensor_desc_name(desc) == ""
    assert rt.set_tensor_desc_name(desc, "image") is None
    assert rt.get_tensor_desc_name(desc) == "image"
    assert rt.get_tensor_desc_by_index(desc, 0) == desc
    assert rt.sim.live_objects()["tensor_descs"] == 1
    assert rt.destroy_tensor_desc(desc) is None
    assert rt.sim.live_objects()["tensor_descs"] == 0


def test_bad_descriptions_and_indexes_get_the_c_answers(rt: Any, check: Any) -> None:
    desc = rt.create_tensor_desc(ACL_INT32, [2, -1], ND)
    assert rt.get_tensor_desc_dim(desc, 2) == -1
    check(rt.get_tensor_desc_dim_v2(desc, 2), INVALID_PARAM)
    assert rt.get_tensor_desc_element_count(desc) == 0, "a dim is unknown"
    assert rt.get_tensor_desc_size(desc) == 0
    assert rt.get_tensor_desc_num_dims(rt.create_tensor_desc(ACL_FLOAT, [-2], ND)) == 2**64 - 2
    assert rt.get_tensor_desc_element_count(rt.create_tensor_desc(ACL_FLOAT, [], ND)) == 1
    for unknown in (0, 12345):
        assert rt.get_tensor_desc_type(unknown) == -1
        assert rt.get_tensor_desc_format(unknown) == -1
        assert rt.get_tensor_desc_num_dims(unknown) == 0
        assert rt.get_tensor_desc_dim(unknown, 0) == -1
        check(rt.get_tensor_desc_dim_v2(unknown, 0), INVALID_PARAM)
        assert rt.get_tensor_desc_name(unknown) == ""
        check(rt.set_tensor_shape(unknown, [1]), INVALID_PARAM)
        check(rt.set_tensor_format(unknown, ND), what="the format setters ignore a null desc")
    assert rt.trans_tensor_desc_format(desc, NCHW) == (0, API_NOT_SUPPORT)


def test_list_arguments_are_checked_as_the_wrappers_check_them(rt: Any) -> None:
    with pytest.raises(TypeError, match=r"^argument 2 is not list$"):
        rt.create_tensor_desc(ACL_FLOAT, (1, 2), ND)
    with pytest.raises(TypeError, match=r"^invalid data type$"):
        rt.create_tensor_desc(ACL_FLOAT, [1, "2"], ND)
    with pytest.raises(ValueError, match="PyLong_AsLongLong failed"):
        rt.create_tensor_desc(ACL_FLOAT, [2**63], ND)
    with pytest.raises(TypeError, match=r"^acl\.create_tensor_desc args parse failed$"):
        rt.create_tensor_desc("float", [1], ND)
    desc = rt.create_tensor_desc(ACL_FLOAT, [1], ND)
    with pytest.raises(TypeError, match=r"^the list argument is not list of int$"):
        rt.set_tensor_shape_range(desc, [[1]])
    with pytest.raises(TypeError, match=r"^int64_t argument is not list$"):
        rt.set_tensor_value_range(desc, ((1, 2),))


def test_setters_store_shapes_ranges_and_constants(rt: Any, check: Any) -> None:
    desc = rt.create_tensor_desc(ACL_FLOAT16, [-1, 8], ND)
    check(rt.set_tensor_shape_range(desc, [[1, 16], [8, 8]]))
    assert check(rt.get_tensor_desc_dim_range(desc, 0, 2)) == [1, 16]
    assert check(rt.get_tensor_desc_dim_range(desc, 1, 3)) == [8, 8, 0]
    assert rt.get_tensor_desc_dim_range(desc, 2, 2) == (None, INVALID_PARAM)
    assert rt.get_tensor_desc_dim_range(desc, 0, 1) == (None, INVALID_PARAM)
    check(rt.set_tensor_origin_shape(desc, [4, 8]))
    assert rt.get_tensor_desc_element_count(desc) == 32
    check(rt.set_tensor_shape(desc, [4, 1, 8]), what="the storage shape")
    assert rt.get_tensor_desc_num_dims(desc) == 2, "the shape the desc reports is unchanged"
    values = np.arange(4, dtype=np.int32)
    check(rt.set_tensor_const(desc, rt.util.numpy_to_ptr(values), values.nbytes))
    check(rt.set_tensor_const(desc, 0, 8), INVALID_PARAM)
    check(rt.set_tensor_const(desc, 0x10, 8), int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID))
    check(rt.set_tensor_place_ment(desc, 1))
    check(rt.set_tensor_dynamic_input(desc, "x"))
    assert rt.get_tensor_desc_address(desc) == 0


def test_data_type_sizes_follow_acl() -> None:
    from aclasync.sim import create

    rt = create(device_count=1)
    sizes = {0: 4, 1: 2, 2: 1, 3: 4, 9: 8, 11: 8, 12: 1, 13: 0, 17: 16, 27: 2, -1: 0, 99: 8}
    assert {t: rt.data_type_size(t) for t in sizes} == sizes
    rt.sim.close()


def test_a_dataset_keeps_its_own_copy_of_a_description(rt: Any, check: Any) -> None:
    dataset = rt.mdl.create_dataset()
    check(rt.mdl.add_dataset_buffer(dataset, rt.create_data_buffer(0, 0)))
    desc = rt.create_tensor_desc(ACL_FLOAT, [3, 5], ND)
    assert rt.mdl.get_dataset_tensor_desc(dataset, 0) == 0, "none set yet"
    assert check(rt.mdl.set_dataset_tensor_desc(dataset, desc, 0)) == dataset
    rt.destroy_tensor_desc(desc)
    copy = rt.mdl.get_dataset_tensor_desc(dataset, 0)
    assert copy not in (0, desc)
    assert [rt.get_tensor_desc_dim(copy, i) for i in range(2)] == [3, 5]
    check(rt.mdl.set_dataset_tensor_desc(dataset, desc, 0), INVALID_PARAM, "destroyed handle")
    check(rt.mdl.set_dataset_tensor_desc(dataset, copy, 1), INVALID_PARAM, "no buffer 1")
    assert rt.mdl.get_dataset_tensor_desc(dataset, 1) == 0
    check(rt.mdl.set_dataset_tensor_desc(dataset, 0, 0), what="0 removes it")
    assert rt.mdl.get_dataset_tensor_desc(dataset, 0) == 0
    check(rt.mdl.set_dataset_tensor_desc(dataset, rt.create_tensor_desc(0, [1], ND), 0))
    check(rt.mdl.destroy_dataset(dataset))
    assert rt.sim.live_objects()["tensor_descs"] == 1, "the dataset's copy went with it"


def keep_positive_rows(x: Any) -> Any:
    """A body whose output shape depends on the values: the rows with a positive sum."""
    return x[x.sum(axis=1) > 0] * 10


@pytest.fixture
def shape_model(dev0: Any, tmp_path: Path) -> tuple[Any, int]:
    path = dev0.sim.register_model(
        tmp_path / "filter.om",
        inputs=[("x", ((1, 8), 4), "float32")],
        outputs=[("rows", ((0, 8), 4), "float32")],
        fn=keep_positive_rows,
    )
    model_id, ret = dev0.mdl.load_from_file(path)
    assert ret == OK
    return dev0, model_id


def test_a_dynamic_shape_model_describes_its_ranges(
    shape_model: tuple[Any, int], check: Any
) -> None:
    acl, model_id = shape_model
    io = ModelIo(acl, model_id)
    mdl, desc = acl.mdl, io.desc
    assert mdl.get_num_inputs(desc) == 1, "no gear input"
    assert check(mdl.get_input_dims(desc, 0))["dims"] == [-1, 4]
    assert check(mdl.get_input_dims_range(desc, 0)) == {"rangeCount": 2, "range": [[1, 8], [4, 4]]}
    assert mdl.get_input_size_by_index(desc, 0) == 8 * 4 * 4, "sized for the largest shape"
    assert mdl.get_output_size_by_index(desc, 0) == 8 * 4 * 4
    check(mdl.get_cur_output_dims(desc, 0), API_NOT_SUPPORT)


def describe_input(acl: Any, io: ModelIo, shape: list[int]) -> None:
    desc = acl.create_tensor_desc(ACL_FLOAT, shape, ND)
    _, ret = acl.mdl.set_dataset_tensor_desc(io.inputs, desc, 0)
    assert ret == OK
    acl.destroy_tensor_desc(desc)


def read_output_shape(acl: Any, io: ModelIo, check: Any) -> list[int]:
    desc = acl.mdl.get_dataset_tensor_desc(io.outputs, 0)
    assert desc != 0
    assert acl.get_tensor_desc_type(desc) == ACL_FLOAT
    count = acl.get_tensor_desc_num_dims(desc)
    return [check(acl.get_tensor_desc_dim_v2(desc, i)) for i in range(count)]


def test_clients_read_the_real_output_shape_after_execution(
    shape_model: tuple[Any, int], check: Any
) -> None:
    acl, model_id = shape_model
    io = ModelIo(acl, model_id)
    x = np.array([[1, 1, 1, 1], [-5, 0, 0, 0], [0, 0, 0, 2]], dtype=np.float32)
    io.put(0, x)
    check(acl.mdl.execute(model_id, io.inputs, io.outputs), INVALID_PARAM, "no input shape")
    assert acl.mdl.get_dataset_tensor_desc(io.outputs, 0) == 0
    describe_input(acl, io, [3, 4])
    check(acl.mdl.execute(model_id, io.inputs, io.outputs))
    shape = read_output_shape(acl, io, check)
    assert shape == [2, 4]
    np.testing.assert_array_equal(io.get(0, (2, 4), np.float32), keep_positive_rows(x))
    first = acl.mdl.get_dataset_tensor_desc(io.outputs, 0)
    describe_input(acl, io, [1, 4])
    check(acl.mdl.execute(model_id, io.inputs, io.outputs))
    assert read_output_shape(acl, io, check) == [1, 4]
    assert acl.mdl.get_dataset_tensor_desc(io.outputs, 0) != first, "a fresh description"
    assert acl.get_tensor_desc_type(first) == -1, "the old one is gone"
    describe_input(acl, io, [9, 4])
    check(acl.mdl.execute(model_id, io.inputs, io.outputs), INVALID_PARAM, "out of range")
    describe_input(acl, io, [2, 5])
    check(acl.mdl.execute(model_id, io.inputs, io.outputs), INVALID_PARAM, "wrong fixed dim")


def test_async_execution_describes_outputs_when_it_runs(
    shape_model: tuple[Any, int], check: Any
) -> None:
    acl, model_id = shape_model
    io = ModelIo(acl, model_id)
    stream = check(acl.rt.create_stream())
    release = threading.Event()
    from aclasync.sim import Kernel

    check(acl.sim.launch_kernel(Kernel(fn=lambda: release.wait(10)), stream))
    io.put(0, np.ones((2, 4), np.float32))
    describe_input(acl, io, [2, 4])
    check(acl.mdl.execute_async(model_id, io.inputs, io.outputs, stream))
    assert acl.mdl.get_dataset_tensor_desc(io.outputs, 0) == 0, "not run yet"
    release.set()
    check(acl.rt.synchronize_stream(stream))
    assert read_output_shape(acl, io, check) == [2, 4]
    check(acl.rt.destroy_stream(stream))


def test_an_output_too_big_for_its_buffer_fails_the_execution(
    shape_model: tuple[Any, int], check: Any
) -> None:
    acl, model_id = shape_model
    io = ModelIo(acl, model_id, out_sizes=[16])  # room for one row
    io.put(0, np.ones((2, 4), np.float32))
    describe_input(acl, io, [2, 4])
    check(acl.mdl.execute(model_id, io.inputs, io.outputs), MODEL_EXECUTE)
    assert acl.mdl.get_dataset_tensor_desc(io.outputs, 0) == 0
