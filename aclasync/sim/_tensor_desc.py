"""Tensor descriptions: ``acl.create_tensor_desc`` and the ``get_``/``set_tensor_*`` family.

Conventions follow the C implementation (``hicann/ge``
``api/acl/acl_model/types/tensor_desc_internal_om2.cpp``) and pyACL's wrappers
(``py_init_acl.cpp``): getters of a null or unknown description answer ``-1``
(ACL_DT_UNDEFINED, ACL_FORMAT_UNDEFINED, a dim), ``0`` or ``""``; setters returning a
status answer 100000 (ACL_ERROR_INVALID_PARAM) for it; the format setters ignore it and
answer 0, as the C code does. List arguments are checked as the wrappers check them:
``TypeError("argument 2 is not list")``, ``TypeError("invalid data type")`` for an
element that is not an ``int``, ``ValueError`` for one past 64 bits.
"""

from __future__ import annotations

from typing import Any

from .._pyacl.codes import ErrorCode
from ._args import parsed
from ._host import host_view
from ._mdl_state import ModelRegistry, TensorDesc

__all__ = ["TensorDescCalls", "data_type_size"]

_OK = 0
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
_API_NOT_SUPPORT = int(ErrorCode.ACL_ERROR_API_NOT_SUPPORT)
_RT_PARAM_INVALID = int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
_UNKNOWN_RANK_DIM = -2  # a dims list starting with -2: rank unknown
_UNKNOWN_RANK = (1 << 64) - 2  # ACL_UNKNOWN_RANK, as get_tensor_desc_num_dims returns it
_DIM_RANGE_LIMIT = 4096  # the wrapper refuses larger dim_range_num
_I64 = (-(1 << 63), (1 << 63) - 1)

# aclDataTypeSize (hicann/runtime src/acl/aclrt_impl/data_buffer.cpp): bytes per element.
_SIZES = {-1: 0, 13: 0, 29: 1, 30: 1, 0: 4, 3: 4, 8: 4, 33: 4, 17: 16}
_SIZES.update(dict.fromkeys((2, 4, 12, 34, 35, 36, 37), 1))
_SIZES.update(dict.fromkeys((1, 6, 7, 27), 2))


def data_type_size(data_type: int) -> int:
    """``aclDataTypeSize``: bytes per element; 8 for a type the table does not list."""
    return _SIZES.get(data_type, 8)


def int64_list(value: Any, not_list: str) -> list[int]:
    """The wrapper's ``GetValuesFromPyList`` for int64 values."""
    if not isinstance(value, list):
        raise TypeError(not_list)
    result = []
    for item in value:
        if not isinstance(item, int):
            raise TypeError("invalid data type")
        if not _I64[0] <= item <= _I64[1]:
            raise ValueError("PyLong_AsLongLong failed")
        result.append(int(item))
    return result


def pair_list(value: Any, not_list: str) -> list[tuple[int, int]]:
    """The wrapper's ``ConvertPyListToLongLongArrayV2`` for ``[[low, high], ...]``."""
    if not isinstance(value, list):
        raise TypeError(not_list)
    pairs = []
    for row in value:
        if not isinstance(row, list):
            raise TypeError("the list argument is not list")
        if len(row) < 2 or not all(isinstance(v, int) for v in row[:2]):
            raise TypeError("the list argument is not list of int")
        if not all(_I64[0] <= v <= _I64[1] for v in row[:2]):
            raise ValueError("PyLong_AsLongLong failed")
        pairs.append((int(row[0]), int(row[1])))
    return pairs


