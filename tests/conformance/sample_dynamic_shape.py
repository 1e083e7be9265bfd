"""A dynamic-shape inference program (ATC --input_shape_range): tensor descriptions in and out.

It only does ``import acl``: ``python sample_dynamic_shape.py MODEL``. It reads the
input's range with ``get_input_dims_range``, describes each input it sends with
``create_tensor_desc`` + ``set_dataset_tensor_desc``, runs ``execute``, and reads the
output's real shape from ``get_dataset_tensor_desc`` with ``get_tensor_desc_num_dims``
and ``get_tensor_desc_dim_v2`` (``get_cur_output_dims`` does not serve such models).
Prints ``sample passed``.
"""

import sys

import acl
import numpy as np

ACL_FLOAT = 0
ACL_FORMAT_ND = 2
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
DEVICE_ID = 0


def check_ret(message, ret):
    if ret != 0:
        raise Exception(f"{message} failed ret={ret}")


def buffer_dataset(size):
    ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    dataset = acl.mdl.create_dataset()
    buffer = acl.create_data_buffer(ptr, size)
    _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
    check_ret("acl.mdl.add_dataset_buffer", ret)
    return dataset, buffer, ptr


def output_shape(dataset, index):
    desc = acl.mdl.get_dataset_tensor_desc(dataset, index)
    if desc == 0:
        raise Exception("the output has no tensor description")
    shape = []
    for i in range(acl.get_tensor_desc_num_dims(desc)):
        dim, ret = acl.get_tensor_desc_dim_v2(desc, i)
        check_ret("acl.get_tensor_desc_dim_v2", ret)
        shape.append(dim)
    return shape


def main(model_path):
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    model_id, ret = acl.mdl.load_from_file(model_path)
    check_ret("acl.mdl.load_from_file", ret)
    desc = acl.mdl.create_desc()
    check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))
    ranges, ret = acl.mdl.get_input_dims_range(desc, 0)
    check_ret("acl.mdl.get_input_dims_range", ret)
    (low, high), (width, _) = ranges["range"]
    _, ret = acl.mdl.get_cur_output_dims(desc, 0)
    assert ret != 0, "dynamic-shape models have no current output dims"

    in_size = acl.mdl.get_input_size_by_index(desc, 0)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    assert in_size == high * width * 4, in_size
    inputs, in_buffer, in_ptr = buffer_dataset(in_size)
    outputs, out_buffer, out_ptr = buffer_dataset(out_size)

    rng = np.random.default_rng(11)
    for rows in (low, 17, high):
        scores = rng.random((rows, width), dtype=np.float32)
        tensor_desc = acl.create_tensor_desc(ACL_FLOAT, [rows, width], ACL_FORMAT_ND)
        _, ret = acl.mdl.set_dataset_tensor_desc(inputs, tensor_desc, 0)
        check_ret("acl.mdl.set_dataset_tensor_desc", ret)
        ret = acl.rt.memcpy(
            in_ptr, in_size, acl.util.numpy_to_ptr(scores), scores.nbytes, ACL_MEMCPY_HOST_TO_DEVICE
        )
        check_ret("acl.rt.memcpy", ret)
        check_ret("acl.mdl.execute", acl.mdl.execute(model_id, inputs, outputs))
        acl.destroy_tensor_desc(tensor_desc)
        expected = scores[scores[:, 0] > 0.5]
        shape = output_shape(outputs, 0)
        assert shape == list(expected.shape), (shape, expected.shape)
        kept = np.zeros(shape, dtype=np.float32)
        if kept.size:
            ret = acl.rt.memcpy(
                acl.util.numpy_to_ptr(kept),
                kept.nbytes,
                out_ptr,
                kept.nbytes,
                ACL_MEMCPY_DEVICE_TO_HOST,
            )
            check_ret("acl.rt.memcpy", ret)
        np.testing.assert_array_equal(kept, expected)

    for dataset, buffer, ptr in ((inputs, in_buffer, in_ptr), (outputs, out_buffer, out_ptr)):
        check_ret("acl.destroy_data_buffer", acl.destroy_data_buffer(buffer))
        check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(dataset))
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(desc))
    check_ret("acl.mdl.unload", acl.mdl.unload(model_id))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("sample passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
