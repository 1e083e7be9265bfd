"""Device and pinned host memory owned by a device, freed when closed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import numpy as np

from ._errors import raise_for_status
from ._factory import AsyncResource

if TYPE_CHECKING:
    from ._device import Device

__all__ = ["DeviceBuffer", "HostBuffer"]


class _Buffer(AsyncResource):
    _free_api = ""

    def __init__(self, device: Device, ptr: int, nbytes: int) -> None:
        self._device = device
        self._ptr = ptr
        self._nbytes = nbytes
        self._closed = False

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        kind = type(self).__name__
        where = f"{self._ptr:#x} nbytes={self._nbytes} device={self._device.id}"
        return f"<aclasync.{kind} {where}{state}>"

    @property
    def ptr(self) -> int:
        """The address, as pyACL calls take it."""
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        return self._ptr

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @property
    def device(self) -> Device:
        return self._device

    async def aclose(self) -> None:
        """Free the memory on the device worker. Idempotent; survives cancellation.

        Like ``acl.rt.free``, this does not wait for queued work that still uses it.
        """
        if self._closed:
            await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        device = self._device
        device._buffers.discard(self)
        if device._gone:
            await anyio.lowlevel.checkpoint()
            return
        free = getattr(device.acl.rt, self._free_api)
        ptr = self._ptr
        with anyio.CancelScope(shield=True):
            ret = await device._roundtrip(lambda: free(ptr))
        raise_for_status(ret, f"acl.rt.{self._free_api}", device=device.id)


class DeviceBuffer(_Buffer):
    """Device memory from ``await dev.alloc(nbytes)`` (``acl.rt.malloc``)."""

    _free_api = "free"


class HostBuffer(_Buffer):
    """Pinned host memory from ``await dev.alloc_host(nbytes)`` (``acl.rt.malloc_host``)."""

    _free_api = "free_host"

    def __init__(self, device: Device, ptr: int, nbytes: int) -> None:
        super().__init__(device, ptr, nbytes)
        self._array: np.ndarray[Any, np.dtype[np.uint8]] = device.acl.util.ptr_to_numpy(
            ptr, (nbytes,), np.dtype(np.uint8).num
        )

    def view(self, dtype: Any = np.uint8, shape: int | tuple[int, ...] | None = None) -> Any:
        """A numpy array over the buffer (no copy); valid until the buffer is closed."""
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        array = self._array.view(np.dtype(dtype))
        return array if shape is None else array.reshape(shape)
