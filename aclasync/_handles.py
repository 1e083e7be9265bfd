"""The runtime handles one device holds: streams, events, memory, and what others
made on its worker (a model and its datasets).

``Handles`` belongs to the device worker and is only ever used on its thread: it is
the one owner of every handle the device made, and the one place that releases them.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from ._errors import AclError
from ._lanes import Lane, Life

if TYPE_CHECKING:
    from ._pyacl.backend import AclRt

__all__ = ["READY_HIGH", "READY_LOW", "Handles"]

#: ``take_ready`` asks for a refill below READY_LOW events; one fills up to READY_HIGH.
READY_LOW, READY_HIGH = 8, 32


class Handles:
    """Streams (as ``Lane``), the event pools, recorded events and memory of a device."""

    def __init__(self, rt: AclRt, device_id: int, default_lane: Lane) -> None:
        self._rt = rt
        self._device_id = device_id
        self.lanes: dict[int, Lane] = {0: default_lane}
        #: Events that fence syncs record, reused.
        self.fence_pool: list[int] = []
        #: Created, unrecorded events by timing flag: the pool of ``record``, which the
        #: event loop also takes from for ``Stream.record_event_nowait``.
        self.ready: dict[bool, deque[int]] = {False: deque(), True: deque()}
        self._events: dict[int, bool] = {}  # recorded events the user holds: timing
        #: A refill of ``ready`` is asked for, by timing flag (set by the loop in
        #: ``take_ready``, cleared by the worker as the refill starts).
        self._refilling = {False: False, True: False}
        #: Address: the pyACL call that frees it, and that call's name for errors.
        self._memory: dict[int, tuple[Callable[[int], int], str]] = {}
        #: Other handles made on the worker (``keep``): key -> (release, its name).
        self._kept: dict[object, tuple[Callable[[], int], str]] = {}
        self._overflow: dict[Lane, int] = {}  # a stream's overflow-status buffer

    def error(self, code: int, api: str, lane: Lane | None = None) -> AclError:
        """The ``AclError`` for a status of this device (and stream)."""
        stream = None if lane is None or lane.handle < 0 else lane.handle
        return AclError.from_status(code, api, device=self._device_id, stream=stream)

    def check(self, ret: int, api: str, lane: Lane | None = None) -> None:
        if ret:
            raise self.error(ret, api, lane)

    # -- making ----------------------------------------------------------------------

    def adopt(self, lane: Lane) -> None:
        """Count a stream aclasync wrapped among the device's (it is never destroyed)."""
        self.lanes[lane.handle] = lane

    def create_stream(self, priority: int, flags: int) -> Lane:
        """Create a stream with ``create_stream_with_config``."""
        handle, ret = self._rt.create_stream_with_config(priority, flags)
        self.check(ret, "acl.rt.create_stream_with_config")
        lane = self.lanes[handle] = Lane(handle, flags, priority)
        return lane

    def fence_event(self) -> tuple[int, int]:
        """An event for a fence: ``(handle, ret)``, from the pool or new."""
        if self.fence_pool:
            return self.fence_pool.pop(), 0
        event, ret = self._rt.create_event()
        return int(event), int(ret)

    def record(self, lane: Lane, timing: bool) -> int:
        """Record a pooled (or new) event on *lane*; raise ``AclError`` if that fails.

        A failed record puts the event back in the pool: it is never handed out.
        """
        pool = self.ready[timing]
        try:
            event = pool.pop()
        except IndexError:  # (the event loop may take the last one meanwhile)
            event, ret = self._rt.create_event()
            self.check(ret, "acl.rt.create_event", lane)
        ret = self._rt.record_event(event, lane.handle)
        if ret:
            pool.append(event)
            self.check(ret, "acl.rt.record_event", lane)
        self._events[event] = timing
        return int(event)

    def take_ready(self, timing: bool) -> tuple[int | None, bool]:
        """An event kept ready for a record that does not wait (or None), and whether
        to ask for a refill now (few are left and none is asked for). From the loop."""
        ready = self.ready[timing]
        try:
            event: int | None = ready.pop()
        except IndexError:
            event = None
        refill = len(ready) < READY_LOW and not self._refilling[timing]
        if refill:
            self._refilling[timing] = True
        return event, refill

    def hand_out(self, event: int, timing: bool) -> None:
        """Count *event*, taken from ``ready`` by the event loop, as held by the user."""
        self._events[event] = timing

    def refill(self, timing: bool) -> None:
        """Create events until ``ready[timing]`` holds READY_HIGH (stops at a failure:
        ``record`` then makes its own, and says why if it cannot)."""
        self._refilling[timing] = False
        pool = self.ready[timing]
        while len(pool) < READY_HIGH:
            event, ret = self._rt.create_event()
            if ret:
                return
            pool.appendleft(int(event))

    def give_back_event(self, event: int) -> bool:
        """Return a recorded event to its pool; False if it was not handed out."""
        timing = self._events.pop(event, None)
        if timing is None:
            return False
        self.ready[timing].append(event)
        return True

    def alloc(self, nbytes: int, *, host: bool) -> int:
        """Allocate device (``malloc``) or pinned host (``malloc_host``) memory."""
        rt = self._rt
        if host:
            ptr, ret = rt.malloc_host(nbytes)
            self.check(ret, "acl.rt.malloc_host")
            self._memory[int(ptr)] = (rt.free_host, "acl.rt.free_host")
        else:
            ptr, ret = rt.malloc(nbytes, 0)
            self.check(ret, "acl.rt.malloc")
            self._memory[int(ptr)] = (rt.free, "acl.rt.free")
        return int(ptr)

    @overload
    def overflow_buffer(self, lane: Lane, nbytes: int) -> int: ...
    @overload
    def overflow_buffer(self, lane: Lane, nbytes: int, *, make: bool) -> int | None: ...
    def overflow_buffer(self, lane: Lane, nbytes: int, *, make: bool = True) -> int | None:
        """The stream's overflow-status buffer, allocated on first use (unless not
        *make*: then None if it has none, freed with a stream closed meanwhile)."""
        buffer = self._overflow.get(lane)
        if buffer is None and make:
            buffer = self._overflow[lane] = self.alloc(nbytes, host=False)
        return buffer

    def forget_stream(self, lane: Lane) -> AclError | None:
        """A stream was destroyed (or let go of): free its overflow-status buffer; the
        error if that fails."""
        if self.lanes.get(lane.handle) is lane:  # (a wrapper made since holds the handle)
            del self.lanes[lane.handle]
        buffer = self._overflow.pop(lane, None)
        return None if buffer is None else self.free(buffer, lane)

    def free_or_raise(self, ptr: int) -> None:
        """Free memory from ``alloc``; raise its ``AclError`` if that fails."""
        error = self.free(ptr)
        if error is not None:
            raise error

    def free(self, ptr: int, lane: Lane | None = None) -> AclError | None:
        """Free memory from ``alloc``; the error if that fails, None if not ours."""
        owned = self._memory.pop(ptr, None)
        if owned is None:
            return None
        free, api = owned
        ret = free(ptr)
        return self.error(ret, api, lane) if ret else None

    def keep(self, key: object, release: Callable[[], int], api: str) -> None:
        """Hold a handle made on the worker by other code (a loaded model, a dataset):
        ``release()`` (named *api* in errors) runs at the device's close, or after its
        worker died, unless ``drop(key)`` took it back first."""
        self._kept[key] = (release, api)

    def drop(self, key: object) -> tuple[int, str]:
        """Release what ``keep(key)`` holds: ``(status, api)``; ``(0, "")`` if nothing."""
        kept = self._kept.pop(key, None)
        if kept is None:
            return 0, ""
        release, api = kept
        return int(release()), api

    # -- releasing everything --------------------------------------------------------

    def release_all(self, *, reset: bool) -> list[AclError]:
        """Destroy every event, free all memory, destroy every stream, reset the device.

        For a normal close, after the streams went idle. Every release is attempted;
        the failures are returned.
        """
        rt = self._rt
        failures: list[AclError] = []

        def release(ret: int, api: str, lane: Lane | None = None) -> None:
            if ret:
                failures.append(self.error(ret, api, lane))

        for key in reversed(list(self._kept)):  # the last kept first: a model's datasets
            release(*self.drop(key))
        for event in self._all_events():
            release(rt.destroy_event(event), "acl.rt.destroy_event")
        for ptr in list(self._memory):
            error = self.free(ptr)
            if error is not None:
                failures.append(error)
        for lane in self.lanes.values():
            if lane.handle and not lane.borrowed:
                release(rt.destroy_stream(lane.handle), "acl.rt.destroy_stream", lane)
            if not lane.closed:
                lane.move(Life.CLOSED)
        self.lanes.clear()
        self._overflow.clear()
        if reset:
            release(rt.reset_device(self._device_id), "acl.rt.reset_device")
        return failures

    def release_after_death(self, *, reset: bool) -> None:
        """Best effort after the worker died: nothing may stay set or allocated.

        Streams go with ``destroy_stream_force`` (queued work is dropped); any call
        that raises is skipped and the rest still run.
        """
        rt = self._rt
        releases: list[Callable[[], Any]] = [
            release for release, _ in reversed(self._kept.values())
        ]
        self._kept.clear()
        releases += [functools.partial(rt.destroy_event, event) for event in self._all_events()]
        releases += [functools.partial(free, ptr) for ptr, (free, _) in self._memory.items()]
        releases += [
            functools.partial(rt.destroy_stream_force, handle)
            for handle, lane in self.lanes.items()
            if handle and not lane.borrowed
        ]
        if reset:
            releases.append(functools.partial(rt.reset_device, self._device_id))
        for release in releases:
            try:  # noqa: SIM105 - keep releasing whatever one call does
                release()
            except Exception:
                pass
        self._memory.clear()
        self._overflow.clear()
        for lane in self.lanes.values():
            if not lane.closed:
                lane.move(Life.CLOSED)

    def _all_events(self) -> list[int]:
        events = [e for pool in self.ready.values() for e in pool]
        events += [*self._events, *self.fence_pool]
        for pool in self.ready.values():
            pool.clear()
        self._events.clear()
        self.fence_pool.clear()
        return events
