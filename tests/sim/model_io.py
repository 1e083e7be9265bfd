"""Datasets over device buffers for a loaded model, as client code builds them."""

from __future__ import annotations

from typing import Any

import numpy as np

H2D, D2H = 1, 2


class ModelIo:
    """A model's description, and datasets with a device buffer per tensor.

    Buffers are sized by ``get_input_size_by_index`` / ``get_output_size_by_index``
    (or *sizes*), as samples size them.
    """

    def __init__(self, acl: Any, model_id: int, out_sizes: list[int] | None = None) -> None:
        self.acl, self.model_id = acl, model_id
        self.desc = acl.mdl.create_desc()
        assert acl.mdl.get_desc(self.desc, model_id) == 0
        mdl = acl.mdl
        in_sizes = [mdl.get_input_size_by_index(self.desc, i) for i in range(self.num(True))]
        if out_sizes is None:
            out_sizes = [mdl.get_output_size_by_index(self.desc, i) for i in range(self.num(False))]
        self.inputs = self._dataset(in_sizes)
        self.outputs = self._dataset(out_sizes)

    def num(self, inputs: bool) -> int:
        mdl = self.acl.mdl
        return int(mdl.get_num_inputs(self.desc) if inputs else mdl.get_num_outputs(self.desc))

    def _dataset(self, sizes: list[int]) -> int:
        dataset = self.acl.mdl.create_dataset()
        for size in sizes:
            ptr, ret = self.acl.rt.malloc(size, 0)
            assert ret == 0, ret
            _, ret = self.acl.mdl.add_dataset_buffer(
                dataset, self.acl.create_data_buffer(ptr, size)
            )
            assert ret == 0, ret
        return int(dataset)

    def ptr(self, dataset: int, index: int) -> int:
        return int(self.acl.get_data_buffer_addr(self.acl.mdl.get_dataset_buffer(dataset, index)))

    def put(self, index: int, array: Any) -> None:
        data = np.ascontiguousarray(array)
        host = self.acl.util.numpy_to_ptr(data)
        ret = self.acl.rt.memcpy(self.ptr(self.inputs, index), data.nbytes, host, data.nbytes, H2D)
        assert ret == 0, ret

    def get(self, index: int, shape: tuple[int, ...], dtype: Any) -> Any:
        out = np.zeros(shape, dtype=dtype)
        host = self.acl.util.numpy_to_ptr(out)
        ret = self.acl.rt.memcpy(host, out.nbytes, self.ptr(self.outputs, index), out.nbytes, D2H)
        assert ret == 0, ret
        return out

    def read_raw(self, dataset: int, index: int, count: int, dtype: Any) -> Any:
        out = np.zeros(count, dtype=dtype)
        host = self.acl.util.numpy_to_ptr(out)
        assert self.acl.rt.memcpy(host, out.nbytes, self.ptr(dataset, index), out.nbytes, D2H) == 0
        return out
