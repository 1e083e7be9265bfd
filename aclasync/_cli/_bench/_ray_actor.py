"""The actor of ``bench ray`` (imported only when Ray is installed)."""

from __future__ import annotations

from typing import Any

from aclasync.ray import NpuActor
from aclasync.sim import Kernel

__all__ = ["ItemActor"]


class ItemActor(NpuActor):
    """Runs each item as one kernel of *kernel_us* on its one stream, then waits for it.

    One stream per actor: items queue behind each other on the device, so an item
    really holds the actor's NPU for its whole kernel time.
    """

    def __init__(self, *, kernel_us: float) -> None:
        super().__init__(backend="sim")
        self._kernel = Kernel(duration_us=kernel_us)
        self._stream: Any = None

    async def item(self, index: int) -> int:
        dev = await self.device()
        if self._stream is None:
            self._stream = await dev.create_stream()
        self._stream.launch(dev.acl.sim.launch_kernel, self._kernel)
        done = await self._stream.record_event()
        await done.synchronize()
        await done.aclose()
        return index
