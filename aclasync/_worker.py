"""The device worker: one thread per open device that makes every runtime call for it.

The event loop hands the worker *jobs* through a deque; the worker drains the whole
deque per round, so a busy worker costs submitters no wake-up. Waiting for work to
finish is the business of the device's waiting thread (``_waiting_thread``): the worker
lends it the oldest point waiters watch, and it blocks in the runtime's own wait for
that point and resolves the waiters when it returns. One exception: a FAST_SYNC
stream's sync that is all the device waits for, with no job queued, the worker waits
for itself in short slices (``_wait_inline``), since it is running already and the
waiting thread's wake-up would outlast a short kernel. A stream whose waits are not lent
(a second stream with waiters while the first is lent) is watched by the worker
between rounds, without running Python in runtime callbacks: it queries the event at
the head of each stream's watch list (events on a stream finish in order), waits in
short ``synchronize_event_with_timeout`` slices with the GIL released, or, while a
FAST_SYNC stream has waiters, polls. Every waiter resolved in a round reaches its event
loop in one batch per loop. That half of the worker, watching for finished work, is
``_worker_waits.Watching``; this module holds the thread, the jobs and the handles.

Threads: one submitting thread and at most one waiting thread per device. The
bookkeeping both touch (watches, the waiting set, resolved waiters) changes only under
the worker's ``lock``.

The worker owns every runtime handle the device holds (streams, events, memory) and
releases them all when the device closes, or as far as it can when it dies. Results
cross back as ``outcome.Value`` / ``outcome.Error``. Failures of queued calls and
kernels never travel in a waiter's result: they go to the stream's ``Lane.errors``,
which the event loop reports by the rule the device state documents.
"""

from __future__ import annotations

import _thread
import contextlib
import itertools
import operator
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import outcome

from ._errors import AclasyncError, AclError, DeviceBrokenError
from ._handles import Handles
from ._lanes import EventRecord, Lane
from ._loop import Delivery, Waiter
from ._options import WorkerOptions
from ._waiting_thread import Loan, WaitingThread
from ._worker_waits import STREAM_ABORT, Watching, closed_outcome, post

if TYPE_CHECKING:
    from ._pyacl.backend import AclBackend, AclRt

__all__ = ["DeviceWorker", "WorkerOptions"]

_LAUNCH, _CALL, _FENCE, _WATCH, _STOP, _RECORD, _REFILL = range(7)
_RECORD_API = "acl.rt.record_event"


#: ``take_ready_event`` asks for a refill below READY_LOW events; one fills up to READY_HIGH.
READY_LOW, READY_HIGH = 8, 32


