"""The demo: a double-buffered, multi-device pipeline driven from one event loop.

Each item goes host→device copy → kernel → device→host copy. Per device, one
*transfer* stream carries both copies and one *compute* stream runs the kernels;
events order the stages across the two streams (recorded with
``record_event_nowait``, so ordering costs no worker round trip). Two buffer slots
per device let the upload of item k+1 and the download of item k overlap the kernel
of item k. The kernel's body does real numpy work (``tanh(x @ W)``) on simulated
device memory and lasts a modelled ``kernel_us``; every result is checked against the
same computation done on the host.

With ``model=True`` the compute step is a simulated offline model instead: the run
registers one (``acl.sim.register_model``) in a temporary directory, whose body is the
kernel's, each device loads it (``dev.load_model``) and queues it on the compute stream
over the slot's device buffers (``Model.launch``), so the data never leaves the device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np

from .._device import Device, open_device
from .._event import Event
from .._model import Model
from .._stream import Stream

__all__ = ["SLOTS", "PipelineProgress", "run_pipeline"]

#: Buffer slots per device: one item uploads or downloads while another computes.
SLOTS = 2


@dataclasses.dataclass
class PipelineProgress:
    """Live counters of a pipeline run, passed to the ``progress`` callback."""

    total: int
    done: int = 0
    per_device: dict[int, int] = dataclasses.field(default_factory=dict)
    mismatches: int = 0
    started: float = dataclasses.field(default_factory=time.perf_counter)


@dataclasses.dataclass
class _Slot:
    host_in: Any
    host_out: Any
    dev_in: Any
    dev_out: Any
    item: int = -1
    events: tuple[Event, ...] = ()


def item_input(item: int, size: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The deterministic input matrix of *item*."""
    rng = np.random.default_rng(item)
    return rng.standard_normal((size, size), dtype=np.float32)


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
) -> dict[str, Any]:
    """Run the pipeline over *devices* devices and return its figures.

    ``backend=None`` uses a fresh simulator with enough devices. ``progress`` is
    called in the event loop after each finished item, ``on_ready(device_id)`` once a
    device has its streams and buffers (the end of its set-up). Cancellation stops
    the run; every device is closed (its queued work finished) before it propagates.
    ``model=True`` runs the compute step as a registered simulated model (see the
    module docstring); its temporary directory is removed before this returns, also
    on error or cancellation.

    Raises
    ------
    RuntimeError
        If any result differs from the host reference.
    """
    if devices < 1 or items < 1 or size < 1 or kernel_us < 0:
        raise ValueError("devices, items and size must be >= 1 and kernel_us >= 0")
    own_runtime = backend is None
    if own_runtime:
        from .. import sim

        backend = sim.create(device_count=devices)
    state = PipelineProgress(total=items, per_device=dict.fromkeys(range(devices), 0))
    w = weights(size)
    started = time.perf_counter()
    try:
        with contextlib.ExitStack() as stack:
            model_path = None
            if model:
                directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="aclasync-"))
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
                        model_path,
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
            "utilisation": n * kernel_us / 1e6 / seconds,
        }
        for d, n in state.per_device.items()
    ]
    return {
        "devices": devices,
        "items": items,
        "verified": state.done,
        "seconds": seconds,
        "items_per_s": items / seconds,
        "kernel_us": kernel_us,
        "compute": "model" if model else "kernel",
        "size": size,
        "per_device": per_device,
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
    #: The registered model's file, or None for the kernel.
    model_path: str | None = None
    _model: Model | None = dataclasses.field(default=None, init=False)

    async def run(self) -> None:
        if not self.share:
            return
        async with open_device(self.device_id, backend=self.backend) as dev:
            if not hasattr(dev.acl, "sim"):
                raise RuntimeError("the demo's kernels need the simulator (backend='sim')")
            if self.model_path is None:
                await self._process(dev)
                return
            async with dev.load_model(self.model_path) as model:  # closed before the device
                self._model = model
                await self._process(dev)

    async def _process(self, dev: Device[Any]) -> None:
        size = self.w.shape[0]
        nbytes = size * size * 4
        transfer = await dev.create_stream()
        compute_stream = await dev.create_stream()
        slots = [
            _Slot(
                host_in=await dev.alloc_host(nbytes),
                host_out=await dev.alloc_host(nbytes),
                dev_in=await dev.alloc(nbytes),
                dev_out=await dev.alloc(nbytes),
            )
            for _ in range(SLOTS)
        ]
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
            slot.host_in.view(np.float32, (size, size))[...] = item_input(item, size)
            await self._upload_and_compute(dev, transfer, compute_stream, slot)
            uploaded.append(slot)
            if len(uploaded) == SLOTS or k == last:
                in_flight.append(await _download(transfer, uploaded.popleft()))
        while uploaded:
            in_flight.append(await _download(transfer, uploaded.popleft()))
        while in_flight:
            await self._finish(in_flight.popleft())
        await transfer.aclose()
        await compute_stream.aclose()

    async def _upload_and_compute(
        self, dev: Device[Any], transfer: Stream, compute_stream: Stream, slot: _Slot
    ) -> None:
        from ..sim import Kernel

        transfer.memcpy(slot.dev_in, slot.host_in)
        uploaded = await _record(transfer)
        compute_stream.wait_event(uploaded)
        if self._model is not None:
            self._model.launch(compute_stream, [slot.dev_in], [slot.dev_out])
            computed = await _record(compute_stream)
            slot.events = (uploaded, computed)
            return
        w = self.w
        size = w.shape[0]
        acl = dev.acl
        dev_in, dev_out = slot.dev_in.ptr, slot.dev_out.ptr

        def body() -> None:
            x = acl.sim.device_array(dev_in, (size, size), np.float32)
            out = acl.sim.device_array(dev_out, (size, size), np.float32)
            compute(x, w, out)

        compute_stream.launch(acl.sim.launch_kernel, Kernel(duration_us=self.kernel_us, fn=body))
        computed = await _record(compute_stream)
        slot.events = (uploaded, computed)

    async def _finish(self, slot: _Slot) -> None:
        await slot.events[-1].synchronize()
        size = self.w.shape[0]
        got = slot.host_out.view(np.float32, (size, size))
        expected = host_reference(slot.item, self.w)
        state = self.state
        if not np.array_equal(got, expected):
            state.mismatches += 1
        for event in slot.events:
            await event.aclose()
        slot.events = ()
        state.done += 1
        state.per_device[self.device_id] += 1
        if self.progress is not None:
            self.progress(state)


async def _record(stream: Stream) -> Event:
    """An event after the work queued so far on *stream*; no worker round trip when the
    device has one ready (``record_event_nowait``), as it has after the first few."""
    try:
        return stream.record_event_nowait()
    except anyio.WouldBlock:
        return await stream.record_event()


async def _download(transfer: Stream, slot: _Slot) -> _Slot:
    transfer.wait_event(slot.events[-1])
    transfer.memcpy(slot.host_out, slot.dev_out)
    downloaded = await _record(transfer)
    slot.events = (*slot.events, downloaded)
    return slot
