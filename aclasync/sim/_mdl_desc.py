"""``acl.mdl`` model descriptions: ``create_desc``, ``get_desc`` and the getters.

A description is a copy: it answers after the model is unloaded, as in the C code
(``hicann/ge`` ``model_om2.cpp``), whose conventions these follow: getters returning a
count or size give 0 for a bad description or index, name getters give ``""``, data
type getters give -1 (ACL_DT_UNDEFINED), and status-returning getters give 100000
(ACL_ERROR_INVALID_PARAM).
"""

from __future__ import annotations

from typing import Any

from .._pyacl.codes import ErrorCode
from ._core import check_ints
from ._mdl_spec import TensorSpec
from ._mdl_state import ModelDesc, ModelRegistry

__all__ = ["DescCalls"]

_OK = 0
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
_MODEL_ID_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID)
_FORMAT_ND = 2  # ACL_FORMAT_ND: simulated tensors have no layout
_FORMAT_UNDEFINED = -1
_DT_UNDEFINED = -1


def _dims(tensor: TensorSpec | None, shape: tuple[int, ...] | None = None) -> dict[str, Any]:
    if tensor is None:
        return {"name": "", "dimCount": 0, "dims": []}
    dims = list(tensor.shape if shape is None else shape)
    return {"name": tensor.name, "dimCount": len(dims), "dims": dims}


