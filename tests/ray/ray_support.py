"""Actor classes for the Ray tests (importable, so Ray can ship them)."""

from __future__ import annotations

import os
import threading

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
