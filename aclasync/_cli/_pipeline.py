"""The demo: a double-buffered, multi-device pipeline driven from one event loop.

Each item goes host→device copy → kernel → device→host copy. Per device, one
*transfer* stream carries both copies and one *compute* stream runs the kernels;
events order the stages across the two streams (recorded with
``record_event_nowait``, so ordering costs no worker round trip). Two buffer slots
per device let the upload of item k+1 and the download of item k overlap the kernel
of item k. The kernel's body does real numpy work (``tanh(x @ W)``) on simulated
device memory and lasts a modelled ``kernel_us``; every result is checked against the
same computation done on the host.

What the compute step is depends on the runtime and the options:

- ``sim-kernel`` (the default where ``acl.sim`` exists): the numpy kernel above;
- ``memset`` (the default on CANN's ``acl``, or asked for): pyACL alone, a calibrated
  ``memset_async`` workload of ``kernel_us`` (``_workload``) and a device-to-device copy
  of the input into the output, so every result must come back unchanged;
- ``model=True``: a simulated offline model, registered (``acl.sim.register_model``) in
  a temporary directory with the kernel's body; each device loads it
  (``dev.load_model``) and queues it on the compute stream over the slot's device
  buffers (``Model.launch``), so the data never leaves the device;
- ``model_path``: an offline model of the user's (a real ``.om`` on CANN), run the same
  way on inputs drawn per item; aclasync cannot know its answers, so the outputs are
  copied back but not checked.

With ``on_stage``, every stage (upload, compute, download) is bracketed by timing
events and reported on the host's clock, from the device's own timestamps: how the
trace draws one track per stream without the simulator's task observer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np

from .._backend import resolve_backend
from .._buffers import DeviceBuffer, HostBuffer
from .._device import Device, open_device
from .._event import Event
from .._model import Model, TensorInfo
from .._pyacl.constants import MemcpyKind
from .._stream import Stream
from ._common import sim_runtime
from ._loops import temporary_directory
from ._workload import Workload, default_kind, time_model

__all__ = ["COMPUTES", "SLOTS", "PipelineProgress", "StageSpan", "run_pipeline"]

#: Buffer slots per device: one item uploads or downloads while another computes.
SLOTS = 2
#: What the compute step can be (see the module docstring).
COMPUTES = ("sim-kernel", "memset", "model")

#: ``on_stage(device, stream, stage, start, finish)``: a stage's span, in
#: ``time.monotonic()`` seconds, on the stream named ``"transfer"`` or ``"compute"``.
StageSpan = Callable[[int, str, str, float, float], None]


@dataclasses.dataclass
class PipelineProgress:
    """Live counters of a pipeline run, passed to the ``progress`` callback."""

    total: int
    done: int = 0
    per_device: dict[int, int] = dataclasses.field(default_factory=dict)
    mismatches: int = 0
    started: float = dataclasses.field(default_factory=time.perf_counter)
    #: What each device's compute step was and how it was calibrated (``describe()``).
    workloads: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Slot:
    host_in: list[HostBuffer]
    host_out: list[HostBuffer]
    dev_in: list[DeviceBuffer]
    dev_out: list[DeviceBuffer]
    item: int = -1
    events: tuple[Event, ...] = ()
    #: With ``on_stage``: (stream, stage, start event, end event) per stage.
    stages: list[tuple[str, str, Event, Event]] = dataclasses.field(default_factory=list)


def item_input(item: int, size: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The deterministic input matrix of *item*."""
    rng = np.random.default_rng(item)
    return rng.standard_normal((size, size), dtype=np.float32)


