"""aclasync in Ray: async actors that own one NPU each, and a driver that feeds them.

Needs the ``aclasync[ray]`` extra; the rest of aclasync never imports Ray.

Ray knows NPUs as a resource. An actor declared with ``resources={"NPU": 1}`` gets one
NPU, and Ray sets ``ASCEND_RT_VISIBLE_DEVICES`` in its process to that NPU's physical id,
so that inside the actor the NPU is logical device 0 (CANN, and aclasync's simulator,
number the visible devices from 0). Async actors run their methods on an asyncio loop,
which is where ``await stream.synchronize()`` belongs.

With ``RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1`` in the cluster's environment
Ray leaves the variable alone: the actor sees every NPU its node sees, and the one Ray
assigned it is named only by ``ray.get_runtime_context().get_accelerator_ids()["NPU"]``,
as a physical id. :meth:`NpuActor.device` opens the assigned NPU in both modes: it takes
Ray's physical id and finds its logical number in the process's visible list (its
position in ``ASCEND_RT_VISIBLE_DEVICES``, or the id itself when the variable is unset).
:func:`assigned_npus` and :func:`logical_device` do the same for code of your own.

.. code-block:: python

    import ray
    from aclasync.ray import NpuActor, dispatch

    @ray.remote(resources={"NPU": 1}, num_cpus=0)
    class Worker(NpuActor):
        async def square(self, x: float) -> float:
            dev = await self.device()        # opened on first use, closed when the actor exits
            ...

    ray.init(resources={"NPU": 4})
    workers = [Worker.remote(backend="sim") for _ in range(4)]
    for done in dispatch(workers, "square", range(100), in_flight=2):
        print(done.index, done.value)

Importing this module keeps Ray's NPU detection from logging "Failed to detect NPU
type." tracebacks when there is no ``acl`` module to detect NPUs with (the simulator on
a machine without CANN); any other error it logs still shows.

Errors raised by an actor method reach the caller with their type: an
:class:`aclasync.AclError` raised in the actor is caught as ``aclasync.AclError`` (and
as Ray's ``RayTaskError``) by the driver, with its ``code``, ``name``, ``api`` and
``device``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

import anyio
import anyio.lowlevel

from ._device import Device, open_device
from ._errors import AclasyncError, raise_for_status
from ._loop import Turn
from ._ray_logging import quiet_npu_detection
from ._worker import WorkerOptions

try:
    import ray
    import ray.exceptions
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(f"aclasync.ray needs Ray: pip install 'aclasync[ray]' ({exc})") from exc

# Without CANN, ray.init(resources={"NPU": n}) would log two "Failed to detect NPU
# type." tracebacks for an `import acl` that cannot work; see _ray_logging.
quiet_npu_detection()

__all__ = [
    "NOSET_VISIBLE_DEVICES_ENV",
    "VISIBLE_DEVICES_ENV",
    "ActorInfo",
    "ActorLostError",
    "Completed",
    "NpuActor",
    "assigned_npus",
    "dispatch",
    "logical_device",
    "visible_devices",
]

#: The variable through which Ray (and CANN) tell a process which NPUs it may use.
VISIBLE_DEVICES_ENV = "ASCEND_RT_VISIBLE_DEVICES"
#: Set to ``1`` where Ray starts workers, it stops Ray from setting ``VISIBLE_DEVICES_ENV``.
NOSET_VISIBLE_DEVICES_ENV = "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"


def visible_devices() -> tuple[int, ...] | None:
    """Return the physical NPU ids this process may use, or ``None`` if not restricted.

    Reads ``ASCEND_RT_VISIBLE_DEVICES`` (a comma-separated list of ids) the way CANN
    does: logical device ``k`` of this process is the ``k``-th id listed.

    Raises
    ------
    ValueError
        If the variable is set but is not a comma-separated list of integers.
    """
    raw = os.environ.get(VISIBLE_DEVICES_ENV)
    if raw is None:
        return None
    ids = [part.strip() for part in raw.split(",") if part.strip()]
    try:
        return tuple(int(part) for part in ids)
    except ValueError:
        raise ValueError(
            f"{VISIBLE_DEVICES_ENV}={raw!r}: expected comma-separated device ids"
        ) from None


def assigned_npus() -> tuple[int, ...]:
    """Return the physical ids of the NPUs Ray assigned to this worker, in order.

    From ``ray.get_runtime_context().get_accelerator_ids()["NPU"]``, which names physical
    NPUs whether or not Ray set ``ASCEND_RT_VISIBLE_DEVICES``. Empty outside a Ray worker
    (``ray.is_initialized()`` false) and for a worker that asked for no NPU.
    """
    if not ray.is_initialized():
        return ()
    ids = ray.get_runtime_context().get_accelerator_ids().get("NPU", [])
    return tuple(sorted(int(npu) for npu in ids))


def logical_device(physical: int) -> int:
    """Return the logical device id under which this process sees physical NPU *physical*.

    Its position in ``ASCEND_RT_VISIBLE_DEVICES`` when the variable is set (as CANN
    numbers the visible devices), else *physical* itself.

    Raises
    ------
    ValueError
        If the variable is set and does not list *physical*.
    """
    visible = visible_devices()
    if visible is None:
        return physical
    try:
        return visible.index(physical)
    except ValueError:
        raise ValueError(
            f"NPU {physical} is not visible here: {VISIBLE_DEVICES_ENV}="
            f"{os.environ.get(VISIBLE_DEVICES_ENV)!r}"
        ) from None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ActorInfo:
    """What an :class:`NpuActor` reports about itself (picklable, for the driver).

    Attributes
    ----------
    pid:
        The actor's process id.
    visible_devices:
        ``ASCEND_RT_VISIBLE_DEVICES`` as parsed by :func:`visible_devices`.
    ray_npus:
        The physical NPUs Ray assigned to the actor (:func:`assigned_npus`).
    device_id:
        The logical device the actor opened.
    physical_device:
        The physical NPU behind it, as the runtime maps it
        (``acl.rt.get_phy_dev_id_by_logic_dev_id``).
    device_count:
        How many devices the runtime reports inside the actor.
    backend_name, soc_name:
        ``"sim"``, ``"native"`` or the backend's type name; the chip's name.
    """

    pid: int
    visible_devices: tuple[int, ...] | None
    ray_npus: tuple[int, ...]
    device_id: int
    physical_device: int
    device_count: int
    backend_name: str
    soc_name: str


class NpuActor:
    """Base class for an async Ray actor that owns one NPU.

    Subclass it and decorate the subclass with ``@ray.remote(resources={"NPU": 1})``.
    The device (the NPU Ray assigned) is opened on the first ``await self.device()`` and
    closed by :meth:`close`, or when the actor exits gracefully (Ray calls
    ``__ray_shutdown__``). A killed actor's process is gone with its device; nothing of
    it outlives the process. A Ray Serve deployment can subclass it too (Serve calls
    the deployment's ``__del__`` at shutdown, which can await :meth:`close`).

    Parameters
    ----------
    device_id:
        Which of the NPUs Ray assigned to the actor to open: 0 is the first (by
        physical id). Its logical id is found as :func:`logical_device` does, so the
        right NPU opens whether or not Ray set ``ASCEND_RT_VISIBLE_DEVICES``. In a
        process Ray assigned no NPU (or outside Ray), *device_id* is the logical device.
    backend:
        As ``aclasync.open_device(backend=...)``: ``"sim"``, ``"native"``, or ``None``
        for ``$ACLASYNC_BACKEND``, then native. Each actor process has its own
        simulated runtime, whose devices are the actor's visible set.
    options:
        Worker tuning, as for ``open_device``.
    """

    def __init__(
        self,
        *,
        device_id: int = 0,
        backend: str | None = None,
        options: WorkerOptions | None = None,
    ) -> None:
        if backend is not None and not isinstance(backend, str):
            raise TypeError(
                "NpuActor(backend=...) takes 'sim', 'native' or None: a backend object "
                "cannot be shipped to an actor process"
            )
        if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
            raise ValueError(f"device_id must be an int >= 0, got {device_id!r}")
        self._device_id = device_id
        self._backend = backend
        self._options = options
        self._device: Device[Any] | None = None
        self._exit_stack: contextlib.AsyncExitStack | None = None
        # Ray runs each concurrency group on an event loop (and thread) of its own: a
        # Turn, unlike an asyncio.Lock, wakes a waiter of any loop.
        self._opening = Turn()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def device(self) -> Device[Any]:
        """Return the actor's open device, opening it on first use.

        Typed ``Device[Any]``: the backend is the actor's run-time choice (``backend=``).

        Concurrent first calls open it once, on whichever of the actor's event loops
        they run (Ray gives each concurrency group a loop and thread of its own); the
        others wait for it. Cancellation while opening leaves it closed (a later call
        opens it again); cancellation while waiting abandons the wait only.

        Raises
        ------
        anyio.ClosedResourceError
            After :meth:`close`.
        ValueError
            If Ray assigned the actor fewer NPUs than ``device_id + 1``, or one the
            process cannot see.
        """
        if self._device is not None:
            await anyio.lowlevel.checkpoint()
            return self._device
        if self._closed:
            raise anyio.ClosedResourceError("this actor's device was closed")
        while (busy := self._opening.take()) is not None:  # another first call opens it
            await busy.wait()
        try:
            return await self._open_device()
        finally:
            self._opening.end()

    async def _open_device(self) -> Device[Any]:
        """Open the device unless a call before did; the caller holds the ``_opening`` turn."""
        if self._closed:
            raise anyio.ClosedResourceError("this actor's device was closed")
        if self._device is not None:
            return self._device
        stack = contextlib.AsyncExitStack()
        device = await stack.enter_async_context(
            open_device(self._logical_id(), backend=self._backend, options=self._options)
        )
        if self._closed_meanwhile():  # close() came while it opened: it waits for this
            await stack.aclose()
            raise anyio.ClosedResourceError("this actor's device was closed")
        self._exit_stack, self._device = stack, device
        self._loop = asyncio.get_running_loop()
        return device

    def _closed_meanwhile(self) -> bool:
        """Whether :meth:`close` was called (read afresh, after an await)."""
        return self._closed

    def _logical_id(self) -> int:
        npus = assigned_npus()
        if not npus:
            return self._device_id
        if self._device_id >= len(npus):
            raise ValueError(
                f"device_id={self._device_id}, but Ray assigned this actor "
                f"{len(npus)} NPU(s): {list(npus)}"
            )
        return logical_device(npus[self._device_id])

    async def describe(self) -> ActorInfo:
        """Open the device if needed and say which NPU this actor holds.

        A few short worker round trips; a cancellation abandons the one under way (and
        one that arrives while the device opens is handled as :meth:`device` says).
        """
        dev = await self.device()
        count, ret = await dev.call(dev.acl.rt.get_device_count)
        raise_for_status(ret, "acl.rt.get_device_count", device=dev.id)
        soc = await dev.call(dev.acl.get_soc_name)
        physical, ret = await dev.call(dev.acl.rt.get_phy_dev_id_by_logic_dev_id, dev.id)
        raise_for_status(ret, "acl.rt.get_phy_dev_id_by_logic_dev_id", device=dev.id)
        visible = visible_devices()
        return ActorInfo(
            pid=os.getpid(),
            visible_devices=visible,
            ray_npus=assigned_npus(),
            device_id=dev.id,
            physical_device=int(physical),
            device_count=int(count),
            backend_name=dev.backend_name,
            soc_name=str(soc),
        )

    async def synchronize(self, timeout: float | None = None) -> None:
        """Wait for all work on the actor's device (``Device.synchronize``).

        Opens the device first if needed. ``timeout`` (seconds) expiry raises
        ``AclTimeoutError``; cancellation abandons the wait only. Neither consumes a
        failure: the next await reports it.
        """
        dev = await self.device()
        await dev.synchronize(timeout=timeout)

    async def close(self) -> None:
        """Close the device: destroy what it owns, reset it, join its worker.

        Idempotent. Errors still unreported by the device are raised here. Runs to
        completion even when cancelled, as ``Device.aclose`` does. A first
        :meth:`device` still opening, on any of the actor's event loops, is waited for
        (it then closes what it opened and raises ``anyio.ClosedResourceError``).
        """
        self._closed = True
        with anyio.CancelScope(shield=True):  # an open under way closes what it made
            while (busy := self._opening.take()) is not None:
                await busy.wait()
        stack, self._exit_stack = self._exit_stack, None
        self._device = None
        self._opening.end()
        if stack is not None:
            await stack.aclose()
        else:
            await anyio.lowlevel.checkpoint()

    def __ray_shutdown__(self) -> None:
        # Ray calls this on the actor's main thread when the actor exits gracefully,
        # after its pending tasks and with its event loop stopped: run the close there.
        # (Also after an __init__ that raised: then nothing was set, nothing opened.)
        loop = getattr(self, "_loop", None)
        if getattr(self, "_exit_stack", None) is None or loop is None or loop.is_closed():
            return
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(self.close(), loop).result(timeout=60)
        else:
            loop.run_until_complete(self.close())


@dataclasses.dataclass(frozen=True)
class Completed:
    """One finished item from :func:`dispatch`.

    Attributes
    ----------
    index:
        The item's position in the input.
    actor:
        The position, in the ``actors`` list, of the actor that produced it.
    value:
        What the actor method returned.
    """

    index: int
    actor: int
    value: Any


def _lost_message(actors: int, unfinished: int, read: int, items: Iterable[Any]) -> str:
    """What ``ActorLostError`` says: the items read and unfinished, and the rest."""
    message = f"all {actors} actors died; {unfinished} item(s) read and unfinished"
    if isinstance(items, Sized):
        return f"{message}, {len(items) - read} never read"
    return f"{message}; the rest of the items were never read"


class ActorLostError(AclasyncError, RuntimeError):
    """Every actor given to :func:`dispatch` died before the work was done.

    Its message says how many items were read from the source and left unfinished,
    and how many were never read (when the source has a length).
    """


#: How long :func:`dispatch` lets an actor stay unavailable (``ActorUnavailableError``:
#: Ray restarts it), with no result, before it takes it for dead (seconds). Restarts
#: that reopen an NPU or reload a model take seconds.
_UNAVAILABLE_S = 60.0
#: The first pause before an unavailable actor is sent work again (then doubled, up
#: to ``_MAX_PAUSE_S``): calls made while Ray restarts it fail at once.
_FIRST_PAUSE_S = 0.1
_MAX_PAUSE_S = 2.0


def dispatch(
    actors: Sequence[Any],
    method: str,
    items: Iterable[Any],
    *,
    in_flight: int = 2,
    lost: list[int] | None = None,
) -> Iterator[Completed]:
    """Spread *items* over *actors*, calling ``actor.<method>.remote(item)``; yield results.

    At most *in_flight* items are outstanding per actor (backpressure: items are read
    from *items* only as slots free up). Results are yielded as they finish, in any
    order. An actor that dies (``ray.exceptions.RayActorError``) is dropped, its
    position appended to *lost* if given, and its unfinished items are sent to the
    others. An actor Ray is restarting (``ActorUnavailableError``, under
    ``max_restarts``) is kept: its unfinished items are sent again, to the others or,
    after a pause (0.1 s, doubling up to 2 s), to it (Ray cannot say whether they ran,
    so they may run twice); one still unavailable 60 s after it first
    was, with no result since, is dropped as dead. Any other
    exception from an item is raised at once; the items still in flight are cancelled,
    as they are when the iteration is closed early.

    Blocks the calling thread in ``ray.wait``; run it in a thread from async code.
    The arguments are checked at the call, before any item is read.

    Raises
    ------
    ActorLostError
        If every actor died with items left; its cause is the last actor's
        ``RayActorError``, which says why (an ``__init__`` that raised, a killed process).
    TypeError
        If *actors* is not a sequence, *method* not a str, *items* not iterable,
        *in_flight* not an int or *lost* not a list.
    ValueError
        If *actors* is empty or *in_flight* is below 1.
    AttributeError
        If an actor has no method *method*.
    """
    if not isinstance(actors, Sequence) or isinstance(actors, str):
        raise TypeError(f"actors must be a sequence of actor handles, got {type(actors).__name__}")
    if not actors:
        raise ValueError("dispatch() needs at least one actor")
    if not isinstance(method, str):
        raise TypeError(f"method must be a method name (str), got {type(method).__name__}")
    if isinstance(in_flight, bool) or not isinstance(in_flight, int):
        raise TypeError(f"in_flight must be an int, got {type(in_flight).__name__}")
    if in_flight < 1:
        raise ValueError(f"in_flight must be >= 1, got {in_flight}")
    if lost is not None and not isinstance(lost, list):
        raise TypeError(f"lost must be a list or None, got {type(lost).__name__}")
    for position, actor in enumerate(actors):
        if not hasattr(actor, method):  # (an actor handle knows its methods locally)
            raise AttributeError(f"actors[{position}] has no method {method!r}: {actor!r}")
    try:
        source = iter(items)
    except TypeError:
        raise TypeError(f"items must be iterable, got {type(items).__name__}") from None
    return _dispatch(_Feed(actors, method, items, source, in_flight, lost))


class _Feed:
    """What :func:`dispatch` tracks: the items to send, and what each actor holds."""

    def __init__(
        self,
        actors: Sequence[Any],
        method: str,
        items: Iterable[Any],
        source: Iterator[Any],
        in_flight: int,
        lost: list[int] | None,
    ) -> None:
        self.actors, self.method, self.in_flight, self.lost = actors, method, in_flight, lost
        self.items = items  # (for its length, in ActorLostError's message)
        self.source = enumerate(source)
        self.read = 0
        self.exhausted = False
        self.retry: deque[tuple[int, Any]] = deque()
        self.alive = set(range(len(actors)))
        self.load = dict.fromkeys(self.alive, 0)
        #: Per actor found unavailable, with no result since: its pause.
        self.down: dict[int, _Down] = {}
        #: ref -> (actor, index, item)
        self.pending: dict[Any, tuple[int, int, Any]] = {}

    def next_item(self) -> tuple[int, Any] | None:
        if self.retry:
            return self.retry.popleft()
        if self.exhausted:
            return None
        try:
            work: tuple[int, Any] = next(self.source)
        except StopIteration:
            self.exhausted = True
            return None
        self.read += 1
        return work

    def submit(self) -> None:
        """Fill the free slots of every live actor not paused, the least loaded first."""
        now = time.monotonic()
        ready = [a for a in self.alive if a not in self.down or self.down[a].until <= now]
        for actor in sorted(ready, key=self.load.__getitem__):
            while self.load[actor] < self.in_flight:
                work = self.next_item()
                if work is None:
                    return
                index, item = work
                ref = getattr(self.actors[actor], self.method).remote(item)
                self.pending[ref] = (actor, index, item)
                self.load[actor] += 1

    def pause_left(self) -> float | None:
        """Seconds until a paused actor may be sent work again, if work may be left
        for it (None: no actor is paused)."""
        if self.exhausted and not self.retry:
            return None
        now = time.monotonic()
        until = [self.down[a].until for a in self.alive if a in self.down]
        until = [moment for moment in until if moment > now]
        return max(0.0, min(until) - now) if until else None

    def answered(self, actor: int) -> None:
        """*actor* gave a result: it is up."""
        self.down.pop(actor, None)

    def failed(
        self, actor: int, work: tuple[int, Any], error: ray.exceptions.RayActorError
    ) -> None:
        """Queue *work* again; pause an unavailable actor, drop a dead one (or one
        unavailable for ``_UNAVAILABLE_S``).

        Raises ``ActorLostError`` (from *error*) if no actor is left.
        """
        self.retry.append(work)
        if actor not in self.alive:  # the dead actor's other items come back here too
            return
        if isinstance(error, ray.exceptions.ActorUnavailableError):
            now = time.monotonic()
            down = self.down.setdefault(actor, _Down(now))
            if now - down.since < _UNAVAILABLE_S:
                down.pause_again(now)
                return
        self.down.pop(actor, None)
        self.alive.discard(actor)
        if self.lost is not None:
            self.lost.append(actor)
        if not self.alive:
            unfinished = len(self.retry) + len(self.pending)
            message = _lost_message(len(self.actors), unfinished, self.read, self.items)
            raise ActorLostError(message) from error


@dataclasses.dataclass
class _Down:
    """An actor found unavailable at *since* (monotonic s), with no result since: it is
    sent work again at *until*, after a pause that doubles each time it is still down."""

    since: float
    pause: float = 0.0
    until: float = 0.0

    def pause_again(self, now: float) -> None:
        """Pause it (longer than last time) unless a pause is under way (its other items
        failing meanwhile are the same spell)."""
        if self.until <= now:
            self.pause = min(max(2 * self.pause, _FIRST_PAUSE_S), _MAX_PAUSE_S)
            self.until = now + self.pause


def _dispatch(feed: _Feed) -> Iterator[Completed]:
    """:func:`dispatch`'s loop, over its checked arguments."""
    try:
        feed.submit()
        while True:
            pause = feed.pause_left()
            if not feed.pending:
                if pause is None:
                    break
                time.sleep(pause)  # every live actor is paused: until the first may work
                feed.submit()
                continue
            ready, _ = ray.wait(list(feed.pending), num_returns=1, timeout=pause)
            if not ready:  # a pause ended: send the paused actor work again
                feed.submit()
                continue
            ref = ready[0]
            actor, index, item = feed.pending.pop(ref)
            feed.load[actor] -= 1
            try:
                value = ray.get(ref)
            except ray.exceptions.RayActorError as error:
                feed.failed(actor, (index, item), error)
            else:
                feed.answered(actor)
                yield Completed(index, actor, value)
            feed.submit()
    finally:
        for ref in feed.pending:
            ray.cancel(ref)
