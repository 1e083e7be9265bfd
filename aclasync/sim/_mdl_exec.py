"""One execution of a simulated model: what is checked when it is queued, what runs on
the device.

When ``execute``/``execute_async`` is called the datasets are checked against the model
and the memory each tensor uses is captured (``plan``); the task then reads the inputs,
runs the model's ``fn`` on a simulated core and writes the outputs (``body``). The
shapes come from the model's mode: declared (static), the dataset's gear (batch, image
size, dims) or the input dataset's tensor descriptions (dynamic shape). After a
dynamic-shape model runs, each output buffer of the output dataset gets a fresh tensor
description holding the output's real shape, as ACL's dynamic-shape execution does.

A synchronous execution gives output buffers without memory (address 0) device memory,
as ACL's ``ModelExecute`` does (``hicann/ge`` ``model.cpp``; the asynchronous path does
not): the output's size before the run (``allocate_outputs``), or, for a dynamic-shape
output of unknown size, its real size after it (``adopt_outputs``). The caller frees it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from .._pyacl.codes import ErrorCode
from ._core import Core
from ._mdl_spec import ModelSpec
from ._mdl_state import Dataset, ModelRegistry, TensorDesc
from ._rt_memory import allocate_device_memory

__all__ = ["Plan", "adopt_outputs", "allocate_outputs", "body", "plan"]

_log = logging.getLogger("aclasync.sim")

_OK = 0
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
_GE_PARAM_INVALID = int(ErrorCode.ACL_ERROR_GE_PARAM_INVALID)
_MODEL_ID_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID)
_GEAR_INVALID = int(ErrorCode.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID)
_MODEL_EXECUTE = int(ErrorCode.ACL_ERROR_RT_MODEL_EXECUTE)
#: How many bytes a static model's buffer may lack (GE: kDataMemAlignSizeCompare).
_SLACK = 64
_FORMAT_ND = 2


@dataclasses.dataclass
class Plan:
    """One execution: the model, its tensors' shapes and the device memory they use."""

    spec: ModelSpec
    input_shapes: list[tuple[int, ...]]
    #: The outputs' shapes; None for a dynamic-shape model (``fn`` decides them).
    output_shapes: list[tuple[int, ...]] | None
    inputs: list[memoryview]
    outputs: list[memoryview]
    output_dataset: int
    #: Output index -> data buffer, for the outputs given memory after the run (their
    #: view is empty); ``kept`` receives the bytes the run produced for them.
    held: dict[int, int] = dataclasses.field(default_factory=dict)
    kept: dict[int, bytes] = dataclasses.field(default_factory=dict)


def allocate_outputs(
    core: Core, models: ModelRegistry, model_id: int, input: int, output: int
) -> int:
    """Before a synchronous run: device memory of the model's output size for each output
    buffer without any (none for a size of 0, which the run decides).

    ACL looks at the datasets first (100000 for a null one) and, when some buffer needs
    memory, at the model's outputs: 100000 if the model is not loaded or has fewer
    outputs than the dataset has buffers. The memory stays with the buffer even if the
    execution then fails, as in ACL.
    """
    with models.lock:
        ins = models.datasets.get(input)
        outs = models.datasets.get(output)
        if ins is None or outs is None:
            return _INVALID_PARAM
        empty = _unallocated(models, outs)
        if not empty:
            return _OK
        model = models.models.get(model_id)
        if model is None or len(model.spec.outputs) < len(outs.buffers):
            return _INVALID_PARAM
        for position, handle in empty.items():
            size = model.spec.output_nbytes(position)
            if size > 0:
                address, ret = allocate_device_memory(core, size)
                if ret != _OK:
                    return ret
                buffer = models.buffers[handle]
                buffer.addr, buffer.size = address, size
    return _OK


