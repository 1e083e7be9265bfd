"""Device work of a requested duration, for the demo, the trace and the benchmarks.

Two kinds of work, chosen per device:

``sim-kernel``
    ``acl.sim.launch_kernel(Kernel(duration_us=d))``: exactly the modelled time, on the
    simulator only. The default where ``acl.sim`` exists, so the figures measured on
    the simulator keep meaning what they always meant.
``memset``
    ``acl.rt.memset_async`` on a scratch buffer of device memory the stream owns, in as
    many calls as the duration needs. Calls of pyACL alone: the default on CANN's
    ``acl`` (and on the strict simulator, which has no ``acl.sim``). How many bytes a
    microsecond of work takes is calibrated on the device when the workload is made,
    with timing events around fills of growing size; a stream's scratch buffer holds
    ``TARGET_CALL_US`` of fill, and at most ``SCRATCH_CAP`` bytes.

``Workload.calibrate(dev)`` makes one for an open device; ``await w.prepare(stream)``
gives a stream its scratch buffer; ``w.launch(stream, duration_us)`` queues the work
(synchronous and non-blocking, like ``Stream.launch``); ``w.work(duration_us, ptr)``
gives the same work as a pyACL call for code that drives the runtime itself;
``w.describe()`` says what ran and how it was calibrated, for reports.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from .._buffers import DeviceBuffer
from .._device import Device
from .._errors import raise_for_status
from .._model import Model
from .._stream import Stream

__all__ = [
    "KINDS",
    "SCRATCH_CAP",
    "FillRate",
    "Stopwatch",
    "Workload",
    "default_kind",
    "describe_line",
    "fill",
    "time_model",
]

#: The kinds of work, by the name reports and ``--workload`` use.
KINDS = ("sim-kernel", "memset")
#: Most device memory one stream's scratch buffer may take.
SCRATCH_CAP = 64 << 20
#: The smallest fill, the work of a zero-length request: one short runtime task.
MIN_FILL = 32
#: Device time one fill call aims at when it is not capped: long calls keep the host's
#: share small, short ones keep the scratch buffer small (on the simulator the bytes
#: are real host memory).
TARGET_CALL_US = 100.0
#: Fill sizes the calibration starts from and grows by.
_FIRST_SIZE, _GROWTH = 256 << 10, 4
#: At most this many sizes are timed (each a few milliseconds at most).
_MAX_SIZES = 8
#: No device call is planned shorter than this, so that no calibration, however
#: disturbed, plans more calls than microseconds asked for.
_MIN_CALL_US = 1.0
_FILL_VALUE = 0


def default_kind(acl: object) -> str:
    """``sim-kernel`` where the runtime has ``acl.sim``, else ``memset``."""
    return "sim-kernel" if hasattr(acl, "sim") else "memset"


def fill(
    memset_async: Callable[..., int], ptr: int, size: int, calls: int, each: int, stream: int
) -> int:
    """Queue *calls* fills of *each* bytes at *ptr* (of *size*) on *stream*; return a status.

    pyACL alone (``acl.rt.memset_async``), in the stream-last convention, so that it
    can be queued as one ``Stream.launch`` job or called on a thread that owns the
    stream's context. Returns the first non-zero status, after which it stops.
    """
    for _ in range(calls):
        ret = memset_async(ptr, size, _FILL_VALUE, each, stream)
        if ret:
            return ret
    return 0


class Stopwatch:
    """Two timing events of one device that time work on the device itself.

    ``watch.start(stream)``, the work, ``watch.stop(stream)``: the records are queued
    like launches, so no host round trip lies between them and the work (the worker
    takes queued jobs in batches). Once the stream has finished, ``await
    watch.elapsed_us()`` gives the device time. Made with ``await
    Stopwatch.create(dev)``, destroyed by ``aclose()``.
    """

    def __init__(self, dev: Device[Any], start: int, end: int) -> None:
        self._dev = dev
        self._start = start
        self._end = end

    @classmethod
    async def create(cls, dev: Device[Any]) -> Stopwatch:
        rt = dev.acl.rt
        start, ret = await dev.call(rt.create_event)
        raise_for_status(ret, "acl.rt.create_event", device=dev.id)
        end, ret = await dev.call(rt.create_event)
        if ret:
            await dev.call(rt.destroy_event, start)
            raise_for_status(ret, "acl.rt.create_event", device=dev.id)
        return cls(dev, start, end)

    def start(self, stream: Stream) -> None:
        """Queue the first record on *stream*; return at once."""
        stream.launch(self._dev.acl.rt.record_event, self._start)

    def stop(self, stream: Stream) -> None:
        """Queue the second record on *stream*; return at once."""
        stream.launch(self._dev.acl.rt.record_event, self._end)

    def launch(self, stream: Stream, fn: Callable[..., int], args: tuple[Any, ...]) -> None:
        """Queue ``fn(*args, stream)`` between the two records; return at once."""
        self.start(stream)
        stream.launch(fn, *args)
        self.stop(stream)

    async def elapsed_us(self) -> float:
        """Microseconds between the events; the work must have finished."""
        ms, ret = await self._dev.call(self._dev.acl.rt.event_elapsed_time, self._start, self._end)
        raise_for_status(ret, "acl.rt.event_elapsed_time", device=self._dev.id)
        return float(ms) * 1e3

    async def aclose(self) -> None:
        rt = self._dev.acl.rt
        for event in (self._start, self._end):
            await self._dev.call(rt.destroy_event, event)


class FillRate:
    """What the calibration found: bytes per microsecond and a fixed cost per call."""

    __slots__ = ("bytes_per_us", "chunk_bytes", "overhead_us")

    def __init__(self, bytes_per_us: float, overhead_us: float, chunk_bytes: int) -> None:
        self.bytes_per_us = bytes_per_us
        self.overhead_us = overhead_us
        self.chunk_bytes = chunk_bytes

    def plan(self, duration_us: float) -> tuple[int, int]:
        """Return ``(calls, bytes each)`` for about *duration_us* of device work."""
        if duration_us <= self.overhead_us:
            return 1, MIN_FILL
        # (at least _MIN_CALL_US a call, whatever the calibration found)
        chunk_us = max(_MIN_CALL_US, self.overhead_us + self.chunk_bytes / self.bytes_per_us)
        calls = max(1, math.ceil(duration_us / chunk_us))
        each = (duration_us / calls - self.overhead_us) * self.bytes_per_us
        each = int(min(self.chunk_bytes, max(MIN_FILL, each)))
        return calls, each - each % MIN_FILL or MIN_FILL


class Workload:
    """Queues device work of about a requested duration on the streams of one device.

    Made by ``await Workload.calibrate(dev)``; see the module docstring. The scratch
    buffers are the device's (``dev.alloc``), freed by ``aclose()`` or with the device.
    """

    def __init__(self, dev: Device[Any], kind: str, rate: FillRate | None, details: dict[str, Any]):
        self._dev = dev
        self.kind = kind
        self._rate = rate
        self._details = details
        self._scratch: dict[Stream, DeviceBuffer] = {}

    @classmethod
    async def calibrate(
        cls, dev: Device[Any], *, kind: str | None = None, cap: int = SCRATCH_CAP
    ) -> Workload:
        """Make the workload for *dev*: ``kind`` ``None`` picks ``default_kind(dev.acl)``.

        For ``memset``, times fills on a stream of its own (created and closed here)
        with timing events, in a few tens of milliseconds. Cancellation abandons the
        calibration; what it allocated is the device's and goes with it.

        Raises
        ------
        ValueError
            For an unknown kind, or ``sim-kernel`` on a runtime without ``acl.sim``.
        """
        kind = default_kind(dev.acl) if kind is None else kind
        if kind not in KINDS:
            raise ValueError(f"unknown workload {kind!r}; expected one of {', '.join(KINDS)}")
        if kind == "sim-kernel":
            if not hasattr(dev.acl, "sim"):
                raise ValueError(
                    "the sim-kernel workload needs the simulator's acl.sim.launch_kernel, "
                    "which this runtime does not have"
                )
            return cls(dev, kind, None, {"timing": "modelled exactly"})
        rate, details = await _calibrate_fill(dev, cap)
        return cls(dev, kind, rate, details)

    @property
    def scratch_bytes(self) -> int:
        """Device memory each prepared stream takes (0 for ``sim-kernel``)."""
        return 0 if self._rate is None else self._rate.chunk_bytes

    async def prepare(self, stream: Stream) -> None:
        """Give *stream* its scratch buffer (once); nothing to do for ``sim-kernel``.

        The buffer is filled once on the stream (queued, not awaited), so that no
        timed request pays for its first touch.
        """
        rate = self._rate
        if rate is not None and stream not in self._scratch:
            buffer = await self._dev.alloc(rate.chunk_bytes)
            self._scratch[stream] = buffer
            stream.launch(
                fill,
                self._dev.acl.rt.memset_async,
                buffer.ptr,
                rate.chunk_bytes,
                1,
                rate.chunk_bytes,
            )

    def work(
        self, duration_us: float, scratch: int = 0, acl: Any = None
    ) -> tuple[Callable[..., int], tuple[Any, ...]]:
        """The work of one request, as ``(fn, args)`` to queue as ``fn(*args, stream)``.

        *scratch* is the device address of a buffer of ``scratch_bytes`` (for code that
        allocates its own, as a raw thread does); ``sim-kernel`` needs none. *acl* is
        the runtime whose calls to use (default: the device's), for a runtime of the
        same kind driven without aclasync.
        """
        acl = self._dev.acl if acl is None else acl
        if self._rate is None:
            from ..sim import Kernel

            return acl.sim.launch_kernel, (Kernel(duration_us=duration_us),)
        calls, each = self._rate.plan(duration_us)
        return fill, (acl.rt.memset_async, scratch, self._rate.chunk_bytes, calls, each)

    def work_for(
        self, stream: Stream, duration_us: float
    ) -> tuple[Callable[..., int], tuple[Any, ...]]:
        """``work`` on *stream*'s scratch buffer: queue it as ``stream.launch(fn, *args)``,
        as often as wanted (the same objects each time)."""
        scratch = 0
        if self._rate is not None:
            buffer = self._scratch.get(stream)
            if buffer is None:
                raise ValueError(f"{stream!r} has no scratch buffer: await prepare(stream) first")
            scratch = buffer.ptr
        return self.work(duration_us, scratch)

    def launch(self, stream: Stream, duration_us: float) -> None:
        """Queue about *duration_us* of device work on *stream*; return at once.

        Synchronous and non-blocking, like ``Stream.launch``: a failure is the
        stream's, raised by a later await on it. ``memset`` needs ``prepare(stream)``
        first.
        """
        fn, args = self.work_for(stream, duration_us)
        stream.launch(fn, *args)

    def describe(self) -> dict[str, Any]:
        """What this workload queues and how it was calibrated, JSON-ready."""
        if self._rate is None:
            return {"kind": self.kind, "calls": "acl.sim.launch_kernel", **self._details}
        rate = self._rate
        return {
            "kind": self.kind,
            "calls": "acl.rt.memset_async",
            "bytes_per_us": rate.bytes_per_us,
            "gb_per_s": rate.bytes_per_us / 1e3,
            "overhead_us": rate.overhead_us,
            "scratch_bytes": rate.chunk_bytes,
            "cap_bytes": self._details["cap_bytes"],
            "calibration": self._details,
        }

    async def aclose(self) -> None:
        """Free the scratch buffers. Idempotent."""
        buffers = list(self._scratch.values())
        self._scratch.clear()
        for buffer in buffers:
            await buffer.aclose()


def describe_line(described: dict[str, Any]) -> str:
    """One line saying which workload ran and its calibration (from ``describe()``)."""
    kind = described.get("kind")
    if kind == "none":
        return f"workload: none ({described.get('what', 'no device work')})"
    if kind == "sim-kernel":
        return "workload: simulated kernels (acl.sim.launch_kernel), modelled durations"
    if kind == "memset":
        return (
            f"workload: acl.rt.memset_async on a {described['scratch_bytes'] / 2**20:.3g} MiB "
            f"scratch buffer per stream (cap {described['cap_bytes'] / 2**20:g} MiB); "
            f"calibrated on the device: {described['gb_per_s']:.3g} GB/s + "
            f"{described['overhead_us']:.3g} us per call"
        )
    if kind == "model":
        took = described.get("execute_us")
        if not described.get("path"):
            return f"workload: a registered simulated model, {took:g} us per execution (modelled)"
        timed = "" if took is None else f", {took:.0f} us per execution, timed on the device"
        return f"workload: the offline model {described['path']} (acl.mdl.execute_async){timed}"
    return f"workload: {kind}"


async def time_model(
    model: Model,
    stream: Stream,
    inputs: list[DeviceBuffer],
    outputs: list[DeviceBuffer],
    runs: int = 5,
) -> float:
    """Microseconds one execution of *model* takes on the device (timing events, median).

    Queues ``runs + 1`` executions on *stream* (the first is not timed: it may pay for
    set-up) and waits for each.
    """
    dev = stream.device
    model.launch(stream, inputs, outputs)
    await stream.synchronize()
    watch = await Stopwatch.create(dev)
    samples = []
    try:
        for _ in range(runs):
            watch.start(stream)
            model.launch(stream, inputs, outputs)
            watch.stop(stream)
            await stream.synchronize()
            samples.append(await watch.elapsed_us())
    finally:
        await watch.aclose()
    return statistics.median(samples)


async def _calibrate_fill(dev: Device[Any], cap: int) -> tuple[FillRate, dict[str, Any]]:
    """Time fills of growing size on a stream of its own; return the rate found.

    A fill's cost per call is the difference between a run of *n* calls and one of
    *2n*, divided by *n*: what a run pays once (the events, the device waiting for
    the host's first call) cancels out, where dividing one run by its calls counted
    it in and, when it was large, gave a rate several times too low. Each run is
    timed three times and the shortest counts: a busy host lengthens one, never
    shortens it.
    """
    began = time.perf_counter()
    memset = dev.acl.rt.memset_async
    watch = await Stopwatch.create(dev)
    try:
        async with dev.create_stream() as stream:

            async def run_us(buffer: DeviceBuffer, calls: int, each: int) -> float:
                samples = []
                for _ in range(3):
                    watch.launch(stream, fill, (memset, buffer.ptr, buffer.nbytes, calls, each))
                    await stream.synchronize()
                    samples.append(await watch.elapsed_us())
                return min(samples)

            async def per_call(buffer: DeviceBuffer, calls: int, each: int) -> float:
                await run_us(buffer, 1, each)  # the first touch (and the stream's set-up)
                few, more = await run_us(buffer, calls, each), await run_us(buffer, 2 * calls, each)
                if more <= few:  # a stall lengthened the shorter run: not a difference to
                    return more / (2 * calls)  # trust; the longer run's mean errs high
                return (more - few) / calls

            # Each size gets a buffer of its own, so that a small device (the
            # simulator's memory is the host's) never holds more than it measures.
            async with await dev.alloc(MIN_FILL) as small:
                overhead = await per_call(small, 32, MIN_FILL)
            # Grow the fill until one call takes about TARGET_CALL_US (or the cap is
            # reached): the rate that matters is that of the calls work is made of,
            # and one far shorter than the overhead per call measures nothing.
            points: list[tuple[int, float]] = []
            size = min(_FIRST_SIZE, cap)
            for _ in range(_MAX_SIZES):
                async with await dev.alloc(size) as buffer:
                    took = await per_call(buffer, 8, size)
                points.append((size, took))
                rate = _rate(size, took, overhead)
                if size >= cap or TARGET_CALL_US / 2 <= took <= 2 * TARGET_CALL_US:
                    break
                grown = _chunk(rate, cap) if took > 2 * overhead else size * _GROWTH
                size = min(cap, max(MIN_FILL, grown))
    finally:
        await watch.aclose()
    chunk = _chunk(rate, cap)
    details = {
        "cap_bytes": cap,
        "target_call_us": TARGET_CALL_US,
        "empty_call_us": overhead,
        "fills": [{"bytes": b, "us": us} for b, us in points],
        "seconds": time.perf_counter() - began,
    }
    return FillRate(rate, overhead, chunk), details


def _rate(size: int, took: float, overhead: float) -> float:
    """Bytes per microsecond of fill, from one call of *size* bytes taking *took* us.

    A call no longer than twice an empty one (a device far faster than its call
    overhead) leaves too little to measure: the whole call time counts then, which
    errs short, by at most half.
    """
    took = max(took, 1e-3)  # two runs alike to the microsecond: a very fast fill
    return size / (took - overhead if took > 2 * overhead else took)


def _chunk(bytes_per_us: float, cap: int) -> int:
    """The scratch buffer per stream: ``TARGET_CALL_US`` of fill, at most *cap*."""
    chunk = int(min(cap, max(MIN_FILL, bytes_per_us * TARGET_CALL_US)))
    return chunk - chunk % MIN_FILL
