"""Inference code written the way Ascend samples' acllite model wrapper is written.

It imports ``acl`` and knows nothing of aclasync: the test installs a simulated
runtime as ``sys.modules["acl"]`` and runs it unchanged. Host buffers come from
``acl.rt.malloc_host`` and outputs are read through ``acl.util.ptr_to_numpy``.
"""

import acl

ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_FLOAT = 0
NPY_FLOAT32 = 11


class InferenceModel:
    def __init__(self, model_path):
        self.model_path = model_path
        self.model_id = None
        self.model_desc = None
        self.input_dataset = None
        self.output_dataset = None
        self.input_buffers = []
        self.output_host = []
        self._load()

    def _load(self):
        self.model_id, ret = acl.mdl.load_from_file(self.model_path)
        check(ret, "acl.mdl.load_from_file")
        self.model_desc = acl.mdl.create_desc()
        ret = acl.mdl.get_desc(self.model_desc, self.model_id)
        check(ret, "acl.mdl.get_desc")
        self.output_dataset = acl.mdl.create_dataset()
        for i in range(acl.mdl.get_num_outputs(self.model_desc)):
            size = acl.mdl.get_output_size_by_index(self.model_desc, i)
            buf, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)
            check(ret, "acl.rt.malloc")
            data_buffer = acl.create_data_buffer(buf, size)
            _, ret = acl.mdl.add_dataset_buffer(self.output_dataset, data_buffer)
            check(ret, "acl.mdl.add_dataset_buffer")
            host, ret = acl.rt.malloc_host(size)
            check(ret, "acl.rt.malloc_host")
            self.output_host.append((host, size))
        for i in range(acl.mdl.get_num_inputs(self.model_desc)):
            size = acl.mdl.get_input_size_by_index(self.model_desc, i)
            dev, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)
            check(ret, "acl.rt.malloc")
            host, ret = acl.rt.malloc_host(size)
            check(ret, "acl.rt.malloc_host")
            self.input_buffers.append({"dev": dev, "host": host, "size": size})

    def execute(self, input_list):
        self.input_dataset = acl.mdl.create_dataset()
        for item, data in zip(self.input_buffers, input_list, strict=True):
            staging = acl.util.ptr_to_numpy(item["host"], (data.size,), NPY_FLOAT32)
            staging[:] = data.reshape(-1)
            ret = acl.rt.memcpy(
                item["dev"], item["size"], item["host"], item["size"], ACL_MEMCPY_HOST_TO_DEVICE
            )
            check(ret, "acl.rt.memcpy")
            data_buffer = acl.create_data_buffer(item["dev"], item["size"])
            _, ret = acl.mdl.add_dataset_buffer(self.input_dataset, data_buffer)
            check(ret, "acl.mdl.add_dataset_buffer")
        ret = acl.mdl.execute(self.model_id, self.input_dataset, self.output_dataset)
        check(ret, "acl.mdl.execute")
        self._release_dataset(self.input_dataset)
        self.input_dataset = None
        return self._outputs_to_numpy()

    def _outputs_to_numpy(self):
        results = []
        for i in range(acl.mdl.get_dataset_num_buffers(self.output_dataset)):
            buf = acl.mdl.get_dataset_buffer(self.output_dataset, i)
            data = acl.get_data_buffer_addr(buf)
            size = int(acl.get_data_buffer_size(buf))
            host, host_size = self.output_host[i]
            ret = acl.rt.memcpy(host, host_size, data, size, ACL_MEMCPY_DEVICE_TO_HOST)
            check(ret, "acl.rt.memcpy")
            dims, ret = acl.mdl.get_output_dims(self.model_desc, i)
            check(ret, "acl.mdl.get_output_dims")
            assert acl.mdl.get_output_data_type(self.model_desc, i) == ACL_FLOAT
            shape = tuple(dims["dims"])
            results.append(acl.util.ptr_to_numpy(host, shape, NPY_FLOAT32).copy())
        return results

    def _release_dataset(self, dataset):
        if not dataset:
            return
        for i in range(acl.mdl.get_dataset_num_buffers(dataset)):
            data_buf = acl.mdl.get_dataset_buffer(dataset, i)
            if data_buf:
                acl.destroy_data_buffer(data_buf)
        acl.mdl.destroy_dataset(dataset)

    def destroy(self):
        self._release_dataset(self.output_dataset)
        for item in self.input_buffers:
            acl.rt.free(item["dev"])
            acl.rt.free_host(item["host"])
        for host, _ in self.output_host:
            acl.rt.free_host(host)
        acl.mdl.destroy_desc(self.model_desc)
        acl.mdl.unload(self.model_id)


def check(ret, api):
    if ret != 0:
        raise RuntimeError(f"{api} failed: {ret}")
