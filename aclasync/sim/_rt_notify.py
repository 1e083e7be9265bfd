"""``acl.rt`` notifies: device-side signals one stream records and another waits for."""

from __future__ import annotations

from collections import deque
from typing import Any

from ._args import parsed
from ._calls import CallGroup
from ._device import SimDevice
from ._objects import SimStream, Task
from ._rc import RC

__all__ = ["NotifyCalls", "SimNotify"]

#: Notifies per device (the runtime's hardware notify table).
NOTIFY_LIMIT = 8192
_MAX_TIMEOUT = 2**32


class SimNotify:
    """A notify: set by ``record_notify`` tasks, consumed by ``wait_and_reset_notify``."""

    __slots__ = ("alive", "device", "gates", "handle", "number", "signalled")

    def __init__(self, handle: int, device: SimDevice, number: int) -> None:
        self.handle = handle
        self.device = device
        self.number = number
        self.signalled = False
        #: Per queued wait, oldest first: its unfinished placeholder task and the wait
        #: itself. A record releases one wait still queued (and resets the notify), as
        #: ``aclrtWaitAndResetNotify``; one dropped meanwhile (abort, forced destroy) is
        #: passed over.
        self.gates: deque[tuple[Task, Task]] = deque()
        self.alive = True

    def release_waits(self) -> None:
        """End every queued wait (the notify is going away: none may hang); lock held."""
        gates, self.gates = self.gates, deque()
        engine = self.device.engine
        if engine is not None:
            for gate, _ in gates:
                engine.complete_locked(gate)


class NotifyCalls(CallGroup):
    """create/destroy/record/wait_and_reset/get_id/batch_reset of notifies."""

    def _notify(self, handle: int) -> SimNotify | None:
        found = self._core.objects.get(handle)
        return found if isinstance(found, SimNotify) and found.alive else None

    @parsed("acl.rt.create_notify")
    def create_notify(self, flag: int, /) -> tuple[int, int]:
        """Create a notify on the current device (``flag`` must be 0); 207009 past the limit."""
        core = self._core
        ctx = core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        if flag != 0:
            return 0, RC.PARAM_INVALID
        device = ctx.device
        with core.lock:
            if len(device.notifies) >= NOTIFY_LIMIT:
                return 0, RC.NO_NOTIFY_RESOURCE
            notify = SimNotify(core.new_handle(), device, next(device.notify_numbers))
            device.notifies[notify.handle] = notify
            core.objects[notify.handle] = notify
        return notify.handle, RC.OK

    @parsed("acl.rt.destroy_notify")
    def destroy_notify(self, notify: int, /) -> int:
        if notify == 0:
            return RC.INVALID_PARAM
        core = self._core
        with core.lock:
            found = self._notify(notify)
            if found is None:
                return RC.PARAM_INVALID
            found.alive = False
            found.device.notifies.pop(notify, None)
            core.objects.pop(notify, None)
            found.release_waits()  # waits on a destroyed notify end
        return RC.OK

    def _stream_for(
        self, notify: int, stream: int
    ) -> tuple[SimNotify | None, SimStream | None, int]:
        """Resolve the notify, then the stream (``ApiImpl::NotifyRecord`` / ``NotifyWait``:
        107003 for a stream of another context); 107000 across devices."""
        if notify == 0:
            return None, None, RC.INVALID_PARAM
        target = self._notify(notify)
        if target is None:
            return None, None, RC.PARAM_INVALID
        found, ret = self._own_stream(stream)
        if found is None:
            return None, None, ret
        if target.device is not found.device:
            return None, None, RC.PARAM_INVALID
        return target, found, RC.OK

    @parsed("acl.rt.record_notify")
    def record_notify(self, notify: int, stream: int, /) -> int:
        """Queue a task that sets the notify: it releases the oldest wait queued before
        it (which resets it), or stays set for the next wait."""
        target, found, ret = self._stream_for(notify, stream)
        if target is None or found is None:
            return ret
        engine = found.device.engine

        def signal(_: Task) -> None:
            while target.gates and engine is not None:
                gate, wait = target.gates.popleft()
                engine.complete_locked(gate)
                if not wait.done:  # (a wait dropped with its stream's queue is done)
                    return
            target.signalled = True

        return self._submit(found, Task(found, "record_notify", action=signal))

    @parsed("acl.rt.wait_and_reset_notify")
    def wait_and_reset_notify(self, notify: int, stream: int, timeout: int, /) -> int:
        """Queue a wait: later tasks of *stream* run once the notify is set; it is reset.

        *timeout* (ms) must be in ``[0, 2**32)`` (``TypeError`` otherwise, as pyACL);
        the simulator waits without a limit.
        """
        if timeout < 0:
            raise TypeError("timeout can't be a negative number!")
        if timeout >= _MAX_TIMEOUT:
            raise TypeError("timeout should be less than 2**32!")
        target, found, ret = self._stream_for(notify, stream)
        if target is None or found is None:
            return ret
        with self._core.lock:
            if target.signalled:  # set already: this wait passes, and resets it
                target.signalled = False
                wait = Task(found, "wait_notify")
            else:
                gate = Task(found, "notify_gate")
                wait = Task(found, "wait_notify", dep=gate)
                target.gates.append((gate, wait))
        return self._submit(found, wait)

    @parsed("acl.rt.get_notify_id")
    def get_notify_id(self, notify: int, /) -> tuple[int, int]:
        """Return ``(id, ret)``: the notify's number on its device."""
        if notify == 0:
            return 0, RC.INVALID_PARAM
        found = self._notify(notify)
        return (found.number, RC.OK) if found is not None else (0, RC.PARAM_INVALID)

    @parsed("acl.rt.notify_batch_reset")
    def notify_batch_reset(self, notifies: Any, /) -> int:
        """Clear a list of notifies that were set and not yet waited for."""
        if not isinstance(notifies, list):
            raise ValueError("argument only support the format of list")
        if not all(isinstance(item, int) for item in notifies):
            raise ValueError("get notify pointers from PyList failed")
        with self._core.lock:
            found = [self._notify(item) for item in notifies]
            if any(item is None for item in found):
                return RC.PARAM_INVALID
            for item in found:
                assert item is not None
                item.signalled = False
        return RC.OK
