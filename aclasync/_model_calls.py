"""What ``Model`` runs on the device worker: plain ``acl.mdl`` calls, any backend.

Every handle made here (the model, its description, each buffer set's datasets and
data buffers) is kept by the worker's ``Handles`` until the model releases it, so that
a device closed before the model, or whose worker died, still releases it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._pyacl.codes import ErrorCode
from ._pyacl.dtypes import to_numpy

if TYPE_CHECKING:
    from ._handles import Handles
    from ._pyacl.backend import AclBackend

__all__ = ["Datasets", "Loaded", "TensorInfo", "datasets", "execute_on", "load", "release"]

#: Reported when a create call returns the null handle, as ACL does for bad arguments.
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One model input or output as the model description reports it.

    ``shape`` holds ``-1`` for a dynamic dimension; ``dtype`` is ``None`` for an ACL
    data type numpy has no dtype for (bf16, int4, strings: ``Model.run`` refuses the
    model, ``Model.launch`` takes it); ``nbytes`` is the buffer size the model asks for
    (``acl.mdl.get_input_size_by_index``); ``data_type`` is the ACL data type the
    description reports (``None`` in one made by hand; not compared).
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any] | None
    nbytes: int
    data_type: int | None = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class Loaded:
    """A model loaded on the worker, or why it was not (``ret`` non-zero, named ``api``)."""

    model_id: int = 0
    desc: int = 0
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    api: str = ""
    ret: int = 0


@dataclasses.dataclass(frozen=True)
class Datasets:
    """A buffer set's input and output datasets, or why they were not made."""

    inputs: int = 0
    outputs: int = 0
    api: str = ""
    ret: int = 0


def load(acl: AclBackend, handles: Handles, path: str) -> Loaded:
    """Load *path* and read its description; on failure, undo what was done."""
    model_id, ret = acl.mdl.load_from_file(path)
    if ret:
        return Loaded(api="acl.mdl.load_from_file", ret=ret)
    desc = acl.mdl.create_desc()
    ret = acl.mdl.get_desc(desc, model_id) if desc else _INVALID_PARAM
    if ret:
        if desc:
            acl.mdl.destroy_desc(desc)
        acl.mdl.unload(model_id)
        return Loaded(api="acl.mdl.get_desc", ret=ret)
    try:
        inputs = tuple(_tensor(acl, desc, i, True) for i in range(acl.mdl.get_num_inputs(desc)))
        outputs = tuple(_tensor(acl, desc, i, False) for i in range(acl.mdl.get_num_outputs(desc)))
    except ValueError:
        acl.mdl.destroy_desc(desc)
        acl.mdl.unload(model_id)
        raise

    def unload_model() -> int:
        codes = [int(acl.mdl.destroy_desc(desc)), int(acl.mdl.unload(model_id))]
        return next((c for c in codes if c), 0)

    handles.keep(("model", model_id), unload_model, "acl.mdl.unload")
    return Loaded(model_id, desc, inputs, outputs)


def _tensor(acl: AclBackend, desc: int, index: int, is_input: bool) -> TensorInfo:
    mdl = acl.mdl
    if is_input:
        name = mdl.get_input_name_by_index(desc, index)
        dims, ret = mdl.get_input_dims(desc, index)
        data_type = mdl.get_input_data_type(desc, index)
        nbytes = mdl.get_input_size_by_index(desc, index)
    else:
        name = mdl.get_output_name_by_index(desc, index)
        dims, ret = mdl.get_output_dims(desc, index)
        data_type = mdl.get_output_data_type(desc, index)
        nbytes = mdl.get_output_size_by_index(desc, index)
    if ret:
        raise ValueError(f"cannot read the dims of tensor {index} of the model ({ret})")
    try:
        dtype: np.dtype[Any] | None = to_numpy(data_type)
    except ValueError:  # (bf16 and the like: run refuses it, launch takes it)
        dtype = None
    shape = tuple(int(d) for d in dims["dims"])
    return TensorInfo(str(name), shape, dtype, nbytes, int(data_type))


def datasets(
    acl: AclBackend,
    handles: Handles,
    key: object,
    ins: Sequence[tuple[int, int]],
    outs: Sequence[tuple[int, int]],
) -> Datasets:
    """Make an input and an output dataset over (pointer, size) pairs, kept as *key*."""
    made = _make_datasets(acl, ins, outs)
    if isinstance(made, Datasets):
        return made
    inputs, outputs, buffers = made
    handles.keep(key, lambda: _destroy(acl, (inputs, outputs), buffers), "acl.mdl.destroy_dataset")
    return Datasets(inputs, outputs)


def _make_datasets(
    acl: AclBackend, ins: Sequence[tuple[int, int]], outs: Sequence[tuple[int, int]]
) -> Datasets | tuple[int, int, list[int]]:
    """The datasets and their data buffers, or (all undone) why they were not made."""
    made: list[int] = []
    sets: list[int] = []
    for pairs in (ins, outs):
        dataset = acl.mdl.create_dataset()
        if not dataset:
            _destroy(acl, sets, made)
            return Datasets(api="acl.mdl.create_dataset", ret=_INVALID_PARAM)
        sets.append(dataset)
        for ptr, size in pairs:
            buffer = acl.create_data_buffer(ptr, size)
            if not buffer:
                _destroy(acl, sets, made)
                return Datasets(api="acl.create_data_buffer", ret=_INVALID_PARAM)
            made.append(buffer)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
            if ret:
                _destroy(acl, sets, made)
                return Datasets(api="acl.mdl.add_dataset_buffer", ret=ret)
    return sets[0], sets[1], made


def _destroy(acl: AclBackend, sets: Sequence[int], buffers: Sequence[int]) -> int:
    """Destroy datasets and data buffers; return the first failure code (0 if none)."""
    codes = [int(acl.mdl.destroy_dataset(d)) for d in sets if d]
    codes += [int(acl.destroy_data_buffer(b)) for b in buffers]
    return next((c for c in codes if c), 0)


def release(handles: Handles, keys: Sequence[object]) -> tuple[str, int]:
    """Release what *keys* hold (datasets, then the model): the first failure, if any."""
    results = [handles.drop(key) for key in keys]
    return next(((api, ret) for ret, api in results if ret), ("", 0))


def execute_on(acl: AclBackend) -> Any:
    """``execute_async`` over (pointer, size) pairs, with datasets made for the call."""

    def execute_async(
        model_id: int,
        ins: tuple[tuple[int, int], ...],
        outs: tuple[tuple[int, int], ...],
        stream: int,
    ) -> int:
        made = _make_datasets(acl, ins, outs)
        if isinstance(made, Datasets):
            return made.ret
        inputs, outputs, buffers = made
        try:
            return int(acl.mdl.execute_async(model_id, inputs, outputs, stream))
        finally:
            _destroy(acl, (inputs, outputs), buffers)

    execute_async.__module__ = "acl.mdl"  # how the worker names the call in errors
    return execute_async
