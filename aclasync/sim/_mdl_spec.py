"""Simulated offline models: what a model declares.

``.om`` files are a closed format, so the simulator runs models declared in Python
(``acl.sim.register_model``). A declaration has inputs and outputs of ``(name, shape,
dtype)``, a body ``fn`` and at most one dynamic mode, as ATC builds them:

- static: every dimension is known;
- dynamic batch (ATC ``--dynamic_batch_size``): ``batch_sizes``; every shape starts
  with ``-1``, the batch;
- dynamic image size (``--dynamic_image_size``): ``dynamic_hw`` gears ``(h, w)``; an
  input with a dynamic image has two ``-1`` dimensions, its height and width;
- dynamic dims (``--dynamic_dims``): ``dynamic_dims`` gears; the ``-1`` dimensions of
  all inputs, in order, take a gear's values in order;
- dynamic shape (``--input_shape_range``): no gears; a dimension is ``-1`` (any size)
  or a ``(low, high)`` range (``high`` ``-1``: unbounded). Inputs get their shapes from
  the input dataset's tensor descriptions; an output's shape is whatever ``fn`` returns.

In the three gear modes an output's ``-1`` dimensions take the chosen gear's values in
order (the batch; the height then the width; the dims gear's values), and the model
gets one more input, ``ascend_mbatch_shape_data``, last, as ATC adds it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .._pyacl.dtypes import DataType, from_numpy

__all__ = ["BATCH_INPUT_NAME", "ModelSpec", "SpecError", "TensorSpec", "build_spec"]

#: The input a gear model gets last, as the ATC tool names it in real models.
BATCH_INPUT_NAME = "ascend_mbatch_shape_data"
_MAX_GEARS = 128  # ACL_MAX_BATCH_NUM / ACL_MAX_HW_NUM in acl_mdl.h
_UNBOUNDED = -1


class SpecError(ValueError):
    """A spec file or registration that cannot describe a model."""


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One model input or output. ``-1`` in ``shape`` marks a dynamic dimension.

    ``ranges`` gives ``(low, high)`` for every dimension of a dynamic-shape model's
    tensor (``(d, d)`` for a fixed one, ``high == -1`` for no bound); None otherwise.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    ranges: tuple[tuple[int, int], ...] | None = None

    @property
    def data_type(self) -> DataType:
        return from_numpy(self.dtype)

    @property
    def dynamic_count(self) -> int:
        return self.shape.count(-1)

    def resolve(self, values: Iterator[int]) -> tuple[int, ...]:
        """The shape with each ``-1`` replaced by the next of *values*."""
        return tuple(next(values) if d == -1 else d for d in self.shape)

    def nbytes(self, shape: Sequence[int]) -> int:
        return int(math.prod(shape)) * self.dtype.itemsize

    def fits(self, shape: Sequence[int]) -> bool:
        """Whether a concrete *shape* is one this tensor may take."""
        if len(shape) != len(self.shape) or any(d < 0 for d in shape):
            return False
        bounds = self.ranges or tuple((d, d) for d in self.shape)
        return all(
            low <= d and (high == _UNBOUNDED or d <= high)
            for d, (low, high) in zip(shape, bounds, strict=True)
        )

    def max_nbytes(self) -> int:
        """Bytes at the largest shape a dynamic-shape tensor may take (0 if unbounded)."""
        if self.ranges is None:
            return self.nbytes(self.shape) if -1 not in self.shape else 0
        highs = [high for _, high in self.ranges]
        return 0 if _UNBOUNDED in highs else self.nbytes(highs)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model the simulator can load: tensors, body, device time and dynamic mode."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    fn: Callable[..., Any]
    duration_us: float
    batch_sizes: tuple[int, ...] = ()
    hw: tuple[tuple[int, int], ...] = ()
    dims: tuple[tuple[int, ...], ...] = ()

    @property
    def mode(self) -> str:
        """``"batch"``, ``"hw"``, ``"dims"``, ``"shape"`` or ``"static"``."""
        if self.batch_sizes:
            return "batch"
        if self.hw:
            return "hw"
        if self.dims:
            return "dims"
        if any(-1 in t.shape for t in (*self.inputs, *self.outputs)):
            return "shape"
        return "static"

    @property
    def dynamic(self) -> bool:
        """Whether executions need a gear (batch, image size or dims)."""
        return bool(self.batch_sizes or self.hw or self.dims)

    @property
    def gears(self) -> tuple[tuple[int, ...], ...]:
        """The gears: ``(batch,)``, ``(h, w)`` or a dims gear each."""
        if self.batch_sizes:
            return tuple((b,) for b in self.batch_sizes)
        return self.hw or self.dims

    def all_inputs(self) -> tuple[TensorSpec, ...]:
        """The inputs as ``acl.mdl`` reports them: with the gear input last."""
        if not self.dynamic:
            return self.inputs
        width = len(self.gears[0])
        return (*self.inputs, TensorSpec(BATCH_INPUT_NAME, (width,), np.dtype(np.uint64)))

    def input_shapes(self, gear: Sequence[int]) -> list[tuple[int, ...]]:
        """The inputs' shapes at *gear* (without the gear input)."""
        if self.dims:
            values = iter(gear)
            return [t.resolve(values) for t in self.inputs]
        return [t.resolve(iter(gear)) for t in self.inputs]

    def output_shape(self, index: int, gear: Sequence[int]) -> tuple[int, ...]:
        return self.outputs[index].resolve(iter(gear))

    def reported_output_shape(self, index: int) -> tuple[int, ...]:
        """Output *index*'s dims as ``get_output_dims`` reports them: a gear model's at
        its largest gear (the output's static dims, which ATC records at the largest;
        ACL's ``aclmdlGetOutputDims`` page says so), else as declared (``-1`` marking a
        dynamic shape's unknown dimensions)."""
        if not self.dynamic:
            return self.outputs[index].shape
        tensor = self.outputs[index]
        return max(
            (self.output_shape(index, g) for g in self.gears), key=lambda s: tensor.nbytes(s)
        )

    def input_nbytes(self, index: int) -> int:
        """Bytes input *index* needs: at the largest gear, or at its largest shape."""
        if index == len(self.inputs) and self.dynamic:  # the gear input: uint64 values
            return 8 * len(self.gears[0])
        tensor = self.inputs[index]
        if not self.dynamic:
            return tensor.max_nbytes()
        return max(tensor.nbytes(self.input_shapes(g)[index]) for g in self.gears)

    def output_nbytes(self, index: int) -> int:
        """Bytes output *index* needs: at the largest gear, or at its largest shape."""
        tensor = self.outputs[index]
        if not self.dynamic:
            return tensor.max_nbytes()
        return max(tensor.nbytes(self.output_shape(index, g)) for g in self.gears)


