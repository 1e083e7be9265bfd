"""Gates for aclasync streams: hold a stream's work with a blocking pyACL callback.

``async with DeviceGates(dev) as gates`` starts a report thread for *dev* (pyACL's
``process_report`` loop, on the device's context); ``gate = await gates.hold(stream)``
subscribes *stream* to it (once) and queues a blocking ``acl.rt.launch_callback`` on
it, so that everything queued behind stays queued until ``gate.open()``. Nothing here
uses ``acl.sim``: the native-path tests and the benchmarks hold device work this way
on CANN's ``acl`` as on the strict simulator, instead of racing durations.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread

from .._conformance import Gate, ReportThread
from .._device import Device
from .._errors import raise_for_status
from .._stream import Stream

__all__ = ["DeviceGates", "Gate"]

#: How long leaving ``DeviceGates`` waits for the subscribed streams to run their
#: callbacks before it unsubscribes them anyway.
_DRAIN_S = 30.0


class DeviceGates:
    """A report thread for one device and the gates queued through it.

    Leaving opens every gate, waits until the subscribed streams have run their
    callbacks (``stream_query``, which consumes no failure), unsubscribes them and
    stops the thread; leave it before closing the streams it holds.
    """

    def __init__(self, dev: Device[Any]) -> None:
        self._dev = dev
        self._thread: ReportThread | None = None
        self._subscribed: dict[int, Stream] = {}
        self._gates: list[Gate] = []

    async def __aenter__(self) -> DeviceGates:
        rt = self._dev.acl.rt
        context, ret = await self._dev.call(rt.get_context)
        raise_for_status(ret, "acl.rt.get_context", device=self._dev.id)
        self._thread = ReportThread(self._dev.acl, context)
        self._thread.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True):
            await self.aclose()

    async def hold(self, stream: Stream) -> Gate:
        """Queue a gate on *stream* and return it; the stream stops there until it opens.

        One worker round trip the first time a stream is held (``subscribe_report``);
        the gate itself is queued like ``stream.launch`` (a failed ``launch_callback``
        is the stream's failure, raised by its next await).
        """
        await self.subscribe(stream)
        return self.hold_nowait(stream)

    async def subscribe(self, stream: Stream) -> None:
        """Subscribe *stream* to the report thread, once (one worker round trip)."""
        thread = self._started()
        handle = stream._lane.handle  # (not .handle: that gives the stream out)
        if handle not in self._subscribed:
            rt = self._dev.acl.rt
            ret = await self._dev.call(rt.subscribe_report, thread.ident, handle)
            raise_for_status(ret, "acl.rt.subscribe_report", device=self._dev.id)
            self._subscribed[handle] = stream

    def hold_nowait(self, stream: Stream) -> Gate:
        """``hold`` for a stream already subscribed: queues the gate, never waits."""
        if stream._lane.handle not in self._subscribed:
            raise ValueError(f"{stream!r} is not subscribed: await subscribe(stream) first")
        gate = Gate()
        self._gates.append(gate)
        stream.launch(self._dev.acl.rt.launch_callback, gate.callback, None, 1)
        return gate

    async def aclose(self) -> None:
        """Open every gate, unsubscribe the streams once they are past them, stop."""
        for gate in self._gates:
            gate.open()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        rt = self._dev.acl.rt
        deadline = time.monotonic() + _DRAIN_S
        for handle, stream in self._subscribed.items():
            if stream.closed or self._dev.closed:
                continue
            while time.monotonic() < deadline:
                status, ret = await self._dev.call(rt.stream_query, handle)
                if ret or status == 0:
                    break
                await anyio.sleep(0.001)
            await self._dev.call(rt.unsubscribe_report, thread.ident, handle)
        self._subscribed.clear()
        await anyio.to_thread.run_sync(thread.stop)

    def _started(self) -> ReportThread:
        if self._thread is None:
            raise RuntimeError("use DeviceGates with `async with`")
        return self._thread
