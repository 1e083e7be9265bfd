"""Devices: the entry point, each with its own worker thread."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, overload

from ._backend import resolve_backend
from ._buffers import DeviceBuffer, HostBuffer
from ._device_state import DeviceState
from ._event import Event
from ._factory import AsyncResource, Creation
from ._interop import event_handle, stream_handle
from ._lanes import EventRecord, Lane
from ._pyacl.constants import StreamFlag
from ._stream import Stream
from ._stream_config import check_stream_config
from ._stream_pool import StreamPool, stream_pool
from ._waits import check_plain_callable, check_timeout
from ._worker import WorkerOptions

if TYPE_CHECKING:
    from typing_extensions import TypeVar as TypeVarWithDefault

    from ._model import ModelLoading
    from ._pyacl.backend import AclBackend
    from .sim import SimAcl

    #: The backend type of a ``Device``: ``AclBackend`` (pyACL's surface) unless known to
    #: be the simulator (``Device[SimAcl]``, whose ``acl`` has ``.sim``).
    AclT = TypeVarWithDefault("AclT", bound=AclBackend, default=AclBackend, covariant=True)
else:
    AclT = TypeVar("AclT", covariant=True)

__all__ = ["AclT", "Device", "StreamCreation", "open_device"]

_T = TypeVar("_T")


class Device(AsyncResource, Generic[AclT]):
    """An open device. Get one from ``async with aclasync.open_device(...) as dev``, or
    ``dev = await aclasync.open_device(...)`` and close it with ``await dev.aclose()``
    (a device collected unclosed warns with ``ResourceWarning``).

    Any event loop may use it, in any thread, not only the one that opened it: each
    await is answered on the loop that awaits.

    Generic in its backend for the type checker: ``Device`` (``Device[AclBackend]``) has
    an ``acl`` typed as pyACL's surface; ``Device[SimAcl]``, what ``backend="sim"`` or a
    simulated runtime gives, one with the simulator's extensions (``dev.acl.sim``).

    Failures of queued work are reported by the rule in docs/errors.md:
    once each, by the first await on their stream or on the device that completes
    after the worker saw them, oldest first; whatever is left is raised by the close.
    """

    def __init__(self, acl: AclT, backend_name: str, device_id: int, options: WorkerOptions):
        self._acl = acl
        self._backend_name = backend_name
        self._state = DeviceState(acl, device_id, options)
        self._default_stream = Stream._create(self, self._state, self._state.default_lane, 0, 0)

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # As asyncio's transports do: a device nobody closed keeps its worker thread
        # and its runtime resources; say so when it is collected (-W default shows it).
        state = getattr(self, "_state", None)
        if state is not None and not state.closed:
            _warn(
                f"unclosed {self!r}: close it with `await dev.aclose()` or open it with "
                "`async with aclasync.open_device(...) as dev`",
                ResourceWarning,
                source=self,
            )

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<aclasync.Device {self.id} backend={self._backend_name!r}{state}>"

    @property
    def acl(self) -> AclT:
        """The pyACL-shaped backend object in use (``acl.rt.*`` ...)."""
        return self._acl

    @property
    def id(self) -> int:
        """The device id, as passed to ``open_device`` (the logical id in this process)."""
        return self._state.device_id

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
        """Whether the device is closed, or closing (``aclose`` has begun)."""
        return self._state.closed

    @property
    def worker_thread(self) -> Any:
        """The ``threading.Thread`` that makes this device's runtime calls."""
        return self._state.worker.thread

    def create_stream(self, *, flags: StreamFlag | int = 0, priority: int = 0) -> StreamCreation:
        """Create a stream with ``acl.rt.create_stream_with_config(priority, flags)``.

        Use as ``s = await dev.create_stream()`` or ``async with dev.create_stream() as s``
        (which closes the stream on exit). *priority* is 0 (highest) to 7. *flags*
        combines ``StreamFlag`` members; bits pyACL does not define, and the flags under
        which a sync returns at once (``PERSISTENT``, ``CPU_SCHEDULE``,
        ``DEVICE_USE_ONLY``), are a ``ValueError``. A cancellation that arrives while
        the stream is being made destroys it again: nothing is left behind.
        """
        flags, priority = check_stream_config(flags, priority)
        return StreamCreation(self, flags, priority)

    async def _create_private_stream(self, flags: int, priority: int = 0) -> Stream:
        """A stream one holder owns (a ``Model``'s runs, a pool's borrower):
        ``synchronize`` waits for it but leaves its failures to the holder (the
        device's close reports what is left). Cancellation-safe, as ``create_stream``."""
        lane = await self._state.create_stream(priority, flags, reported=False)
        return Stream._create(self, self._state, lane, flags, priority)

    async def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn(*args)`` on the device's worker thread and return its result as is.

        For pyACL calls aclasync does not wrap: they run in order with everything else
        queued for the device, on the thread that owns its context. The worker is busy
        meanwhile, so keep such calls short. ``fn`` must be a plain function (a
        coroutine function is a ``TypeError``). Cancellation abandons the wait only.
        """
        check_plain_callable(fn, "call()")
        return await self._state.roundtrip(lambda: fn(*args))

    async def alloc(self, nbytes: int) -> DeviceBuffer:
        """Allocate device memory (``acl.rt.malloc``); freed by ``aclose`` or device close.

        A cancellation that arrives meanwhile frees the memory again: nothing leaks.
        """
        ptr = await self._state.alloc(_check_nbytes(nbytes), host=False)
        return DeviceBuffer._create(self, self._state, ptr, nbytes)

    async def alloc_host(self, nbytes: int) -> HostBuffer:
        """Allocate pinned host memory (``acl.rt.malloc_host``) for asynchronous copies.

        A cancellation that arrives meanwhile frees the memory again: nothing leaks.
        """
        ptr = await self._state.alloc(_check_nbytes(nbytes), host=True)
        return HostBuffer._create(self, self._state, ptr, nbytes)

    async def synchronize(self, timeout: float | None = None) -> None:
        """Wait for the work queued so far on all of this device's streams.

        Then raises the device's oldest unreported failure, if any (any stream's but
        those of pool and model streams, which are their holders' to report).
        A stream force-closed meanwhile is not waited for (its queued work was
        dropped; the forced close is that stream's to report). ``timeout`` expiry
        raises ``AclTimeoutError``; cancellation abandons the wait. Neither consumes
        a failure.
        """
        await self._state.synchronize(check_timeout(timeout))

    def wrap_stream(self, obj: object) -> Stream:
        """A ``Stream`` over a stream aclasync did not create; never blocks.

        *obj* is an ``aclrtStream`` handle (an ``int``), an object with an
        ``npu_stream`` attribute (torch_npu's ``torch.npu.Stream``: reading it first
        flushes torch_npu's own task queue onto the stream, so wrap it again after
        queuing the torch work to await), or one with ``__acl_stream__()``. The stream
        must be one of this device's, in the context its worker uses (the device's
        default context, where torch_npu and plain ``set_device`` code make theirs).

        Every ``Stream`` operation works on it, on every loop. ``synchronize()`` waits
        for what was queued on the stream when the runtime's wait began, the owner's
        work included, however another thread keeps launching; failures of work
        aclasync did not launch are raised by the first await that sees them, as
        docs/errors.md says (and a sync by the owner may see them first: pyACL
        reports a failure to one sync). aclasync never destroys a wrapped stream: its
        ``aclose()`` waits for the work queued so far and lets go of it (with
        ``force=True``, at once), and the device's close lets go of it without waiting,
        leaving the owner's work running.

        ``wrap_stream(0)`` is ``default_stream``; a handle this device made or wrapped
        already gives that same ``Stream`` (if that one was collected unclosed, a new one
        over the same stream: one the device made stays the device's, not wrapped). A
        wrapped stream whose every ``Stream`` was collected unclosed is let go of at the
        device's next ``synchronize`` or new wrap: the device no longer waits for it, and
        its unreported failures go to the device. The owner must keep the stream alive
        while aclasync uses it: on the simulator a destroyed, unknown or other device's
        handle raises the runtime's code as an ``AclError`` at the first operation; on
        CANN it is undefined behaviour. ``TypeError`` for anything but the three forms;
        ``ValueError`` for another device's ``Stream``, a negative handle or one of 2**64
        or more; ``anyio.ClosedResourceError`` for a closed ``Stream`` or device.
        """
        if isinstance(obj, Stream) and obj.device is not self:
            raise ValueError(f"{obj!r} belongs to {self._state.other(obj._state)}")
        handle = stream_handle(obj)
        self._state.check_open()
        if handle == 0:
            return self._default_stream
        known = self._state.streams.get(handle)
        if known is not None and not known.closed:
            known._lane.share()  # its handle is in other hands: never known idle again
            return known
        lane = self._state.adopt_stream(handle)
        if not lane.borrowed:  # one it made, whose Stream was collected: its again
            lane.share()
        return Stream._create(self, self._state, lane, lane.flags, lane.priority)

    def wrap_event(self, obj: object) -> Event:
        """An ``Event`` over an event aclasync did not create; never blocks.

        *obj* is an ``aclrtEvent`` handle (an ``int``) or an object with
        ``__acl_event__()``. ``synchronize``, ``query`` and ``elapsed_time`` (with a
        wrapped or an aclasync event) work on it. An event not yet recorded is never
        reported complete: a wait waits for it to be recorded and to complete (pyACL's
        ``synchronize_event`` returns at once for such an event; its
        ``query_event_status`` tells the two apart), and ``query()`` is False. (An
        Ex-mode event, which pyACL reports complete before it is recorded, cannot be
        told apart.) aclasync never destroys it: ``aclose()`` lets go of it, and waits
        still pending raise ``anyio.ClosedResourceError``. The owner must keep it
        alive meanwhile (see ``wrap_stream`` for a handle that is not). ``ValueError``
        for another device's ``Event``; ``anyio.ClosedResourceError`` for a closed one.
        """
        if isinstance(obj, Event) and obj._state is not self._state:
            raise ValueError(f"{obj!r} is an event of another device than {self!r}")
        handle = event_handle(obj)
        self._state.check_open()
        lane = Lane(-1, borrowed=True)  # its points only: no stream is known
        return Event._create(None, self._state, lane, handle, EventRecord(1), True)

    def stream_pool(
        self, size: int, *, flags: StreamFlag | int = 0, priority: int = 0
    ) -> StreamPool:
        """Return an unopened ``StreamPool`` of *size* streams; open it with ``async with``."""
        return stream_pool([self], size, flags=flags, priority=priority)

    def load_model(
        self, path: str | os.PathLike[str], *, pool_size: int | None = None
    ) -> ModelLoading:
        """Load an offline model; await the result or use it with ``async with``.

        *path* is a ``str`` or ``os.PathLike``; *pool_size* caps the buffer sets the
        model pools (``None``: as many as concurrent runs). Returns an
        ``aclasync.ModelLoading`` that yields an ``aclasync.Model``; loading
        (``acl.mdl.load_from_file`` and the description) runs on the worker.
        Cancellation takes effect once it is loaded.
        """
        from ._model import ModelLoading  # the model runtime loads only when used

        return ModelLoading(self, path, pool_size)

    async def aclose(self) -> None:
        """Close the device: destroy what it still owns, reset it and join its thread.

        ``reset_device`` waits for queued work, so nothing queued is lost. Raises the
        failures nobody has been told of yet (one as itself, several as an
        ``ExceptionGroup``). Idempotent; a second concurrent call waits for the first.
        Runs to completion even when cancelled; the cancellation then goes on, with
        the unreported failures as notes.
        """
        await self._state.aclose()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._state.aclose(exc)


def _check_nbytes(nbytes: object) -> int:
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
    if nbytes <= 0:
        raise ValueError(f"nbytes must be > 0, got {nbytes}")
    return nbytes


class StreamCreation(Creation[Stream]):
    """What ``Device.create_stream()`` returns: await it, or use it with ``async with``."""

    def __init__(self, device: Device, flags: StreamFlag, priority: int) -> None:
        self._device = device
        self._flags = flags
        self._priority = priority

    async def _create(self) -> Stream:
        device = self._device
        lane = await device._state.create_stream(self._priority, self._flags)
        return Stream._create(device, device._state, lane, self._flags, self._priority)


class _DeviceOpener(Creation[Device[AclT]]):
    """What ``open_device`` returns: use it with ``async with`` (or await it and close)."""

    def __init__(self, device_id: int, backend: object, options: WorkerOptions) -> None:
        self._device_id = device_id
        self._backend = backend
        self._options = options

    def __repr__(self) -> str:
        return f"<aclasync.open_device({self._device_id}) opener: async with it, or await it>"

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the opener lacks: a Device's, used before opening it.
        if not name.startswith("_") and hasattr(Device, name):
            raise AttributeError(
                f"open_device() returns an opener, not a Device: it has no {name!r}. Use "
                f"`async with aclasync.open_device(...) as dev:` (closed at the end of the "
                f"block), or `dev = await aclasync.open_device(...)` and later "
                f"`await dev.aclose()`; then dev.{name}"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    async def _create(self) -> Device[AclT]:
        acl, name = resolve_backend(self._backend)
        device = cast("Device[AclT]", Device._create(acl, name, self._device_id, self._options))
        await device._state.start()
        return device


@overload
def open_device(
    device_id: int = 0,
    *,
    backend: Literal["sim"] | SimAcl,
    options: WorkerOptions | None = None,
) -> _DeviceOpener[SimAcl]: ...
@overload
def open_device(
    device_id: int = 0, *, backend: object = None, options: WorkerOptions | None = None
) -> _DeviceOpener[AclBackend]: ...
def open_device(
    device_id: int = 0, *, backend: object = None, options: WorkerOptions | None = None
) -> _DeviceOpener[Any]:
    """Open a device: ``async with aclasync.open_device(0, backend="sim") as dev``.

    Or ``dev = await aclasync.open_device(0, backend="sim")``, then ``await dev.aclose()``
    when done. The opener returned is no ``Device``: use one of these two forms.

    Entering starts the worker thread and sets the device on it; leaving destroys what
    the device still owns, resets the device (waiting for queued work) and joins the
    thread. A cancellation that arrives while the device opens closes it again; the
    close runs to completion even when cancelled (see ``Device.aclose``).

    Parameters
    ----------
    device_id:
        The device to set on the worker thread.
    backend:
        ``"sim"`` (the simulator), ``"native"`` (the real ``acl`` module), a pyACL-shaped
        object, or ``None``: then ``$ACLASYNC_BACKEND``, then native if ``import acl``
        works, else ``BackendUnavailableError`` naming the choices. For the type
        checker, ``"sim"`` or a ``SimAcl`` gives a ``Device[SimAcl]`` (``dev.acl.sim``
        exists), anything else a ``Device`` whose ``acl`` is ``AclBackend``.
    options:
        ``WorkerOptions`` tuning the device worker.
    """
    if isinstance(device_id, bool) or not isinstance(device_id, int):
        raise TypeError(f"device_id must be an int, got {type(device_id).__name__}")
    if not 0 <= device_id < 2**31:  # pyACL parses it as a C int
        raise ValueError(f"device_id must be >= 0 and < 2**31, got {device_id}")
    if options is not None and not isinstance(options, WorkerOptions):
        raise TypeError(f"options must be aclasync.WorkerOptions, got {type(options).__name__}")
    return _DeviceOpener(device_id, backend, options or WorkerOptions())
