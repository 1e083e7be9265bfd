"""Streams: awaitable task queues on a device."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import numpy as np

from ._buffers import DeviceBuffer, HostBuffer
from ._errors import raise_for_status
from ._event import Event
from ._factory import AsyncResource
from ._loop import current_delivery
from ._pyacl.constants import FailureMode, MemcpyKind, StreamFlag
from ._waits import check_timeout, park, unpack_wait
from ._worker import Lane

if TYPE_CHECKING:
    from ._device import Device

__all__ = ["Stream"]

_OVERFLOW_STATUS_BYTES = 64
#: memcpy kind by (source on device, destination on device).
_COPY_KINDS = {
    (False, False): int(MemcpyKind.HOST_TO_HOST),
    (False, True): int(MemcpyKind.HOST_TO_DEVICE),
    (True, False): int(MemcpyKind.DEVICE_TO_HOST),
    (True, True): int(MemcpyKind.DEVICE_TO_DEVICE),
}


class Stream(AsyncResource):
    """A stream of one device: work queued on it runs in order.

    Get one from ``Device.create_stream()`` or ``Device.default_stream``. Work is queued
    with ``launch`` (synchronous, never blocks) and waited for with ``await``; an error
    returned by a queued call is raised by the next awaited operation on the stream.
    """

    def __init__(self, device: Device, handle: int, flags: int, priority: int) -> None:
        self._device = device
        self._lane = Lane(handle, fast_sync=bool(flags & StreamFlag.FAST_SYNC))
        self._flags = StreamFlag(flags & (StreamFlag.FAST_LAUNCH | StreamFlag.FAST_SYNC))
        self._priority = priority
        self._closed = False
        self._overflow_buffer = 0

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return (
            f"<aclasync.Stream {self.handle:#x} device={self._device.id} "
            f"flags={self._flags!r}{state}>"
        )

    @property
    def handle(self) -> int:
        """The pyACL stream handle (``0`` for the default stream)."""
        return self._lane.handle

    @property
    def device(self) -> Device:
        return self._device

    @property
    def flags(self) -> StreamFlag:
        return self._flags

    @property
    def priority(self) -> int:
        return self._priority

    @property
    def closed(self) -> bool:
        return self._closed or self._device.closed

    # -- queueing (synchronous) ------------------------------------------------------

    def launch(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args, stream_handle)`` on the device worker; return at once.

        This is pyACL's stream-last convention (``acl.rt.memcpy_async``,
        ``acl.rt.launch_callback``, ``acl.sim.launch_kernel`` ...). It never waits for
        the worker. A non-zero status (or an exception) from the call is raised by the
        next awaited operation on this stream.
        """
        if not callable(fn):
            raise TypeError(f"launch() needs a callable, got {type(fn).__name__}")
        self._check_open()
        self._device._worker.launch(self._lane, fn, args)

    def memcpy(
        self,
        dst: DeviceBuffer | HostBuffer,
        src: DeviceBuffer | HostBuffer,
        nbytes: int | None = None,
    ) -> None:
        """Queue an asynchronous copy of *nbytes* (default: all of *src*) from *src* to *dst*.

        Synchronous and non-blocking: queues ``acl.rt.memcpy_async`` with the direction
        taken from the buffer kinds.
        """
        for name, buffer in (("dst", dst), ("src", src)):
            if not isinstance(buffer, (DeviceBuffer, HostBuffer)):
                raise TypeError(f"{name} must be a DeviceBuffer or HostBuffer")
        count = src.nbytes if nbytes is None else nbytes
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
        if count > min(src.nbytes, dst.nbytes):
            raise ValueError(
                f"nbytes={count} exceeds a buffer (src {src.nbytes}, dst {dst.nbytes})"
            )
        kind = _COPY_KINDS[isinstance(src, DeviceBuffer), isinstance(dst, DeviceBuffer)]
        self.launch(self._device.acl.rt.memcpy_async, dst.ptr, dst.nbytes, src.ptr, count, kind)

    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait until *event* completes (device-side).

        Synchronous and non-blocking: queues ``acl.rt.stream_wait_event``.
        """
        if not isinstance(event, Event):
            raise TypeError(f"wait_event() needs an aclasync.Event, got {type(event).__name__}")
        event._check_open()
        self._check_open()
        rt = self._device.acl.rt
        handle = event.handle
        self._device._worker.launch(
            self._lane,
            lambda stream: rt.stream_wait_event(stream, handle),
            (),
            "acl.rt.stream_wait_event",
        )

    # -- awaiting --------------------------------------------------------------------

    async def synchronize(self, timeout: float | None = None) -> None:
        """Wait until all work queued on this stream so far has finished.

        Raises the first error of a queued call or kernel. ``timeout`` (seconds) expiry
        raises ``AclTimeoutError`` and leaves the stream usable; cancellation abandons
        the wait only, the device work carries on.
        """
        timeout = check_timeout(timeout)
        self._check_open()
        self._raise_deferred()
        waiter = current_delivery().new_waiter()
        self._device._worker.fence(self._lane, waiter)
        value = await park(
            waiter,
            timeout,
            api="aclasync.Stream.synchronize",
            device=self._device.id,
            stream=self.handle,
        )
        unpack_wait(value, device=self._device.id, stream=self.handle)
        self._raise_deferred()

    async def record_event(self, *, timing: bool = False) -> Event:
        """Record a new event after the work queued so far and return it.

        With ``timing=True`` the event carries timestamps for ``Event.elapsed_time``.
        Events come from a per-device pool, so this queues ``acl.rt.record_event``
        without a worker round trip (except to refill the pool). An error from the
        record is raised by the next await on this stream. A pool refill is shielded
        from cancellation, so no event leaks.
        """
        self._check_open()
        self._raise_deferred()
        device = self._device
        handle = await device._take_event(timing)
        try:
            self.launch(device.acl.rt.record_event, handle)
        except BaseException:
            device._give_back_event(handle, timing)
            raise
        event = Event._create(self, handle, self._lane.next_seq(), timing)
        device._events.add(event)
        return event

    async def query(self) -> bool:
        """Return True when all work queued on the stream has finished (non-blocking).

        A short worker round trip; cancellation abandons the wait only (the call
        still runs, in order, on the worker).
        """
        self._check_open()
        self._raise_deferred()
        status, ret = await self._call(lambda rt, s: rt.stream_query(s))
        raise_for_status(ret, "acl.rt.stream_query", device=self._device.id, stream=self.handle)
        return bool(status == 0)

    async def set_failure_mode(self, mode: FailureMode | int) -> None:
        """Set what a failing task does to later ones (``acl.rt.set_stream_failure_mode``).

        The runtime allows this once per stream and not on the default stream.

        A short worker round trip; cancellation abandons the wait only (the call
        still runs, in order, on the worker).
        """
        mode = FailureMode(_enum_value(mode, FailureMode, "mode"))
        await self._checked(
            "set_stream_failure_mode", lambda rt, s: rt.set_stream_failure_mode(s, int(mode))
        )

    async def set_overflow_switch(self, on: bool) -> None:
        """Turn overflow detection on or off for tasks queued from now on.

        A short worker round trip; cancellation abandons the wait only (the call
        still runs, in order, on the worker).
        """
        if not isinstance(on, (bool, int)):
            raise TypeError(f"on must be a bool, got {type(on).__name__}")
        flag = 1 if on else 0
        await self._checked(
            "set_stream_overflow_switch", lambda rt, s: rt.set_stream_overflow_switch(s, flag)
        )

    async def get_overflow_switch(self) -> bool:
        """Return whether overflow detection is on for this stream.

        A short worker round trip; cancellation abandons the wait only (the call
        still runs, in order, on the worker).
        """
        flag, ret = await self._call(lambda rt, s: rt.get_stream_overflow_switch(s))
        raise_for_status(
            ret, "acl.rt.get_stream_overflow_switch", device=self._device.id, stream=self.handle
        )
        return bool(flag)

    async def get_overflow_status(self) -> int:
        """Return the overflow status (non-zero: a task overflowed) once queued work is done.

        Does the documented protocol: a 64-byte device buffer, the asynchronous
        ``get_overflow_status`` task, a stream sync and a copy back to the host.
        Cancellation and ``synchronize`` rules apply to the sync in the middle.
        """
        self._check_open()
        device = self._device
        acl = device.acl
        if not self._overflow_buffer:

            def allocate() -> tuple[int, int]:
                address, ret = acl.rt.malloc(_OVERFLOW_STATUS_BYTES, 0)
                return int(address), int(ret)

            with anyio.CancelScope(shield=True):
                address, ret = await device._roundtrip(allocate)
            raise_for_status(ret, "acl.rt.malloc", device=device.id)
            self._overflow_buffer = address
        buffer = self._overflow_buffer
        self.launch(acl.rt.get_overflow_status, buffer, _OVERFLOW_STATUS_BYTES)
        await self.synchronize()

        def read_back() -> tuple[bytes, int]:
            host = np.zeros(_OVERFLOW_STATUS_BYTES, dtype=np.uint8)
            ret = acl.rt.memcpy(
                acl.util.numpy_to_ptr(host),
                host.nbytes,
                buffer,
                host.nbytes,
                int(MemcpyKind.DEVICE_TO_HOST),
            )
            return host.tobytes(), int(ret)

        raw, ret = await device._roundtrip(read_back)
        raise_for_status(ret, "acl.rt.memcpy", device=device.id, stream=self.handle)
        return int.from_bytes(raw[:8], "little")

    async def reset_overflow_status(self) -> None:
        """Clear the overflow status and wait until the reset task has run.

        Cancellation abandons the wait; the queued reset still runs.
        """
        self.launch(self._device.acl.rt.reset_overflow_status)
        await self.synchronize()

    async def aclose(self, *, force: bool = False) -> None:
        """Destroy the stream: ``destroy_stream`` (after queued work) or, with ``force``,
        ``destroy_stream_force`` (queued work is dropped). Idempotent.

        The default stream is never destroyed; closing it only marks this object closed.
        If cancelled while waiting for queued work, the destruction still happens on
        the worker and nothing queued is lost.
        """
        if self._closed:
            await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        device = self._device
        if self.handle == 0 or device._gone:
            await anyio.lowlevel.checkpoint()
            return
        device._streams.discard(self)
        await device._destroy_stream(self._lane, force=force, overflow_buffer=self._overflow_buffer)

    # -- helpers ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        self._device._check_open()

    def _raise_deferred(self) -> None:
        deferred = self._lane.deferred
        if not deferred:
            return
        first = deferred.popleft()
        deferred.clear()
        if isinstance(first, BaseException):
            raise first
        code, api = first
        raise_for_status(code, api, device=self._device.id, stream=self.handle)

    async def _call(self, fn: Callable[[Any, int], Any]) -> Any:
        self._check_open()
        rt = self._device.acl.rt
        handle = self.handle
        return await self._device._roundtrip(lambda: fn(rt, handle))

    async def _checked(self, call: str, fn: Callable[[Any, int], int]) -> None:
        self._check_open()
        self._raise_deferred()
        ret = await self._call(fn)
        raise_for_status(ret, f"acl.rt.{call}", device=self._device.id, stream=self.handle)


def _enum_value(value: object, kind: type[FailureMode], name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a {kind.__name__} or int, got {type(value).__name__}")
    if value not in {int(member) for member in kind}:
        choices = ", ".join(f"{m.name}={int(m)}" for m in kind)
        raise ValueError(f"{name} must be one of {choices}; got {value}")
    return value
