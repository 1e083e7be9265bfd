"""The Serve deployments ``bench serve-ray`` measures (imported only where Ray Serve is).

Three ways to serve one model from one NPU per replica, behind ``@serve.batch`` with the
same batch size and wait; a request is ``{"x": K}`` and its answer ``{"y": 2K + 1,
"in_flight": n, "batch": b}``: the batches the replica had on the NPU when the request's
batch ran, and that batch's size.

- ``Batches``: ``max_concurrent_batches=BATCHES``; a batch borrows a stream from
  ``dev.stream_pool(BATCHES)`` and awaits ``model.run`` (aclasync).
- ``OneBatch``: the same with ``max_concurrent_batches=1``.
- ``ToThread``: ``max_concurrent_batches=BATCHES``; a batch runs the model with blocking
  pyACL calls (copy in, ``acl.mdl.execute_async``, ``acl.rt.synchronize_stream``, copy
  out) inside ``asyncio.to_thread``, on buffers and a stream of its own, which is Ray
  Serve's advice for a handler that blocks.

The model is a simulated one whose spec file names :func:`model` (see
:func:`write_model`), so the replicas, in their own processes, load it by path.
"""

from __future__ import annotations

import asyncio
import json
import queue
from pathlib import Path
from typing import Any

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from aclasync.ray import NpuActor, assigned_npus, logical_device

from ._common import expect

__all__ = ["BATCHES", "DEPLOYMENTS", "MAX_BATCH", "model", "write_model"]

#: Requests per batch, and the batches ``Batches`` and ``ToThread`` run at once.
MAX_BATCH, BATCHES = 8, 4
BATCH_WAIT_S = 0.005
FEATURES = 16
H2D, D2H = 1, 2


def model(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """What the simulated NPU computes."""
    y: np.ndarray[Any, Any] = x * np.float32(2) + np.float32(1)
    return y


def write_model(path: Path, duration_us: float) -> None:
    """Write the model's spec file: one batch takes *duration_us* of NPU time."""
    spec = {
        "format": "aclasync.sim.model",
        "version": 1,
        "fn": f"{__name__}:model",
        "inputs": [["x", [MAX_BATCH, FEATURES], "float32"]],
        "outputs": [["y", [MAX_BATCH, FEATURES], "float32"]],
        "duration_us": duration_us,
        "batch_sizes": [],
    }
    path.write_text(json.dumps(spec))


def _batch(rows: list[float]) -> np.ndarray[Any, Any]:
    batch = np.zeros((MAX_BATCH, FEATURES), dtype=np.float32)
    batch[: len(rows)] = np.asarray(rows, dtype=np.float32)[:, None]
    return batch


def _answers(y: np.ndarray[Any, Any], count: int, in_flight: int) -> list[dict[str, Any]]:
    facts = {"in_flight": in_flight, "batch": count}
    return [{"y": float(y[i, 0]), **facts} for i in range(count)]


async def _parse(request: Request) -> float:
    return float((await request.json())["x"])


_OPTIONS: dict[str, Any] = {
    "ray_actor_options": {"resources": {"NPU": 1}, "num_cpus": 0},
    "max_ongoing_requests": 2 * MAX_BATCH * BATCHES,
}


class _Awaiting(NpuActor):
    """A replica that runs its batches with ``await model.run`` on a borrowed stream."""

    async def _open(self, model_path: str, streams: int) -> None:
        dev = await self.device()
        self.model = await dev.load_model(model_path)
        self.pool = await dev.stream_pool(streams)
        self.in_flight = 0

    async def _run(self, rows: list[float]) -> list[dict[str, Any]]:
        async with self.pool.stream() as stream:
            self.in_flight += 1
            in_flight = self.in_flight
            try:
                (y,) = await self.model.run(stream, _batch(rows))
            finally:
                self.in_flight -= 1
        return _answers(y, len(rows), in_flight)

    async def __del__(self) -> None:
        await self.pool.aclose()
        await self.model.aclose()
        await self.close()


@serve.deployment(**_OPTIONS)
class Batches(_Awaiting):
    # Serve awaits an async __init__ before the replica takes requests.
    async def __init__(self, model_path: str) -> None:  # type: ignore[misc]
        super().__init__(backend="sim")  # the replica's process-wide simulated runtime
        await self._open(model_path, BATCHES)

    @serve.batch(
        max_batch_size=MAX_BATCH, batch_wait_timeout_s=BATCH_WAIT_S, max_concurrent_batches=BATCHES
    )
    async def infer(self, rows: list[float]) -> list[dict[str, Any]]:
        return await self._run(rows)

    async def __call__(self, request: Request) -> JSONResponse:
        return JSONResponse(await self.infer(await _parse(request)))


@serve.deployment(**_OPTIONS)
class OneBatch(_Awaiting):
    async def __init__(self, model_path: str) -> None:  # type: ignore[misc]
        super().__init__(backend="sim")
        await self._open(model_path, 1)

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=BATCH_WAIT_S)
    async def infer(self, rows: list[float]) -> list[dict[str, Any]]:
        return await self._run(rows)

    async def __call__(self, request: Request) -> JSONResponse:
        return JSONResponse(await self.infer(await _parse(request)))


