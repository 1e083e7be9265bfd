"""Actor classes for the Ray tests (importable, so Ray can ship them)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import ray

from aclasync.ray import NpuActor
from aclasync.sim import Kernel


@ray.remote(resources={"NPU": 1}, num_cpus=0)
class Squarer(NpuActor):
    """Squares a vector on its NPU: upload, a kernel on the device memory, download."""

    async def square(self, values: list[float]) -> list[float]:
        dev = await self.device()
        data = np.asarray(values, dtype=np.float64)
        async with (
            dev.create_stream() as stream,
            await dev.alloc_host(data.nbytes) as host,
            await dev.alloc(data.nbytes) as device_memory,
        ):
            host.view(np.float64, data.shape)[...] = data
            stream.memcpy(device_memory, host)
            acl, ptr, shape = dev.acl, device_memory.ptr, data.shape

            def body() -> None:
                view = acl.sim.device_array(ptr, shape, np.float64)
                view *= view

            stream.launch(acl.sim.launch_kernel, Kernel(duration_us=1_000, fn=body))
            stream.memcpy(host, device_memory)
            await stream.synchronize()
            result: list[float] = host.view(np.float64, shape).tolist()
            return result

    async def fail(self, code: int) -> None:
        dev = await self.device()
        async with dev.create_stream() as stream:
            stream.launch(dev.acl.sim.launch_kernel, Kernel(error=code))
            await stream.synchronize()

    async def hold(self, seconds: float) -> int:
        """Keep a kernel running for *seconds* of device time; returns the actor's pid."""
        dev = await self.device()
        async with dev.create_stream() as stream:
            stream.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=seconds * 1e6))
            await stream.synchronize()
        return os.getpid()

    async def threads(self) -> list[str]:
        return sorted(t.name for t in threading.enumerate())

    async def device_is_open(self) -> bool:
        return self._device is not None and not self._device.closed


@ray.remote(resources={"NPU": 1}, num_cpus=0, concurrency_groups={"control": 1})
class TwoLoops(NpuActor):
    """Opens its device from two event loops: the default group's and ``control``'s.

    The first open, on the default loop, waits inside its turn (in the
    ``_closed_meanwhile`` hook) until a call on the ``control`` loop waits for it.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inside = threading.Event()
        self.release = threading.Event()

    def _closed_meanwhile(self) -> bool:
        self.inside.set()
        self.release.wait(30)  # blocks the default loop's thread only
        return super()._closed_meanwhile()

    async def open(self) -> int:
        await self.device()
        return threading.get_ident()

    @ray.method(concurrency_group="control")
    async def open_meanwhile(self) -> int:
        if not await asyncio.to_thread(self.inside.wait, 30):
            raise RuntimeError("the first open never got under way")
        opening = asyncio.ensure_future(self.device())
        await asyncio.sleep(0)  # it ran up to its wait for the first open
        self.release.set()
        await opening
        return threading.get_ident()


@ray.remote(resources={"NPU": 1}, num_cpus=0, max_restarts=1)
class CrashOnce(NpuActor):
    """Its process exits on the item ``"crash"`` if the file *marker* does not exist
    yet (it makes it first): Ray restarts it once, and the item then succeeds."""

    def __init__(self, marker: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.marker = marker

    async def work(self, item: object) -> tuple[object, int]:
        if item == "crash" and _made(self.marker):
            os._exit(1)
        await self.synchronize()
        return item, os.getpid()


def _made(marker: str) -> bool:
    """Make the file *marker*: False if it existed already."""
    try:
        Path(marker).touch(exist_ok=False)
    except FileExistsError:
        return False
    return True
