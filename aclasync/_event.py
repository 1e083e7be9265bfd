"""Events: points in a stream's work that can be waited for and timed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from ._errors import raise_for_status
from ._factory import AsyncResource
from ._loop import current_delivery
from ._waits import check_timeout, park, unpack_wait

if TYPE_CHECKING:
    from ._stream import Stream

__all__ = ["Event"]

_RECORDED_COMPLETE = 1  # query_event_status: NOT_READY=0, COMPLETE=1


class Event(AsyncResource):
    """An event recorded on a stream by ``Stream.record_event()``."""

    def __init__(self, stream: Stream, handle: int, seq: int, timing: bool) -> None:
        self._stream = stream
        self._handle = handle
        self._seq = seq
        self._timing = timing
        self._closed = False

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<aclasync.Event {self._handle:#x} stream={self._stream.handle:#x}{state}>"

    @property
    def handle(self) -> int:
        """The pyACL event handle."""
        return self._handle

    @property
    def stream(self) -> Stream:
        """The stream the event was recorded on."""
        return self._stream

    @property
    def timing(self) -> bool:
        """Whether the event records timestamps (``record_event(timing=True)``)."""
        return self._timing

    async def synchronize(self, timeout: float | None = None) -> None:
        """Wait until the work recorded before this event has finished.

        ``timeout`` (seconds) expiry raises ``AclTimeoutError``; cancellation abandons
        the wait only.
        """
        timeout = check_timeout(timeout)
        self._check_open()
        device = self._stream.device
        waiter = current_delivery().new_waiter()
        device._worker.watch(self._stream._lane, self._handle, self._seq, waiter)
        value = await park(
            waiter,
            timeout,
            api="aclasync.Event.synchronize",
            device=device.id,
            stream=self._stream.handle,
            event=True,
        )
        unpack_wait(value, device=device.id, stream=self._stream.handle)

    async def query(self) -> bool:
        """Return True once the recorded work has finished (non-blocking).

        A short worker round trip; cancellation abandons the wait only (the call
        still runs, in order, on the worker).
        """
        self._check_open()
        device = self._stream.device
        rt = device.acl.rt
        handle = self._handle
        status, ret = await device._roundtrip(lambda: rt.query_event_status(handle))
        raise_for_status(ret, "acl.rt.query_event_status", device=device.id)
        return bool(status == _RECORDED_COMPLETE)

    async def elapsed_time(self, end: Event) -> float:
        """Milliseconds between this event and *end*, once both have completed.

        Both must come from ``record_event(timing=True)``. Waits for both events first
        (see ``synchronize`` for cancellation).
        """
        if not isinstance(end, Event):
            raise TypeError(f"end must be an aclasync.Event, got {type(end).__name__}")
        if not (self._timing and end._timing):
            raise ValueError("elapsed_time needs two events recorded with timing=True")
        await self.synchronize()
        await end.synchronize()
        device = self._stream.device
        rt = device.acl.rt
        start_handle, end_handle = self._handle, end._handle
        ms, ret = await device._roundtrip(lambda: rt.event_elapsed_time(start_handle, end_handle))
        raise_for_status(ret, "acl.rt.event_elapsed_time", device=device.id)
        return float(ms)

    async def aclose(self) -> None:
        """Release the event. Idempotent; never blocks.

        The handle goes back to the device's event pool for a later ``record_event``
        (re-recording replaces what an event captures); the device destroys pooled
        events when it closes. Only checkpoints, so cancellation cannot leave the
        event half released.
        """
        if not self._closed:
            self._closed = True
            device = self._stream.device
            device._events.discard(self)
            if not device.closed:
                device._give_back_event(self._handle, self._timing)
        await anyio.lowlevel.checkpoint()

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        self._stream.device._check_open()
