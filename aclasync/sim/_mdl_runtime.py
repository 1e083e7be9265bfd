"""``acl.mdl``: loading simulated models and executing them on streams.

Codes and where they come from (details in ``docs/simulator.md``): 145003
(ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, ``model_manager.cc`` "model id does not exist")
for a model id not loaded; 145002 (…_MODEL_PATH_INVALID) for an unreadable file;
145000 (ACL_ERROR_GE_PARAM_INVALID) for a file that is no model and for datasets whose
buffers do not fit the model; 145013 (…_DYNAMIC_BATCH_SIZE_INVALID) for a batch size
the model does not offer; 100000 for null or unknown handles; 507011
(ACL_ERROR_RT_MODEL_EXECUTE), from the stream's next sync, when the model body fails.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._pyacl.codes import ErrorCode
from ._calls import CallGroup
from ._core import Core, check_ints, wait_for_tasks
from ._mdl_dataset import DatasetCalls
from ._mdl_desc import DescCalls
from ._mdl_spec import ModelSpec, SpecError, build_spec, read_document, spec_document
from ._mdl_state import Dataset, LoadedModel, ModelRegistry
from ._mdl_unsupported import UNSUPPORTED, unsupported
from ._objects import Task
from ._unmodelled import attach_unmodelled

if TYPE_CHECKING:
    from .._pyacl.backend import AclMdl as _MdlSurface
else:
    _MdlSurface = object

__all__ = ["Mdl", "ModelExtension"]

_log = logging.getLogger("aclasync.sim")

_OK = 0
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
_CONTEXT_NULL = int(ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
_RT_PARAM_INVALID = int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
_GE_PARAM_INVALID = int(ErrorCode.ACL_ERROR_GE_PARAM_INVALID)
_PATH_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
_MODEL_ID_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID)
_BATCH_INVALID = int(ErrorCode.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID)
_MODEL_EXECUTE = int(ErrorCode.ACL_ERROR_RT_MODEL_EXECUTE)

#: One planned execution: the model, its batch, input views and output views.
_Plan = tuple[ModelSpec, int, list[memoryview], list[memoryview]]


class Mdl(CallGroup, DescCalls, DatasetCalls, _MdlSurface):
    """The ``acl.mdl`` namespace of a simulated runtime."""

    def __init__(self, core: Core, models: ModelRegistry) -> None:
        super().__init__(core)
        self._models = models

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name in UNSUPPORTED:
            return unsupported(name)
        raise AttributeError(f"acl.mdl has no attribute {name!r}")

    def __dir__(self) -> Iterable[str]:
        return sorted({*super().__dir__(), *UNSUPPORTED})

    # -- loading ---------------------------------------------------------------------

    def load_from_file(self, model_path: str, /) -> tuple[int, int]:
        """Load the model a spec file (or a registration of its path) declares."""
        if not isinstance(model_path, str):
            raise TypeError(f"load_from_file: argument 1 must be str, not {type(model_path)}")
        if self._core.context is None:
            return 0, _CONTEXT_NULL
        spec = self._models.registrations.get(os.path.realpath(model_path))
        if spec is None:
            try:
                with open(model_path, "rb") as file:
                    data = file.read()
            except OSError:
                return 0, _PATH_INVALID
            return self._load_bytes(data)
        return self._models.add_model(spec), _OK

    def load_from_mem(self, model: int, model_size: int, /) -> tuple[int, int]:
        """Load from *model_size* bytes of host memory at *model* (a spec file's bytes)."""
        check_ints("load_from_mem", model, model_size)
        if model == 0 or model_size <= 0:
            return 0, _INVALID_PARAM
        if self._core.context is None:
            return 0, _CONTEXT_NULL
        with self._core.lock:
            view, device_id, _ = self._core.resolve(model, model_size, write=False)
        if view is None or device_id is not None:  # the model's bytes live on the host
            return 0, _INVALID_PARAM
        return self._load_bytes(bytes(view))

    def unload(self, model_id: int, /) -> int:
        check_ints("unload", model_id)
        with self._models.lock:
            found = self._models.models.pop(model_id, None)
        return _MODEL_ID_INVALID if found is None else _OK

    def get_desc_from_file(self, model_desc: int, model_path: str, /) -> int:
        """Fill *model_desc* from a spec file without loading it."""
        check_ints("get_desc_from_file", model_desc)
        desc = self._models.descs.get(model_desc)
        if desc is None:
            return _INVALID_PARAM
        spec = self._models.registrations.get(os.path.realpath(model_path))
        if spec is None:
            try:
                with open(model_path, "rb") as file:
                    spec = read_document(file.read(), self._models.registrations)
            except OSError:
                return _PATH_INVALID
            except SpecError:
                return _GE_PARAM_INVALID
        desc.model_id, desc.spec = 0, spec
        return _OK

    def _load_bytes(self, data: bytes) -> tuple[int, int]:
        try:
            spec = read_document(data, self._models.registrations)
        except SpecError as exc:
            _log.warning("acl.mdl load failed: %s", exc)
            return 0, _GE_PARAM_INVALID
        return self._models.add_model(spec), _OK

    # -- execution -------------------------------------------------------------------

    def execute(self, model_id: int, input: int, output: int, /) -> int:
        """Run the model and wait for it (on the current context's default stream)."""
        check_ints("execute", model_id, input, output)
        _, stream, ret = self._resolve_stream(0)
        if stream is None:
            return ret
        plan, ret = self._plan(model_id, input, output)
        if plan is None:
            return ret
        failure: list[int] = []
        task = Task(stream, "model", duration=plan[0].duration_us / 1e6)
        task.fn = _body(plan, lambda code: failure.append(code))
        ret = self._submit(stream, task)
        if ret != _OK:
            return ret
        wait_for_tasks(self._core, [task], None)
        return failure[0] if failure else _OK

    def execute_async(self, model_id: int, input: int, output: int, stream: int, /) -> int:
        """Queue the model on *stream*; a failing body surfaces at the stream's next sync."""
        check_ints("execute_async", model_id, input, output, stream)
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        plan, ret = self._plan(model_id, input, output)
        if plan is None:
            return ret
        task = Task(found, "model", duration=plan[0].duration_us / 1e6)

        def fail(code: int) -> None:
            task.error = code

        task.fn = _body(plan, fail)
        return self._submit(found, task)

    def set_dynamic_batch_size(
        self, model_id: int, dataset: int, index: int, batch_size: int, /
    ) -> int:
        """Choose the batch of *dataset*: writes it to the batch-size input's buffer."""
        check_ints("set_dynamic_batch_size", model_id, dataset, index, batch_size)
        models = self._models
        found = models.datasets.get(dataset)
        if found is None or batch_size <= 0:
            return _INVALID_PARAM
        model = models.models.get(model_id)
        if model is None:
            return _MODEL_ID_INVALID
        if batch_size not in model.spec.batch_sizes:
            return _BATCH_INVALID
        buffer = (
            models.buffers.get(found.buffers[index]) if 0 <= index < len(found.buffers) else None
        )
        if buffer is None or buffer.addr == 0:
            return _INVALID_PARAM
        width = 8 if buffer.size >= 8 else 4
        region = self._core.device_region(buffer.addr)
        view = None if region is None else region.view(buffer.addr, width)
        if view is None or buffer.size < 4:
            return _RT_PARAM_INVALID
        view[:] = batch_size.to_bytes(width, "little")
        found.batch = model.cur_batch = batch_size
        return _OK

    def _plan(self, model_id: int, input: int, output: int) -> tuple[_Plan | None, int]:
        """Check the datasets against the model; capture the memory each tensor uses."""
        models = self._models
        with models.lock:
            model = models.models.get(model_id)
            ins = models.datasets.get(input)
            outs = models.datasets.get(output)
            if model is None:
                return None, _MODEL_ID_INVALID
            if ins is None or outs is None:
                return None, _INVALID_PARAM
            batch = _batch(model, ins)
            if batch == 0:
                return None, _BATCH_INVALID
            spec = model.spec
            in_views = self._views(ins, spec.inputs, batch, exact=not spec.dynamic)
            out_views = self._views(outs, spec.outputs, batch, exact=False)
            expected_inputs = len(spec.all_inputs())
        if in_views is None or out_views is None or len(ins.buffers) != expected_inputs:
            return None, _GE_PARAM_INVALID
        if len(outs.buffers) != len(spec.outputs):
            return None, _GE_PARAM_INVALID
        return (spec, batch, in_views, out_views), _OK

    def _views(
        self, dataset: Dataset, tensors: Any, batch: int, *, exact: bool
    ) -> list[memoryview] | None:
        """Device views of the dataset's buffers for *tensors*, or None if one does not fit."""
        views = []
        for position, tensor in enumerate(tensors):
            if position >= len(dataset.buffers):
                return None
            buffer = self._models.buffers.get(dataset.buffers[position])
            need = tensor.nbytes(batch)
            if buffer is None or buffer.size < need or (exact and buffer.size != need):
                return None
            region = self._core.device_region(buffer.addr)
            view = None if region is None else region.view(buffer.addr, need)
            if view is None:
                return None
            views.append(view)
        return views


class ModelExtension:
    """The ``acl.sim`` calls for simulated models (mixed into ``acl.sim``)."""

    _models: ModelRegistry

    def register_model(
        self,
        path: str | os.PathLike[str],
        *,
        inputs: Iterable[Any],
        outputs: Iterable[Any],
        fn: Callable[..., Any],
        duration_us: float = 0.0,
        batch_sizes: Iterable[int] = (),
    ) -> str:
        """Declare the model that ``acl.mdl.load_from_file(path)`` loads in this runtime.

        Parameters
        ----------
        path:
            The model file client code names. A spec file naming this registration is
            written there unless a file already exists (the file is never overwritten).
        inputs, outputs:
            Lists of ``(name, shape, dtype)``; with ``batch_sizes`` every shape starts
            with ``-1``, the batch dimension.
        fn:
            ``fn(*inputs) -> output array or sequence of arrays``, run on a simulated
            core when the model executes; it must return the declared shapes and dtypes
            (at the batch in use).
        duration_us:
            Device time each execution takes at least.
        batch_sizes:
            The dynamic-batch choices (``acl.mdl.set_dynamic_batch_size``); the model
            then has one more input, ``ascend_mbatch_shape_data``, last.

        Returns
        -------
        str
            The resolved path, which also keys the registration. Raises ``TypeError``
            or ``ValueError`` for a declaration that describes no model, and
            ``OSError`` if the spec file cannot be written (nothing is registered then).
        """
        spec = build_spec(inputs, outputs, fn, duration_us, batch_sizes)
        key = os.path.realpath(os.fspath(path))
        try:
            with open(key, "xb") as file:
                file.write(spec_document(spec, registration=key, fn=None))
        except FileExistsError:
            pass
        with self._models.lock:
            self._models.registrations[key] = spec
        return key

    def model_objects(self) -> dict[str, int]:
        """``{"models", "model_descs", "datasets", "data_buffers"}``: how many are alive."""
        return self._models.counts()


def _batch(model: LoadedModel, dataset: Dataset) -> int:
    """The batch an execution runs at: 1 for a static model, the dataset's choice else."""
    if not model.spec.dynamic:
        return 1
    return dataset.batch


def _body(plan: _Plan, fail: Callable[[int], None]) -> Callable[[], None]:
    """The device-side work of one execution: read inputs, run ``fn``, write outputs."""
    spec, batch, in_views, out_views = plan

    def run() -> None:
        try:
            arrays = [
                np.frombuffer(view, dtype=t.dtype).reshape(t.concrete(batch)).copy()
                for t, view in zip(spec.inputs, in_views, strict=False)
            ]
            results = spec.fn(*arrays)
            if isinstance(results, np.ndarray) or not isinstance(results, (tuple, list)):
                results = (results,)
            if len(results) != len(spec.outputs):
                raise ValueError(
                    f"fn returned {len(results)} outputs, the model declares {len(spec.outputs)}"
                )
            for tensor, view, result in zip(spec.outputs, out_views, results, strict=True):
                value = np.asarray(result)
                shape = tensor.concrete(batch)
                if value.shape != shape:
                    raise ValueError(
                        f"output {tensor.name!r}: shape {value.shape}, declared {shape}"
                    )
                value = value.astype(tensor.dtype, casting="same_kind", copy=False)
                np.frombuffer(view, dtype=tensor.dtype)[:] = value.reshape(-1)
        except Exception:
            _log.exception("simulated model body failed")
            fail(_MODEL_EXECUTE)

    return run


def _record_error(mdl: Any, code: int, api: str) -> None:
    mdl._core.record_error(code, api)


# Functions of pyACL's acl.mdl the simulator neither models nor lists in UNSUPPORTED.
attach_unmodelled(Mdl, "acl.mdl", _record_error, skip=frozenset(UNSUPPORTED))