class TensorDescCalls:
    """The top-level ``acl`` tensor-description calls (mixed into the runtime object)."""

    _models: ModelRegistry

    def _desc(self, handle: int) -> TensorDesc | None:
        return self._models.tensor_descs.get(handle)

    @parsed("acl.data_type_size")
    def data_type_size(self, data_type: int, /) -> int:
        """Bytes per element of an ``aclDataType`` (8 for an unlisted one, as in C)."""
        return data_type_size(data_type)

    @parsed("acl.create_tensor_desc")
    def create_tensor_desc(self, data_type: int, dims: Any, format: int, /) -> int:
        """Describe a tensor: a handle for ``acl.destroy_tensor_desc`` to free."""
        values = int64_list(dims, "argument 2 is not list")
        return self._models.add(self._models.tensor_descs, TensorDesc(data_type, values, format))

    @parsed("acl.destroy_tensor_desc")
    def destroy_tensor_desc(self, desc: int, /) -> None:
        """Free a description (a null or unknown handle is ignored)."""
        models = self._models
        with models.lock:
            found = models.tensor_descs.pop(desc, None)
            owner = models.datasets.get(found.owner) if found is not None else None
            if owner is not None and desc in owner.descs:  # the dataset forgets its copy
                owner.descs[owner.descs.index(desc)] = 0

    @parsed("acl.get_tensor_desc_type")
    def get_tensor_desc_type(self, desc: int, /) -> int:
        """The ``aclDataType`` of the description; -1 for a bad handle."""
        found = self._desc(desc)
        return -1 if found is None else found.data_type

    @parsed("acl.get_tensor_desc_format")
    def get_tensor_desc_format(self, desc: int, /) -> int:
        """The ``aclFormat`` (the origin format); -1 for a bad handle."""
        found = self._desc(desc)
        return -1 if found is None else found.format

    @parsed("acl.get_tensor_desc_element_count")
    def get_tensor_desc_element_count(self, desc: int, /) -> int:
        """Elements of the shape (1 for no dims; 0 when a dim is unknown)."""
        found = self._desc(desc)
        if found is None or any(d < 0 for d in found.dims):
            return 0
        count = 1
        for d in found.dims:
            count *= d
        return count

    @parsed("acl.get_tensor_desc_size")
    def get_tensor_desc_size(self, desc: int, /) -> int:
        """Bytes of the tensor: elements times the type's size; 0 for a bad handle."""
        found = self._desc(desc)
        if found is None:
            return 0
        return self.get_tensor_desc_element_count(desc) * data_type_size(found.data_type)

    @parsed("acl.get_tensor_desc_num_dims")
    def get_tensor_desc_num_dims(self, desc: int, /) -> int:
        """Number of dimensions; ``ACL_UNKNOWN_RANK`` (2**64 - 2) for an unknown rank."""
        found = self._desc(desc)
        if found is None:
            return 0
        if found.dims and found.dims[0] == _UNKNOWN_RANK_DIM:
            return _UNKNOWN_RANK
        return len(found.dims)

    @parsed("acl.get_tensor_desc_dim")
    def get_tensor_desc_dim(self, desc: int, index: int, /) -> int:
        """Dimension *index*; -1 for a bad description or index."""
        found = self._desc(desc)
        if found is None or index >= len(found.dims):
            return -1
        return found.dims[index]

    @parsed("acl.get_tensor_desc_dim_v2")
    def get_tensor_desc_dim_v2(self, desc: int, index: int, /) -> tuple[int, int]:
        """``(dimension, ret)``; 100000 for a bad description or index."""
        found = self._desc(desc)
        if found is None or index >= len(found.dims):
            return 0, _INVALID_PARAM
        return found.dims[index], _OK

    @parsed("acl.get_tensor_desc_dim_range")
    def get_tensor_desc_dim_range(
        self, desc: int, index: int, dim_range_num: int, /
    ) -> tuple[list[int] | None, int]:
        """``([low, high, 0, ...], ret)``: the range set for dimension *index*."""
        found = self._desc(desc)
        if dim_range_num > _DIM_RANGE_LIMIT or found is None:
            return None, _INVALID_PARAM
        if index >= len(found.shape_range) or dim_range_num < 2:
            return None, _INVALID_PARAM
        values = [0] * dim_range_num
        values[0], values[1] = found.shape_range[index]
        return values, _OK

    @parsed("acl.get_tensor_desc_name")
    def get_tensor_desc_name(self, desc: int, /) -> str:
        """The name set on the description (empty by default or for a bad handle)."""
        found = self._desc(desc)
        return "" if found is None else found.name

    @parsed("acl.set_tensor_desc_name")
    def set_tensor_desc_name(self, desc: int, name: str, /) -> None:
        """Name the description (a bad handle is ignored, as in C)."""
        found = self._desc(desc)
        if found is not None:
            found.name = name

    @parsed("acl.get_tensor_desc_address")
    def get_tensor_desc_address(self, desc: int, /) -> int:
        """The device address the description carries: none is ever set here, 0."""
        return 0

    @parsed("acl.get_tensor_desc_by_index")
    def get_tensor_desc_by_index(self, desc: int, index: int, /) -> int:
        """Element *index* of an array of descriptions: here every array has one."""
        return desc if index == 0 and self._desc(desc) is not None else 0

    @parsed("acl.trans_tensor_desc_format")
    def trans_tensor_desc_format(self, src_desc: int, format: int, /) -> tuple[int, int]:
        """Answers 200001 (ACL_ERROR_API_NOT_SUPPORT), as the newest ACL does."""
        return 0, _API_NOT_SUPPORT

    @parsed("acl.set_tensor_storage_format")
    def set_tensor_storage_format(self, tensor_desc: int, format: int, /) -> int:
        """Set the storage format (a bad handle is ignored: 0, as in C)."""
        found = self._desc(tensor_desc)
        if found is not None:
            found.storage_format = format
        return _OK

    @parsed("acl.set_tensor_format")
    def set_tensor_format(self, tensor_desc: int, format: int, /) -> int:
        """Sets the storage format, as the C function does."""
        found = self._desc(tensor_desc)
        if found is not None:
            found.storage_format = format
        return _OK

    @parsed("acl.set_tensor_origin_format")
    def set_tensor_origin_format(self, tensor_desc: int, format: int, /) -> int:
        """Set the origin format (what ``get_tensor_desc_format`` gives)."""
        found = self._desc(tensor_desc)
        if found is not None:
            found.format = format
        return _OK

    @parsed("acl.set_tensor_storage_shape")
    def set_tensor_storage_shape(self, tensor_desc: int, dims_list: Any, /) -> int:
        """Set the storage shape; 100000 for a bad handle."""
        return self._set_dims(tensor_desc, dims_list, "storage_dims")

    @parsed("acl.set_tensor_shape")
    def set_tensor_shape(self, tensor_desc: int, dims_list: Any, /) -> int:
        """Sets the storage shape, as the C function does."""
        return self._set_dims(tensor_desc, dims_list, "storage_dims")

    @parsed("acl.set_tensor_origin_shape")
    def set_tensor_origin_shape(self, tensor_desc: int, dims_list: Any, /) -> int:
        """Set the origin shape (what the ``get_tensor_desc_dim*`` calls give)."""
        return self._set_dims(tensor_desc, dims_list, "dims")

    @parsed("acl.set_tensor_shape_range")
    def set_tensor_shape_range(self, tensor_desc: int, dims_list: Any, /) -> int:
        """Set ``[low, high]`` per dimension, for dynamic shapes."""
        pairs = pair_list(dims_list, "argument 2 is not list")
        found = self._desc(tensor_desc)
        if found is None:
            return _INVALID_PARAM
        found.shape_range = pairs
        return _OK

    @parsed("acl.set_tensor_value_range")
    def set_tensor_value_range(self, desc: int, value_range_obj: Any, /) -> int:
        """Set ``[low, high]`` value pairs; 100000 for a bad handle."""
        pairs = pair_list(value_range_obj, "int64_t argument is not list")
        found = self._desc(desc)
        if found is None:
            return _INVALID_PARAM
        found.value_range = pairs
        return _OK

    @parsed("acl.set_tensor_dynamic_input")
    def set_tensor_dynamic_input(self, tensor_desc: int, dynamic_input_name: str, /) -> int:
        """Name the dynamic input the description belongs to."""
        found = self._desc(tensor_desc)
        if found is None:
            return _INVALID_PARAM
        found.dynamic_input = dynamic_input_name
        return _OK

    @parsed("acl.set_tensor_place_ment")
    def set_tensor_place_ment(self, desc: int, mem_type: int, /) -> int:
        """Set where the tensor lives (``aclMemType``); 100000 for a bad handle."""
        found = self._desc(desc)
        if found is None:
            return _INVALID_PARAM
        found.memtype = mem_type
        return _OK

    @parsed("acl.set_tensor_const")
    def set_tensor_const(self, desc: int, data: int, size: int, /) -> int:
        """Copy *size* bytes of host memory at *data* into the description."""
        found = self._desc(desc)
        if found is None or data == 0 or size == 0:
            return _INVALID_PARAM
        view = host_view(data, size, write=False)
        if view is None:  # where C would read a bad pointer
            return _RT_PARAM_INVALID
        found.const = bytes(view)
        return _OK

    def _set_dims(self, handle: int, dims_list: Any, slot: str) -> int:
        values = int64_list(dims_list, "argument 2 is not list")
        found = self._desc(handle)
        if found is None:
            return _INVALID_PARAM
        setattr(found, slot, values)
        return _OK