class DeviceWorker(Watching):
    """The thread that owns one device's context and makes all its runtime calls.

    Methods under "on the worker" run on the worker thread only (through ``call``);
    the submission methods run on the event loop's thread.
    """

    def __init__(self, acl: AclBackend, device_id: int, options: WorkerOptions) -> None:
        self.acl = acl
        self._rt: AclRt = acl.rt
        self.device_id = device_id
        self.options = options
        #: Why the thread died, once it has.
        self.death: BaseException | None = None
        #: Whether a ``DeviceBrokenError`` reached anybody yet.
        self.death_reported = False
        #: Failures that belong to no open stream (closed streams, teardown).
        self.orphan_errors: deque[tuple[int, BaseException]] = deque()
        self.default_lane = Lane(0, fast_sync=False)
        self._inbox: deque[tuple[Any, ...]] = deque()
        self._wake = _thread.allocate_lock()
        self._wake.acquire()
        self._idle = False
        self._look = False
        self._last_jobs = 0.0
        self._cpu: int | None = None
        self._device_set = False
        self._current: tuple[Any, ...] = ()
        self._error_seq = itertools.count()
        self._waiting: dict[int, Lane] = {}
        #: A refill of ``handles.ready`` is queued, by timing flag (set by the loop,
        #: cleared by the worker as it starts the refill).
        self._refilling = {False: False, True: False}
        self._ready: dict[Delivery, list[Waiter]] = {}
        #: Streams found busy by ``_fence`` in this round (no need to ask again).
        self._asked: set[Lane] = set()
        #: Guards what the waiting thread shares with the worker (see the module doc).
        self.lock = threading.Lock()
        self._loan_returned = threading.Condition(self.lock)
        self._context: int | None = None
        #: Arbitrary calls run so far: any of them may queue work on any stream.
        self._calls = 0
        self._waiting_thread: WaitingThread | None = None
        #: Runtime handles the device owns: the worker's alone.
        self.handles = Handles(self._rt, device_id, self.default_lane)
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

    # -- submission, from the event loop ---------------------------------------------

    def start(self, waiter: Waiter) -> None:
        """Start the thread; *waiter* gets the ``set_device`` result (raises on failure).

        Call on the event loop's thread: ``WorkerOptions(cpu="loop")`` pins it here.
        """
        self._cpu = self.options.resolve_cpu()
        self._inbox.append((_CALL, self._set_device, waiter))
        self._thread.start()

    def launch(
        self, lane: Lane, fn: Callable[..., Any], args: tuple[Any, ...], api: str | None = None
    ) -> None:
        """Queue ``fn(*args, lane.handle)``; a failure goes to ``lane.errors``.

        *api* names the call in errors when ``fn`` is a wrapper.
        """
        self._submit((_LAUNCH, lane, fn, args, api))

    def call(self, fn: Callable[[], Any], waiter: Waiter | None) -> None:
        """Run ``fn()`` on the worker; *waiter* (if any) gets its outcome."""
        self._submit((_CALL, fn, waiter))

    def fence(self, lane: Lane, waiter: Waiter, *, timed: bool = False) -> None:
        """*waiter* gets ``Value(None)`` once all work queued on the stream so far is done.

        *timed*: the wait has a timeout, so the worker's first look must answer it
        (``_fence`` then asks the runtime before anything else).
        """
        self._submit((_FENCE, lane, waiter, timed))

    def watch(self, lane: Lane, event: int, record: EventRecord, waiter: Waiter) -> None:
        """*waiter* gets ``Value(None)`` once *event* (its *record*) completes."""
        self._submit((_WATCH, lane, event, record, waiter))

    def take_ready_event(self, timing: bool) -> int | None:
        """An event kept ready for a record that does not wait, or None (from the loop).

        Asks for more in the background when few are left.
        """
        ready = self.handles.ready[timing]
        try:
            event: int | None = ready.pop()
        except IndexError:
            event = None
        if len(ready) < READY_LOW and not self._refilling[timing]:
            self._refilling[timing] = True
            self._submit((_REFILL, timing))
        return event

    def record_ready(self, lane: Lane, event: int, timing: bool, record: EventRecord) -> None:
        """Queue the record of *event* (from ``take_ready_event``) on *lane*.

        A failure goes to ``lane.errors`` and to ``record.failure``.
        """
        self._submit((_RECORD, lane, event, timing, record))

    def stop(self, waiter: Waiter) -> None:
        """Release everything, reset the device and end the thread.

        *waiter* gets the teardown's failures (a list) as the thread's very last act.
        """
        self._submit((_STOP, waiter))

    def _submit(self, job: tuple[Any, ...]) -> None:
        if self.death is not None:
            raise self.broken_error()
        self._inbox.append(job)
        if self._dead() and self._inbox:  # died between the check and the append
            self._inbox.clear()
            raise self.broken_error()
        if self._idle:
            self._rouse()

    def _rouse(self) -> None:
        """Wake the idle worker (from any thread that saw ``_idle`` set)."""
        self._idle = False
        try:  # noqa: SIM105 - contextlib.suppress costs more on this hot path
            self._wake.release()
        except RuntimeError:  # already released by another waker
            pass

    def _dead(self) -> bool:
        return self.death is not None

    # -- the thread ------------------------------------------------------------------

    def _main(self) -> None:
        stop_waiter: Waiter | None = None
        try:
            if self._cpu is not None:
                os.sched_setaffinity(0, {self._cpu})
            while stop_waiter is None:
                stop_waiter = self._drain_inbox()
                inline: Loan | None = None
                with self.lock:
                    if self._waiting:
                        # A lone FAST_SYNC sync first: its own wait answers it, so that
                        # nothing stands between the launch and the wait (one stream
                        # query and a sweep measured 20 us here). Else sweep and try again.
                        if stop_waiter is None:
                            inline = self._inline_loan()
                        if inline is None:
                            self._sweep()
                            if stop_waiter is None:
                                inline = self._inline_loan()
                        if inline is None:
                            self._lend()
                    self._asked.clear()
                    ready = self._take_ready()
                waiting_thread = self._waiting_thread
                if waiting_thread is not None and waiting_thread.failure is not None:
                    post(ready)
                    raise waiting_thread.failure
                if inline is not None:
                    post(ready)
                    self._wait_inline(inline)
                elif stop_waiter is None and not self._inbox:
                    # Posted right before blocking: the loop it wakes finds the GIL free.
                    self._idle_wait(ready)
                else:
                    post(ready)
            failures = self._teardown()
        except BaseException as exc:  # the device is unusable; say so to every waiter
            self._die(exc)
            return
        with self.lock:
            self._resolve(stop_waiter, outcome.Value(failures))
            self._flush()

    def _set_device(self) -> None:
        self._check(self._rt.set_device(self.device_id), "acl.rt.set_device")
        self._device_set = True
        if self.options.waiting_thread:
            context, ret = self._rt.get_context()
            self._check(ret, "acl.rt.get_context")
            self._context = int(context)

    def _drain_inbox(self) -> Waiter | None:
        inbox = self._inbox
        if inbox:
            self._last_jobs = time.monotonic()
        while inbox:
            job = self._current = inbox.popleft()
            op = job[0]
            if op == _LAUNCH:
                self._launch(job[1], job[2], job[3], job[4])
            elif op == _CALL:
                self._call(job[1], job[2])
            elif op == _FENCE:
                lane = job[1]
                if lane.idle_at == (lane.launches, self._calls) and not (inbox or self._ready):
                    self._answer_idle(lane, job[2])
                else:
                    with self.lock:
                        self._fence(lane, job[2], job[3])
            elif op == _RECORD:
                self._record_ready(job[1], job[2], job[3], job[4])
            elif op == _REFILL:
                self._refilling[job[1]] = False
                self.handles.refill(job[1], READY_HIGH)
            elif op == _WATCH:
                with self.lock:
                    self._watch(job[1], job[2], job[3], job[4])
            else:
                waiter: Waiter = job[1]
                return waiter
        self._current = ()
        return None

    def _launch(
        self, lane: Lane, fn: Callable[..., Any], args: tuple[Any, ...], api: str | None
    ) -> BaseException | None:
        """Run ``fn(*args, stream)``; its failure goes to the stream and is returned."""
        if lane.open_fence is not None:
            self._close_fence(lane)
        lane.launches += 1
        try:
            result = fn(*args, lane.handle)
        except Exception as exc:
            self._fail(lane, exc)
            return exc
        ret = result[-1] if isinstance(result, tuple) and result else result
        if ret.__class__ is not int:  # pyACL's own calls never get past this test
            try:
                ret = _status(ret, result, api or self.api_name(fn))
            except TypeError as exc:
                self._fail(lane, exc)
                return exc
        if not ret:
            return None
        error = self._error(ret, api or self.api_name(fn), lane)
        if ret == STREAM_ABORT:
            # A stopped stream refuses every later call: one report says so, after the
            # failure that stopped it (rule 4: a cause before what it provoked).
            if lane.aborted:
                return error
            self._stopped(lane)
        self._fail(lane, error)
        return error

    def _stopped(self, lane: Lane) -> None:
        """*lane* refused a call (107023): collect the failure that stopped it first,
        if no sync has yet (``synchronize_stream`` returns it once)."""
        with self.lock:
            self._collect(lane)
        lane.aborted = True

    def _call(self, fn: Callable[[], Any], waiter: Waiter | None) -> None:
        self._calls += 1
        result: outcome.Outcome[Any] = outcome.capture(fn)
        if isinstance(result, outcome.Value) and _is_coroutine(result.value):
            result.value.close()
            result = outcome.Error(TypeError("the function returned a coroutine; pass a plain one"))
        if waiter is not None:
            with self.lock:
                self._resolve(waiter, result)

    # -- on the worker: resources ----------------------------------------------------

    def create_stream(self, priority: int, flags: int, fast_sync: bool) -> Lane:
        """Create a stream with ``create_stream_with_config``; the worker owns it."""
        return self.handles.create_stream(priority, flags, fast_sync)

    def close_stream(self, lane: Lane, *, force: bool, reported: bool) -> None:
        """Destroy a stream after collecting its last failures.

        Without *force* the stream is idle by now (its closer waited) or is waited
        for here. With *force* queued work is dropped and every wait still pending
        on the stream fails with ``ClosedResourceError``: the work it waited for
        will never run. Unless *reported* (someone awaits this and reports the
        stream's failures), they go to the device's ``orphan_errors``.
        """
        with self.lock:
            self._close_stream(lane, force=force, reported=reported)

    def _close_stream(self, lane: Lane, *, force: bool, reported: bool) -> None:
        if lane.closed:
            return
        rt = self._rt
        self._sweep_lane(lane)
        if force:
            lane.forced = True
            ret, api = rt.destroy_stream_force(lane.handle), "acl.rt.destroy_stream_force"
            self._await_loan(lane)  # a lent stream sync may hold the stream's failure
            self._fail_watches(
                lane, "the stream was closed with force=True: the work this waited for was dropped"
            )
        else:
            self._collect(lane)
            self._sweep_lane(lane)
            ret, api = rt.destroy_stream(lane.handle), "acl.rt.destroy_stream"
            self._fail_watches(lane, "the stream was closed")
        lane.closed = True
        self._waiting.pop(lane.handle, None)
        del self.handles.lanes[lane.handle]
        if lane.overflow_buffer:
            self.handles.free(lane.overflow_buffer, lane)
        if ret:
            self._fail(lane, self._error(ret, api, lane))
        if not reported:
            self._orphan(lane)

    def record(self, lane: Lane, timing: bool) -> tuple[int, EventRecord]:
        """Record an event on *lane*: its handle and its record.

        A failed record raises its ``AclError`` and hands out no event: nothing ever
        watches an event whose record failed.
        """
        if lane.open_fence is not None:
            self._close_fence(lane)
        try:
            event = self.handles.record(lane, timing)
        except AclError as exc:
            if exc.code == STREAM_ABORT and not lane.aborted:
                self._stopped(lane)
            raise
        lane.launches += 1
        return event, EventRecord(lane.next_seq())

    def _record_ready(self, lane: Lane, event: int, timing: bool, record: EventRecord) -> None:
        self.handles.hand_out(event, timing)  # from here on, the user's to give back
        record.seq = lane.next_seq()
        record.failure = self._launch(lane, self._rt.record_event, (event,), _RECORD_API)

    def record_failed(self, lane: Lane, record: EventRecord) -> AclasyncError:
        """A fresh exception for a wait on an event whose record failed."""
        failure = record.failure
        if isinstance(failure, AclError):
            error: AclasyncError = self._error(failure.code, failure.api, lane)
        else:
            error = AclasyncError(f"acl.rt.record_event raised {failure!r}")
            error.__cause__ = failure
        error.add_note("the event's record failed: it was never recorded and cannot be waited on")
        return error

    def forget_event(self, lane: Lane, event: int, record: EventRecord) -> None:
        """Take back a closed event: fail its pending waits, return it to the pool."""
        with self.lock:
            self._forget_event(lane, event, record)

    def _forget_event(self, lane: Lane, event: int, record: EventRecord) -> None:
        if not self.handles.give_back_event(event):
            return
        seq = record.seq
        index = lane.find(seq)
        watches = lane.watches
        if index < len(watches) and watches[index].seq == seq and not watches[index].fence:
            watch = watches.pop(index)
            self._resolve_all(
                watch, closed_outcome("the event was closed while this waited for it")
            )

    def alloc(self, nbytes: int, *, host: bool) -> int:
        """Allocate device (``malloc``) or pinned host (``malloc_host``) memory."""
        return self.handles.alloc(nbytes, host=host)

    def free(self, ptr: int) -> None:
        """Free memory from ``alloc`` (raises ``AclError`` on failure)."""
        error = self.handles.free(ptr)
        if error is not None:
            raise error

    def overflow_buffer(self, lane: Lane, nbytes: int) -> int:
        """The stream's overflow-status buffer, allocated on first use."""
        if not lane.overflow_buffer:
            lane.overflow_buffer = self.handles.alloc(nbytes, host=False)
        return lane.overflow_buffer

    def _teardown(self) -> list[BaseException]:
        """At stop: let the work finish, collect failures, release everything, reset.

        Every step is attempted; the failures of the releases are returned. A wait
        still pending after the streams went idle can never complete; it fails with
        ``ClosedResourceError`` instead of spinning.
        """
        if not self._device_set:
            return []
        with self.lock:
            for lane in list(self.handles.lanes.values()):
                self._collect(lane)
                self._sweep_lane(lane)
                self._fail_watches(lane, "the device was closed")
            self._waiting.clear()
        self._stop_waiting_thread()
        return list(self.handles.release_all(reset=True))

    # -- recording failures ------------------------------------------------------------

    def _fail(self, lane: Lane, error: BaseException) -> None:
        lane.errors.append((next(self._error_seq), error))

    def orphan(self, error: BaseException) -> None:
        """Give the device a failure nobody else can report (from any thread)."""
        self.orphan_errors.append((next(self._error_seq), error))

    def _orphan(self, lane: Lane) -> None:
        while lane.errors:
            self.orphan_errors.append(lane.errors.popleft())

    def _error(self, code: int, api: str, lane: Lane | None = None) -> AclError:
        return self.handles.error(code, api, lane)

    def _error_outcome(self, code: int, api: str, lane: Lane) -> outcome.Error:
        return outcome.Error(self._error(code, api, lane))

    def _check(self, ret: int, api: str, lane: Lane | None = None) -> None:
        self.handles.check(ret, api, lane)

    def _die(self, exc: BaseException) -> None:
        """Fail every pending waiter with a fresh ``DeviceBrokenError``; release what
        the device holds as far as the runtime still lets us."""
        self.death = exc
        with self.lock:
            self._flush()  # results found before the death are still true
            waiters: list[Waiter] = []
            for lane in self.handles.lanes.values():
                for watch in lane.watches:
                    waiters.extend(watch.waiters)
                lane.watches.clear()
            self._waiting.clear()
            jobs = [self._current, *self._inbox]
            self._inbox.clear()
            for job in jobs:
                waiters.extend(item for item in job if isinstance(item, Waiter))
                if job and job[0] == _RECORD:  # taken from the pool, never recorded
                    self.handles.hand_out(job[2], job[3])
            for waiter in dict.fromkeys(waiters):  # each once, in order
                if waiter.result is None and not waiter.abandoned:
                    self._resolve(waiter, outcome.Error(self.broken_error()))
            self._flush()
        self._stop_waiting_thread()
        self.handles.release_after_death(reset=self._device_set)

    def api_name(self, fn: Callable[..., Any]) -> str:
        """A readable ``acl.<namespace>.<call>`` name for a backend function."""
        owner = getattr(fn, "__self__", None)
        name = getattr(fn, "__name__", repr(fn))
        for namespace in ("rt", "sim", "util", "mdl"):
            if owner is not None and owner is getattr(self.acl, namespace, None):
                return f"acl.{namespace}.{name}"
        module = getattr(fn, "__module__", None)
        return f"{module}.{name}" if module else name


def _is_coroutine(value: object) -> bool:
    return hasattr(value, "cr_frame") and hasattr(value, "close")


def _status(ret: object, result: object, api: str) -> int:
    """The pyACL status *ret* (from the launched call's *result*) as an ``int``.

    numpy integers and other ``__index__`` types are statuses; ``bool`` is not, nor is
    anything else.

    Raises
    ------
    TypeError
        Saying what ``launch`` expects and what *api* returned instead.
    """
    if not isinstance(ret, bool) and hasattr(type(ret), "__index__"):
        with contextlib.suppress(TypeError):
            return operator.index(ret)  # type: ignore[arg-type]
    got = f"{type(result).__name__} {result!r}"
    if _is_coroutine(result):
        result.close()  # type: ignore[attr-defined]  # never awaited: say so here, once
        got = "a coroutine (the worker thread never awaits one)"
    if len(got) > 120:
        got = got[:117] + "..."
    raise TypeError(
        f"launch() expects fn to return a pyACL status: an int (0 for success), or a "
        f"tuple whose last item is one, as pyACL's calls return; {api} returned {got}"
    )
