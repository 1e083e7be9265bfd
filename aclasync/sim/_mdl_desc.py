"""``acl.mdl`` model descriptions: ``create_desc``, ``get_desc`` and the getters.

A description is a copy: it answers after the model is unloaded, as in the C code
(``hicann/ge`` ``model_om2.cpp``, ``model_common.cpp``), whose conventions these follow:
getters returning a count or size give 0 for a bad description or index, name getters
give ``""``, data type and format getters give -1 (ACL_DT_UNDEFINED /
ACL_FORMAT_UNDEFINED), and status-returning getters give 100000 (ACL_ERROR_INVALID_PARAM)
with an empty dict where pyACL builds one (its wrapper fills the dict only on success).
"""

from __future__ import annotations

from typing import Any

from .._pyacl.codes import ErrorCode
from ._args import parsed
from ._mdl_spec import ModelSpec, TensorSpec
from ._mdl_state import ModelDesc, ModelRegistry

__all__ = ["DescCalls"]

_OK = 0
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
_MODEL_ID_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID)
_API_NOT_SUPPORT = int(ErrorCode.ACL_ERROR_API_NOT_SUPPORT)
_FORMAT_ND = 2  # ACL_FORMAT_ND: simulated tensors have no layout
_FORMAT_UNDEFINED = -1
_DT_UNDEFINED = -1
_ALL = (1 << 64) - 1  # the index -1, as the wrapper's "k" hands it to C
_GEAR_LIMIT = 4096  # the wrapper refuses larger gear_count


def _dims(name: str, shape: tuple[int, ...]) -> dict[str, Any]:
    return {"name": name, "dimCount": len(shape), "dims": list(shape)}


