"""Choosing a gear: ``set_dynamic_batch_size``, ``set_dynamic_hw_size``, ``set_input_dynamic_dims``.

Each call writes the gear's values into the device buffer at *index* of the input
dataset (the ``ascend_mbatch_shape_data`` input: ``uint64`` values, or ``uint32`` when
the buffer is too small for them), records the gear for executions with that dataset
and makes it the model's current gear (what ``get_cur_output_dims`` reports). Codes and
their order follow ``hicann/ge`` (``model.cpp`` ``*Impl`` and ``ge_executor.cc``
``GeExecutor::SetDynamicBatchSize`` / ``SetDynamicImageSize`` / ``SetDynamicDims``):

1. a null or unknown dataset, a zero batch, height, width or ``dimCount``, a buffer
   index the dataset lacks or a buffer without an address: 100000;
2. batch and image size: a buffer smaller than 4 bytes per value: 145012
   (ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID), before the model is looked at;
3. a model id not loaded: 145003 (ACL_ERROR_GE_EXEC_MODEL_ID_INVALID);
4. ``set_input_dynamic_dims`` (GE's ``GetCurDynamicDims``): a ``dimCount`` other than
   the number of dims of all inputs (a model built without gears has none), or a fixed
   dimension given another value: 145012;
5. a model of another dynamic mode, or a gear it does not offer: 145013
   (ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID);
6. ``set_input_dynamic_dims``: a buffer smaller than 4 bytes per dynamic value: 145012.
"""

from __future__ import annotations

from typing import Any

from .._pyacl.codes import ErrorCode
from ._args import parsed
from ._core import Core
from ._mdl_spec import ModelSpec
from ._mdl_state import ModelRegistry

__all__ = ["GearCalls", "dims_argument"]

_OK = 0
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
_RT_PARAM_INVALID = int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
_MODEL_ID_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID)
_GEAR_INVALID = int(ErrorCode.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID)
_INPUT_LENGTH_INVALID = int(ErrorCode.ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID)
_MAX_DIM_COUNT = 128  # ACL_MAX_DIM_CNT: the dims array of aclmdlIODims
_U64 = (1 << 64) - 1
_I64 = (-(1 << 63), (1 << 63) - 1)
_NOT_INTS = "the dims of fourth parameter is not list of int"


def dims_argument(value: Any) -> list[int]:
    """The dims a ``{"name", "dimCount", "dims"}`` dict carries, read as pyACL's wrapper does.

    Raises what the wrapper raises: ``TypeError`` for a non-dict, a ``"dims"`` that is
    not a list, or a missing or non-``int`` dim among the first ``"dimCount"``;
    ``RuntimeError`` for a ``"name"`` (even ``None``) that is not a ``str``; ``ValueError``
    for a dim past 64 bits. A ``"dimCount"`` that is no ``size_t`` (missing, not an
    ``int``, negative or past 64 bits) leaves ``PyLong_AsSize_t``'s error pending and
    the count at ``SIZE_MAX``: the first dim, if it is an ``int``, then trips the dims
    loop's error check, ``ValueError("PyLong_AsLongLong failed")``.
    """
    if not isinstance(value, dict):
        raise TypeError("argument 4 is not dict")
    count = value.get("dimCount")
    size: int | None = count if isinstance(count, int) and 0 <= count <= _U64 else None
    if "name" in value and not isinstance(value["name"], str):
        raise RuntimeError("PyUnicode_AsUTF8String failed")
    dims = value.get("dims")
    if not isinstance(dims, list):
        raise TypeError("The dims of parameter 4 is not a list.")
    result = []
    for position in range(_U64 if size is None else size):  # None: SIZE_MAX, error pending
        item = dims[position] if position < len(dims) else None
        if not isinstance(item, int):
            raise TypeError(_NOT_INTS)
        if size is None or not _I64[0] <= item <= _I64[1]:
            raise ValueError("PyLong_AsLongLong failed")
        result.append(int(item))
    return result


def _dynamic_dims(spec: ModelSpec, values: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """GE's ``GetCurDynamicDims``: the values at the ``-1`` of all inputs' dims, or a code.

    The inputs' order is recorded by ATC with the gears, so a model without gears has
    no dims to match and every ``dimCount`` is wrong.
    """
    flat = [d for t in spec.inputs for d in t.shape] if spec.dynamic else []
    if len(values) != len(flat):
        return (), _INPUT_LENGTH_INVALID
    if any(d >= 0 and v & _U64 != d for v, d in zip(values, flat, strict=True)):
        return (), _INPUT_LENGTH_INVALID  # "Static dims should be same"
    return tuple(v & _U64 for v, d in zip(values, flat, strict=True) if d < 0), _OK


class GearCalls:
    """The gear-choosing calls of the ``acl.mdl`` namespace."""

    _core: Core
    _models: ModelRegistry

    @parsed("acl.mdl.set_dynamic_batch_size")
    def set_dynamic_batch_size(
        self, model_id: int, dataset: int, index: int, batch_size: int, /
    ) -> int:
        """Choose the batch of *dataset*'s executions (a dynamic-batch model)."""
        return self._choose(model_id, dataset, index, "batch", (batch_size,))

    @parsed("acl.mdl.set_dynamic_hw_size")
    def set_dynamic_hw_size(
        self, model_id: int, dataset: int, index: int, height: int, width: int, /
    ) -> int:
        """Choose the image size of *dataset*'s executions (a dynamic-image-size model)."""
        return self._choose(model_id, dataset, index, "hw", (height, width))

    @parsed("acl.mdl.set_input_dynamic_dims")
    def set_input_dynamic_dims(
        self, model_id: int, dataset: int, index: int, p_dict: Any, /
    ) -> int:
        """Choose the dims of *dataset*'s executions (a dynamic-dims model).

        *p_dict* is ``{"name": ..., "dimCount": n, "dims": [...]}`` (an entry of
        ``get_input_dynamic_dims``): the dims of all inputs in order, concrete.
        """
        flat = dims_argument(p_dict)
        if len(flat) > _MAX_DIM_COUNT:
            return _INVALID_PARAM
        return self._choose(model_id, dataset, index, "dims", tuple(flat))

    def _choose(
        self, model_id: int, dataset: int, index: int, mode: str, values: tuple[int, ...]
    ) -> int:
        models = self._models
        with models.lock:
            found = models.datasets.get(dataset)
            if found is None or not values or (mode != "dims" and 0 in values):
                return _INVALID_PARAM
            buffer = (
                models.buffers.get(found.buffers[index]) if index < len(found.buffers) else None
            )
            if buffer is None or buffer.addr == 0:
                return _INVALID_PARAM
            if mode != "dims" and buffer.size < 4 * len(values):
                return _INPUT_LENGTH_INVALID
            model = models.models.get(model_id)
            if model is None:
                return _MODEL_ID_INVALID
            if mode == "dims":
                values, ret = _dynamic_dims(model.spec, values)
                if ret != _OK:
                    return ret
            if model.spec.mode != mode or values not in model.spec.gears:
                return _GEAR_INVALID
            if buffer.size < 4 * len(values):
                return _INPUT_LENGTH_INVALID
            width = 8 if buffer.size >= 8 * len(values) else 4
            region = self._core.device_region(buffer.addr)
            view = None if region is None else region.view(buffer.addr, width * len(values))
            if view is None:  # not device memory: the copy onto the device fails
                return _RT_PARAM_INVALID
            mask = (1 << (8 * width)) - 1
            view[:] = b"".join((v & mask).to_bytes(width, "little") for v in values)
            found.gear = model.cur_gear = values
        return _OK