def model_inputs(item: int, tensors: tuple[TensorInfo, ...]) -> list[np.ndarray[Any, Any]]:
    """Deterministic inputs of *item* for a model with these input tensors."""
    rng = np.random.default_rng(item)
    arrays = []
    for tensor in tensors:
        if tensor.dtype is None:  # a type numpy lacks (bf16, say): its bytes
            arrays.append(rng.integers(0, 256, tensor.nbytes, dtype=np.uint8))
        elif tensor.dtype.kind == "f":
            arrays.append(rng.standard_normal(tensor.shape).astype(tensor.dtype))
        elif tensor.dtype.kind in "iu":
            arrays.append(rng.integers(0, 16, tensor.shape).astype(tensor.dtype))
        else:
            arrays.append(np.zeros(tensor.shape, tensor.dtype))
    return arrays


def weights(size: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    rng = np.random.default_rng(2**31 - 1)
    w = rng.standard_normal((size, size), dtype=np.float32)
    w /= np.float32(np.sqrt(size))
    return w


def compute(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], out: np.ndarray[Any, Any]) -> None:
    """The kernel's work; the host reference runs exactly the same operations."""
    np.tanh(x @ w, out=out)


def model_body(w: np.ndarray[Any, Any], x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The demo model's body: the kernel's work, into a new output array."""
    out = np.empty((x.shape[0], w.shape[1]), dtype=np.float32)
    compute(x, w, out)
    return out


def register_demo_model(
    backend: object, directory: str, w: np.ndarray[Any, Any], duration_us: float
) -> str:
    """Register the demo model on simulated runtime *backend*; return its model file's path.

    The spec file is written into *directory*; the model takes one ``x`` and gives one
    ``y``, both ``size`` x ``size`` float32, and each execution lasts at least
    *duration_us*. Raises ``RuntimeError`` if *backend* is not a simulated runtime.
    """
    sim = getattr(backend, "sim", None)
    if sim is None:
        raise RuntimeError(
            "the demo's model needs a simulated runtime: backend=None or aclasync.sim.create()"
        )
    size = w.shape[0]
    path: str = sim.register_model(
        os.path.join(directory, "demo.om"),
        inputs=[("x", (size, size), "float32")],
        outputs=[("y", (size, size), "float32")],
        fn=functools.partial(model_body, w),
        duration_us=duration_us,
    )
    return path


def host_reference(item: int, w: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """What the device must have computed for *item*, computed on the host."""
    size = w.shape[0]
    expected = np.empty((size, size), dtype=np.float32)
    compute(item_input(item, size), w, expected)
    return expected


async def run_pipeline(
    *,
    devices: int = 4,
    items: int = 256,
    backend: object = None,
    kernel_us: float = 5000.0,
    size: int = 64,
    progress: Callable[[PipelineProgress], None] | None = None,
    on_ready: Callable[[int], None] | None = None,
    model: bool = False,
    model_path: str | None = None,
    workload: str | None = None,
    on_stage: StageSpan | None = None,
) -> dict[str, Any]:
    """Run the pipeline over *devices* devices and return its figures.

    ``backend=None`` uses a fresh simulator with enough devices; ``"native"`` (or any
    ``open_device`` backend) runs on that. ``progress`` is called in the event loop
    after each finished item, ``on_ready(device_id)`` once a device has its streams and
    buffers (the end of its set-up). Cancellation stops the run; every device is closed
    (its queued work finished) before it propagates. ``model=True`` runs the compute
    step as a registered simulated model, ``model_path`` as the model in that file, and
    *workload* (``"sim-kernel"`` or ``"memset"``) chooses the compute step otherwise
    (default: ``_workload.default_kind`` of the runtime); see the module docstring. The
    registered model's temporary directory is removed before this returns, also on
    error or cancellation.

    Raises
    ------
    RuntimeError
        If any checked result differs from what it must be.
    """
    if devices < 1 or items < 1 or size < 1 or kernel_us < 0:
        raise ValueError("devices, items and size must be >= 1 and kernel_us >= 0")
    if model and model_path is not None:
        raise ValueError("model=True registers a simulated model; model_path loads one: not both")
    own_runtime = backend is None
    if own_runtime:
        backend = sim_runtime(devices)
    if model or model_path is not None:
        compute_kind = "model"
    elif workload is not None:
        if workload not in COMPUTES[:2]:
            raise ValueError(f"unknown workload {workload!r}; expected sim-kernel or memset")
        compute_kind = workload
    else:
        compute_kind = default_kind(resolve_backend(backend)[0])
    state = PipelineProgress(total=items, per_device=dict.fromkeys(range(devices), 0))
    w = weights(size)
    started = time.perf_counter()
    try:
        with contextlib.ExitStack() as stack:
            if model:
                directory = stack.enter_context(temporary_directory())
                model_path = register_demo_model(backend, directory, w, kernel_us)
            async with anyio.create_task_group() as tg:
                for device_id in range(devices):
                    share = range(device_id, items, devices)  # lazy: no memory per item
                    pipeline = _DevicePipeline(
                        device_id,
                        share,
                        backend,
                        w,
                        kernel_us,
                        state,
                        progress,
                        on_ready,
                        compute_kind,
                        model_path,
                        checked=model_path is None or model,
                        on_stage=on_stage,
                    )
                    tg.start_soon(pipeline.run)
    finally:
        if own_runtime:
            backend.sim.close()  # type: ignore[attr-defined]
    seconds = time.perf_counter() - started
    if state.mismatches:
        raise RuntimeError(f"{state.mismatches} of {items} results differ from the host reference")
    per_device = [
        {
            "device": d,
            "items": n,
            "items_per_s": n / seconds,
            "utilisation": n * _busy_us(state.workloads.get(d), kernel_us) / 1e6 / seconds,
        }
        for d, n in state.per_device.items()
    ]
    checked = model_path is None or model
    return {
        "devices": devices,
        "items": items,
        "verified": state.done if checked else 0,
        "checked": checked,
        "seconds": seconds,
        "items_per_s": items / seconds,
        "kernel_us": kernel_us,
        "compute": compute_kind,
        "model_path": None if model else model_path,
        "size": size,
        "per_device": per_device,
        "workloads": {str(d): state.workloads[d] for d in sorted(state.workloads)},
    }


@dataclasses.dataclass
class _DevicePipeline:
    """One device's share of the items and what it needs to process them."""

    device_id: int
    share: range
    backend: object
    w: np.ndarray[Any, Any]
    kernel_us: float
    state: PipelineProgress
    progress: Callable[[PipelineProgress], None] | None
    on_ready: Callable[[int], None] | None
    #: One of ``COMPUTES``.
    compute_kind: str
    #: The model's file, or None for the other compute steps.
    model_path: str | None = None
    #: Whether results are compared with what they must be (not for a user's model).
    checked: bool = True
    on_stage: StageSpan | None = None
    _model: Model | None = dataclasses.field(default=None, init=False)
    _workload: Workload | None = dataclasses.field(default=None, init=False)
    _anchor: tuple[Event, float] | None = dataclasses.field(default=None, init=False)

    async def run(self) -> None:
        if not self.share:
            return
        async with open_device(self.device_id, backend=self.backend) as dev:
            if self.compute_kind == "sim-kernel" and not hasattr(dev.acl, "sim"):
                raise RuntimeError("the demo's kernels need the simulator (backend='sim')")
            if self.model_path is None:
                self._workload = await Workload.calibrate(dev, kind=self.compute_kind)
                self.state.workloads[self.device_id] = self._workload.describe()
                await self._process(dev)
                return
            async with dev.load_model(self.model_path) as model:  # closed before the device
                self._model = model
                await self._process(dev)

    async def _process(self, dev: Device[Any]) -> None:
        transfer = await dev.create_stream()
        compute_stream = await dev.create_stream()
        if self._model is not None:
            ins, outs = self._model.inputs, self._model.outputs
            if any(d < 0 for t in (*ins, *outs) for d in t.shape):
                raise ValueError(
                    f"{self.model_path}: the demo runs models of static shapes only, "
                    f"this one has dynamic dimensions ({_shapes(ins)} -> {_shapes(outs)})"
                )
        else:
            size = self.w.shape[0]
            ins = outs = (TensorInfo("x", (size, size), np.dtype(np.float32), size * size * 4),)
        slots = [await _slot(dev, ins, outs) for _ in range(SLOTS)]
        if self._workload is not None:
            await self._workload.prepare(compute_stream)
        if self._model is not None:
            if self.checked:  # registered here: its time is the modelled one
                described = {"kind": "model", "path": None, "execute_us": self.kernel_us}
            else:
                took = await time_model(
                    self._model, compute_stream, slots[0].dev_in, slots[0].dev_out
                )
                described = {"kind": "model", "path": self.model_path, "execute_us": took}
            described.update(inputs=_shapes(ins), outputs=_shapes(outs))
            self.state.workloads[self.device_id] = described
        if self.on_stage is not None:
            anchor = await transfer.record_event(timing=True)
            await anchor.synchronize()
            self._anchor = (anchor, time.monotonic())
        if self.on_ready is not None:
            self.on_ready(self.device_id)
        # Uploads run one item ahead of downloads, so that the transfer stream never
        # holds an upload behind a download waiting for the running kernel.
        uploaded: deque[_Slot] = deque()
        in_flight: deque[_Slot] = deque()
        last = len(self.share) - 1
        for k, item in enumerate(self.share):
            slot = slots[k % SLOTS]
            if slot.events:
                await self._finish(in_flight.popleft())
            slot.item = item
            self._fill_inputs(slot, ins)
            await self._upload_and_compute(dev, transfer, compute_stream, slot)
            uploaded.append(slot)
            if len(uploaded) == SLOTS or k == last:
                in_flight.append(await self._download(transfer, uploaded.popleft()))
        while uploaded:
            in_flight.append(await self._download(transfer, uploaded.popleft()))
        while in_flight:
            await self._finish(in_flight.popleft())
        if self._anchor is not None:
            await self._anchor[0].aclose()
        await transfer.aclose()
        await compute_stream.aclose()

    def _fill_inputs(self, slot: _Slot, tensors: tuple[TensorInfo, ...]) -> None:
        if self._model is not None and self.model_path is not None and not self.checked:
            arrays = model_inputs(slot.item, tensors)
        else:
            arrays = [item_input(slot.item, self.w.shape[0])]
        for host, array, tensor in zip(slot.host_in, arrays, tensors, strict=True):
            if tensor.dtype is None:
                host.view(np.uint8, tensor.nbytes)[...] = array
            else:
                host.view(tensor.dtype, tensor.shape)[...] = array

    async def _upload_and_compute(
        self, dev: Device[Any], transfer: Stream, compute_stream: Stream, slot: _Slot
    ) -> None:
        begun = await self._mark(transfer)
        for device, host in zip(slot.dev_in, slot.host_in, strict=True):
            transfer.memcpy(device, host)
        uploaded = await _record(transfer, timing=begun is not None)
        compute_stream.wait_event(uploaded)
        started = await self._mark(compute_stream)
        if self._model is not None:
            self._model.launch(compute_stream, slot.dev_in, slot.dev_out)
        elif self.compute_kind == "memset":
            assert self._workload is not None
            self._workload.launch(compute_stream, self.kernel_us)
            dst, src = slot.dev_out[0], slot.dev_in[0]
            compute_stream.launch(
                dev.acl.rt.memcpy_async,
                dst.ptr,
                dst.nbytes,
                src.ptr,
                src.nbytes,
                int(MemcpyKind.DEVICE_TO_DEVICE),
            )
        else:
            self._launch_kernel(dev, compute_stream, slot)
        computed = await _record(compute_stream, timing=started is not None)
        slot.events = (uploaded, computed)
        if begun is not None and started is not None:
            slot.stages = [
                ("transfer", "upload", begun, uploaded),
                ("compute", "compute", started, computed),
            ]

    def _launch_kernel(self, dev: Device[Any], compute_stream: Stream, slot: _Slot) -> None:
        from ..sim import Kernel

        w = self.w
        size = w.shape[0]
        acl = dev.acl
        dev_in, dev_out = slot.dev_in[0].ptr, slot.dev_out[0].ptr

        def body() -> None:
            x = acl.sim.device_array(dev_in, (size, size), np.float32)
            out = acl.sim.device_array(dev_out, (size, size), np.float32)
            compute(x, w, out)

        compute_stream.launch(acl.sim.launch_kernel, Kernel(duration_us=self.kernel_us, fn=body))

    async def _download(self, transfer: Stream, slot: _Slot) -> _Slot:
        transfer.wait_event(slot.events[-1])
        begun = await self._mark(transfer)
        for host, device in zip(slot.host_out, slot.dev_out, strict=True):
            transfer.memcpy(host, device)
        downloaded = await _record(transfer, timing=begun is not None)
        slot.events = (*slot.events, downloaded)
        if begun is not None:
            slot.stages.append(("transfer", "download", begun, downloaded))
        return slot

    async def _mark(self, stream: Stream) -> Event | None:
        """A timing event now on *stream* when stages are reported, else None."""
        return None if self.on_stage is None else await _record(stream, timing=True)

    async def _finish(self, slot: _Slot) -> None:
        await slot.events[-1].synchronize()
        state = self.state
        if self.checked:
            size = self.w.shape[0]
            got = slot.host_out[0].view(np.float32, (size, size))
            if self.compute_kind == "memset":
                expected = item_input(slot.item, size)  # copied through unchanged
            else:
                expected = host_reference(slot.item, self.w)
            if not np.array_equal(got, expected):
                state.mismatches += 1
        if slot.stages:
            await self._report_stages(slot)
        for event in slot.events:
            await event.aclose()
        slot.events = ()
        state.done += 1
        state.per_device[self.device_id] += 1
        if self.progress is not None:
            self.progress(state)

    async def _report_stages(self, slot: _Slot) -> None:
        """Hand each stage's span to ``on_stage``, placed by the device's timestamps."""
        assert self.on_stage is not None
        assert self._anchor is not None
        anchor, anchored_at = self._anchor
        for stream_name, stage, start, end in slot.stages:
            begins = anchored_at + await anchor.elapsed_time(start) / 1e3
            ends = anchored_at + await anchor.elapsed_time(end) / 1e3
            self.on_stage(self.device_id, stream_name, f"{stage} item {slot.item}", begins, ends)
        for _, _, start, _ in slot.stages:
            if start not in slot.events:
                await start.aclose()
        slot.stages = []


async def _slot(
    dev: Device[Any], ins: tuple[TensorInfo, ...], outs: tuple[TensorInfo, ...]
) -> _Slot:
    return _Slot(
        host_in=[await dev.alloc_host(t.nbytes) for t in ins],
        host_out=[await dev.alloc_host(t.nbytes) for t in outs],
        dev_in=[await dev.alloc(t.nbytes) for t in ins],
        dev_out=[await dev.alloc(t.nbytes) for t in outs],
    )


def _busy_us(workload: dict[str, Any] | None, kernel_us: float) -> float:
    """Device time of one compute step: a user's model's measured one, else *kernel_us*."""
    if workload is not None and "execute_us" in workload and workload.get("path"):
        return float(workload["execute_us"])
    return kernel_us


def describe_tensor(tensor: TensorInfo) -> str:
    """``name shape dtype``; the ACL data type's number where numpy has no dtype."""
    kind = tensor.dtype if tensor.dtype is not None else f"ACL data type {tensor.data_type}"
    return f"{tensor.name} {tensor.shape} {kind}"


def _shapes(tensors: tuple[TensorInfo, ...]) -> str:
    return ", ".join(describe_tensor(t) for t in tensors)


async def _record(stream: Stream, *, timing: bool = False) -> Event:
    """An event after the work queued so far on *stream*; no worker round trip when the
    device has one ready (``record_event_nowait``), as it has after the first few."""
    try:
        return stream.record_event_nowait(timing=timing)
    except anyio.WouldBlock:
        return await stream.record_event(timing=timing)
