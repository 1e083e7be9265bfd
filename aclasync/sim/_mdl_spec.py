"""Simulated offline models: what a model declares, and the spec file that names it.

``.om`` files are a closed format, so the simulator runs models declared in Python.
A spec file is a small JSON document::

    {"format": "aclasync.sim.model", "version": 1,
     "registration": "/abs/path/model.om",          # or "fn": "package.module:function"
     "inputs":  [["x", [-1, 3], "float32"]],
     "outputs": [["y", [-1, 3], "float32"]],
     "duration_us": 250.0, "batch_sizes": [1, 4, 8]}

``registration`` names a model registered in the loading runtime with
``acl.sim.register_model``; ``fn`` names an importable function, so that code in
another process can load the same file.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from .._pyacl.dtypes import DataType, from_numpy

__all__ = [
    "BATCH_INPUT_NAME",
    "FORMAT",
    "ModelSpec",
    "SpecError",
    "TensorSpec",
    "build_spec",
    "read_document",
    "spec_document",
]

FORMAT = "aclasync.sim.model"
#: The input a dynamic-batch model gets last, as the ATC tool names it in real models.
BATCH_INPUT_NAME = "ascend_mbatch_shape_data"
_MAX_BATCH_COUNT = 128  # ACL_MAX_BATCH_NUM in acl_mdl.h


class SpecError(ValueError):
    """A spec file or registration that cannot describe a model."""


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One model input or output. ``shape[0] == -1`` marks the dynamic batch dimension."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    @property
    def data_type(self) -> DataType:
        return from_numpy(self.dtype)

    def concrete(self, batch: int) -> tuple[int, ...]:
        """The shape with the batch dimension (if any) set to *batch*."""
        if self.shape and self.shape[0] == -1:
            return (batch, *self.shape[1:])
        return self.shape

    def nbytes(self, batch: int) -> int:
        return int(math.prod(self.concrete(batch))) * self.dtype.itemsize


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model the simulator can load: tensors, body, device time and batch choices."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    fn: Callable[..., Any]
    duration_us: float
    batch_sizes: tuple[int, ...]

    @property
    def dynamic(self) -> bool:
        return bool(self.batch_sizes)

    @property
    def max_batch(self) -> int:
        return max(self.batch_sizes, default=1)

    def all_inputs(self) -> tuple[TensorSpec, ...]:
        """The inputs as ``acl.mdl`` reports them: with the batch-size input last."""
        if not self.dynamic:
            return self.inputs
        return (*self.inputs, TensorSpec(BATCH_INPUT_NAME, (1,), np.dtype(np.uint64)))


def build_spec(
    inputs: Iterable[Any],
    outputs: Iterable[Any],
    fn: Callable[..., Any],
    duration_us: float = 0.0,
    batch_sizes: Iterable[int] = (),
) -> ModelSpec:
    """Validate a declaration; ``TypeError``/``SpecError`` name what is wrong."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(duration_us, bool) or not isinstance(duration_us, (int, float)):
        raise TypeError(f"duration_us must be a number, got {type(duration_us).__name__}")
    if not math.isfinite(duration_us) or duration_us < 0:
        raise SpecError(f"duration_us must be finite and >= 0, got {duration_us!r}")
    batches = tuple(batch_sizes)
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batches):
        raise SpecError(f"batch_sizes must be positive ints, got {batches!r}")
    if len(set(batches)) != len(batches) or len(batches) > _MAX_BATCH_COUNT:
        raise SpecError(f"batch_sizes must be distinct and at most 128, got {batches!r}")
    ins = _tensors(inputs, "inputs", dynamic=bool(batches))
    outs = _tensors(outputs, "outputs", dynamic=bool(batches))
    if not outs:
        raise SpecError("a model needs at least one output")
    names = [t.name for t in ins]
    if len(set(names)) != len(names) or BATCH_INPUT_NAME in names:
        raise SpecError(f"input names must be distinct and not {BATCH_INPUT_NAME!r}: {names}")
    return ModelSpec(ins, outs, fn, float(duration_us), batches)


def spec_document(spec: ModelSpec, *, registration: str | None, fn: str | None) -> bytes:
    """The JSON bytes of a spec file naming a registration or an importable function."""
    document: dict[str, Any] = {"format": FORMAT, "version": 1}
    if registration is not None:
        document["registration"] = registration
    if fn is not None:
        document["fn"] = fn
    document["inputs"] = [[t.name, list(t.shape), t.dtype.name] for t in spec.inputs]
    document["outputs"] = [[t.name, list(t.shape), t.dtype.name] for t in spec.outputs]
    document["duration_us"] = spec.duration_us
    document["batch_sizes"] = list(spec.batch_sizes)
    return (json.dumps(document) + "\n").encode()


def read_document(data: bytes, registrations: Mapping[str, ModelSpec]) -> ModelSpec:
    """Parse spec-file bytes; ``SpecError`` if they describe no loadable model."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SpecError("not a simulated-model spec file (not JSON)") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise SpecError(f"not a simulated-model spec file (no format {FORMAT!r})")
    registration = document.get("registration")
    if isinstance(registration, str) and registration in registrations:
        return registrations[registration]
    target = document.get("fn")
    if not isinstance(target, str):
        raise SpecError(
            f"spec names registration {registration!r}, which this runtime does not have, "
            'and no "fn"'
        )
    try:
        return build_spec(
            document.get("inputs", ()),
            document.get("outputs", ()),
            _import_fn(target),
            document.get("duration_us", 0.0),
            document.get("batch_sizes", ()),
        )
    except TypeError as exc:
        raise SpecError(str(exc)) from None


def _import_fn(target: str) -> Callable[..., Any]:
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise SpecError(f'"fn" must look like "package.module:function", got {target!r}')
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"cannot import {target!r}: {exc}") from None
    if not callable(value):
        raise SpecError(f"{target!r} is not callable")
    return value  # type: ignore[no-any-return]


def _tensors(items: Iterable[Any], what: str, *, dynamic: bool) -> tuple[TensorSpec, ...]:
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what} must be a list of (name, shape, dtype)")
    tensors = []
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            raise TypeError(f"{what}: each entry must be (name, shape, dtype), got {item!r}")
        name, shape, dtype = item
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what}: a tensor name must be a non-empty str, got {name!r}")
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
            raise TypeError(f"{what}: shape of {name!r} must be ints, got {shape!r}")
        batched = bool(dims) and dims[0] == -1
        if dynamic and not batched:
            raise SpecError(f"{what}: {name!r} needs -1 as its first (batch) dimension")
        if any(d < 0 for d in dims[1 if dynamic else 0 :]):
            raise SpecError(f"{what}: {name!r} has a negative dimension in {dims}")
        try:
            kind = np.dtype(dtype)
            from_numpy(kind)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{what}: dtype of {name!r}: {exc}") from None
        tensors.append(TensorSpec(name, dims, kind))
    return tuple(tensors)