def adopt_outputs(core: Core, models: ModelRegistry, plan: Plan) -> int:
    """After a synchronous run: give each held output buffer device memory of the real
    size, holding what the model produced (ACL's ``aclrtMalloc`` and copy)."""
    with models.lock:
        for position, handle in plan.held.items():
            buffer = models.buffers.get(handle)
            data = plan.kept.get(position)
            if buffer is None or data is None:  # destroyed meanwhile
                continue
            address, ret = allocate_device_memory(core, len(data))
            if ret != _OK:
                return ret
            region = core.device_region(address)
            view = None if region is None else region.view(address, len(data))
            if view is not None:
                view[:] = data
            buffer.addr, buffer.size = address, len(data)
    return _OK


def plan(
    core: Core,
    models: ModelRegistry,
    model_id: int,
    input: int,
    output: int,
    *,
    synchronous: bool = False,
) -> tuple[Plan | None, int]:
    """Check the datasets against the model; capture the memory each tensor uses.

    A null dataset is 100000 before an unknown model id (145003), as in ACL. In a
    *synchronous* run of a dynamic-shape model, output buffers still without memory
    are held for ``adopt_outputs``.
    """
    with models.lock:
        model = models.models.get(model_id)
        ins = models.datasets.get(input)
        outs = models.datasets.get(output)
        if ins is None or outs is None:
            return None, _INVALID_PARAM
        if model is None:
            return None, _MODEL_ID_INVALID
        spec = model.spec
        if len(ins.buffers) != len(spec.all_inputs()) or len(outs.buffers) != len(spec.outputs):
            return None, _GE_PARAM_INVALID
        out_shapes: list[tuple[int, ...]] | None = None
        if spec.dynamic:
            if ins.gear is None or ins.gear not in spec.gears:
                return None, _GEAR_INVALID
            in_shapes = spec.input_shapes(ins.gear)
            out_shapes = [spec.output_shape(i, ins.gear) for i in range(len(spec.outputs))]
        elif spec.mode == "shape":
            described = _described_shapes(models, spec, ins)
            if described is None:
                return None, _INVALID_PARAM
            in_shapes = described
        else:
            in_shapes = [t.shape for t in spec.inputs]
            out_shapes = [t.shape for t in spec.outputs]
        # GE's size check of a static model's inputs and outputs (davinci_model.cc,
        # CheckUserAndModelSize): a bigger buffer only logs a warning; a smaller one is
        # refused only when more than 64 bytes short (the bytes an input lacks read as
        # zeros; those an output lacks are not written).
        short = _SLACK if spec.mode == "static" else 0
        in_sizes = [t.nbytes(s) for t, s in zip(spec.inputs, in_shapes, strict=True)]
        in_views = _views(core, models, ins, in_sizes, short=short)
        out_sizes = (
            [t.nbytes(s) for t, s in zip(spec.outputs, out_shapes, strict=True)]
            if out_shapes is not None
            else None
        )
        held = _unallocated(models, outs) if synchronous and spec.mode == "shape" else {}
        out_views = _views(core, models, outs, out_sizes, short=short, held=held)
    if in_views is None or out_views is None:
        return None, _GE_PARAM_INVALID
    return Plan(spec, in_shapes, out_shapes, in_views, out_views, output, held), _OK


