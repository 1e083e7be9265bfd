"""``acl.mdl``: loading simulated models and executing them on streams.

Codes and where they come from (details in ``docs/simulator.md``): 145003
(ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, ``model_manager.cc`` "model id does not exist")
for a model id not loaded; 145002 (…_MODEL_PATH_INVALID) for an unreadable file;
145000 (ACL_ERROR_GE_PARAM_INVALID) for a file that is no model and for datasets whose
buffers do not fit the model; 145013 (…_DYNAMIC_BATCH_SIZE_INVALID) for a gear the
model does not offer or an execution with none chosen; 100000 for null or unknown
handles; 507011 (ACL_ERROR_RT_MODEL_EXECUTE), from the stream's next sync, when the
model body fails.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._pyacl.codes import ErrorCode
from ._args import parsed
from ._calls import CallGroup
from ._core import Core, wait_for_tasks
from ._mdl_dataset import DatasetCalls
from ._mdl_desc import DescCalls
from ._mdl_exec import adopt_outputs, allocate_outputs, body, plan
from ._mdl_file import importable_name, read_document, spec_document
from ._mdl_gears import GearCalls
from ._mdl_spec import ModelSpec, SpecError, build_spec
from ._mdl_state import ModelRegistry
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
_GE_PARAM_INVALID = int(ErrorCode.ACL_ERROR_GE_PARAM_INVALID)
_PATH_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
_MODEL_ID_INVALID = int(ErrorCode.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID)


class Mdl(CallGroup, DescCalls, DatasetCalls, GearCalls, _MdlSurface):
    """The ``acl.mdl`` namespace of a simulated runtime."""

    def __init__(self, core: Core, models: ModelRegistry) -> None:
        super().__init__(core)
        self._models = models

    # -- loading ---------------------------------------------------------------------

    @parsed("acl.mdl.load_from_file")
    def load_from_file(self, model_path: str, /) -> tuple[int, int]:
        """Load the model a spec file (or a registration of its path) declares."""
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

    @parsed("acl.mdl.load_from_mem")
    def load_from_mem(self, model: int, model_size: int, /) -> tuple[int, int]:
        """Load from *model_size* bytes of host memory at *model* (a spec file's bytes)."""
        if model == 0 or model_size == 0:
            return 0, _INVALID_PARAM
        if self._core.context is None:
            return 0, _CONTEXT_NULL
        data = self._host_bytes(model, model_size)
        if data is None:
            return 0, _INVALID_PARAM
        return self._load_bytes(data)

    @parsed("acl.mdl.unload")
    def unload(self, model_id: int, /) -> int:
        with self._models.lock:
            found = self._models.models.pop(model_id, None)
        return _MODEL_ID_INVALID if found is None else _OK

    @parsed("acl.mdl.get_desc_from_file")
    def get_desc_from_file(self, model_desc: int, model_path: str, /) -> int:
        """Fill *model_desc* from a spec file without loading it (cleared first, as in ACL)."""
        if not self._clear_desc(model_desc):
            return _INVALID_PARAM
        spec = self._models.registrations.get(os.path.realpath(model_path))
        if spec is None:
            try:
                with open(model_path, "rb") as file:
                    data = file.read()
            except OSError:
                return _PATH_INVALID
            return self._describe(model_desc, data)
        return self._fill(model_desc, spec)

    @parsed("acl.mdl.get_desc_from_mem")
    def get_desc_from_mem(self, model_desc: int, model: int, model_size: int, /) -> int:
        """Fill *model_desc* from a spec file's bytes in host memory, without loading it.

        Once the arguments pass ACL's null and zero checks the description is cleared,
        so a failure leaves it empty.
        """
        if model_desc not in self._models.descs or model == 0 or model_size == 0:
            return _INVALID_PARAM
        self._clear_desc(model_desc)
        data = self._host_bytes(model, model_size)
        if data is None:
            return _INVALID_PARAM
        return self._describe(model_desc, data)

    def _clear_desc(self, model_desc: int) -> bool:
        """Empty *model_desc* (``aclmdlDesc::Clear``); False if there is no such description."""
        desc = self._models.descs.get(model_desc)
        if desc is None:
            return False
        desc.clear()
        return True

    def _host_bytes(self, address: int, size: int) -> bytes | None:
        with self._core.lock:
            view, device_id, _ = self._core.resolve(address, size, write=False)
        if view is None or device_id is not None:  # the model's bytes live on the host
            return None
        return bytes(view)

    def _load_bytes(self, data: bytes) -> tuple[int, int]:
        try:
            spec = read_document(data, self._models.registrations)
        except SpecError as exc:
            _log.warning("acl.mdl load failed: %s", exc)
            return 0, _GE_PARAM_INVALID
        return self._models.add_model(spec), _OK

    def _describe(self, model_desc: int, data: bytes) -> int:
        try:
            spec = read_document(data, self._models.registrations)
        except SpecError:
            return _GE_PARAM_INVALID
        return self._fill(model_desc, spec)

    def _fill(self, model_desc: int, spec: ModelSpec) -> int:
        desc = self._models.descs.get(model_desc)
        if desc is None:
            return _INVALID_PARAM
        desc.model_id, desc.spec = 0, spec
        return _OK

    # -- execution -------------------------------------------------------------------

    @parsed("acl.mdl.execute")
    def execute(self, model_id: int, input: int, output: int, /) -> int:
        """Run the model and wait for it (on the current context's default stream).

        Output buffers without memory (``create_data_buffer(0, 0)``) get device memory,
        as ACL's synchronous execution gives them: the output's size, or a dynamic-shape
        output's real size; the buffer then holds its address and size, and the caller
        frees it with ``acl.rt.free``.
        """
        _, stream, ret = self._resolve_stream(0)
        if stream is None:
            return ret
        ret = allocate_outputs(self._core, self._models, model_id, input, output)
        if ret != _OK:
            return ret
        planned, ret = plan(self._core, self._models, model_id, input, output, synchronous=True)
        if planned is None:
            return ret
        failure: list[int] = []
        task = Task(stream, "model", duration=planned.spec.duration_us / 1e6)
        task.fn = body(planned, self._models, failure.append)
        ret = self._submit(stream, task)
        if ret != _OK:
            return ret
        wait_for_tasks(self._core, [task], None)
        if failure:
            return failure[0]
        return adopt_outputs(self._core, self._models, planned)

    @parsed("acl.mdl.execute_async")
    def execute_async(self, model_id: int, input: int, output: int, stream: int, /) -> int:
        """Queue the model on *stream*; a failing body surfaces at the stream's next sync."""
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        planned, ret = plan(self._core, self._models, model_id, input, output)
        if planned is None:
            return ret
        task = Task(found, "model", duration=planned.spec.duration_us / 1e6)

        def fail(code: int) -> None:
            task.error = code

        task.fn = body(planned, self._models, fail)
        return self._submit(found, task)


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
        dynamic_hw: Iterable[Sequence[int]] = (),
        dynamic_dims: Iterable[Sequence[int]] = (),
    ) -> str:
        """Declare the model that ``acl.mdl.load_from_file(path)`` loads in this runtime.

        Parameters
        ----------
        path:
            The model file client code names. A spec file naming this registration is
            written there unless a file already exists (the file is never overwritten);
            when *fn* can be imported by name (``package.module:function``), the file
            names it too, so that code in another process can load the same file.
        inputs, outputs:
            Lists of ``(name, shape, dtype)``. ``-1`` in a shape is a dynamic dimension
            (see the dynamic modes below); in a model without gears a dimension may
            also be a ``(low, high)`` range (``high`` ``-1``: unbounded).
        fn:
            ``fn(*inputs) -> output array or sequence of arrays``, run on a simulated
            core when the model executes, with the inputs in the shapes chosen for the
            execution; it must return the outputs' shapes (a dynamic-shape model's
            outputs may take any shape their declaration allows) and dtypes.
        duration_us:
            Device time each execution takes at least.
        batch_sizes:
            Dynamic batch (ATC ``--dynamic_batch_size``): every shape starts with
            ``-1``; chosen with ``acl.mdl.set_dynamic_batch_size``.
        dynamic_hw:
            Dynamic image size (ATC ``--dynamic_image_size``): ``(h, w)`` gears; an
            input's two ``-1`` dimensions are its height and width; chosen with
            ``acl.mdl.set_dynamic_hw_size``.
        dynamic_dims:
            Dynamic dims (ATC ``--dynamic_dims``): gears of values for the ``-1``
            dimensions of all inputs, in order; chosen with
            ``acl.mdl.set_input_dynamic_dims``.

        Notes
        -----
        With any of the three, the model has one more input, ``ascend_mbatch_shape_data``,
        last, and an output's ``-1`` dimensions take the gear's values in order. A model
        with ``-1`` dimensions and none of them has dynamic shapes: inputs take their
        shapes from the input dataset's tensor descriptions
        (``acl.mdl.set_dataset_tensor_desc``) and the outputs' real shapes are in the
        output dataset's after execution (``acl.mdl.get_dataset_tensor_desc``).

        Returns
        -------
        str
            The resolved path, which also keys the registration. Raises ``TypeError``
            or ``ValueError`` for a declaration that describes no model, and
            ``OSError`` if the spec file cannot be written (nothing is registered then).
        """
        spec = build_spec(inputs, outputs, fn, duration_us, batch_sizes, dynamic_hw, dynamic_dims)
        key = os.path.realpath(os.fspath(path))
        try:
            with open(key, "xb") as file:
                file.write(spec_document(spec, registration=key, fn=importable_name(fn)))
        except FileExistsError:
            pass
        with self._models.lock:
            self._models.registrations[key] = spec
        return key

    def model_objects(self) -> dict[str, int]:
        """``{"models", "model_descs", "datasets", "data_buffers"}``: how many are alive."""
        return self._models.counts()


attach_unmodelled(Mdl, "acl.mdl")
