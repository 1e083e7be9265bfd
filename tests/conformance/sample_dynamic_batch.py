"""A dynamic-batch inference program in the style of Ascend's samples (ATC --dynamic_batch_size).

It only does ``import acl``: ``python sample_dynamic_batch.py MODEL``. It reads the
batch choices with ``get_dynamic_batch``, finds the ``ascend_mbatch_shape_data`` input,
sizes buffers for the largest batch, and for each batch calls
``set_dynamic_batch_size``, copies a batch in, runs ``execute_async`` on its stream,
reads ``get_cur_output_dims`` and checks the output. Prints ``sample passed``.
"""

import sys

import acl
import numpy as np

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
DEVICE_ID = 0


def check_ret(message, ret):
    if ret != 0:
        raise Exception(f"{message} failed ret={ret}")


def make_dataset(sizes):
    dataset = acl.mdl.create_dataset()
    pointers = []
    for size in sizes:
        ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        buffer = acl.create_data_buffer(ptr, size)
        _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
        check_ret("acl.mdl.add_dataset_buffer", ret)
        pointers.append(ptr)
    return dataset, pointers


def destroy_dataset(dataset, pointers):
    for i in range(acl.mdl.get_dataset_num_buffers(dataset)):
        check_ret(
            "acl.destroy_data_buffer",
            acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(dataset, i)),
        )
    check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(dataset))
    for ptr in pointers:
        check_ret("acl.rt.free", acl.rt.free(ptr))


def main(model_path):
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.create_context(DEVICE_ID)
    check_ret("acl.rt.create_context", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    model_id, ret = acl.mdl.load_from_file(model_path)
    check_ret("acl.mdl.load_from_file", ret)
    desc = acl.mdl.create_desc()
    check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))
    batch_info, ret = acl.mdl.get_dynamic_batch(desc)
    check_ret("acl.mdl.get_dynamic_batch", ret)
    batches = batch_info["batch"]
    assert batch_info["batchCount"] == len(batches) == 3
    shape_index, ret = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
    check_ret("acl.mdl.get_input_index_by_name", ret)

    num_inputs = acl.mdl.get_num_inputs(desc)
    in_sizes = [acl.mdl.get_input_size_by_index(desc, i) for i in range(num_inputs)]
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    inputs, in_ptrs = make_dataset(in_sizes)
    outputs, out_ptrs = make_dataset([out_size])

    for batch in batches:
        ret = acl.mdl.set_dynamic_batch_size(model_id, inputs, shape_index, batch)
        check_ret("acl.mdl.set_dynamic_batch_size", ret)
        x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
        ret = acl.rt.memcpy(
            in_ptrs[0], in_sizes[0], acl.util.numpy_to_ptr(x), x.nbytes, ACL_MEMCPY_HOST_TO_DEVICE
        )
        check_ret("acl.rt.memcpy", ret)
        check_ret("acl.mdl.execute_async", acl.mdl.execute_async(model_id, inputs, outputs, stream))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
        dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
        check_ret("acl.mdl.get_cur_output_dims", ret)
        assert dims["dims"] == [batch, 16], dims
        result = np.zeros(dims["dims"], dtype=np.float32)
        ret = acl.rt.memcpy(
            acl.util.numpy_to_ptr(result),
            result.nbytes,
            out_ptrs[0],
            result.nbytes,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
        check_ret("acl.rt.memcpy", ret)
        np.testing.assert_allclose(result, x * 2.0 + 1.0, rtol=1e-6)

    destroy_dataset(inputs, in_ptrs)
    destroy_dataset(outputs, out_ptrs)
    check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(desc))
    check_ret("acl.mdl.unload", acl.mdl.unload(model_id))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.destroy_context", acl.rt.destroy_context(context))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("sample passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
