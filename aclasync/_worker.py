"""The device worker: one thread per open device that makes every runtime call for it
(docs/design.md). It drains the jobs (``_jobs``) the event loop appends to its inbox,
a whole deque per round; its ``Watcher`` waits for work to finish. Failures of calls
and kernels go to the stream's ``Lane.errors``, reported by the rule in docs/errors.md.

Who owns what:
- the worker thread: the inbox's consuming end, the ``Handles``, each lane's counters
  and ``life``, ``_stop_job`` (which ``submit`` reads, from any thread);
- the worker and the waiting thread, under ``Watcher.lock``: the streams waited for,
  each lane's ``watches`` and ``loan``, the resolved waiters;
- the event loop: the inbox's appending end, ``Lane.submitted``, ``settled_at`` and
  ``shared`` (set once, when the stream's handle is given out); it
  pops ``Lane.errors`` and ``orphan_errors``, which the worker appends to (deques).
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import outcome

from ._errors import AclError, DeviceBrokenError, call_name
from ._handles import Handles
from ._jobs import Call, Job, Record, Run, Stop
from ._lanes import EventRecord, Lane, Life
from ._loop import Then, Waiter, post
from ._options import WorkerOptions
from ._platform import precise_timers
from ._points import STREAM_ABORT
from ._waits import is_coroutine, launch_status
from ._watcher import Watcher

if TYPE_CHECKING:
    from ._loop import Ready
    from ._pyacl.backend import AclBackend, AclRt

__all__ = ["DeviceWorker", "WorkerOptions"]


class DeviceWorker:
    """The thread that owns one device's context. The submission methods run on the
    event loop's thread; the others on the worker thread only."""

    def __init__(self, acl: AclBackend, device_id: int, options: WorkerOptions) -> None:
        self.acl = acl
        self._rt: AclRt = acl.rt
        self.device_id = device_id
        self.options = options
        #: Why the thread died, once it has; whether a DeviceBrokenError reached anybody.
        self.death: BaseException | None = None
        self.death_reported = False
        #: Failures that belong to no open stream (closed streams, cancelled closes).
        self.orphan_errors: deque[tuple[int, BaseException]] = deque()
        self.default_lane = Lane(0)
        # Every thread that sets the device shares its default context, and with it
        # the default stream (docs/interop.md): others may queue work on it.
        self.default_lane.share()
        self.handles = Handles(self._rt, device_id, self.default_lane)
        self.watcher = Watcher(
            self._rt, device_id, self.handles, options, self._fail, self._look_again
        )
        self._inbox: deque[Job] = deque()
        self._wake = _thread.allocate_lock()
        self._wake.acquire()
        self._idle = False
        self._stop_job: Job | None = None
        self._look = False
        self._last_jobs = 0.0
        self._busy_s = options.busy_window_ms / 1e3
        self._cpu: int | None = None
        self._device_set = False
        self._current: Job | None = None
        self._error_seq = itertools.count()
        #: Arbitrary calls run so far: any of them may queue work on any stream.
        self._calls = 0
        self._thread = threading.Thread(
            target=self._main, name=f"aclasync-device{device_id}", daemon=True
        )

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def broken_error(self) -> DeviceBrokenError:
        """A fresh ``DeviceBrokenError`` chained to the death's cause (counts as reported)."""
        self.death_reported = True
        error = DeviceBrokenError(
            f"the worker thread of device {self.device_id} died: {self.death!r}; "
            "every pending and later operation on this device fails"
        )
        error.__cause__ = self.death
        return error

    def start(self, waiter: Waiter) -> None:
        """Start the thread; *waiter* gets the ``set_device`` result. Call on the loop's
        thread: ``WorkerOptions(cpu="loop")`` pins it here."""
        self._cpu = self.options.resolve_cpu()
        self._inbox.append(Call(self._set_device, waiter))
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Hand the worker a job (from any thread); never blocks. One that came after the
        stop (a close on another thread raced the caller's check) is refused."""
        inbox = self._inbox
        inbox.append(job)
        if self.death is not None:  # died before or meanwhile: nothing will run it
            inbox.clear()
            raise self.broken_error()
        if self._stop_job:  # the worker runs what it finds after the stop: is it there?
            with contextlib.suppress(ValueError):
                inbox.remove(job)
                raise anyio.ClosedResourceError(f"device {self.device_id} is closed")
        if self._idle:
            self._rouse()

    def _rouse(self) -> None:
        """Wake the idle worker (from any thread that saw ``_idle`` set)."""
        self._idle = False
        try:  # noqa: SIM105 - contextlib.suppress costs more on this hot path
            self._wake.release()
        except RuntimeError:  # already released by another waker
            pass

    def _look_again(self) -> None:
        """Make the worker go round once more (from the waiting thread)."""
        self._look = True
        if self._idle:
            self._rouse()

    def _main(self) -> None:
        inbox, watcher = self._inbox, self.watcher
        stop: Job | None = None

        def may_wait() -> bool:
            return stop is None and not inbox

        try:
            if self._cpu is not None:
                os.sched_setaffinity(0, {self._cpu})
            while stop is None:
                stop = self._drain()
                if stop is None and not inbox and not self._look and not watcher.watching():
                    self._sleep(watcher.take_ready())  # nothing to watch: until a job comes
                    continue
                busy = time.monotonic() - self._last_jobs < self._busy_s
                self._look = False  # the round is the look asked for
                inline, ready = watcher.round(may_wait, busy)
                watcher.wake_waiting_thread()
                failure = watcher.thread_failure()
                if failure is not None:
                    post(ready)
                    raise failure
                if inline is not None:
                    post(ready)
                    watcher.wait_inline(inline, lambda: bool(inbox))
                elif stop is None and not inbox:
                    # Posted right before blocking: the loop it wakes finds the GIL free.
                    self._idle_wait(ready)
                else:
                    post(ready)
            failures = self._teardown()
        except BaseException as exc:  # the device is unusable; say so to every waiter
            self._die(exc)
            return
        waiter = stop.answers()
        assert waiter is not None
        self._current = None  # (it would hold the closing task, whose loop may be gone)
        watcher.resolve(waiter, outcome.Value(failures))
        watcher.flush()
        if isinstance(stop, Stop):
            stop.forget()  # (the same)
            if stop.ended is not None:
                stop.ended()

    def _drain(self) -> Job | None:
        """Run the queued jobs in order; the stop job, if it came."""
        inbox = self._inbox
        if inbox:
            self._last_jobs = time.monotonic()
        while inbox:
            job = self._current = inbox.popleft()
            job.run(self)
            if job.__class__ is Stop:  # what came meanwhile runs too; later jobs are refused
                self._stop_job = job  # (answered by _die if one of those kills us)
                self._drain()
                return job
        self._current = None
        return None

    def _idle_wait(self, ready: Ready) -> None:
        """Post *ready* and sleep by the watcher's plan (``Watcher.idle_plan``)."""
        busy = time.monotonic() - self._last_jobs < self._busy_s
        timeout, event = self.watcher.idle_plan(busy)
        if event:
            post(ready)
            self._rt.synchronize_event_with_timeout(event, self.options.wait_slice_ms)
        else:
            self._sleep(ready, timeout)

    def _sleep(self, ready: Ready, timeout: float | None = None) -> None:
        """Post *ready* right before blocking (the loop it wakes finds the GIL free) and
        sleep until a job comes, a look is asked for, or *timeout* s (None: no limit)."""
        self._idle = True
        if self._inbox or self._look:  # re-checked after _idle is set: no lost wake-up
            self._idle = False
            post(ready)
            return
        self.watcher.wake_waiting_thread()
        post(ready)
        if timeout is None:
            self._wake.acquire()
        else:  # a poll's timing: on time, not up to the default slack late
            precise_timers(True)
            self._wake.acquire(timeout=timeout)
            precise_timers(False)
        self._idle = False

    def _set_device(self) -> None:
        self.handles.check(self._rt.set_device(self.device_id), "acl.rt.set_device")
        self._device_set = True
        context, ret = self._rt.get_context()
        self.handles.check(ret, "acl.rt.get_context")
        self.watcher.start(int(context))

    def launch_now(
        self, lane: Lane, fn: Callable[..., Any], args: tuple[Any, ...], api: str | None
    ) -> BaseException | None:
        """Run ``fn(*args, stream)``; its failure goes to the stream and is returned."""
        if lane.open_fence is not None:
            self.watcher.close_fence(lane)
        lane.queue()
        try:  # anything the call or its result raises is the stream's failure, as itself
            result = fn(*args, lane.handle)
            ret = result[-1] if isinstance(result, tuple) and result else result
            if ret.__class__ is not int:  # pyACL's own calls never get past this test
                ret = launch_status(ret, result, api or call_name(self.acl, fn))
        except BaseException as exc:
            self._fail(lane, exc)
            return exc
        if not ret:
            return None
        error = self.handles.error(ret, api or call_name(self.acl, fn), lane)
        if ret == STREAM_ABORT:
            # A stopped stream refuses every later call: one report, after its cause.
            if lane.life is Life.REFUSED:
                return error
            self._stopped(lane)
            lane.move(Life.REFUSED)
        self._fail(lane, error)
        return error

    def _stopped(self, lane: Lane) -> None:
        """*lane* refused a call (107023): collect the failure that stopped it first."""
        if lane.life is Life.OPEN:
            with self.watcher.points() as points:
                points.collect(lane)  # (it blocks until the stream is idle)
        if lane.life is Life.OPEN:
            lane.move(Life.STOPPED)

    def call_now(self, fn: Callable[[], Any], waiter: Waiter | None) -> None:
        self._calls += 1
        result: outcome.Outcome[Any] = outcome.capture(fn)
        if isinstance(result, outcome.Value) and is_coroutine(result.value):
            result.value.close()
            result = outcome.Error(TypeError("the function returned a coroutine; pass a plain one"))
        if waiter is not None:
            self.watcher.resolve(waiter, result)

    def fence_now(self, lane: Lane, waiter: Waiter, timed: bool) -> None:
        watcher, inbox = self.watcher, self._inbox
        if not inbox:  # the sync is the last job: answer it here if it can be
            if watcher.idle_answer(lane, waiter, self._calls):
                return
            if not timed and watcher.wait_here(lane, waiter, self._calls, lambda: bool(inbox)):
                return
        watcher.fence(lane, waiter, timed, self._calls)

    def record_ready_now(self, lane: Lane, event: int, timing: bool, record: EventRecord) -> None:
        self.handles.hand_out(event, timing)  # from here on, the user's to give back
        seq = lane.next_seq()
        api = "acl.rt.record_event"
        record.ran(seq, self.launch_now(lane, self._rt.record_event, (event,), api))

    def close_stream(self, lane: Lane, *, force: bool, reported: bool) -> None:
        """Destroy a stream (see ``Watcher.close_stream``); unless *reported* (its closer
        reports them), its failures go to ``orphan_errors``."""
        if lane.closed:
            return
        ret = self.watcher.close_stream(lane, force=force)
        error = self.handles.forget_stream(lane)  # (a borrowed stream too: it is let go of)
        if error is not None:
            self._fail(lane, error)
        if ret:
            api = "acl.rt.destroy_stream_force" if force else "acl.rt.destroy_stream"
            self._fail(lane, self.handles.error(ret, api, lane))
        if not reported:
            self._to_device(lane)

    def close_when_done(self, lane: Lane) -> None:
        """A close of *lane* was cancelled: its failures go to the device from now on; it
        is destroyed once its work is done, waited for as any sync is (not holding us)."""
        lane.disown()
        self._to_device(lane)
        close = functools.partial(self.close_stream, lane, force=False, reported=False)

        def queue_close() -> None:  # on a thread of the device, once the work is done
            if self.death is None:  # else it released all (and its death is not seen here)
                with contextlib.suppress(DeviceBrokenError, anyio.ClosedResourceError):
                    self.submit(Run(close))

        self.fence_now(lane, Waiter(Then(queue_close)), timed=False)

    def let_go(self, lane: Lane) -> None:
        """aclasync no longer uses the wrapped stream *lane*: its failures go to the
        device; it is forgotten unless points on it are waited for (an event's)."""
        if lane.closed:
            return
        lane.disown()
        self._to_device(lane)
        with self.watcher.points() as points:
            forgotten = points.drop_if_forsaken(lane)
        error = self.handles.forget_stream(lane) if forgotten else None
        if error is not None:  # its overflow-status buffer's free
            self._fail(lane, error)

    def record(self, lane: Lane, timing: bool) -> tuple[int, EventRecord]:
        """Record an event on *lane*: its handle and record. A failed record raises its
        ``AclError`` and hands out no event."""
        if lane.open_fence is not None:
            self.watcher.close_fence(lane)
        try:
            event = self.handles.record(lane, timing)
        except AclError as exc:
            if exc.code == STREAM_ABORT:
                self._stopped(lane)
            raise
        lane.queue()
        return event, EventRecord(lane.next_seq())

    def forget_event(self, lane: Lane, event: int, record: EventRecord) -> None:
        """Take back a closed event: fail its pending waits, return it to the pool (a
        ``wrap_event`` one is let go of; one recorded on a wrapped stream goes back)."""
        if lane.handle < 0 or self.handles.give_back_event(event):
            with self.watcher.points() as points:
                points.forget(lane, record)

    def _teardown(self) -> list[BaseException]:
        """At stop: let the work finish, release everything, reset; the releases' failures."""
        if not self._device_set:
            return []
        self.watcher.finish(list(self.handles.lanes.values()))
        return list(self.handles.release_all(reset=True))

    def _die(self, exc: BaseException) -> None:
        """Fail every pending waiter with a fresh ``DeviceBrokenError``; release what the
        device holds as far as the runtime lets us."""
        self.death = exc
        waiters = self.watcher.abandon_all(self.handles.lanes.values())
        jobs = list(dict.fromkeys([self._current, *self._inbox, self._stop_job]))  # each once
        self._inbox.clear()
        self._current = None
        for job in jobs:
            waiter = None if job is None else job.answers()
            if waiter is not None:
                waiters.append(waiter)
            if isinstance(job, Record):  # taken from the pool, never recorded
                self.handles.hand_out(job.event, job.timing)
        for waiter in dict.fromkeys(waiters):  # each once, in order; a Then is nobody's
            nobody = isinstance(waiter.delivery, Then)
            if waiter.result is None and not waiter.abandoned and not nobody:
                self.watcher.resolve(waiter, outcome.Error(self.broken_error()))
        self.watcher.flush()
        for job in jobs:
            if isinstance(job, Stop) and job.ended is not None:
                job.ended()
        self.watcher.stop_thread()
        self.handles.release_after_death(reset=self._device_set)

    def _fail(self, lane: Lane, error: BaseException) -> None:
        errors = self.orphan_errors if lane.disowned else lane.errors
        errors.append((next(self._error_seq), error))

    def _to_device(self, lane: Lane) -> None:
        """The failures *lane* holds go to the device (``orphan_errors``), in order."""
        while lane.errors:
            self.orphan_errors.append(lane.errors.popleft())

    def orphan(self, error: BaseException) -> None:
        """Give the device a failure nobody else can report (from any thread)."""
        self.orphan_errors.append((next(self._error_seq), error))
