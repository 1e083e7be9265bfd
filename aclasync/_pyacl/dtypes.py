"""ACL tensor data types (``aclDataType``) and their numpy counterparts.

Values from the CANN header ``acl_base.h``; ``acl.mdl.get_input_data_type`` and
``get_output_data_type`` return them as plain ints, ``-1`` meaning undefined.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

__all__ = ["DataType", "from_numpy", "to_numpy"]


class DataType(enum.IntEnum):
    """``aclDataType``: the element type of a model input or output."""

    UNDEFINED = -1
    FLOAT = 0
    FLOAT16 = 1
    INT8 = 2
    INT32 = 3
    UINT8 = 4
    INT16 = 6
    UINT16 = 7
    UINT32 = 8
    INT64 = 9
    UINT64 = 10
    DOUBLE = 11
    BOOL = 12


_NUMPY: dict[DataType, str] = {
    DataType.FLOAT: "float32",
    DataType.FLOAT16: "float16",
    DataType.INT8: "int8",
    DataType.INT32: "int32",
    DataType.UINT8: "uint8",
    DataType.INT16: "int16",
    DataType.UINT16: "uint16",
    DataType.UINT32: "uint32",
    DataType.INT64: "int64",
    DataType.UINT64: "uint64",
    DataType.DOUBLE: "float64",
    DataType.BOOL: "bool",
}
_ACL: dict[str, DataType] = {name: kind for kind, name in _NUMPY.items()}


def to_numpy(data_type: int) -> np.dtype[Any]:
    """Return the numpy dtype of an ACL data type; ``ValueError`` if it has none."""
    try:
        return np.dtype(_NUMPY[DataType(data_type)])
    except (KeyError, ValueError):
        raise ValueError(f"ACL data type {data_type!r} has no numpy equivalent") from None


def from_numpy(dtype: Any) -> DataType:
    """Return the ACL data type of a numpy dtype; ``ValueError`` if ACL has none."""
    name = np.dtype(dtype).name
    try:
        return _ACL[name]
    except KeyError:
        raise ValueError(f"numpy dtype {name!r} has no ACL data type") from None
