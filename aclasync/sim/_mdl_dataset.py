"""Data buffers (``acl.create_data_buffer`` ...) and datasets (``acl.mdl.*_dataset*``).

Return conventions and codes follow the C implementation (``hicann/ge``
``api/acl/acl_model/model/model_om2.cpp``): a null or unknown handle is
100000 (ACL_ERROR_INVALID_PARAM) where the call returns a status, and 0 (the null
handle, or a zero count/size) where it returns a value. A dataset keeps a tensor
description per buffer (``set_dataset_tensor_desc`` stores a copy, which the dataset
owns and destroys with itself); ``get_dataset_tensor_desc`` returns that copy.
"""

from __future__ import annotations

from .._pyacl.codes import ErrorCode
from ._args import parsed
from ._mdl_state import DataBuffer, Dataset, ModelRegistry

__all__ = ["DataBufferCalls", "DatasetCalls"]

_OK = 0
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)


class DataBufferCalls:
    """The top-level ``acl.*_data_buffer*`` calls (mixed into the runtime object)."""

    _models: ModelRegistry

    @parsed("acl.create_data_buffer")
    def create_data_buffer(self, data: int, size: int, /) -> int:
        """Return a data buffer describing *size* bytes at *data* (0 for a null *data*)."""
        if data == 0 and size != 0:
            return 0
        return self._models.add(self._models.buffers, DataBuffer(data, size))

    @parsed("acl.update_data_buffer")
    def update_data_buffer(self, data_buffer: int, data: int, size: int, /) -> int:
        """Point the buffer at other memory; 100000 for a bad handle or null data."""
        found = self._models.buffers.get(data_buffer)
        if found is None or (data == 0 and size != 0):
            return _INVALID_PARAM
        found.addr, found.size = data, size
        return _OK

    @parsed("acl.get_data_buffer_addr")
    def get_data_buffer_addr(self, data_buffer: int, /) -> int:
        """The address the buffer points at; 0 for a bad handle."""
        found = self._models.buffers.get(data_buffer)
        return 0 if found is None else found.addr

    @parsed("acl.get_data_buffer_size")
    def get_data_buffer_size(self, data_buffer: int, /) -> int:
        """Deprecated in favour of ``get_data_buffer_size_v2``: the size as a C ``uint32``
        (its low 32 bits); 0 for a bad handle."""
        found = self._models.buffers.get(data_buffer)
        return 0 if found is None else found.size & 0xFFFF_FFFF

    @parsed("acl.get_data_buffer_size_v2")
    def get_data_buffer_size_v2(self, data_buffer: int, /) -> int:
        """The buffer's size in bytes; 0 for a bad handle."""
        found = self._models.buffers.get(data_buffer)
        return 0 if found is None else found.size

    @parsed("acl.destroy_data_buffer")
    def destroy_data_buffer(self, data_buffer: int, /) -> int:
        """Forget the buffer (not the memory it points at, which stays the caller's)."""
        with self._models.lock:
            found = self._models.buffers.pop(data_buffer, None)
        return _INVALID_PARAM if found is None else _OK


class DatasetCalls:
    """``acl.mdl`` dataset calls (mixed into the ``acl.mdl`` namespace)."""

    _models: ModelRegistry

    @parsed("acl.mdl.create_dataset")
    def create_dataset(self) -> int:
        return self._models.add(self._models.datasets, Dataset())

    @parsed("acl.mdl.destroy_dataset")
    def destroy_dataset(self, dataset: int, /) -> int:
        """Forget the dataset and its tensor descriptions; its data buffers stay alive."""
        with self._models.lock:
            found = self._models.drop_dataset(dataset)
        return _INVALID_PARAM if found is None else _OK

    @parsed("acl.mdl.add_dataset_buffer")
    def add_dataset_buffer(self, dataset: int, data_buffer: int, /) -> tuple[int, int]:
        """Append *data_buffer*; returns ``(dataset, ret)`` as pyACL does."""
        models = self._models
        with models.lock:
            found = models.datasets.get(dataset)
            if found is None or data_buffer not in models.buffers:
                return dataset, _INVALID_PARAM
            found.buffers.append(data_buffer)
            found.descs.append(0)
        return dataset, _OK

    @parsed("acl.mdl.get_dataset_num_buffers")
    def get_dataset_num_buffers(self, dataset: int, /) -> int:
        found = self._models.datasets.get(dataset)
        return 0 if found is None else len(found.buffers)

    @parsed("acl.mdl.get_dataset_buffer")
    def get_dataset_buffer(self, dataset: int, index: int, /) -> int:
        found = self._models.datasets.get(dataset)
        if found is None or index >= len(found.buffers):
            return 0
        return found.buffers[index]

    @parsed("acl.mdl.set_dataset_tensor_desc")
    def set_dataset_tensor_desc(
        self, dataset: int, tensor_desc: int, index: int, /
    ) -> tuple[int, int]:
        """Give buffer *index* a copy of *tensor_desc* (0 removes it): ``(dataset, ret)``.

        The caller may destroy its own description afterwards; the dataset's copy lives
        until the dataset is destroyed (or the next call for that buffer).
        """
        models = self._models
        with models.lock:
            found = models.datasets.get(dataset)
            if found is None or index >= len(found.buffers):
                return dataset, _INVALID_PARAM
            if tensor_desc == 0:
                models.set_blob_desc(found, index, None)
                return dataset, _OK
            source = models.tensor_descs.get(tensor_desc)
            if source is None:
                return dataset, _INVALID_PARAM
            copy = source.copy()
            copy.owner = dataset
            models.set_blob_desc(found, index, copy)
        return dataset, _OK

    @parsed("acl.mdl.get_dataset_tensor_desc")
    def get_dataset_tensor_desc(self, dataset: int, index: int, /) -> int:
        """The dataset's description of buffer *index*: 0 if it has none.

        After a dynamic-shape model executes, each output buffer's description holds
        the output's real shape.
        """
        found = self._models.datasets.get(dataset)
        if found is None or index >= len(found.buffers):
            return 0
        return found.descs[index]
