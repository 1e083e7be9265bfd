"""DevicePool: several devices opened together, lending their streams from one queue."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType

import anyio
import anyio.lowlevel

from ._device import Device, open_device
from ._errors import raise_closing, report
from ._loop import failure, to_completion
from ._pyacl.constants import StreamFlag
from ._stream import Stream
from ._stream_pool import PoolStatistics, StreamPool, stream_pool
from ._waits import check_timeout

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import ExceptionGroup

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
        self._devices: list[Device] = []
        self._pool: StreamPool | None = None
        self._entered = False
        self._opening: anyio.Event | None = None  # set when the opening has ended
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
            raise RuntimeError(f"{self!r} was entered before: a pool opens once, make a new one")
        self._entered = True
        opening = self._opening = anyio.Event()
        try:
            for device_id in self._ids:
                self._devices.append(await open_device(device_id, backend=self._backend))
                self._refuse_if_closed()
            pool = stream_pool(self._devices, self._per_device, flags=self._flags)
            self._pool = await pool
            self._refuse_if_closed()
        except BaseException as exc:
            errors, cancelled = await self._close_all(None, exc)
            report(errors, exc)
            if cancelled is not None:  # (asyncio's own, during the clean-up) it goes on
                raise cancelled from exc
            raise
        finally:
            opening.set()
        return self

    def _refuse_if_closed(self) -> None:
        """Raise ``ClosedResourceError`` if ``aclose`` was called while the pool opened."""
        if self._close_done is not None:
            raise anyio.ClosedResourceError(f"{self!r} was closed while it opened")

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close as ``aclose()`` does; while *exc* propagates, what the close finds is
        added to it as notes and never replaces it (errors rule 6)."""
        await self._close(None, exc)

    async def aclose(self, *, timeout: float | None = None) -> None:
        """Close the pool (see ``StreamPool.aclose``), then every device. Idempotent: a
        call while another is under way returns when that one is complete; a call
        while the pool opens waits for the opening, which then fails with
        ``anyio.ClosedResourceError`` and closes what it opened.

        With ``timeout`` (seconds), borrowers still holding a stream after that long are
        cancelled (they get ``anyio.ClosedResourceError``) and their streams
        force-closed; without it the close waits for every lent stream to come back.
        The devices' close then waits for kernels already running (a force-close drops
        queued work only). Raises what the pool's and the devices' closes found (one
        failure as itself, several as an ``ExceptionGroup``). Runs to completion even
        when cancelled (asyncio's own ``task.cancel()`` too: then raised once the close
        is complete, with those failures as notes). Raises ``RuntimeError`` at once,
        closing nothing, when called by a task from inside one of its own borrows.
        """
        await self._close(check_timeout(timeout), None)

    async def _close(self, timeout: float | None, propagating: BaseException | None) -> None:
        if self._pool is not None:
            self._pool._refuse_own_borrow()
        errors: list[BaseException] = []
        if self._close_done is not None:  # a second caller: wait for the first
            _, cancelled = await to_completion(self._close_done.wait)
        else:
            done = self._close_done = anyio.Event()
            try:
                _, cancelled = await to_completion(self._opened)
                errors, cancelled_later = await self._close_all(timeout, propagating)
            finally:
                done.set()
            cancelled = cancelled or cancelled_later
        await raise_closing(errors, cancelled, propagating)

    async def _opened(self) -> None:
        """Return once an opening under way has ended (it sees the close and fails)."""
        if self._opening is not None:
            await self._opening.wait()

    async def _close_all(
        self, timeout: float | None, propagating: BaseException | None
    ) -> tuple[list[BaseException], BaseException | None]:
        """Close the pool, then the devices (the last opened first), each to completion
        whatever cancels the caller. Return what they raised (with *propagating*, they
        add it as notes to that instead) and asyncio's own cancellation if one came."""
        errors: list[BaseException] = []
        cancelled: BaseException | None = None
        closes: list[Callable[[], Awaitable[None]]] = []
        if self._pool is not None and not self._pool.closed:
            closes.append(functools.partial(_exit, self._pool, timeout, propagating))
        closes.extend(
            functools.partial(_exit, device, None, propagating)
            for device in reversed(self._devices)
        )
        for close in closes:  # each to its end: what one raises, the others close too
            closed, cancelled_now = await to_completion(close)
            cancelled = cancelled or cancelled_now
            error = failure(closed)
            if isinstance(error, ExceptionGroup):  # one close's several failures
                errors.extend(error.exceptions)
            elif error is not None:  # an AclError, a fault
                errors.append(error)
        return errors, cancelled


async def _exit(
    resource: StreamPool | Device, timeout: float | None, propagating: BaseException | None
) -> None:
    """Close *resource*: with *propagating* as its ``async with`` exit does (failures
    become notes on it), else with ``aclose``."""
    if propagating is not None:
        await resource.__aexit__(type(propagating), propagating, None)
    elif isinstance(resource, StreamPool):
        await resource.aclose(timeout=timeout)
    else:
        await resource.aclose()
