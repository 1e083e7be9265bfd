"""Streams: awaitable task queues on a device."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import numpy as np

from ._buffers import DeviceBuffer, HostBuffer
from ._errors import AclError, never_recorded, raise_for_status
from ._event import Event
from ._factory import AsyncResource
from ._lanes import Lane, Life
from ._loop import Flag, Turn
from ._pyacl.codes import ErrorCode
from ._pyacl.constants import FailureMode, MemcpyKind, StreamFlag
from ._waits import check_bool, check_plain_callable, check_timeout

if TYPE_CHECKING:
    from ._device import Device
    from ._device_state import DeviceState

__all__ = ["Stream"]

_OVERFLOW_STATUS_BYTES = 64
_BUILTIN = types.BuiltinFunctionType
#: memcpy kind by (source on device, destination on device); host to host is refused.
_COPY_KINDS = {
    (False, True): int(MemcpyKind.HOST_TO_DEVICE),
    (True, False): int(MemcpyKind.DEVICE_TO_HOST),
    (True, True): int(MemcpyKind.DEVICE_TO_DEVICE),
}


class Stream(AsyncResource):
    """A stream of one device: work queued on it runs in order.

    Get one from ``Device.create_stream()`` or ``Device.default_stream``, or wrap
    another library's with ``Device.wrap_stream()``. Work is queued with ``launch``
    (synchronous, never blocks) and waited for with ``await``. A failure of queued work
    is raised once, by the first await on this stream (or on its device) that completes
    after the device worker saw it; an abandoned wait never consumes it, and ``aclose``
    raises whatever is left (see docs/errors.md).
    """

    def __init__(
        self, device: Device, state: DeviceState, lane: Lane, flags: int, priority: int
    ) -> None:
        self._device = device
        self._state = state
        self._lane = lane
        self._flags = StreamFlag(flags)
        self._priority = priority
        self._closed = False
        self._forced = False  # a close with force=True began
        #: Set to STOP mode, or overflow detection on: a pool replaces it on return.
        self._reconfigured = False
        #: Held by the get_overflow_status call that uses the stream's status buffer.
        self._overflow_turn = Turn(reclaim=True)
        state.streams[lane.handle] = self

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        kind = " wrapped" if self._lane.borrowed else ""
        return (
            f"<aclasync.Stream {self._lane.handle:#x} device={self._device.id} "
            f"flags={self._flags!r}{kind}{state}>"
        )

    def __acl_stream__(self) -> tuple[int, int]:
        """``(0, handle)``: version 0 of the stream protocol, then the ``aclrtStream``.

        In the manner of CUDA's ``__cuda_stream__``: any library (``Device.wrap_stream``
        too) may take the stream this way. The handle lives as long as this object is
        open; a thread that uses it must have set the device first (pyACL's rule:
        ``acl.rt.set_device``, or ``set_context`` of the device's context), and must
        not destroy it. Work it queues on the stream is the stream's: its failures are
        raised by aclasync's awaits on it (docs/errors.md), whose syncs from now on
        always ask the runtime (aclasync no longer knows all the stream's work).
        ``anyio.ClosedResourceError`` once the stream or its device is closed (the
        handle may then be destroyed, or another stream's).
        """
        self._check_open()
        self._lane.share()
        return 0, self._lane.handle

    @property
    def wrapped(self) -> bool:
        """Whether aclasync wrapped this stream (``Device.wrap_stream``) rather than made
        it: it is then never destroyed by aclasync, only let go of."""
        return self._lane.borrowed

    @property
    def handle(self) -> int:
        """The pyACL stream handle (``0`` for the default stream). Reading it gives the
        stream out as ``__acl_stream__`` does: work others queue on the handle is the
        stream's, and its syncs from then on always ask the runtime. Once the stream
        or its device is closed it still reads (for logs and ``repr``), but the handle
        may be destroyed, or another stream's: take it with ``__acl_stream__``, which
        refuses a closed stream, where it will be used."""
        if not self.closed:
            self._lane.share()
        return self._lane.handle

    @property
    def device(self) -> Device:
        """The device the stream belongs to."""
        return self._device

    @property
    def flags(self) -> StreamFlag:
        """The flags the stream was created with, as passed."""
        return self._flags

    @property
    def priority(self) -> int:
        """The priority the stream was created with, from 0 (highest) to 7."""
        return self._priority

    @property
    def closed(self) -> bool:
        """Whether the stream or its device is closed (it then takes no more work)."""
        return self._closed or self._state.closed

    # -- queueing (synchronous) ------------------------------------------------------

    def launch(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args, stream_handle)`` on the device worker; return at once.

        This is pyACL's stream-last convention (``acl.rt.memcpy_async``,
        ``acl.rt.launch_callback``, ``acl.sim.launch_kernel`` ...). It never waits for
        the worker. ``fn`` must return a pyACL status: an ``int`` (0 is success), or a
        tuple whose last item is one, as pyACL's calls do. A non-zero status, an
        exception, or a result that is not a status (a ``TypeError`` saying so) is a
        failure of this stream, raised by a later await (see the class docstring).

        Raises
        ------
        TypeError
            At once, if *fn* is not callable or is a coroutine function (``async def``):
            the worker thread runs plain functions only.
        """
        if fn.__class__ is not _BUILTIN:  # pyACL's own calls need no look
            check_plain_callable(fn, "launch()")
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        self._state.launch(self._lane, fn, args)  # checks the device is open

    def memcpy(
        self,
        dst: DeviceBuffer | HostBuffer,
        src: DeviceBuffer | HostBuffer,
        nbytes: int | None = None,
    ) -> None:
        """Queue an asynchronous copy of *nbytes* (default: all of *src*) from *src* to *dst*.

        Synchronous and non-blocking: queues ``acl.rt.memcpy_async`` with the direction
        taken from the buffer kinds. Host to host is a ``ValueError``: CANN's
        ``aclrtMemcpyAsync`` does not support it on a host with cards (207000, or a
        failed task on older releases); copy between host buffers on the host. A
        ``DeviceBuffer`` of another device is a ``ValueError`` too.
        """
        for name, buffer in (("dst", dst), ("src", src)):
            if not isinstance(buffer, (DeviceBuffer, HostBuffer)):
                raise TypeError(f"{name} must be a DeviceBuffer or HostBuffer")
            if isinstance(buffer, DeviceBuffer) and buffer.device is not self._device:
                raise ValueError(
                    f"{name}: {buffer!r} is memory of another device; a stream copies "
                    "to and from its own device's memory"
                )
        count = src.nbytes if nbytes is None else nbytes
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
        if count > min(src.nbytes, dst.nbytes):
            raise ValueError(
                f"nbytes={count} exceeds a buffer (src {src.nbytes}, dst {dst.nbytes})"
            )
        kind = _COPY_KINDS.get((isinstance(src, DeviceBuffer), isinstance(dst, DeviceBuffer)))
        if kind is None:
            raise ValueError(
                "memcpy() between two host buffers: aclrtMemcpyAsync does not copy host to "
                "host on a host with cards; copy on the host (numpy views) instead"
            )
        self.launch(self._device.acl.rt.memcpy_async, dst.ptr, dst.nbytes, src.ptr, count, kind)

    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait until *event* completes (device-side).

        Synchronous and non-blocking: queues ``acl.rt.stream_wait_event``. An event of
        another device raises ``AclError`` 107000 (``ACL_ERROR_RT_PARAM_INVALID``) at
        once: streams and events belong to their device's context. An event whose
        record failed (``record_event_nowait``) is never waited for: its failure is
        raised here if already known, else it is this stream's (its next await).
        """
        self._wait_event(event, quiet=False)

    def _wait_event(self, event: Event, *, quiet: bool) -> None:
        """``wait_event``; *quiet*: an event whose record failed is skipped silently
        (its failure is its stream's, and this stream's later work has nothing to wait
        for)."""
        if not isinstance(event, Event):
            raise TypeError(f"wait_event() needs an aclasync.Event, got {type(event).__name__}")
        if event.closed:
            raise anyio.ClosedResourceError(f"{event!r} is closed")
        self._check_open()
        if event._state is not self._state:
            raise AclError(
                int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID),
                "acl.rt.stream_wait_event",
                device=self._device.id,
                stream=self._lane.handle,
                detail=f"{event!r} belongs to {self._state.other(event._state)}: an "
                "event waited on must be of the stream's own device (its context)",
            )
        rt = self._device.acl.rt
        handle, record, device = event.handle, event._record, self._device.id
        owner = event._lane.handle
        if record.failure is not None and not quiet:  # nothing will ever complete
            raise never_recorded(record.failure, device, owner)

        def wait(stream: int) -> Any:  # on the worker, after the event's record job
            if record.failure is None:
                return rt.stream_wait_event(stream, handle)
            if quiet:  # (never on its handle: it may be another event's now)
                return 0
            raise never_recorded(record.failure, device, owner)

        self._state.launch(self._lane, wait, (), "acl.rt.stream_wait_event")

    def record_event_nowait(self, *, timing: bool = False) -> Event:
        """Record a new event after the work queued so far, without waiting for the worker.

        Synchronous and non-blocking, like ``launch``: takes one of the events the
        device keeps ready and queues ``acl.rt.record_event``, so a pipeline that
        orders its streams by events pays no round trip per event. What it gives up
        is the answer: a failed record is reported like a failed launch (by the next
        await on this stream), and the event it returned was never recorded, so
        waiting on it or querying it raises at once (the stream's failure if still
        unreported, else a fresh ``AclError``) instead of waiting for ever.

        Raises ``anyio.WouldBlock`` when no event is ready, as at the device's first
        use: the device then makes more in the background; ``await record_event()``
        meanwhile. ``anyio.ClosedResourceError`` once the stream or device is closed.
        """
        timing = check_bool(timing, "timing")
        self._check_open()
        handle, record = self._state.record_nowait(self._lane, timing)
        return Event._create(self, self._state, self._lane, handle, record, timing)

    # -- awaiting --------------------------------------------------------------------

    async def synchronize(self, timeout: float | None = None) -> None:
        """Wait until all work queued on this stream so far has finished.

        Then raises the stream's oldest unreported failure, if any. ``timeout``
        (seconds) expiry raises ``AclTimeoutError`` and leaves the stream usable;
        ``timeout=0`` polls once (an idle stream succeeds). Cancellation abandons the
        wait only, the device work carries on. An abandoned wait reports nothing.
        """
        if timeout is not None:
            timeout = check_timeout(timeout)
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        state, lane = self._state, self._lane
        mark = (lane.submitted, state.calls)  # where it stands, for settle (see settled)
        waiter = state.wait_for(lane, timed=timeout is not None)  # checks the device
        if timeout is None:
            await waiter.wait()
        else:
            on_timeout = state.expiry("aclasync.Stream.synchronize", timeout, lane)
            await waiter.wait(timeout, on_timeout=on_timeout)
        state.settle(lane, mark)

    async def record_event(self, *, timing: bool = False) -> Event:
        """Record a new event after the work queued so far and return it.

        With ``timing=True`` the event carries timestamps for ``Event.elapsed_time``.
        One worker round trip (events come from a per-device pool the worker owns). A
        failed record raises its ``AclError`` and returns no event, so no event is
        ever waited on that was not recorded. A cancellation that arrives meanwhile
        gives the event back: nothing leaks.
        """
        timing = check_bool(timing, "timing")
        self._check_open()
        handle, record = await self._state.record(self._lane, timing)
        return Event._create(self, self._state, self._lane, handle, record, timing)

    async def query(self) -> bool:
        """Return True when all work queued on the stream has finished (non-blocking).

        A short worker round trip; cancellation abandons the wait only (the call still
        runs, in order, on the worker). Then raises the stream's oldest unreported
        failure, if any.
        """
        self._check_open()
        status, ret = await self._call(lambda rt, s: rt.stream_query(s))
        raise_for_status(
            ret, "acl.rt.stream_query", device=self._device.id, stream=self._lane.handle
        )
        self._state.report(self._lane)
        return bool(status == 0)

    async def set_failure_mode(self, mode: FailureMode | int) -> None:
        """Set what a failing task does to later ones (``acl.rt.set_stream_failure_mode``).

        The runtime takes the mode the stream has again as a no-op, but a ``STOP``
        stream cannot go back to ``CONTINUE`` (207000), and the default stream takes
        neither on most SoCs. A ``StreamPool``'s stream set to another mode than
        ``CONTINUE`` is replaced when its borrow ends (the next borrower's is fresh).
        A short worker round trip; cancellation abandons the wait only (the call still
        runs, in order, on the worker). Then raises the stream's oldest unreported
        failure, if any.
        """
        mode = FailureMode(_enum_value(mode, FailureMode, "mode"))
        if mode is not FailureMode.CONTINUE:
            self._reconfigured = True
        await self._checked(
            "set_stream_failure_mode", lambda rt, s: rt.set_stream_failure_mode(s, int(mode))
        )

    async def set_overflow_switch(self, on: bool) -> None:
        """Turn overflow detection on or off for tasks queued from now on.

        A ``StreamPool``'s stream turned on is replaced when its borrow ends (the next
        borrower's is fresh). A short worker round trip; cancellation abandons the wait
        only (the call still runs, in order, on the worker). Then raises the stream's
        oldest unreported failure, if any.
        """
        flag = 1 if check_bool(on, "on") else 0
        if flag:
            self._reconfigured = True
        await self._checked(
            "set_stream_overflow_switch", lambda rt, s: rt.set_stream_overflow_switch(s, flag)
        )

    async def get_overflow_switch(self) -> bool:
        """Return whether overflow detection is on for this stream.

        A short worker round trip; cancellation abandons the wait only (the call still
        runs, in order, on the worker). Then raises the stream's oldest unreported
        failure, if any.
        """
        self._check_open()
        flag, ret = await self._call(lambda rt, s: rt.get_stream_overflow_switch(s))
        raise_for_status(
            ret,
            "acl.rt.get_stream_overflow_switch",
            device=self._device.id,
            stream=self._lane.handle,
        )
        self._state.report(self._lane)
        return bool(flag)

    async def get_overflow_status(self) -> int:
        """Return the overflow status (non-zero: a task overflowed) once queued work is done.

        Does the documented protocol: a 64-byte device buffer (kept with the stream),
        the asynchronous ``get_overflow_status`` task, a stream sync and a copy back
        to the host; concurrent calls on one stream take turns (the buffer is one).
        Cancellation and failure reporting are those of ``synchronize``.
        """
        self._check_open()
        mine = Flag()
        while (busy := self._overflow_turn.take(mine)) is not None:  # one buffer: in turns
            await busy.wait()
        try:
            return await self._read_overflow_status()
        finally:
            self._overflow_turn.end(mine)

    async def _read_overflow_status(self) -> int:
        state, lane, acl = self._state, self._lane, self._device.acl
        handles = state.worker.handles

        def status_task(stream: int) -> Any:  # on the worker, queued at once
            buffer = handles.overflow_buffer(lane, _OVERFLOW_STATUS_BYTES)  # made once
            return acl.rt.get_overflow_status(buffer, _OVERFLOW_STATUS_BYTES, stream)

        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        state.launch(lane, status_task, (), "acl.rt.get_overflow_status")
        await self.synchronize()

        def read_back() -> tuple[bytes, int] | None:
            buffer = handles.overflow_buffer(lane, _OVERFLOW_STATUS_BYTES, make=False)
            if buffer is None or lane.closed:  # force-closed since its sync
                return None
            host = np.zeros(_OVERFLOW_STATUS_BYTES, dtype=np.uint8)
            ret = acl.rt.memcpy(
                acl.util.numpy_to_ptr(host),
                host.nbytes,
                buffer,
                host.nbytes,
                int(MemcpyKind.DEVICE_TO_HOST),
            )
            return host.tobytes(), int(ret)

        read = await state.roundtrip(read_back)
        if read is None:
            raise anyio.ClosedResourceError(f"{self!r} was closed before its status was read")
        raw, ret = read
        raise_for_status(ret, "acl.rt.memcpy", device=self._device.id, stream=self._lane.handle)
        return int.from_bytes(raw[:8], "little")

    async def reset_overflow_status(self) -> None:
        """Clear the overflow status and wait until the reset task has run.

        Cancellation abandons the wait; the queued reset still runs.
        """
        self.launch(self._device.acl.rt.reset_overflow_status)
        await self.synchronize()

    async def aclose(self, *, force: bool = False) -> None:
        """Destroy the stream: ``destroy_stream`` (after queued work) or, with ``force``,
        ``destroy_stream_force`` (queued work is dropped, and waits still pending on
        the stream or its events raise ``ClosedResourceError``). Idempotent.

        Raises the stream's unreported failures (one as itself, several as an
        ``ExceptionGroup``); with ``force``, failures of work that had all ended are
        still raised, while work still queued or running is dropped with its failures.
        ``force=True`` while another close waits for the queued work drops that work
        and reports instead of it (the waiting close then returns quietly). The default
        stream is never destroyed: closing it waits for its work (unless ``force``),
        raises its failures and marks this object closed. Quiet when the device is
        closed or broken (the device released the stream). If cancelled while waiting
        for queued work, the destruction still happens on the worker after that work,
        and the stream's failures go to the device (raised by its next ``synchronize``
        or its close), since the cancel scope would drop them with the cancellation.
        """
        await self._close(force=check_bool(force, "force"), propagating=None)

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        await self._close(force=False, propagating=exc)

    async def _close(self, *, force: bool, propagating: BaseException | None) -> None:
        state, lane = self._state, self._lane
        if self._closed:
            if force and not self._forced and self._lane.handle and not lane.closed:
                # A close waiting for queued work: this one drops it, and reports.
                self._forced = True
                await state.close_stream(lane, force=True, propagating=propagating)
            else:
                await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        self._forced = force
        if self._lane.handle == 0:
            await state.close_default(lane, force=force, propagating=propagating)
        else:
            await state.close_stream(lane, force=force, propagating=propagating)

    # -- helpers ---------------------------------------------------------------------

    def _stopped(self) -> bool:
        """Whether ``FailureMode.STOP`` tripped: the stream refuses all work for good."""
        return self._lane.life is Life.STOPPED or self._lane.life is Life.REFUSED

    def _settled(self) -> bool:
        """Known idle with nothing to report (see ``DeviceState.settled``)."""
        return not self.closed and self._state.settled(self._lane)

    async def _record_quietly(self) -> Event:
        """An event after the work queued so far, reporting none of the stream's
        failures (they stay for its own awaits); no round trip if one is ready."""
        self._check_open()
        try:
            handle, record = self._state.record_nowait(self._lane, False)
        except anyio.WouldBlock:
            handle, record = await self._state.record(self._lane, False, report=False)
        return Event._create(self, self._state, self._lane, handle, record, False)

    async def _drain(self) -> None:
        """Wait for the work queued so far, reporting nothing (an abandoned wait's
        rule: the stream's failures stay for its own awaits)."""
        self._check_open()
        await self._state.wait_for(self._lane, timed=False).wait()

    def _queued(self) -> int:
        """Work submitted to the stream so far, as a count (it only grows)."""
        return self._lane.submitted

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        self._state.check_open()

    async def _call(self, fn: Callable[[Any, int], Any]) -> Any:
        self._check_open()
        return await self._state.roundtrip(
            functools.partial(fn, self._device.acl.rt, self._lane.handle)
        )

    async def _checked(self, call: str, fn: Callable[[Any, int], int]) -> None:
        self._check_open()
        ret = await self._call(fn)
        raise_for_status(ret, f"acl.rt.{call}", device=self._device.id, stream=self._lane.handle)
        self._state.report(self._lane)


def _enum_value(value: object, kind: type[FailureMode], name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a {kind.__name__} or int, got {type(value).__name__}")
    if value not in {int(member) for member in kind}:
        choices = ", ".join(f"{m.name}={int(m)}" for m in kind)
        raise ValueError(f"{name} must be one of {choices}; got {value}")
    return value
