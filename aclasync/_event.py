"""Events: points in a stream's work that can be waited for and timed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from ._errors import AclasyncError, AclError, raise_for_status
from ._factory import AsyncResource
from ._pyacl.codes import ErrorCode
from ._waits import check_timeout

if TYPE_CHECKING:
    from ._device_state import DeviceState
    from ._lanes import EventRecord, Lane
    from ._stream import Stream

__all__ = ["Event", "release_events"]


class Event(AsyncResource):
    """An event recorded on a stream by ``Stream.record_event()``, or one of another
    library's that ``Device.wrap_event()`` wrapped.

    ``record_event()`` returns an ``Event`` only for a record that succeeded.
    ``record_event_nowait()`` returns one before the record ran: if that record fails
    (the stream reports the failure like a failed launch), the event was never
    recorded, and its ``synchronize``, ``query`` and ``elapsed_time`` raise the
    record's ``AclError`` at once instead of waiting for ever. Its awaits are awaits on
    its stream: after their own result they raise the stream's oldest unreported
    failure, if any (see ``Stream``). Once closed it cannot be waited on, and waits
    still pending on it raise ``anyio.ClosedResourceError``. One collected unclosed is
    given back to the device's pool at its next record (a wrapped one is let go of).
    """

    def __init__(
        self,
        stream: Stream | None,
        state: DeviceState,
        lane: Lane,
        handle: int,
        record: EventRecord,
        timing: bool,
    ) -> None:
        self._stream = stream
        self._state = state
        self._lane = lane
        self._handle = handle
        self._record = record
        self._timing = timing
        self._closed = False

    def __del__(self) -> None:
        # Events are often awaited and dropped (a request's "done" event): one collected
        # unclosed goes back to the pool at its device's next record, rather than
        # staying out until the device closes.
        if not getattr(self, "_closed", True) and not self._state.gone():
            self._state.event_dropped(self._lane, self._handle, self._record)

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        where = "wrapped" if self._stream is None else f"stream={self._stream._lane.handle:#x}"
        return f"<aclasync.Event {self._handle:#x} {where}{state}>"

    def __acl_event__(self) -> tuple[int, int]:
        """``(0, handle)``: version 0 of the event protocol, then the ``aclrtEvent``.

        The handle lives as long as this object is open and referenced (one collected
        unclosed is given back to the pool); a thread that uses it must have
        set the event's device (pyACL's rule), and must not destroy it.
        ``anyio.ClosedResourceError`` once the event or its device is closed (its handle
        may then be recorded again for another event).
        """
        self._check_open()
        return 0, self._handle

    @property
    def handle(self) -> int:
        """The pyACL event handle. Once the event or its device is closed it still reads
        (for logs), but the handle may be recorded again for another event: take it with
        ``__acl_event__``, which refuses a closed event, where it will be used."""
        return self._handle

    @property
    def stream(self) -> Stream | None:
        """The stream the event was recorded on; None for a wrapped event (not known)."""
        return self._stream

    @property
    def timing(self) -> bool:
        """Whether the event records timestamps (``record_event(timing=True)``); True for
        a wrapped event, whose timestamps the runtime checks (107006 if it has none)."""
        return self._timing

    @property
    def wrapped(self) -> bool:
        """Whether aclasync wrapped this event (``Device.wrap_event``) rather than made it."""
        return self._stream is None

    @property
    def closed(self) -> bool:
        """Whether the event or its device is closed (it can then no longer be waited on)."""
        return self._closed or self._state.closed

    async def synchronize(self, timeout: float | None = None) -> None:
        """Wait until the work recorded before this event has finished.

        ``timeout`` (seconds) expiry raises ``AclTimeoutError``; ``timeout=0`` polls
        once (a completed event succeeds). Cancellation abandons the wait only.
        Closing the event meanwhile, or its stream with ``force=True``, makes the wait
        raise ``anyio.ClosedResourceError``; so does a wait begun after its stream's
        forced close.
        """
        timeout = check_timeout(timeout)
        self._check_open()
        state, lane, record = self._state, self._lane, self._record
        waiter = state.wait_for(lane, timed=timeout is not None, event=self._handle, record=record)
        try:
            if timeout is None:
                await waiter.wait()
            else:
                on_timeout = state.expiry("aclasync.Event.synchronize", timeout, lane, event=True)
                await waiter.wait(timeout, on_timeout=on_timeout)
        except AclasyncError:
            if not state.never_recorded(lane, record):
                raise
        state.settle(lane)

    async def query(self) -> bool:
        """Return True once the recorded work has finished (non-blocking).

        A short worker round trip; cancellation abandons the wait only (the call
        still runs, in order, on the worker).
        """
        self._check_open()
        return await self._state.query_event(self._lane, self._handle, self._record)

    async def elapsed_time(self, end: Event) -> float:
        """Milliseconds between this event and *end*, once both have completed.

        Both must come from ``record_event(timing=True)``. Waits for both events first
        (see ``synchronize`` for cancellation).
        """
        if not isinstance(end, Event):
            raise TypeError(f"end must be an aclasync.Event, got {type(end).__name__}")
        if not (self._timing and end.timing):
            raise ValueError("elapsed_time needs two events recorded with timing=True")
        if end._state is not self._state:
            raise AclError(
                int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID),
                "acl.rt.event_elapsed_time",
                device=self._state.device_id,
                detail=f"{end!r} belongs to {self._state.other(end._state)}: both "
                "events must be recorded on one device (pyACL: on the same stream)",
            )
        await self.synchronize()
        await end.synchronize()
        rt = self._state.acl.rt
        start_handle, end_handle = self._handle, end.handle
        ms, ret = await self._state.roundtrip(
            lambda: rt.event_elapsed_time(start_handle, end_handle)
        )
        raise_for_status(ret, "acl.rt.event_elapsed_time", device=self._state.device_id)
        return float(ms)

    async def aclose(self) -> None:
        """Release the event. Idempotent; never blocks.

        The handle goes back to the device's event pool for a later ``record_event``
        (after the worker has failed the waits still pending on this event); the
        device destroys pooled events when it closes. Only checkpoints, so
        cancellation cannot leave the event half released.
        """
        self._release()
        await anyio.lowlevel.checkpoint()

    def _release(self) -> None:
        """``aclose`` without the checkpoint: give the handle back; never blocks."""
        if not self._closed:
            self._closed = True
            self._state.forget_event(self._lane, self._handle, self._record)

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        self._state.check_open()


def release_events(events: list[Event]) -> None:
    """Close events of one device without a checkpoint, in one worker job."""
    mine = [e for e in events if not e._closed]
    if mine:
        for event in mine:
            event._closed = True
        mine[0]._state.forget_events([(e._lane, e._handle, e._record) for e in mine])
