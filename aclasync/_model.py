"""Offline models: ``async with dev.load_model(path) as model`` and ``await model.run``.

``Model`` drives ``acl.mdl`` and ``acl.*`` data-buffer calls through the public
``Device``/``Stream``/buffer API only, so the simulator and a real ``.om`` on CANN take
the same path; it never touches ``acl.sim``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import numpy as np

from ._buffers import DeviceBuffer, HostBuffer
from ._errors import AclError, raise_for_status
from ._factory import AsyncResource, Creation
from ._pyacl.codes import ErrorCode
from ._pyacl.dtypes import to_numpy
from ._stream import Stream

if TYPE_CHECKING:
    from ._device import Device
    from ._pyacl.backend import AclBackend

__all__ = ["Model", "ModelLoading", "TensorInfo"]

#: Reported when a create call returns the null handle, as ACL does for bad arguments.
_INVALID_PARAM = int(ErrorCode.ACL_ERROR_INVALID_PARAM)


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One model input or output as the model description reports it.

    ``shape`` holds ``-1`` for a dynamic dimension; ``nbytes`` is the buffer size the
    model asks for (``acl.mdl.get_input_size_by_index``).
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    nbytes: int


class ModelLoading(Creation["Model"]):
    """What ``Device.load_model()`` returns: await it, or use it with ``async with``."""

    def __init__(
        self, device: Device, path: str | os.PathLike[str], pool_size: int | None = None
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        if pool_size is not None and (
            isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1
        ):
            raise ValueError(f"pool_size must be None or an int >= 1, got {pool_size!r}")
        self._device = device
        self._path = os.fspath(path)
        self._pool_size = pool_size

    async def _create(self) -> Model:
        device = self._device
        acl = device.acl
        path = self._path
        with anyio.CancelScope(shield=True):
            model_id, desc, inputs, outputs, api, ret = await device.call(_load, acl, path)
        raise_for_status(ret, api, device=device.id)
        model = Model._create(device, model_id, desc, inputs, outputs, self._pool_size)
        await anyio.lowlevel.checkpoint_if_cancelled()
        return model


class Model(AsyncResource):
    """A loaded model. Get one from ``dev.load_model(path)``.

    Input and output buffers (device memory, pinned host staging and their datasets)
    are pooled: ``run`` takes a set, returns it when done, and makes a new one only when
    all are busy. Without ``pool_size`` the pool grows to the peak number of concurrent
    ``run`` calls; with it, at most ``pool_size`` runs hold a set and the others wait.
    """

    def __init__(
        self,
        device: Device,
        model_id: int,
        desc: int,
        inputs: tuple[TensorInfo, ...],
        outputs: tuple[TensorInfo, ...],
        pool_size: int | None = None,
    ) -> None:
        self._device = device
        self._limit = None if pool_size is None else anyio.Semaphore(pool_size)
        self._id = model_id
        self._desc = desc
        self._inputs = inputs
        self._outputs = outputs
        self._free: list[_Slot] = []
        self._slots: list[_Slot] = []
        self._streams: set[Stream] = set()
        self._closed = False

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<aclasync.Model {self._id} device={self._device.id}{state}>"

    @property
    def id(self) -> int:
        """The model id ``acl.mdl.load_from_file`` gave."""
        return self._id

    @property
    def inputs(self) -> tuple[TensorInfo, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorInfo, ...]:
        return self._outputs

    @property
    def closed(self) -> bool:
        return self._closed

    async def run(self, stream: Stream, *arrays: Any) -> list[np.ndarray[Any, Any]]:
        """Run the model on *arrays* and return its outputs as new numpy arrays.

        Checks the count, shape and dtype of *arrays* before anything is queued
        (``ValueError``/``TypeError``), copies them in on *stream*, queues
        ``acl.mdl.execute_async`` and the copies out, and awaits the stream. An ACL
        failure raises ``AclError``. Cancellation abandons the wait; the device work
        carries on. After a cancellation or an error the buffers the run used are set
        aside (their work may still be queued) and released when the model is closed.
        """
        self._check_stream(stream)
        inputs = self._check_arrays(arrays)
        if self._limit is None:
            return await self._run(stream, inputs)
        async with self._limit:
            return await self._run(stream, inputs)

    def launch(
        self, stream: Stream, inputs: Sequence[DeviceBuffer], outputs: Sequence[DeviceBuffer]
    ) -> None:
        """Queue the model on *stream* over device buffers; return at once.

        Synchronous and non-blocking, for pipelines that keep data on the device: the
        datasets are built, used and destroyed on the device worker in stream order.
        Buffer counts and sizes are checked here (``ValueError``); an ACL failure is
        raised by the next awaited operation on *stream*.
        """
        self._check_stream(stream)
        ins = _buffer_args("inputs", inputs, self._inputs, self._device)
        outs = _buffer_args("outputs", outputs, self._outputs, self._device)
        self._streams.add(stream)
        stream.launch(_execute_on(self._device.acl), self._id, ins, outs)

    async def aclose(self) -> None:
        """Release the pooled buffers and unload the model. Idempotent; survives cancellation.

        First waits for the work queued so far on the streams the model was used on
        (cancelled runs may still be using their buffers); an ACL error pending on one
        of them is raised once everything is released. Close models before their
        device; a model whose device is closed or broken only marks itself closed.
        """
        if self._closed:
            await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        device = self._device
        slots, self._slots, self._free = self._slots, [], []
        streams, self._streams = self._streams, set()
        if device.closed:
            await anyio.lowlevel.checkpoint()
            return
        pending: AclError | None = None
        with anyio.CancelScope(shield=True):
            for stream in streams:
                if stream.closed:
                    continue
                try:
                    await stream.synchronize()
                except AclError as exc:
                    pending = pending or exc
                except anyio.BrokenResourceError:
                    return  # nothing can be released through a dead worker
            handles = [(s.in_ds, s.out_ds, s.data_buffers) for s in slots]
            api, ret = await device.call(_unload, device.acl, self._id, self._desc, handles)
            for slot in slots:
                for buffer in slot.buffers():
                    await buffer.aclose()
        if pending is not None:
            raise pending
        raise_for_status(ret, api, device=device.id)

    # -- helpers ---------------------------------------------------------------------

    def _check_stream(self, stream: Stream) -> None:
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        if not isinstance(stream, Stream):
            raise TypeError(f"stream must be an aclasync.Stream, got {type(stream).__name__}")
        if stream.device is not self._device:
            raise ValueError(f"{stream!r} belongs to another device than {self!r}")

    def _check_arrays(self, arrays: Sequence[Any]) -> list[np.ndarray[Any, Any]]:
        if len(arrays) != len(self._inputs):
            raise ValueError(f"the model takes {len(self._inputs)} inputs, got {len(arrays)}")
        checked = []
        for tensor, value in zip(self._inputs, arrays, strict=True):
            if -1 in tensor.shape:
                raise ValueError(
                    f"input {tensor.name!r} has a dynamic shape {tensor.shape}; "
                    "Model.run takes static shapes only"
                )
            array = np.asarray(value)
            if array.dtype != tensor.dtype:
                raise TypeError(
                    f"input {tensor.name!r} must have dtype {tensor.dtype}, got {array.dtype}"
                )
            if array.shape != tensor.shape:
                raise ValueError(
                    f"input {tensor.name!r} must have shape {tensor.shape}, got {array.shape}"
                )
            checked.append(array)
        return checked

    async def _run(self, stream: Stream, inputs: list[np.ndarray[Any, Any]]) -> list[Any]:
        if self._closed:  # closed while this run waited for the pool
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        slot = await self._take_slot()
        self._streams.add(stream)
        reusable = False
        try:
            for array, host, target in zip(inputs, slot.host_in, slot.dev_in, strict=True):
                host.view(array.dtype, array.shape)[...] = array
                stream.memcpy(target, host)
            stream.launch(self._device.acl.mdl.execute_async, self._id, slot.in_ds, slot.out_ds)
            for source, host in zip(slot.dev_out, slot.host_out, strict=True):
                stream.memcpy(host, source)
            await stream.synchronize()
            results = [
                host.view(t.dtype, t.shape).copy()
                for t, host in zip(self._outputs, slot.host_out, strict=True)
            ]
            reusable = True
            return results
        finally:
            if reusable and not self._closed:
                self._free.append(slot)

    async def _take_slot(self) -> _Slot:
        if self._free:
            slot = self._free.pop()  # before the checkpoint: another task may come next
            try:
                await anyio.lowlevel.checkpoint()
            except BaseException:
                self._free.append(slot)
                raise
            return slot
        device = self._device
        with anyio.CancelScope(shield=True):
            slot = _Slot()
            self._slots.append(slot)
            for tensor in self._inputs:
                slot.dev_in.append(await device.alloc(tensor.nbytes))
                slot.host_in.append(await device.alloc_host(tensor.nbytes))
            for tensor in self._outputs:
                slot.dev_out.append(await device.alloc(tensor.nbytes))
                slot.host_out.append(await device.alloc_host(tensor.nbytes))
            ins = tuple((b.ptr, b.nbytes) for b in slot.dev_in)
            outs = tuple((b.ptr, b.nbytes) for b in slot.dev_out)
            in_ds, out_ds, data_buffers, api, ret = await device.call(
                _datasets, device.acl, ins, outs
            )
            slot.in_ds, slot.out_ds, slot.data_buffers = in_ds, out_ds, data_buffers
        raise_for_status(ret, api, device=device.id)
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            self._free.append(slot)  # made but never used: ready for the next run
            raise
        return slot


class _Slot:
    """One set of pooled buffers: device and host memory per tensor, and two datasets."""

    def __init__(self) -> None:
        self.dev_in: list[DeviceBuffer] = []
        self.host_in: list[HostBuffer] = []
        self.dev_out: list[DeviceBuffer] = []
        self.host_out: list[HostBuffer] = []
        self.in_ds = 0
        self.out_ds = 0
        self.data_buffers: tuple[int, ...] = ()

    def buffers(self) -> list[DeviceBuffer | HostBuffer]:
        return [*self.dev_in, *self.host_in, *self.dev_out, *self.host_out]


# -- calls made on the device worker (plain pyACL, any backend) ----------------------


def _load(
    acl: AclBackend, path: str
) -> tuple[int, int, tuple[TensorInfo, ...], tuple[TensorInfo, ...], str, int]:
    """Load *path* and read its description; on failure, undo what was done."""
    model_id, ret = acl.mdl.load_from_file(path)
    if ret:
        return 0, 0, (), (), "acl.mdl.load_from_file", ret
    desc = acl.mdl.create_desc()
    ret = acl.mdl.get_desc(desc, model_id) if desc else int(_INVALID_PARAM)
    if ret:
        if desc:
            acl.mdl.destroy_desc(desc)
        acl.mdl.unload(model_id)
        return 0, 0, (), (), "acl.mdl.get_desc", ret
    try:
        inputs = tuple(_tensor(acl, desc, i, True) for i in range(acl.mdl.get_num_inputs(desc)))
        outputs = tuple(_tensor(acl, desc, i, False) for i in range(acl.mdl.get_num_outputs(desc)))
    except ValueError:
        acl.mdl.destroy_desc(desc)
        acl.mdl.unload(model_id)
        raise
    return model_id, desc, inputs, outputs, "", 0


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
    return TensorInfo(str(name), tuple(int(d) for d in dims["dims"]), to_numpy(data_type), nbytes)


def _datasets(
    acl: AclBackend, ins: tuple[tuple[int, int], ...], outs: tuple[tuple[int, int], ...]
) -> tuple[int, int, tuple[int, ...], str, int]:
    """Create an input and an output dataset over (pointer, size) pairs."""
    made: list[int] = []
    datasets: list[int] = []
    for pairs in (ins, outs):
        dataset = acl.mdl.create_dataset()
        if not dataset:
            _destroy(acl, datasets, made)
            return 0, 0, (), "acl.mdl.create_dataset", _INVALID_PARAM
        datasets.append(dataset)
        for ptr, size in pairs:
            buffer = acl.create_data_buffer(ptr, size)
            if not buffer:
                _destroy(acl, datasets, made)
                return 0, 0, (), "acl.create_data_buffer", _INVALID_PARAM
            made.append(buffer)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
            if ret:
                _destroy(acl, datasets, made)
                return 0, 0, (), "acl.mdl.add_dataset_buffer", ret
    return datasets[0], datasets[1], tuple(made), "", 0


def _destroy(acl: AclBackend, datasets: Sequence[int], buffers: Sequence[int]) -> int:
    """Destroy datasets and data buffers; return the first failure code (0 if none)."""
    codes = [acl.mdl.destroy_dataset(d) for d in datasets]
    codes += [acl.destroy_data_buffer(b) for b in buffers]
    return next((int(c) for c in codes if c), 0)


def _unload(
    acl: AclBackend, model_id: int, desc: int, slots: Sequence[tuple[int, int, tuple[int, ...]]]
) -> tuple[str, int]:
    """Destroy the pooled datasets, the description and unload; report the first failure."""
    results = [
        ("acl.mdl.destroy_dataset", _destroy(acl, [d for d in (i, o) if d], b)) for i, o, b in slots
    ]
    results.append(("acl.mdl.destroy_desc", int(acl.mdl.destroy_desc(desc))))
    results.append(("acl.mdl.unload", int(acl.mdl.unload(model_id))))
    return next(((api, ret) for api, ret in results if ret), ("", 0))


def _execute_on(acl: AclBackend) -> Any:
    """``execute_async`` over (pointer, size) pairs, with datasets made for the call."""

    def execute_async(
        model_id: int,
        ins: tuple[tuple[int, int], ...],
        outs: tuple[tuple[int, int], ...],
        stream: int,
    ) -> int:
        in_ds, out_ds, buffers, _, ret = _datasets(acl, ins, outs)
        if ret:
            return ret
        try:
            return int(acl.mdl.execute_async(model_id, in_ds, out_ds, stream))
        finally:
            _destroy(acl, (in_ds, out_ds), buffers)

    execute_async.__module__ = "acl.mdl"  # how the worker names the call in errors
    return execute_async


def _buffer_args(
    what: str, buffers: Sequence[DeviceBuffer], tensors: Sequence[TensorInfo], device: Device
) -> tuple[tuple[int, int], ...]:
    if isinstance(buffers, (DeviceBuffer, HostBuffer)) or len(buffers) != len(tensors):
        raise ValueError(f"{what}: the model takes {len(tensors)} buffers")
    pairs = []
    for tensor, buffer in zip(tensors, buffers, strict=True):
        if not isinstance(buffer, DeviceBuffer):
            raise TypeError(f"{what}: expected DeviceBuffer, got {type(buffer).__name__}")
        if buffer.device is not device:
            raise ValueError(f"{what}: {buffer!r} is memory of another device")
        if buffer.nbytes < tensor.nbytes:
            raise ValueError(
                f"{what}: {tensor.name!r} needs {tensor.nbytes} bytes, {buffer!r} has fewer"
            )
        pairs.append((buffer.ptr, tensor.nbytes))
    return tuple(pairs)
