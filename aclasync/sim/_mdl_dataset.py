"""Data buffers (``acl.create_data_buffer`` ...) and datasets (``acl.mdl.*_dataset*``).

Return conventions and codes follow the C implementation (``hicann/ge``
``api/acl/acl_model/model/model_om2.cpp``): a null or unknown handle is
100000 (ACL_ERROR_INVALID_PARAM) where the call returns a status, and 0 (the null
handle, or a zero count/size) where it returns a value.
"""

from __future__ import annotations

from .._pyacl.codes import ErrorCode
from ._core import check_ints
from ._mdl_state import DataBuffer, Dataset, ModelRegistry

__all__ = ["DataBufferCalls", "DatasetCalls"]

_OK = 0
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)


class DataBufferCalls:
    """The top-level ``acl.*_data_buffer*`` calls (mixed into the runtime object)."""

    _models: ModelRegistry

    def create_data_buffer(self, data: int, size: int, /) -> int:
        """Return a data buffer describing *size* bytes at *data* (0 on bad arguments)."""
        check_ints("create_data_buffer", data, size)
        if size < 0 or (data == 0 and size != 0):
            return 0
        return self._models.add(self._models.buffers, DataBuffer(data, size))

    def update_data_buffer(self, data_buffer: int, data: int, size: int, /) -> int:
        check_ints("update_data_buffer", data_buffer, data, size)
        found = self._models.buffers.get(data_buffer)
        if found is None or size < 0 or (data == 0 and size != 0):
            return _INVALID_PARAM
        found.addr, found.size = data, size
        return _OK

    def get_data_buffer_addr(self, data_buffer: int, /) -> int:
        check_ints("get_data_buffer_addr", data_buffer)
        found = self._models.buffers.get(data_buffer)
        return 0 if found is None else found.addr

    def get_data_buffer_size(self, data_buffer: int, /) -> int:
        """Deprecated in pyACL in favour of ``get_data_buffer_size_v2``; same answer."""
        check_ints("get_data_buffer_size", data_buffer)
        return self.get_data_buffer_size_v2(data_buffer)

    def get_data_buffer_size_v2(self, data_buffer: int, /) -> int:
        check_ints("get_data_buffer_size_v2", data_buffer)
        found = self._models.buffers.get(data_buffer)
        return 0 if found is None else found.size

    def destroy_data_buffer(self, data_buffer: int, /) -> int:
        """Forget the buffer (not the memory it points at, which stays the caller's)."""
        check_ints("destroy_data_buffer", data_buffer)
        with self._models.lock:
            found = self._models.buffers.pop(data_buffer, None)
        return _INVALID_PARAM if found is None else _OK


class DatasetCalls:
    """``acl.mdl`` dataset calls (mixed into the ``acl.mdl`` namespace)."""

    _models: ModelRegistry

    def create_dataset(self) -> int:
        return self._models.add(self._models.datasets, Dataset())

    def destroy_dataset(self, dataset: int, /) -> int:
        """Forget the dataset; its data buffers stay alive until destroyed themselves."""
        check_ints("destroy_dataset", dataset)
        with self._models.lock:
            found = self._models.datasets.pop(dataset, None)
        return _INVALID_PARAM if found is None else _OK

    def add_dataset_buffer(self, dataset: int, data_buffer: int, /) -> tuple[int, int]:
        """Append *data_buffer*; returns ``(dataset, ret)`` as pyACL does."""
        check_ints("add_dataset_buffer", dataset, data_buffer)
        models = self._models
        with models.lock:
            found = models.datasets.get(dataset)
            if found is None or data_buffer not in models.buffers:
                return dataset, _INVALID_PARAM
            found.buffers.append(data_buffer)
        return dataset, _OK

    def get_dataset_num_buffers(self, dataset: int, /) -> int:
        check_ints("get_dataset_num_buffers", dataset)
        found = self._models.datasets.get(dataset)
        return 0 if found is None else len(found.buffers)

    def get_dataset_buffer(self, dataset: int, index: int, /) -> int:
        check_ints("get_dataset_buffer", dataset, index)
        found = self._models.datasets.get(dataset)
        if found is None or not 0 <= index < len(found.buffers):
            return 0
        return found.buffers[index]