def build_spec(
    inputs: Iterable[Any],
    outputs: Iterable[Any],
    fn: Callable[..., Any],
    duration_us: float = 0.0,
    batch_sizes: Iterable[int] = (),
    dynamic_hw: Iterable[Sequence[int]] = (),
    dynamic_dims: Iterable[Sequence[int]] = (),
) -> ModelSpec:
    """Validate a declaration; ``TypeError``/``SpecError`` name what is wrong."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(duration_us, bool) or not isinstance(duration_us, (int, float)):
        raise TypeError(f"duration_us must be a number, got {type(duration_us).__name__}")
    if not math.isfinite(duration_us) or duration_us < 0:
        raise SpecError(f"duration_us must be finite and >= 0, got {duration_us!r}")
    batches = tuple(batch_sizes)
    _check_gears("batch_sizes", [(b,) for b in batches], 1)
    hw = tuple(tuple(g) for g in _sequences("dynamic_hw", dynamic_hw))
    _check_gears("dynamic_hw", hw, 2)
    dims = tuple(tuple(g) for g in _sequences("dynamic_dims", dynamic_dims))
    _check_gears("dynamic_dims", dims, len(dims[0]) if dims else 0)
    if sum(map(bool, (batches, hw, dims))) > 1:
        raise SpecError("declare at most one of batch_sizes, dynamic_hw and dynamic_dims")
    shape_mode = not (batches or hw or dims)
    ins = tuple(_tensor(item, "inputs", shape_mode) for item in _entries(inputs, "inputs"))
    outs = tuple(_tensor(item, "outputs", shape_mode) for item in _entries(outputs, "outputs"))
    if not outs:
        raise SpecError("a model needs at least one output")
    names = [t.name for t in ins]
    if len(set(names)) != len(names) or BATCH_INPUT_NAME in names:
        raise SpecError(f"input names must be distinct and not {BATCH_INPUT_NAME!r}: {names}")
    spec = ModelSpec(ins, outs, fn, float(duration_us), batches, hw, dims)  # type: ignore[arg-type]
    _check_mode(spec)
    return spec


def _check_mode(spec: ModelSpec) -> None:
    """The ``-1`` dimensions must be those the declared mode fills."""
    mode = spec.mode
    if mode == "batch":
        for t in (*spec.inputs, *spec.outputs):
            if not t.shape or t.shape[0] != -1 or t.dynamic_count != 1:
                raise SpecError(f"{t.name!r}: a dynamic-batch model's shapes are (-1, ...)")
    elif mode == "hw":
        counts = [t.dynamic_count for t in spec.inputs]
        if any(c not in (0, 2) for c in counts) or 2 not in counts:
            raise SpecError("dynamic_hw: an input has two -1 dimensions (its height and width)")
    elif mode == "dims":
        width = len(spec.dims[0])
        if sum(t.dynamic_count for t in spec.inputs) != width:
            raise SpecError(f"dynamic_dims: the inputs need {width} -1 dimensions in all")
    width = len(spec.gears[0]) if spec.dynamic else 0
    for t in spec.outputs:
        if spec.dynamic and t.dynamic_count > width:
            raise SpecError(f"output {t.name!r} has more -1 dimensions than a gear has values")


def _sequences(what: str, items: Iterable[Sequence[int]]) -> list[Sequence[int]]:
    gears = list(items)
    if isinstance(items, (str, bytes)):  # type: ignore[unreachable]
        raise TypeError(f"{what} must be a sequence of gears")
    for gear in gears:
        if not isinstance(gear, (tuple, list)):
            raise TypeError(f"{what}: each gear must be a tuple of ints, got {gear!r}")
    return gears


def _check_gears(what: str, gears: Sequence[Sequence[int]], width: int) -> None:
    for gear in gears:
        if len(gear) != width or width == 0:
            raise SpecError(f"{what}: every gear needs {width or 'some'} values, got {gear!r}")
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in gear):
            raise SpecError(f"{what} must be positive ints, got {tuple(gears)!r}")
    if len(set(map(tuple, gears))) != len(gears) or len(gears) > _MAX_GEARS:
        raise SpecError(f"{what} must be distinct and at most {_MAX_GEARS}, got {tuple(gears)!r}")


def _entries(items: Iterable[Any], what: str) -> list[Any]:
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what} must be a list of (name, shape, dtype)")
    return list(items)


def _tensor(item: Any, what: str, shape_mode: bool) -> TensorSpec:
    if not isinstance(item, (tuple, list)) or len(item) != 3:
        raise TypeError(f"{what}: each entry must be (name, shape, dtype), got {item!r}")
    name, shape, dtype = item
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what}: a tensor name must be a non-empty str, got {name!r}")
    raw = (shape,) if isinstance(shape, int) else tuple(shape)
    dims: list[int] = []
    ranges: list[tuple[int, int]] = []
    for d in raw:
        if isinstance(d, (tuple, list)):
            low, high = _range(name, what, d, shape_mode)
            dims.append(-1)
            ranges.append((low, high))
        elif isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"{what}: shape of {name!r} must be ints, got {shape!r}")
        elif d < -1:
            raise SpecError(f"{what}: {name!r} has a negative dimension in {raw}")
        else:
            dims.append(d)
            ranges.append((0, _UNBOUNDED) if d == -1 else (d, d))
    try:
        kind = np.dtype(dtype)
        from_numpy(kind)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{what}: dtype of {name!r}: {exc}") from None
    dynamic_shape = shape_mode and -1 in dims
    return TensorSpec(name, tuple(dims), kind, tuple(ranges) if dynamic_shape else None)


def _range(name: str, what: str, d: Sequence[Any], shape_mode: bool) -> tuple[int, int]:
    if not shape_mode:
        raise SpecError(f"{what}: {name!r}: dimension ranges need a dynamic-shape model")
    if len(d) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in d):
        raise TypeError(f"{what}: a range of {name!r} must be (low, high) ints, got {d!r}")
    low, high = int(d[0]), int(d[1])
    if low < 0 or (high != _UNBOUNDED and high < low):
        raise SpecError(f"{what}: {name!r} has an empty range {tuple(d)}")
    return low, high
