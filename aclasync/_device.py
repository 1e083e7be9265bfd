"""Devices: the entry point, each with its own worker thread."""

from __future__ import annotations

from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from ._backend import resolve_backend
from ._buffers import DeviceBuffer, HostBuffer
from ._errors import AclError, raise_for_status
from ._event import Event
from ._factory import AsyncResource
from ._loop import current_delivery
from ._pyacl.constants import StreamFlag
from ._stream import Stream
from ._stream_pool import StreamPool, stream_pool
from ._waits import check_timeout, timeout_error, unpack_call, unpack_wait
from ._worker import DeviceWorker, Lane, WorkerOptions

__all__ = ["Device", "StreamCreation", "open_device"]

_T = TypeVar("_T")
#: Events created per worker round trip when the pool runs dry.
_EVENT_POOL_REFILL = 16
_B = TypeVar("_B", DeviceBuffer, HostBuffer)


class Device(AsyncResource):
    """An open device. Get one from ``async with aclasync.open_device(...) as dev``."""

    def __init__(self, acl: Any, backend_name: str, device_id: int, options: WorkerOptions):
        self._acl = acl
        self._backend_name = backend_name
        self._id = device_id
        self._worker = DeviceWorker(acl, device_id, options)
        self._closed = False
        self._streams: set[Stream] = set()
        self._events: set[Event] = set()
        self._buffers: set[DeviceBuffer | HostBuffer] = set()
        self._event_pool: dict[bool, list[int]] = {False: [], True: []}
        self._default_stream = Stream._create(self, 0, 0, 0)

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<aclasync.Device {self._id} backend={self._backend_name!r}{state}>"

    @property
    def acl(self) -> Any:
        """The pyACL-shaped backend object in use (``acl.rt.*`` ...)."""
        return self._acl

    @property
    def id(self) -> int:
        return self._id

    @property
    def backend_name(self) -> str:
        """``"sim"``, ``"native"``, or the type name of a backend object."""
        return self._backend_name

    @property
    def default_stream(self) -> Stream:
        """The device's implicit default stream (handle 0); aclasync never destroys it."""
        return self._default_stream

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def _gone(self) -> bool:
        """Closed or broken: nothing is left to release through the worker."""
        return self._closed or self._worker.broken is not None

    @property
    def worker_thread(self) -> Any:
        """The ``threading.Thread`` that makes this device's runtime calls."""
        return self._worker.thread

    def create_stream(self, *, flags: StreamFlag | int = 0, priority: int = 0) -> StreamCreation:
        """Create a stream with ``acl.rt.create_stream_with_config(priority, flags)``.

        Use as ``s = await dev.create_stream()`` or ``async with dev.create_stream() as s``
        (which closes the stream on exit).
        """
        for name, value in (("flags", flags), ("priority", priority)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if flags < 0:
            raise ValueError(f"flags must be >= 0, got {flags}")
        return StreamCreation(self, int(flags), priority)

    async def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn(*args)`` on the device's worker thread and return its result as is.

        For pyACL calls aclasync does not wrap: they run in order with everything else
        queued for the device, on the thread that owns its context. The worker is busy
        meanwhile, so keep such calls short. Cancellation abandons the wait only.
        """
        if not callable(fn):
            raise TypeError(f"call() needs a callable, got {type(fn).__name__}")
        return await self._roundtrip(lambda: fn(*args))

    async def alloc(self, nbytes: int) -> DeviceBuffer:
        """Allocate device memory (``acl.rt.malloc``); freed by ``aclose`` or device close.

        Cancellation takes effect once the buffer exists and is owned by the device, so
        no memory leaks.
        """
        return await self._allocate(DeviceBuffer, nbytes)

    async def alloc_host(self, nbytes: int) -> HostBuffer:
        """Allocate pinned host memory (``acl.rt.malloc_host``) for asynchronous copies.

        Cancellation takes effect once the buffer exists and is owned by the device.
        """
        return await self._allocate(HostBuffer, nbytes)

    async def _allocate(self, kind: type[_B], nbytes: int) -> _B:
        if isinstance(nbytes, bool) or not isinstance(nbytes, int):
            raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
        if nbytes <= 0:
            raise ValueError(f"nbytes must be > 0, got {nbytes}")
        rt = self._acl.rt
        host = kind is HostBuffer
        api = "acl.rt.malloc_host" if host else "acl.rt.malloc"

        def allocate() -> tuple[int, int]:
            result = rt.malloc_host(nbytes) if host else rt.malloc(nbytes, 0)
            return int(result[0]), int(result[-1])

        with anyio.CancelScope(shield=True):
            ptr, ret = await self._roundtrip(allocate)
            raise_for_status(ret, api, device=self._id)
            buffer = kind._create(self, ptr, nbytes)
            self._buffers.add(buffer)
        await anyio.lowlevel.checkpoint_if_cancelled()
        return buffer

    async def synchronize(self, timeout: float | None = None) -> None:
        """Wait for the work queued so far on all of this device's streams.

        ``timeout`` expiry raises ``AclTimeoutError``; cancellation abandons the wait.
        """
        timeout = check_timeout(timeout)
        self._check_open()
        streams = [self._default_stream, *self._streams]
        for stream in streams:
            stream._raise_deferred()
        delivery = current_delivery()
        waiters = []
        for stream in streams:
            waiter = delivery.new_waiter()
            self._worker.fence(stream._lane, waiter)
            waiters.append((stream, waiter))
        with anyio.move_on_after(float("inf") if timeout is None else timeout) as scope:
            results = [(stream, await waiter.wait()) for stream, waiter in waiters]
        if scope.cancelled_caught:
            assert timeout is not None
            raise timeout_error("aclasync.Device.synchronize", timeout, device=self._id)
        for stream, value in results:
            unpack_wait(value, device=self._id, stream=stream.handle)
            stream._raise_deferred()

    async def aclose(self) -> None:
        """Close the device: destroy what it still owns, reset it and join its thread.

        ``reset_device`` waits for queued work, so nothing queued is lost. Idempotent;
        runs to completion even when cancelled.
        """
        if self._closed:
            await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        for stream in (self._default_stream, *self._streams):
            stream._closed = True
        with anyio.CancelScope(shield=True):
            error: BaseException | None = None
            if self._worker.broken is None:
                try:
                    await self._roundtrip(self._teardown, allow_closed=True)
                except BaseException as exc:
                    error = exc
                if self._worker.broken is None:
                    waiter = current_delivery().new_waiter()
                    self._worker.stop(waiter)
                    await waiter.wait()
            self._worker.thread.join()
        if error is not None:
            raise error

    # -- internals -------------------------------------------------------------------

    async def _take_event(self, timing: bool) -> int:
        """An unused event handle from the pool, refilled by one round trip when empty.

        Both kinds are ``create_event`` events: the reference pages make those usable for
        timing and for cross-stream waits alike, while ``create_event_with_flag`` may
        only take TIME_LINE there, and such events cannot be waited on by streams. The
        pools are kept apart so that ``elapsed_time`` can insist on timing events.
        """
        pool = self._event_pool[timing]
        if not pool:
            rt = self._acl.rt
            api = "acl.rt.create_event"

            def create() -> tuple[list[int], int]:
                made: list[int] = []
                for _ in range(_EVENT_POOL_REFILL):
                    event, ret = rt.create_event()
                    if ret:
                        return made, ret
                    made.append(event)
                return made, 0

            with anyio.CancelScope(shield=True):
                made, ret = await self._roundtrip(create)
            pool.extend(made)
            if not pool:
                raise_for_status(ret, api, device=self._id)
        else:
            await anyio.lowlevel.checkpoint()
        return pool.pop()

    def _give_back_event(self, handle: int, timing: bool) -> None:
        self._event_pool[timing].append(handle)

    async def _start(self) -> None:
        waiter = current_delivery().new_waiter()
        self._worker.start(waiter)
        with anyio.CancelScope(shield=True):
            ret = unpack_call(await waiter.wait())
        if ret:
            self._closed = True
            self._worker.stop(current_delivery().new_waiter())
            self._worker.thread.join()
            raise_for_status(ret, "acl.rt.set_device", device=self._id)
        await anyio.lowlevel.checkpoint_if_cancelled()

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        if self._worker.broken is not None:
            raise self._worker.broken

    async def _roundtrip(self, fn: Callable[[], _T], *, allow_closed: bool = False) -> _T:
        """Run ``fn()`` on the worker thread and return its result."""
        if not allow_closed:
            self._check_open()
        waiter = current_delivery().new_waiter()
        self._worker.call(fn, waiter)
        result: _T = unpack_call(await waiter.wait())
        return result

    async def _destroy_stream(self, lane: Lane, *, force: bool, overflow_buffer: int) -> None:
        rt = self._acl.rt
        handle = lane.handle

        def destroy() -> tuple[int, str]:
            if overflow_buffer:
                rt.free(overflow_buffer)
            if force:
                return rt.destroy_stream_force(handle), "acl.rt.destroy_stream_force"
            return rt.destroy_stream(handle), "acl.rt.destroy_stream"

        if not force:
            try:
                waiter = current_delivery().new_waiter()
                self._worker.fence(lane, waiter)
                await waiter.wait()
            except BaseException:
                # Cancelled: still destroy it, after its queued work, on the worker.
                self._worker.call(destroy, current_delivery().new_waiter())
                raise
        with anyio.CancelScope(shield=True):
            ret, api = await self._roundtrip(destroy)
        raise_for_status(ret, api, device=self._id, stream=handle)

    def _teardown(self) -> None:
        """On the worker: destroy owned events, streams and buffers, then reset the device.

        Everything is attempted; the first failure is raised afterwards.
        """
        self._worker.settle()
        rt = self._acl.rt
        failures: list[tuple[int, str]] = []

        def release(api: str, *args: int) -> None:
            ret = getattr(rt, api)(*args)
            if ret:
                failures.append((ret, f"acl.rt.{api}"))

        pooled = [h for handles in self._event_pool.values() for h in handles]
        for handle in (*pooled, *(event.handle for event in self._events)):
            release("destroy_event", handle)
        for stream in (*self._streams, self._default_stream):
            if stream._overflow_buffer:
                release("free", stream._overflow_buffer)
            if stream.handle:
                release("destroy_stream", stream.handle)
        for buffer in self._buffers:
            release(buffer._free_api, buffer._ptr)
        release("reset_device", self._id)
        for handles in self._event_pool.values():
            handles.clear()
        self._events.clear()
        self._streams.clear()
        self._buffers.clear()
        if failures:
            raise AclError(*failures[0], device=self._id)

    def stream_pool(
        self, size: int, *, flags: StreamFlag | int = 0, priority: int = 0
    ) -> StreamPool:
        """Return an unopened ``StreamPool`` of *size* streams; open it with ``async with``."""
        return stream_pool([self], size, flags=flags, priority=priority)


class StreamCreation:
    """What ``Device.create_stream()`` returns: await it, or use it with ``async with``."""

    def __init__(self, device: Device, flags: int, priority: int) -> None:
        self._device = device
        self._flags = flags
        self._priority = priority
        self._stream: Stream | None = None

    def __await__(self) -> Generator[Any, None, Stream]:
        return self._create().__await__()

    async def __aenter__(self) -> Stream:
        self._stream = await self._create()
        return self._stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stream is not None:
            await self._stream.aclose()

    async def _create(self) -> Stream:
        device = self._device
        rt = device.acl.rt
        priority, flags = self._priority, self._flags
        with anyio.CancelScope(shield=True):
            handle, ret = await device._roundtrip(
                lambda: rt.create_stream_with_config(priority, flags)
            )
        raise_for_status(ret, "acl.rt.create_stream_with_config", device=device.id)
        stream = Stream._create(device, handle, flags, priority)
        device._streams.add(stream)
        await anyio.lowlevel.checkpoint_if_cancelled()
        return stream


class _DeviceOpener:
    """The async context manager ``open_device`` returns."""

    def __init__(self, device_id: int, backend: object, options: WorkerOptions) -> None:
        self._device_id = device_id
        self._backend = backend
        self._options = options
        self._device: Device | None = None

    async def __aenter__(self) -> Device:
        acl, name = resolve_backend(self._backend)
        device = Device._create(acl, name, self._device_id, self._options)
        await device._start()
        self._device = device
        return device

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._device is not None:
            await self._device.aclose()


def open_device(
    device_id: int = 0, *, backend: object = None, options: WorkerOptions | None = None
) -> _DeviceOpener:
    """Open a device: ``async with aclasync.open_device(0, backend="sim") as dev``.

    Parameters
    ----------
    device_id:
        The device to set on the worker thread.
    backend:
        ``"sim"`` (the simulator), ``"native"`` (the real ``acl`` module), a pyACL-shaped
        object, or ``None``: then ``$ACLASYNC_BACKEND``, then native if ``import acl``
        works, else ``BackendUnavailableError`` naming the choices.
    options:
        ``WorkerOptions`` tuning the device worker.

    Entering starts the worker thread and sets the device on it; leaving destroys what
    the device still owns, resets the device (waiting for queued work) and joins the
    thread.
    """
    if isinstance(device_id, bool) or not isinstance(device_id, int):
        raise TypeError(f"device_id must be an int, got {type(device_id).__name__}")
    if device_id < 0:
        raise ValueError(f"device_id must be >= 0, got {device_id}")
    if options is not None and not isinstance(options, WorkerOptions):
        raise TypeError(f"options must be aclasync.WorkerOptions, got {type(options).__name__}")
    return _DeviceOpener(device_id, backend, options or WorkerOptions())