@serve.deployment(**_OPTIONS)
class ToThread:
    """Blocking pyACL in ``asyncio.to_thread``: what Ray Serve advises for a blocking call."""

    async def __init__(self, model_path: str) -> None:  # type: ignore[misc]
        from aclasync.sim import acl

        device = logical_device(assigned_npus()[0])
        self.raw = await asyncio.to_thread(_RawModel, acl, device, model_path, BATCHES)
        self.in_flight = 0

    @serve.batch(
        max_batch_size=MAX_BATCH, batch_wait_timeout_s=BATCH_WAIT_S, max_concurrent_batches=BATCHES
    )
    async def infer(self, rows: list[float]) -> list[dict[str, Any]]:
        self.in_flight += 1
        in_flight = self.in_flight
        try:
            y = await asyncio.to_thread(self.raw.run, _batch(rows))
        finally:
            self.in_flight -= 1
        return _answers(y, len(rows), in_flight)

    async def __call__(self, request: Request) -> JSONResponse:
        return JSONResponse(await self.infer(await _parse(request)))

    async def __del__(self) -> None:
        await asyncio.to_thread(self.raw.close)


#: The variants, by the name the benchmark reports them under.
DEPLOYMENTS: dict[str, Any] = {
    f"aclasync, {BATCHES} batches": Batches,
    "aclasync, 1 batch": OneBatch,
    f"to_thread, {BATCHES} batches": ToThread,
}


class _RawModel:
    """Plain pyACL, as a synchronous service has it: per slot, buffers and a stream."""

    def __init__(self, acl: Any, device: int, path: str, slots: int) -> None:
        rt = acl.rt
        self.acl, self.device = acl, device
        expect(rt.set_device(device), "acl.rt.set_device")
        self.context, ret = rt.get_context()
        expect(ret, "acl.rt.get_context")
        self.model_id, ret = acl.mdl.load_from_file(path)
        expect(ret, "acl.mdl.load_from_file")
        self.nbytes = MAX_BATCH * FEATURES * 4
        self.slots: queue.Queue[_Slot] = queue.Queue()
        self.made: list[_Slot] = []
        for _ in range(slots):
            slot = _Slot(acl, self.nbytes)
            self.made.append(slot)
            self.slots.put(slot)

    def run(self, batch: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Copy in, execute, wait for the stream, copy out; blocks the calling thread."""
        acl, rt = self.acl, self.acl.rt
        expect(rt.set_context(self.context), "acl.rt.set_context")
        slot = self.slots.get()
        try:
            host = np.ascontiguousarray(batch)
            src = acl.util.numpy_to_ptr(host)
            expect(rt.memcpy(slot.dev_in, self.nbytes, src, self.nbytes, H2D), "acl.rt.memcpy")
            expect(
                acl.mdl.execute_async(self.model_id, slot.inputs, slot.outputs, slot.stream),
                "acl.mdl.execute_async",
            )
            expect(rt.synchronize_stream(slot.stream), "acl.rt.synchronize_stream")
            y = np.empty_like(host)
            dst = acl.util.numpy_to_ptr(y)
            expect(rt.memcpy(dst, self.nbytes, slot.dev_out, self.nbytes, D2H), "acl.rt.memcpy")
            return y
        finally:
            self.slots.put(slot)

    def close(self) -> None:
        acl, rt = self.acl, self.acl.rt
        expect(rt.set_context(self.context), "acl.rt.set_context")
        for slot in self.made:
            slot.close(acl)
        expect(acl.mdl.unload(self.model_id), "acl.mdl.unload")
        expect(rt.reset_device(self.device), "acl.rt.reset_device")


class _Slot:
    """Device memory in and out, their datasets, and a stream (on the current context)."""

    def __init__(self, acl: Any, nbytes: int) -> None:
        rt, mdl = acl.rt, acl.mdl
        self.stream, ret = rt.create_stream()
        expect(ret, "acl.rt.create_stream")
        self.dev_in, ret = rt.malloc(nbytes, 0)
        expect(ret, "acl.rt.malloc")
        self.dev_out, ret = rt.malloc(nbytes, 0)
        expect(ret, "acl.rt.malloc")
        self.buffers = [acl.create_data_buffer(p, nbytes) for p in (self.dev_in, self.dev_out)]
        self.inputs, self.outputs = mdl.create_dataset(), mdl.create_dataset()
        for dataset, buffer in zip((self.inputs, self.outputs), self.buffers, strict=True):
            expect(mdl.add_dataset_buffer(dataset, buffer)[1], "acl.mdl.add_dataset_buffer")

    def close(self, acl: Any) -> None:
        rt = acl.rt
        for dataset in (self.inputs, self.outputs):
            expect(acl.mdl.destroy_dataset(dataset), "acl.mdl.destroy_dataset")
        for buffer in self.buffers:
            expect(acl.destroy_data_buffer(buffer), "acl.destroy_data_buffer")
        for ptr in (self.dev_in, self.dev_out):
            expect(rt.free(ptr), "acl.rt.free")
        expect(rt.destroy_stream(self.stream), "acl.rt.destroy_stream")
