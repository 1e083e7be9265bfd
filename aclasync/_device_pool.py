"""DevicePool: several devices opened together, lending their streams from one queue."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from types import TracebackType

import anyio
import anyio.lowlevel

from ._device import Device, open_device
from ._pyacl.constants import StreamFlag
from ._stream import Stream
from ._stream_pool import PoolStatistics, StreamPool, _ToCompletion, stream_pool

__all__ = ["DevicePool"]


class DevicePool:
    """Open devices and lend their streams: ``async with pool.stream() as s``.

    ``async with aclasync.DevicePool([0, 1], backend="sim", streams_per_device=4) as
    pool`` opens every device (as ``open_device`` does) and creates its streams;
    leaving closes the pool (waiting for borrowed streams) and then the devices.
    Borrowers are served strictly in arrival order from one queue, and each grant
    comes from the least busy device that has a free stream; the streams of a device
    that closed or broke are dropped, and the others lend on. The pool belongs to the
    event loop that opened it, as a ``StreamPool`` does. A pool closed (``aclose``)
    before it was opened never opens: ``async with`` then raises
    ``anyio.ClosedResourceError`` and opens nothing.

    Parameters
    ----------
    device_ids:
        The devices to open; distinct non-negative ints, at least one.
    backend:
        As for ``open_device``: ``"sim"``, ``"native"``, a pyACL-shaped object or
        ``None``.
    streams_per_device:
        Streams created on each device.
    flags:
        ``StreamFlag`` for every stream (e.g. ``StreamFlag.FAST_SYNC``).
    """

    def __init__(
        self,
        device_ids: Iterable[int],
        *,
        backend: object = None,
        streams_per_device: int = 1,
        flags: StreamFlag | int = 0,
    ) -> None:
        if isinstance(device_ids, (str, bytes)) or not isinstance(device_ids, Iterable):
            raise TypeError("device_ids must be an iterable of ints")
        ids = list(device_ids)
        for device_id in ids:
            if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
                raise ValueError(f"device_ids must be non-negative ints, got {device_id!r}")
        if not ids:
            raise ValueError("device_ids must name at least one device")
        if len(set(ids)) != len(ids):
            raise ValueError(f"device_ids must be distinct, got {ids}")
        # Checks the other arguments now; the pool itself is built once devices are open.
        stream_pool((), streams_per_device, flags=flags, size_name="streams_per_device")
        self._ids = ids
        self._backend = backend
        self._per_device = streams_per_device
        self._flags = int(flags)
        self._exits = contextlib.AsyncExitStack()
        self._devices: list[Device] = []
        self._pool: StreamPool | None = None
        self._entered = False
        self._close_done: anyio.Event | None = None

    def __repr__(self) -> str:
        return f"<aclasync.DevicePool devices={self._ids} streams_per_device={self._per_device}>"

    @property
    def devices(self) -> tuple[Device, ...]:
        """The open devices, in the order of ``device_ids``."""
        return tuple(self._devices)

    @property
    def pool(self) -> StreamPool:
        """The ``StreamPool`` over every device's streams."""
        if self._pool is None:
            raise RuntimeError(f"{self!r} is not open; use 'async with'")
        return self._pool

    def stream(self) -> contextlib.AbstractAsyncContextManager[Stream]:
        """Borrow a stream: see ``StreamPool.stream``."""
        return self.pool.stream()

    def statistics(self) -> PoolStatistics:
        """Return a snapshot of the pool's counters; never blocks."""
        return self.pool.statistics()

    async def __aenter__(self) -> DevicePool:
        if self._close_done is not None:
            raise anyio.ClosedResourceError(f"{self!r} was closed: a closed pool never opens")
        if self._entered:
            raise RuntimeError(f"{self!r} was already opened")
        self._entered = True
        try:
            for device_id in self._ids:
                device = await self._exits.enter_async_context(
                    open_device(device_id, backend=self._backend)
                )
                self._devices.append(device)
            pool = stream_pool(self._devices, self._per_device, flags=self._flags)
            self._pool = await pool
            self._exits.push_async_callback(pool.aclose)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._exits.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self, *, timeout: float | None = None) -> None:
        """Close the pool (see ``StreamPool.aclose``), then every device. Idempotent: a
        call while another is under way returns when that one is complete.

        With ``timeout`` (seconds), borrowers still holding a stream after that long are
        cancelled (they get ``anyio.ClosedResourceError``) and their streams
        force-closed; without it the close waits for every lent stream to come back.
        The devices' close then waits for kernels already running (a force-close drops
        queued work only). Runs to completion even when cancelled (asyncio's own
        ``task.cancel()`` too: then raised once the close is complete). Raises
        ``RuntimeError`` at once, closing nothing, when called by a task from inside
        one of its own borrows.
        """
        if self._pool is not None:
            self._pool._refuse_own_borrow()
        if self._close_done is not None:  # a second caller: wait for the first
            await _ToCompletion().finish(self._close_done.wait)
            await anyio.lowlevel.checkpoint()
            return
        done = self._close_done = anyio.Event()
        try:
            try:
                if self._pool is not None:  # (runs to completion by itself)
                    await self._pool.aclose(timeout=timeout)
            finally:
                await _ToCompletion().finish(self._exits.aclose)
        finally:
            done.set()
        await anyio.lowlevel.checkpoint()
