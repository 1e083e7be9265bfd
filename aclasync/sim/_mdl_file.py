"""The spec file that names a simulated model: what ``load_from_file`` reads.

A spec file is a small JSON document::

    {"format": "aclasync.sim.model", "version": 1,
     "registration": "/abs/path/model.om",          # or "fn": "package.module:function"
     "inputs":  [["x", [-1, 3], "float32"]],
     "outputs": [["y", [-1, 3], "float32"]],
     "duration_us": 250.0, "batch_sizes": [1, 4, 8]}

``registration`` names a model registered in the loading runtime with
``acl.sim.register_model``; ``fn`` names an importable function, so that code in
another process can load the same file. ``dynamic_hw`` (``[[h, w], ...]``) and
``dynamic_dims`` (``[[d0, d1, ...], ...]``) may stand beside ``batch_sizes``; a
dimension of a dynamic-shape model may be a ``[low, high]`` range.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from ._mdl_spec import ModelSpec, SpecError, TensorSpec, build_spec

__all__ = ["FORMAT", "importable_name", "read_document", "spec_document"]

FORMAT = "aclasync.sim.model"


def _shape(tensor: TensorSpec) -> list[Any]:
    if tensor.ranges is None:
        return list(tensor.shape)
    return [
        [low, high] if d == -1 and (low, high) != (0, -1) else d
        for d, (low, high) in zip(tensor.shape, tensor.ranges, strict=True)
    ]


def spec_document(spec: ModelSpec, *, registration: str | None, fn: str | None) -> bytes:
    """The JSON bytes of a spec file naming a registration or an importable function."""
    document: dict[str, Any] = {"format": FORMAT, "version": 1}
    if registration is not None:
        document["registration"] = registration
    if fn is not None:
        document["fn"] = fn
    document["inputs"] = [[t.name, _shape(t), t.dtype.name] for t in spec.inputs]
    document["outputs"] = [[t.name, _shape(t), t.dtype.name] for t in spec.outputs]
    document["duration_us"] = spec.duration_us
    document["batch_sizes"] = list(spec.batch_sizes)
    if spec.hw:
        document["dynamic_hw"] = [list(g) for g in spec.hw]
    if spec.dims:
        document["dynamic_dims"] = [list(g) for g in spec.dims]
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
            document.get("dynamic_hw", ()),
            document.get("dynamic_dims", ()),
        )
    except TypeError as exc:
        raise SpecError(str(exc)) from None


def importable_name(fn: Callable[..., Any]) -> str | None:
    """``"package.module:function"`` if importing that name gives *fn* back in another
    process too (not a lambda, a nested function or one of ``__main__``), else None."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if module == "__main__" or "<" in qualname:
        return None
    try:
        found = _import_fn(f"{module}:{qualname}")
    except Exception:  # a probe: any failure means "not by name"
        return None
    return f"{module}:{qualname}" if found is fn else None


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