def body(plan: Plan, models: ModelRegistry, fail: Callable[[int], None]) -> Callable[[], None]:
    """The device-side work of one execution: read inputs, run ``fn``, write outputs."""
    spec = plan.spec

    def run() -> None:
        try:
            arrays = [
                _array(view, t.dtype, shape)
                for t, view, shape in zip(spec.inputs, plan.inputs, plan.input_shapes, strict=False)
            ]
            results = spec.fn(*arrays)
            if isinstance(results, np.ndarray) or not isinstance(results, (tuple, list)):
                results = (results,)
            if len(results) != len(spec.outputs):
                raise ValueError(
                    f"fn returned {len(results)} outputs, the model declares {len(spec.outputs)}"
                )
            written = []
            for index, (tensor, view, result) in enumerate(
                zip(spec.outputs, plan.outputs, results, strict=True)
            ):
                value = np.asarray(result)
                if plan.output_shapes is not None:
                    expected = plan.output_shapes[index]
                    if value.shape != expected:
                        raise ValueError(
                            f"output {tensor.name!r}: shape {value.shape}, declared {expected}"
                        )
                elif not tensor.fits(value.shape):
                    raise ValueError(f"output {tensor.name!r}: shape {value.shape} not allowed")
                value = value.astype(tensor.dtype, casting="same_kind", copy=False)
                if index in plan.held:
                    plan.kept[index] = value.tobytes()
                elif value.nbytes > len(view) and spec.mode == "static":  # (a short buffer)
                    view[:] = value.tobytes()[: len(view)]
                elif value.nbytes > len(view):
                    raise ValueError(
                        f"output {tensor.name!r}: {value.nbytes} bytes, the buffer has {len(view)}"
                    )
                else:
                    np.frombuffer(view, dtype=tensor.dtype, count=value.size)[:] = value.reshape(-1)
                written.append((int(tensor.data_type), list(value.shape)))
            if plan.output_shapes is None:
                _describe_outputs(models, plan.output_dataset, written)
        except Exception:
            _log.exception("simulated model body failed")
            fail(_MODEL_EXECUTE)

    return run


def _described_shapes(
    models: ModelRegistry, spec: ModelSpec, dataset: Dataset
) -> list[tuple[int, ...]] | None:
    """A dynamic-shape model's input shapes, from the input dataset's tensor descriptions."""
    shapes = []
    for index, tensor in enumerate(spec.inputs):
        desc = models.tensor_descs.get(dataset.descs[index])
        if desc is None:
            if -1 in tensor.shape:
                return None  # ACL: the input's shape is out of its range
            shapes.append(tensor.shape)
            continue
        shape = tuple(desc.dims)
        if not tensor.fits(shape):
            return None
        shapes.append(shape)
    return shapes


def _array(view: memoryview, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """A copy of an input tensor from its buffer, the bytes a short buffer lacks as zeros."""
    count = int(np.prod(shape))
    missing = count * dtype.itemsize - len(view)
    data = bytes(view) + bytes(missing) if missing > 0 else view
    return np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()


def _views(
    core: Core,
    models: ModelRegistry,
    dataset: Dataset,
    sizes: list[int] | None,
    *,
    short: int = 0,
    held: dict[int, int] | None = None,
) -> list[memoryview] | None:
    """Device views of the dataset's buffers (``sizes`` bytes each, or whole buffers; a
    buffer up to *short* bytes smaller is viewed whole); an empty view at the positions
    *held* (given memory after the run)."""
    views = []
    handles = dataset.buffers if sizes is None else dataset.buffers[: len(sizes)]
    for position, handle in enumerate(handles):
        if held and position in held:
            views.append(memoryview(b""))
            continue
        buffer = models.buffers.get(handle)
        if buffer is None:
            return None
        need = buffer.size if sizes is None else sizes[position]
        if buffer.size < need - short:
            return None
        if short and buffer.size > need:  # as GE does (a warning, the run goes on)
            _log.warning(
                "buffer %d: %d bytes, bigger than the model's %d, may cause inference problem",
                position,
                buffer.size,
                need,
            )
        need = min(need, buffer.size)
        region = core.device_region(buffer.addr)
        view = None if region is None else region.view(buffer.addr, need)
        if view is None:
            return None
        views.append(view)
    return views


def _unallocated(models: ModelRegistry, dataset: Dataset) -> dict[int, int]:
    """Position -> handle of the dataset's data buffers without memory (address 0)."""
    return {
        position: handle
        for position, handle in enumerate(dataset.buffers)
        if (buffer := models.buffers.get(handle)) is not None and buffer.addr == 0
    }


def _describe_outputs(
    models: ModelRegistry, dataset: int, written: list[tuple[int, list[int]]]
) -> None:
    with models.lock:
        found = models.datasets.get(dataset)
        if found is None:  # destroyed while the execution was queued
            return
        for index, (data_type, shape) in enumerate(written):
            if index < len(found.descs):
                desc = TensorDesc(data_type, shape, _FORMAT_ND)
                desc.owner = dataset
                models.set_blob_desc(found, index, desc)
