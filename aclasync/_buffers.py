"""Device and pinned host memory owned by a device, freed when closed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import numpy as np

from ._factory import AsyncResource

if TYPE_CHECKING:
    from ._device import Device
    from ._device_state import DeviceState

__all__ = ["DeviceBuffer", "HostBuffer"]


class _Buffer(AsyncResource):
    def __init__(self, device: Device, state: DeviceState, ptr: int, nbytes: int) -> None:
        self._device = device
        self._state = state
        self._ptr = ptr
        self._nbytes = nbytes
        self._closed = False

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        kind = type(self).__name__
        where = f"{self._ptr:#x} nbytes={self._nbytes} device={self._state.device_id}"
        return f"<aclasync.{kind} {where}{state}>"

    @property
    def ptr(self) -> int:
        """The address, as pyACL calls take it.

        Raises ``anyio.ClosedResourceError`` once the buffer or its device is closed,
        and ``DeviceBrokenError`` once the device's worker died (which freed it).
        """
        self._check_open()
        return self._ptr

    @property
    def nbytes(self) -> int:
        """The size in bytes, as allocated."""
        return self._nbytes

    @property
    def device(self) -> Device:
        """The device that owns this memory."""
        return self._device

    @property
    def closed(self) -> bool:
        """Whether the buffer, or its device, is closed (the memory is freed then)."""
        return self._closed or self._state.closed

    async def aclose(self) -> None:
        """Free the memory on the device worker. Idempotent; survives cancellation (the
        memory is freed, then the cancellation goes on).

        Like ``acl.rt.free``, this does not wait for queued work that still uses it.
        Quiet once the device is closed or broken: the device freed the memory then.
        """
        if self._closed:
            await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        await self._state.free(self._ptr)
        await anyio.lowlevel.checkpoint_if_cancelled()  # freed: a cancellation goes on

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        self._state.check_open()


class DeviceBuffer(_Buffer):
    """Device memory from ``await dev.alloc(nbytes)`` (``acl.rt.malloc``)."""


class HostBuffer(_Buffer):
    """Pinned host memory from ``await dev.alloc_host(nbytes)`` (``acl.rt.malloc_host``)."""

    def __init__(self, device: Device, state: DeviceState, ptr: int, nbytes: int) -> None:
        super().__init__(device, state, ptr, nbytes)
        self._array: np.ndarray[Any, np.dtype[np.uint8]] = state.acl.util.ptr_to_numpy(
            ptr, (nbytes,), np.dtype(np.uint8).num
        )

    def view(self, dtype: Any = np.uint8, shape: int | tuple[int, ...] | None = None) -> Any:
        """A numpy array over the buffer (no copy); valid until the buffer is closed.

        Raises ``anyio.ClosedResourceError`` once the buffer or its device is closed.
        """
        self._check_open()
        array = self._array.view(np.dtype(dtype))
        return array if shape is None else array.reshape(shape)