class DescCalls:
    """Description calls of the ``acl.mdl`` namespace."""

    _models: ModelRegistry

    def create_desc(self) -> int:
        return self._models.add(self._models.descs, ModelDesc())

    def destroy_desc(self, model_desc: int, /) -> int:
        check_ints("destroy_desc", model_desc)
        with self._models.lock:
            found = self._models.descs.pop(model_desc, None)
        return _INVALID_PARAM if found is None else _OK

    def get_desc(self, model_desc: int, model_id: int, /) -> int:
        """Fill *model_desc* from a loaded model: 145003 if *model_id* is not loaded."""
        check_ints("get_desc", model_desc, model_id)
        models = self._models
        desc = models.descs.get(model_desc)
        if desc is None:
            return _INVALID_PARAM
        model = models.models.get(model_id)
        if model is None:
            return _MODEL_ID_INVALID
        desc.model_id, desc.spec = model_id, model.spec
        return _OK

    def get_num_inputs(self, model_desc: int, /) -> int:
        check_ints("get_num_inputs", model_desc)
        return len(self._tensors(model_desc, True))

    def get_num_outputs(self, model_desc: int, /) -> int:
        check_ints("get_num_outputs", model_desc)
        return len(self._tensors(model_desc, False))

    def get_input_size_by_index(self, model_desc: int, index: int, /) -> int:
        """Bytes of input *index* (at the largest batch of a dynamic-batch model)."""
        check_ints("get_input_size_by_index", model_desc, index)
        return self._size(model_desc, index, True)

    def get_output_size_by_index(self, model_desc: int, index: int, /) -> int:
        check_ints("get_output_size_by_index", model_desc, index)
        return self._size(model_desc, index, False)

    def get_input_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """``({"name", "dimCount", "dims"}, ret)``; -1 marks the dynamic batch dimension."""
        check_ints("get_input_dims", model_desc, index)
        tensor = self._tensor(model_desc, index, True)
        return _dims(tensor), _OK if tensor is not None else _INVALID_PARAM

    def get_output_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        check_ints("get_output_dims", model_desc, index)
        tensor = self._tensor(model_desc, index, False)
        return _dims(tensor), _OK if tensor is not None else _INVALID_PARAM

    def get_cur_output_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """Output dims at the batch size last set on the model (static dims if none)."""
        check_ints("get_cur_output_dims", model_desc, index)
        desc = self._models.descs.get(model_desc)
        tensor = self._tensor(model_desc, index, False)
        if desc is None or tensor is None:
            return _dims(None), _INVALID_PARAM
        model = self._models.models.get(desc.model_id)
        if model is None:
            return _dims(None), _MODEL_ID_INVALID
        if not model.cur_batch:
            return _dims(tensor), _OK
        return _dims(tensor, tensor.concrete(model.cur_batch)), _OK

    def get_input_data_type(self, model_desc: int, index: int, /) -> int:
        check_ints("get_input_data_type", model_desc, index)
        tensor = self._tensor(model_desc, index, True)
        return _DT_UNDEFINED if tensor is None else int(tensor.data_type)

    def get_output_data_type(self, model_desc: int, index: int, /) -> int:
        check_ints("get_output_data_type", model_desc, index)
        tensor = self._tensor(model_desc, index, False)
        return _DT_UNDEFINED if tensor is None else int(tensor.data_type)

    def get_input_format(self, model_desc: int, index: int, /) -> int:
        check_ints("get_input_format", model_desc, index)
        return _FORMAT_UNDEFINED if self._tensor(model_desc, index, True) is None else _FORMAT_ND

    def get_output_format(self, model_desc: int, index: int, /) -> int:
        check_ints("get_output_format", model_desc, index)
        return _FORMAT_UNDEFINED if self._tensor(model_desc, index, False) is None else _FORMAT_ND

    def get_input_name_by_index(self, model_desc: int, index: int, /) -> str:
        check_ints("get_input_name_by_index", model_desc, index)
        tensor = self._tensor(model_desc, index, True)
        return "" if tensor is None else tensor.name

    def get_output_name_by_index(self, model_desc: int, index: int, /) -> str:
        check_ints("get_output_name_by_index", model_desc, index)
        tensor = self._tensor(model_desc, index, False)
        return "" if tensor is None else tensor.name

    def get_input_index_by_name(self, model_desc: int, name: str, /) -> tuple[int, int]:
        """``(index, ret)``; 100000 when no input has that name."""
        return self._index("get_input_index_by_name", model_desc, name, True)

    def get_output_index_by_name(self, model_desc: int, name: str, /) -> tuple[int, int]:
        return self._index("get_output_index_by_name", model_desc, name, False)

    def get_dynamic_batch(self, model_desc: int, /) -> tuple[dict[str, Any], int]:
        """``({"batchCount": n, "batch": [...]}, ret)``; a static model has none."""
        check_ints("get_dynamic_batch", model_desc)
        desc = self._models.descs.get(model_desc)
        if desc is None:
            return {"batchCount": 0, "batch": []}, _INVALID_PARAM
        batches = [] if desc.spec is None else list(desc.spec.batch_sizes)
        return {"batchCount": len(batches), "batch": batches}, _OK

    # -- helpers ---------------------------------------------------------------------

    def _tensors(self, model_desc: int, inputs: bool) -> tuple[TensorSpec, ...]:
        desc = self._models.descs.get(model_desc)
        if desc is None or desc.spec is None:
            return ()
        return desc.spec.all_inputs() if inputs else desc.spec.outputs

    def _tensor(self, model_desc: int, index: int, inputs: bool) -> TensorSpec | None:
        tensors = self._tensors(model_desc, inputs)
        return tensors[index] if 0 <= index < len(tensors) else None

    def _size(self, model_desc: int, index: int, inputs: bool) -> int:
        tensor = self._tensor(model_desc, index, inputs)
        if tensor is None:
            return 0
        desc = self._models.descs[model_desc]
        assert desc.spec is not None
        return tensor.nbytes(desc.spec.max_batch)

    def _index(self, api: str, model_desc: int, name: str, inputs: bool) -> tuple[int, int]:
        check_ints(api, model_desc)
        if not isinstance(name, str):
            raise TypeError(f"{api}: argument 2 must be str, not {type(name).__name__}")
        for index, tensor in enumerate(self._tensors(model_desc, inputs)):
            if tensor.name == name:
                return index, _OK
        return 0, _INVALID_PARAM
