"""A dynamic-image-size inference program in the style of Ascend's samples.

Its model is what ATC builds with ``--dynamic_image_size``; it only does ``import acl``:
``python sample_dynamic_hw.py MODEL``. It reads the image sizes with
``get_dynamic_hw(desc, -1)``, sizes buffers for the largest, and for each size calls
``set_dynamic_hw_size`` on the ``ascend_mbatch_shape_data`` input, copies an image in,
runs ``execute`` and checks both outputs at ``get_cur_output_dims``. It tears down as a
published evaluation script does: ``reset_device`` first, then the context it created
(found again with ``get_context``). Prints ``sample passed``.
"""

import sys

import acl
import numpy as np

ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
DEVICE_ID = 0


def check_ret(message, ret):
    if ret != 0:
        raise Exception(f"{message} failed ret={ret}")


class Net:
    """ModelZoo's ``acl_net.py`` shape: device buffers per tensor, datasets over them."""

    def __init__(self, model_path):
        self.model_id, ret = acl.mdl.load_from_file(model_path)
        check_ret("acl.mdl.load_from_file", ret)
        self.desc = acl.mdl.create_desc()
        check_ret("acl.mdl.get_desc", acl.mdl.get_desc(self.desc, self.model_id))
        self.inputs, self.in_ptrs = self._dataset(
            acl.mdl.get_num_inputs, acl.mdl.get_input_size_by_index
        )
        self.outputs, self.out_ptrs = self._dataset(
            acl.mdl.get_num_outputs, acl.mdl.get_output_size_by_index
        )

    def _dataset(self, count, size_of):
        dataset = acl.mdl.create_dataset()
        pointers = []
        for i in range(count(self.desc)):
            size = size_of(self.desc, i)
            ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)
            check_ret("acl.rt.malloc", ret)
            _, ret = acl.mdl.add_dataset_buffer(dataset, acl.create_data_buffer(ptr, size))
            check_ret("acl.mdl.add_dataset_buffer", ret)
            pointers.append((ptr, size))
        return dataset, pointers

    def run(self, image):
        h, w = image.shape[2:]
        index, ret = acl.mdl.get_input_index_by_name(self.desc, "ascend_mbatch_shape_data")
        check_ret("acl.mdl.get_input_index_by_name", ret)
        check_ret(
            "acl.mdl.set_dynamic_hw_size",
            acl.mdl.set_dynamic_hw_size(self.model_id, self.inputs, index, h, w),
        )
        ptr, size = self.in_ptrs[0]
        check_ret(
            "acl.rt.memcpy",
            acl.rt.memcpy(
                ptr, size, acl.util.numpy_to_ptr(image), image.nbytes, ACL_MEMCPY_HOST_TO_DEVICE
            ),
        )
        check_ret("acl.mdl.execute", acl.mdl.execute(self.model_id, self.inputs, self.outputs))
        results = []
        for i, (ptr, _) in enumerate(self.out_ptrs):
            dims, ret = acl.mdl.get_cur_output_dims(self.desc, i)
            check_ret("acl.mdl.get_cur_output_dims", ret)
            out = np.zeros(dims["dims"], dtype=np.float32)
            check_ret(
                "acl.rt.memcpy",
                acl.rt.memcpy(
                    acl.util.numpy_to_ptr(out),
                    out.nbytes,
                    ptr,
                    out.nbytes,
                    ACL_MEMCPY_DEVICE_TO_HOST,
                ),
            )
            results.append(out)
        return results

    def release(self):
        for dataset, pointers in ((self.inputs, self.in_ptrs), (self.outputs, self.out_ptrs)):
            for i in range(acl.mdl.get_dataset_num_buffers(dataset)):
                check_ret(
                    "acl.destroy_data_buffer",
                    acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(dataset, i)),
                )
            check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(dataset))
            for ptr, _ in pointers:
                check_ret("acl.rt.free", acl.rt.free(ptr))
        check_ret("acl.mdl.unload", acl.mdl.unload(self.model_id))
        check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(self.desc))


def main(model_path):
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    _, ret = acl.rt.create_context(DEVICE_ID)
    check_ret("acl.rt.create_context", ret)
    net = Net(model_path)
    hw_info, ret = acl.mdl.get_dynamic_hw(net.desc, -1)
    check_ret("acl.mdl.get_dynamic_hw", ret)
    assert hw_info["hwCount"] == 2, hw_info
    for h, w in hw_info["hw"]:
        image = np.random.default_rng(h * w).random((1, 3, h, w), dtype=np.float32)
        grey, peak = net.run(image)
        assert grey.shape == (1, 1, h, w), grey.shape
        np.testing.assert_allclose(grey, image.mean(axis=1, keepdims=True), rtol=1e-5)
        np.testing.assert_allclose(peak, image.max(axis=(2, 3)), rtol=1e-6)
    net.release()

    # An evaluation script's teardown: the device first, then the context it made.
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    context, ret = acl.rt.get_context()
    check_ret("acl.rt.get_context", ret)
    check_ret("acl.rt.destroy_context", acl.rt.destroy_context(context))
    check_ret("acl.finalize", acl.finalize())
    print("sample passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