class DescCalls:
    """Description calls of the ``acl.mdl`` namespace."""

    _models: ModelRegistry

    @parsed("acl.mdl.create_desc")
    def create_desc(self) -> int:
        return self._models.add(self._models.descs, ModelDesc())

    @parsed("acl.mdl.destroy_desc")
    def destroy_desc(self, model_desc: int, /) -> int:
        with self._models.lock:
            found = self._models.descs.pop(model_desc, None)
        return _INVALID_PARAM if found is None else _OK

    @parsed("acl.mdl.get_desc")
    def get_desc(self, model_desc: int, model_id: int, /) -> int:
        """Fill *model_desc* from a loaded model: 145003 if *model_id* is not loaded.

        The description is cleared first, as ACL does: a failed call leaves it empty.
        """
        models = self._models
        desc = models.descs.get(model_desc)
        if desc is None:
            return _INVALID_PARAM
        desc.clear()
        model = models.models.get(model_id)
        if model is None:
            return _MODEL_ID_INVALID
        desc.model_id, desc.spec = model_id, model.spec
        return _OK

    @parsed("acl.mdl.get_num_inputs")
    def get_num_inputs(self, model_desc: int, /) -> int:
        return len(self._tensors(model_desc, True))

    @parsed("acl.mdl.get_num_outputs")
    def get_num_outputs(self, model_desc: int, /) -> int:
        return len(self._tensors(model_desc, False))

    @parsed("acl.mdl.get_input_size_by_index")
    def get_input_size_by_index(self, model_desc: int, index: int, /) -> int:
        """Bytes of input *index*: at the largest gear, or the largest shape (0: unbounded)."""
        spec = self._spec(model_desc)
        if spec is None or self._tensor(model_desc, index, True) is None:
            return 0
        return spec.input_nbytes(index)

    @parsed("acl.mdl.get_output_size_by_index")
    def get_output_size_by_index(self, model_desc: int, index: int, /) -> int:
        spec = self._spec(model_desc)
        if spec is None or self._tensor(model_desc, index, False) is None:
            return 0
        return spec.output_nbytes(index)

    @parsed("acl.mdl.get_input_dims")
    def get_input_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """``({"name", "dimCount", "dims"}, ret)``; -1 marks a dynamic dimension."""
        tensor = self._tensor(model_desc, index, True)
        return ({}, _INVALID_PARAM) if tensor is None else (_dims(tensor.name, tensor.shape), _OK)

    @parsed("acl.mdl.get_input_dims_v2")
    def get_input_dims_v2(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """The same as ``get_input_dims``: simulated models have no AIPP to change them."""
        tensor = self._tensor(model_desc, index, True)
        return ({}, _INVALID_PARAM) if tensor is None else (_dims(tensor.name, tensor.shape), _OK)

    @parsed("acl.mdl.get_output_dims")
    def get_output_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """``({"name", "dimCount", "dims"}, ret)``: a gear model's at its largest gear
        (what ACL documents), a dynamic-shape model's with -1 where a dimension varies."""
        desc = self._models.descs.get(model_desc)
        tensor = self._tensor(model_desc, index, False)
        if desc is None or desc.spec is None or tensor is None:
            return {}, _INVALID_PARAM
        return _dims(tensor.name, desc.spec.reported_output_shape(index)), _OK

    @parsed("acl.mdl.get_cur_output_dims")
    def get_cur_output_dims(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """Output dims at the gear last chosen for the model; before one is chosen, at
        the largest gear, as ``get_output_dims`` (ACL's ``aclmdlGetCurOutputDims`` page).

        A dynamic-shape model answers 200001 (ACL_ERROR_API_NOT_SUPPORT), as ACL does:
        its output shapes are in the output dataset's tensor descriptions.
        """
        desc = self._models.descs.get(model_desc)
        tensor = self._tensor(model_desc, index, False)
        if desc is None or desc.spec is None or tensor is None:
            return {}, _INVALID_PARAM
        model = self._models.models.get(desc.model_id)
        if model is None:
            return {}, _MODEL_ID_INVALID
        if desc.spec.mode == "shape":
            return {}, _API_NOT_SUPPORT
        if model.cur_gear is None:
            return _dims(tensor.name, desc.spec.reported_output_shape(index)), _OK
        return _dims(tensor.name, desc.spec.output_shape(index, model.cur_gear)), _OK

    @parsed("acl.mdl.get_input_data_type")
    def get_input_data_type(self, model_desc: int, index: int, /) -> int:
        tensor = self._tensor(model_desc, index, True)
        return _DT_UNDEFINED if tensor is None else int(tensor.data_type)

    @parsed("acl.mdl.get_output_data_type")
    def get_output_data_type(self, model_desc: int, index: int, /) -> int:
        tensor = self._tensor(model_desc, index, False)
        return _DT_UNDEFINED if tensor is None else int(tensor.data_type)

    @parsed("acl.mdl.get_input_format")
    def get_input_format(self, model_desc: int, index: int, /) -> int:
        return _FORMAT_UNDEFINED if self._tensor(model_desc, index, True) is None else _FORMAT_ND

    @parsed("acl.mdl.get_output_format")
    def get_output_format(self, model_desc: int, index: int, /) -> int:
        return _FORMAT_UNDEFINED if self._tensor(model_desc, index, False) is None else _FORMAT_ND

    @parsed("acl.mdl.get_input_name_by_index")
    def get_input_name_by_index(self, model_desc: int, index: int, /) -> str:
        tensor = self._tensor(model_desc, index, True)
        return "" if tensor is None else tensor.name

    @parsed("acl.mdl.get_output_name_by_index")
    def get_output_name_by_index(self, model_desc: int, index: int, /) -> str:
        tensor = self._tensor(model_desc, index, False)
        return "" if tensor is None else tensor.name

    @parsed("acl.mdl.get_input_index_by_name")
    def get_input_index_by_name(self, model_desc: int, name: str, /) -> tuple[int, int]:
        """``(index, ret)``; 100000 when no input has that name."""
        return self._index(model_desc, name, True)

    @parsed("acl.mdl.get_output_index_by_name")
    def get_output_index_by_name(self, model_desc: int, name: str, /) -> tuple[int, int]:
        return self._index(model_desc, name, False)

    @parsed("acl.mdl.get_dynamic_batch")
    def get_dynamic_batch(self, model_desc: int, /) -> tuple[dict[str, Any], int]:
        """``({"batchCount": n, "batch": [...]}, ret)``; a model without batch gears has none."""
        desc = self._models.descs.get(model_desc)
        if desc is None:
            return {}, _INVALID_PARAM
        batches = [] if desc.spec is None else list(desc.spec.batch_sizes)
        return {"batchCount": len(batches), "batch": batches}, _OK

    @parsed("acl.mdl.get_dynamic_hw")
    def get_dynamic_hw(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """``({"hwCount": n, "hw": [[h, w], ...]}, ret)``; *index* is not used (pass -1)."""
        desc = self._models.descs.get(model_desc)
        if desc is None:
            return {}, _INVALID_PARAM
        gears = [] if desc.spec is None else [list(g) for g in desc.spec.hw]
        return {"hwCount": len(gears), "hw": gears}, _OK

    @parsed("acl.mdl.get_input_dynamic_gear_count")
    def get_input_dynamic_gear_count(self, model_desc: int, index: int, /) -> tuple[int, int]:
        """``(gears, ret)`` of a dynamic-dims model (0 for others); *index* must be -1."""
        desc = self._models.descs.get(model_desc)
        if desc is None or index != _ALL:
            return 0, _INVALID_PARAM
        return (0 if desc.spec is None else len(desc.spec.dims)), _OK

    @parsed("acl.mdl.get_input_dynamic_dims")
    def get_input_dynamic_dims(
        self, model_desc: int, index: int, gear_count: int, /
    ) -> tuple[list[dict[str, Any]] | None, int]:
        """``([{"name", "dimCount", "dims"}, ...], ret)``: every input's dims, per gear.

        Each entry lists the dims of all inputs in order with the gear's values in the
        ``-1`` places, as ``set_input_dynamic_dims`` takes them; *index* must be -1 and
        *gear_count* at least the model's; entries past the model's gears are empty.
        """
        if gear_count > _GEAR_LIMIT:
            return None, _INVALID_PARAM
        desc = self._models.descs.get(model_desc)
        gears = () if desc is None or desc.spec is None else desc.spec.dims
        if desc is None or index != _ALL or gear_count < len(gears):
            return [], _INVALID_PARAM
        spec = desc.spec
        flat = [tuple(d for s in spec.input_shapes(g) for d in s) for g in gears] if spec else []
        return [_dims("", flat[i] if i < len(flat) else ()) for i in range(gear_count)], _OK

    @parsed("acl.mdl.get_input_dims_range")
    def get_input_dims_range(self, model_desc: int, index: int, /) -> tuple[dict[str, Any], int]:
        """``({"rangeCount", "range": [[low, high], ...]}, ret)`` of a dynamic-shape input.

        A fixed dimension is ``[d, d]``; gear models report no ranges, as ACL does.
        """
        spec = self._spec(model_desc)
        tensor = self._tensor(model_desc, index, True)
        if spec is None or tensor is None:
            return {"rangeCount": 0, "range": []}, _INVALID_PARAM
        if spec.dynamic:
            return {"rangeCount": 0, "range": []}, _OK
        ranges = tensor.ranges or tuple((d, d) for d in tensor.shape)
        return {"rangeCount": len(ranges), "range": [list(r) for r in ranges]}, _OK

    @parsed("acl.mdl.get_tensor_real_name")
    def get_tensor_real_name(self, model_desc: int, name: str, /) -> str | None:
        """*name* if an input or output of the model has it, else None (a NULL ``char *``)."""
        for is_input in (True, False):
            if any(t.name == name for t in self._tensors(model_desc, is_input)):
                return name
        return None

    # -- helpers ---------------------------------------------------------------------

    def _spec(self, model_desc: int) -> ModelSpec | None:
        desc = self._models.descs.get(model_desc)
        return None if desc is None else desc.spec

    def _tensors(self, model_desc: int, inputs: bool) -> tuple[TensorSpec, ...]:
        spec = self._spec(model_desc)
        if spec is None:
            return ()
        return spec.all_inputs() if inputs else spec.outputs

    def _tensor(self, model_desc: int, index: int, inputs: bool) -> TensorSpec | None:
        tensors = self._tensors(model_desc, inputs)
        return tensors[index] if index < len(tensors) else None

    def _index(self, model_desc: int, name: str, inputs: bool) -> tuple[int, int]:
        for index, tensor in enumerate(self._tensors(model_desc, inputs)):
            if tensor.name == name:
                return index, _OK
        return 0, _INVALID_PARAM
