"""Base of the ``acl.rt`` call groups: resolving the calling thread's context and handles."""

from __future__ import annotations

import threading
import time

from ._core import Core, has_ended, wait_for_tasks
from ._device import SimDevice
from ._objects import Context, SimStream, Task
from ._rc import RC
from ._timeouts import timeout_deadline

__all__ = ["CallGroup"]


class CallGroup:
    """Shared plumbing of the call groups that make up ``acl.rt``."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def _resolve_stream(self, handle: int) -> tuple[Context | None, SimStream | None, int]:
        """Return (context, stream, 0) or the code saying why the handle is unusable."""
        ctx = self._core.context
        if ctx is None:
            return None, None, RC.CONTEXT_NULL
        stream = self._core.stream(ctx, handle)
        if stream is None:
            return ctx, None, RC.PARAM_INVALID
        return ctx, stream, RC.OK

    def _own_stream(self, handle: int) -> tuple[SimStream | None, int]:
        """Resolve a stream that must belong to the current context (107003 otherwise)."""
        ctx, stream, ret = self._resolve_stream(handle)
        if stream is None:
            return None, ret
        if stream.context is not ctx:
            return None, RC.STREAM_CONTEXT
        return stream, RC.OK

    def _submit(self, stream: SimStream, task: Task) -> int:
        """Queue *task*; pay the lazy set-up cost on a stream's first launch."""
        if stream.aborted:
            return RC.STREAM_ABORT
        if not stream.launched:
            stream.launched = True
            if not stream.fast_launch and self._core.profile.lazy_setup_us:
                time.sleep(self._core.profile.lazy_setup_us / 1e6)
        with self._core.lock:
            if not stream.alive:
                return RC.PARAM_INVALID
            engine = stream.device.engine
            if engine is None:
                return RC.PARAM_INVALID
            task.task_id = next(self._core.task_ids)
            task.submitter = threading.get_ident()
            engine.submit_locked(task)
        self._core.last_task_id = task.task_id
        return RC.OK

    def _queue(self, stream: SimStream, task: Task, *, wait: bool) -> int:
        """``_submit``, then, if *wait*, wait for the task (a copy or fill with pageable
        host memory is done before its call returns)."""
        ret = self._submit(stream, task)
        if ret == RC.OK and wait:
            wait_for_tasks(self._core, [task], None)
        return ret

    def _wait_stream(self, stream: SimStream, timeout_ms: int) -> bool:
        """Wait for *stream*'s queued work, in the stream's sync mode."""
        tail = stream.tail
        if tail is None or tail.done:
            return True
        if has_ended(tail):  # idle on the device: no wake-up to pay, only the bookkeeping
            return wait_for_tasks(self._core, [tail], timeout_deadline(timeout_ms))
        if timeout_ms == 0:
            return False
        profile = self._core.profile
        if stream.fast_sync:
            return wait_for_tasks(
                self._core,
                [tail],
                timeout_deadline(timeout_ms),
                poll_s=profile.fast_sync_poll_us / 1e6,
            )
        return wait_for_tasks(
            self._core,
            [tail],
            timeout_deadline(timeout_ms),
            latency_s=profile.notify_latency_us / 1e6,
        )

    def _release_default_context(self, device: SimDevice) -> None:
        """Wait for the default context's work, then destroy it, its streams and events."""
        core = self._core
        while True:
            with core.lock:
                ctx = device.default_context
                if ctx is None:
                    return
                tails = [
                    s.tail for s in ctx.all_streams() if s.tail is not None and not s.tail.done
                ]
                if not tails:
                    for stream in ctx.all_streams():
                        core.reports.forget_stream_locked(stream)
                    device.release_default_locked(core.objects)
                    return
            wait_for_tasks(core, tails, None)

    def _release_device(self, device: SimDevice) -> None:
        """Wait for all of *device*'s work, destroy its resources and stop its engine."""
        core = self._core
        with core.lock:
            for notify in device.notifies.values():  # never-recorded waits must not hang
                notify.release_waits()
        while True:
            wait_for_tasks(core, device.pending_tails(), None)
            with core.lock:
                if device.pending_tails():
                    continue
                for stream in device.all_streams():
                    core.reports.forget_stream_locked(stream)
                for ctx in device.all_contexts():
                    core.objects.pop(ctx.handle, None)
                    core.objects.pop(ctx.default_alias, None)
                    for handle in (*ctx.streams, *ctx.events):
                        core.objects.pop(handle, None)
                for handle in device.notifies:
                    core.objects.pop(handle, None)
                for host_ptr, (owner, _) in list(core.host_registrations.items()):
                    if owner == device.id:
                        del core.host_registrations[host_ptr]
                engine, cores = device.deactivate()
                break
        if engine is not None:
            engine.stop()
        for thread in cores:
            thread.join()
