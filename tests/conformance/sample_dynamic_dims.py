"""A dynamic-dims inference program in the style of public ACL wrappers (ATC --dynamic_dims).

It only does ``import acl``: ``python sample_dynamic_dims.py MODEL``. As mmdeploy's
Ascend wrapper does, it reads the gears with ``get_input_dynamic_gear_count(desc, -1)``
and ``get_input_dynamic_dims(desc, -1, count)``, picks the gear matching its inputs'
shapes and passes that entry to ``set_input_dynamic_dims`` unchanged; it runs on a
stream and waits with ``synchronize_device(device_id)``, as multi-NPU code calls it.
Prints ``sample passed``.
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


def pick_gear(gears, shapes):
    """The gear whose dims equal the inputs' shapes, concatenated in input order."""
    wanted = [d for shape in shapes for d in shape]
    for gear in gears:
        if gear["dims"] == wanted:
            return gear
    raise Exception(f"no gear for {shapes}")


def main(model_path):
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    model_id, ret = acl.mdl.load_from_file(model_path)
    check_ret("acl.mdl.load_from_file", ret)
    desc = acl.mdl.create_desc()
    check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))

    count, ret = acl.mdl.get_input_dynamic_gear_count(desc, -1)
    check_ret("acl.mdl.get_input_dynamic_gear_count", ret)
    gears, ret = acl.mdl.get_input_dynamic_dims(desc, -1, count)
    check_ret("acl.mdl.get_input_dynamic_dims", ret)
    assert len(gears) == count == 2, gears

    names = [acl.mdl.get_input_name_by_index(desc, i) for i in range(acl.mdl.get_num_inputs(desc))]
    shape_index = names.index("ascend_mbatch_shape_data")
    dataset = acl.mdl.create_dataset()
    in_ptrs = []
    for i in range(len(names)):
        size = acl.mdl.get_input_size_by_index(desc, i)
        ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        _, ret = acl.mdl.add_dataset_buffer(dataset, acl.create_data_buffer(ptr, size))
        check_ret("acl.mdl.add_dataset_buffer", ret)
        in_ptrs.append(ptr)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    out_ptr, ret = acl.rt.malloc(out_size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    outputs = acl.mdl.create_dataset()
    _, ret = acl.mdl.add_dataset_buffer(outputs, acl.create_data_buffer(out_ptr, out_size))
    check_ret("acl.mdl.add_dataset_buffer", ret)

    rng = np.random.default_rng(5)
    for batch, length in ((4, 32), (1, 16)):
        tokens = rng.standard_normal((batch, length, 8)).astype(np.float32)
        mask = (rng.random((batch, length)) > 0.3).astype(np.float32)
        gear = pick_gear(gears, [tokens.shape, mask.shape])
        check_ret(
            "acl.mdl.set_input_dynamic_dims",
            acl.mdl.set_input_dynamic_dims(model_id, dataset, shape_index, gear),
        )
        for ptr, array in zip(in_ptrs, (tokens, mask), strict=False):
            ret = acl.rt.memcpy(
                ptr,
                array.nbytes,
                acl.util.numpy_to_ptr(array),
                array.nbytes,
                ACL_MEMCPY_HOST_TO_DEVICE,
            )
            check_ret("acl.rt.memcpy", ret)
        check_ret(
            "acl.mdl.execute_async", acl.mdl.execute_async(model_id, dataset, outputs, stream)
        )
        check_ret("acl.rt.synchronize_device", acl.rt.synchronize_device(DEVICE_ID))
        dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
        check_ret("acl.mdl.get_cur_output_dims", ret)
        assert dims["dims"] == [batch, 8], dims
        pooled = np.zeros(dims["dims"], dtype=np.float32)
        ret = acl.rt.memcpy(
            acl.util.numpy_to_ptr(pooled),
            pooled.nbytes,
            out_ptr,
            pooled.nbytes,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
        check_ret("acl.rt.memcpy", ret)
        np.testing.assert_allclose(
            pooled, (tokens * mask[..., None]).sum(axis=1), rtol=1e-5, atol=1e-5
        )

    for ds in (dataset, outputs):
        for i in range(acl.mdl.get_dataset_num_buffers(ds)):
            check_ret(
                "acl.destroy_data_buffer",
                acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(ds, i)),
            )
        check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(ds))
    for ptr in (*in_ptrs, out_ptr):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(desc))
    check_ret("acl.mdl.unload", acl.mdl.unload(model_id))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("sample passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
