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
loop in one batch per loop.

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
import functools
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import outcome

from ._errors import AclasyncError, AclError, DeviceBrokenError
from ._handles import Handles
from ._lanes import EventRecord, Lane, Watch
from ._loop import DONE, EXPIRED, Delivery, Waiter
from ._options import WorkerOptions
from ._pyacl.codes import ErrorCode
from ._waiting_thread import Loan, Ready, WaitingThread, is_timeout

__all__ = ["DeviceWorker", "WorkerOptions"]

_LAUNCH, _CALL, _FENCE, _WATCH, _STOP, _RECORD, _REFILL = range(7)
_EVENT_COMPLETE = 1  # query_event_status: 0 = NOT_READY, 1 = COMPLETE
_STREAM_COMPLETE = 0  # stream_query: 0 = COMPLETE, 1 = NOT_READY
_STREAM_ABORT = int(ErrorCode.ACL_ERROR_RT_STREAM_ABORT)
_RECORD_API = "acl.rt.record_event"


#: ``take_ready_event`` asks for a refill below READY_LOW events; one fills up to READY_HIGH.
READY_LOW, READY_HIGH = 8, 32


def _done() -> outcome.Value[None]:
    return DONE


def _closed(message: str) -> Callable[[], outcome.Error]:
    return lambda: outcome.Error(anyio.ClosedResourceError(message))


class DeviceWorker:
    """The thread that owns one device's context and makes all its runtime calls.

    Methods under "on the worker" run on the worker thread only (through ``call``);
    the submission methods run on the event loop's thread.
    """

    def __init__(self, acl: Any, device_id: int, options: WorkerOptions) -> None:
        self.acl = acl
        self._rt = acl.rt
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

    def fence(self, lane: Lane, waiter: Waiter) -> None:
        """*waiter* gets ``Value(None)`` once all work queued on the stream so far is done."""
        self._submit((_FENCE, lane, waiter))

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
                        self._sweep()
                        if stop_waiter is None:
                            inline = self._inline_loan()
                        if inline is None:
                            self._lend()
                    self._asked.clear()
                    ready = self._take_ready()
                waiting_thread = self._waiting_thread
                if waiting_thread is not None and waiting_thread.failure is not None:
                    _post(ready)
                    raise waiting_thread.failure
                if inline is not None:
                    _post(ready)
                    self._wait_inline(inline)
                elif stop_waiter is None and not self._inbox:
                    # Posted right before blocking: the loop it wakes finds the GIL free.
                    self._idle_wait(ready)
                else:
                    _post(ready)
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
                        self._fence(lane, job[2])
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
        ret = result[-1] if isinstance(result, tuple) else result
        if not ret:
            return None
        error = self._error(ret, api or self.api_name(fn), lane)
        if ret == _STREAM_ABORT:
            # A stopped stream refuses every later call: one report says so.
            if lane.aborted:
                return error
            lane.aborted = True
        self._fail(lane, error)
        return error

    def _call(self, fn: Callable[[], Any], waiter: Waiter | None) -> None:
        self._calls += 1
        result: outcome.Outcome[Any] = outcome.capture(fn)
        if isinstance(result, outcome.Value) and _is_coroutine(result.value):
            result.value.close()
            result = outcome.Error(TypeError("the function returned a coroutine; pass a plain one"))
        if waiter is not None:
            with self.lock:
                self._resolve(waiter, result)

    def _fence(self, lane: Lane, waiter: Waiter) -> None:
        waiter.seen = True
        if lane.closed:  # closing concurrently: nothing more will run on it
            self._resolve(waiter, _done())
            return
        watches = lane.watches
        if watches and watches[-1].fence and watches[-1].launches == lane.launches:
            self._park(lane, watches[-1], waiter)  # nothing queued since: share the fence
            return
        if lane.idle_at == (lane.launches, self._calls):
            self._resolve(waiter, _done())  # idle since the last look: nothing to ask
            return
        rt = self._rt
        status, ret = rt.stream_query(lane.handle)
        if ret:
            self._resolve(waiter, outcome.Error(self._error(ret, "acl.rt.stream_query", lane)))
        elif status == _STREAM_COMPLETE:
            if lane.collected != lane.launches:  # else nothing ran since the last look
                self._collect(lane)
            lane.idle_at = (lane.launches, self._calls)
            self._resolve(waiter, _done())
        elif waiter.expired:
            self._resolve(waiter, EXPIRED)
        else:
            fence = Watch(0, lane.next_seq(), fence=True, launches=lane.launches)
            if self._context is None:  # no waiting thread: the worker watches an event
                error = self._mark_fence(lane, fence)
                if error is not None:
                    self._resolve(waiter, outcome.Error(error))
                    return
            else:
                lane.open_fence = fence
            watches.append(fence)
            self._park(lane, fence, waiter)
            self._asked.add(lane)

    def _answer_idle(self, lane: Lane, waiter: Waiter) -> None:
        """A sync of a stream known idle, as the only job: answer it at once.

        The bare shape of a round trip: no lock, no batch. (``idle_at`` still
        matching means the stream went idle with its failures collected, and nothing
        was queued on it since; the waiting thread never touches ``idle_at``.)
        """
        waiter.seen = True
        waiter.result = DONE
        _post_to(waiter.delivery, (waiter,))

    def _mark_fence(self, lane: Lane, fence: Watch) -> AclError | None:
        """Record the fence's event at the stream's current tail; the error if that fails."""
        event, ret = self.handles.fence_event()
        if not ret:
            ret = self._rt.record_event(event, lane.handle)
            if ret:
                self.handles.fence_pool.append(event)
        if ret:
            return self._error(ret, "acl.rt.record_event", lane)
        fence.event = event
        return None

    def _close_fence(self, lane: Lane) -> None:
        """Give the stream's open fence its event before anything is queued behind it.

        If the record fails, the fence stays eventless and is reached when the stream
        next goes idle (later, never early); the failure is the stream's to report.
        """
        fence, lane.open_fence = lane.open_fence, None
        assert fence is not None
        with self.lock:
            index = lane.find(fence.seq)
            watches = lane.watches
            if index < len(watches) and watches[index] is fence:
                error = self._mark_fence(lane, fence)
                if error is not None:
                    self._fail(lane, error)

    def _watch(self, lane: Lane, event: int, record: EventRecord, waiter: Waiter) -> None:
        waiter.seen = True
        if record.failure is not None:  # never recorded: nothing will ever complete
            self._resolve(waiter, outcome.Error(self.record_failed(lane, record)))
            return
        seq = record.seq
        watches = lane.watches
        index = lane.find(seq)
        if index < len(watches) and watches[index].seq == seq:
            self._park(lane, watches[index], waiter)
            return
        if lane.forced:
            dropped = anyio.ClosedResourceError(
                "the event's stream was closed with force=True: its work may have been dropped"
            )
            self._resolve(waiter, outcome.Error(dropped))
            return
        status, ret = self._rt.query_event_status(event)
        if ret:
            error = self._error(ret, "acl.rt.query_event_status", lane)
            self._resolve(waiter, outcome.Error(error))
        elif status == _EVENT_COMPLETE:
            self._resolve(waiter, _done())
        elif waiter.expired:
            self._resolve(waiter, EXPIRED)
        else:
            watch = Watch(event, seq, fence=False, launches=-1)
            watches.insert(index, watch)
            self._park(lane, watch, waiter)

    def _park(self, lane: Lane, watch: Watch, waiter: Waiter) -> None:
        if waiter.expired:  # its timeout ran out before this first look
            self._resolve(waiter, EXPIRED)
            return
        watch.add(waiter)
        self._waiting[lane.handle] = lane

    def _sweep(self) -> None:
        """Resolve the watches whose events have completed, stream by stream.

        A stream lent to the waiting thread is left to it, and one whose fence was
        parked this round after ``stream_query`` said it is busy is not asked again.
        """
        asked = self._asked
        for handle, lane in list(self._waiting.items()):
            if lane.lent or lane in asked:
                continue
            self._sweep_lane(lane)
            if not lane.watches:
                del self._waiting[handle]

    # -- the waiting thread's side (all with the lock held) --------------------------

    def _lend(self) -> None:
        """Make sure the waiting thread looks for something to wait for."""
        if self._context is None:
            return
        if self._waiting_thread is None:
            self._waiting_thread = WaitingThread(
                self._rt,
                self.device_id,
                self._context,
                self.lock,
                self._pick_loan,
                self._loan_done,
                self._take_ready,
                _post,
                self._wake_worker,
            )
        self._waiting_thread.poke()

    def _pick_loan(self) -> Loan | None:
        """Lend the oldest stream's head watch (None when nothing can be lent).

        An open fence (the stream's tail) is waited on with ``synchronize_stream``, so
        that the runtime waits in the stream's own mode, as a program blocking in that
        call would; everything else by its event.
        """
        for lane in self._waiting.values():
            if lane.unlendable or lane.held or not lane.watches:
                continue
            head = lane.watches[0]
            by_stream = head.fence and not head.event
            lane.lent = True
            lane.lent_stream = by_stream
            return Loan(lane, head, by_stream=by_stream)
        return None

    def _inline_loan(self) -> Loan | None:
        """The sync the worker waits for itself, if any (see ``_wait_inline``).

        Only the tail of a FAST_SYNC stream, when it is all the device waits for and
        no job is queued: the worker is running right now, so it starts polling at
        once, as a program that launches and then syncs on its own thread does,
        where waking the waiting thread would put a thread wake-up (tens of us)
        between a short kernel's end and its waiter.
        """
        if self._context is None or not self.options.inline_fast_sync:
            return None
        if self._inbox or len(self._waiting) != 1:
            return None
        lane = next(iter(self._waiting.values()))
        if not lane.fast_sync or lane.lent or lane.unlendable or lane.held:
            return None
        head = lane.watches[0]
        if not head.fence or head.event:
            return None
        lane.lent = lane.lent_stream = True
        return Loan(lane, head, by_stream=True)

    def _wait_inline(self, loan: Loan) -> None:
        """Wait in the stream's sync (GIL released), ``wait_slice_ms`` at a time.

        The wait goes on slice after slice until the stream is idle or a job has
        been submitted: that job waits at most for the slice to end; the next round
        runs it, and lends the wait to the waiting thread if it is still pending.
        """
        sync = self._rt.synchronize_stream_with_timeout
        handle, slice_ms, inbox = loan.lane.handle, self.options.wait_slice_ms, self._inbox
        while is_timeout(ret := sync(handle, slice_ms)) and not inbox:
            pass
        with self.lock:
            self._loan_done(loan, ret)
            ready = self._take_ready()
        # Posted at once rather than at the end of the round: the round's bookkeeping on
        # a just-woken CPU would come first (return-to-post 11 -> 7 us measured in place;
        # the loop takes longer to wake than the rest of the round takes to run).
        _post(ready)

    def _loan_done(self, loan: Loan, ret: int) -> None:
        """The waiting thread's wait returned *ret*: resolve what is finished."""
        lane = loan.lane
        lane.lent = False
        if loan.by_stream:
            lane.lent_stream = False
            if lane.held:  # only _await_loan waits for the condition
                self._loan_returned.notify_all()
        if lane.closed or is_timeout(ret):
            return
        watches = lane.watches
        head = watches[0] if watches else None
        if loan.by_stream:
            if ret:
                self._take_sync_status(lane, ret)
            lane.collected = loan.watch.launches
            if head is loan.watch and not head.event:
                # The stream sync came back: work up to this open fence is done, and
                # the sync returned the stream's failures. No need to ask again.
                del watches[0]
                self._resolve_all(head, _done)
                if not watches:  # the common case, kept short: the CPU is cold here
                    self._waiting.pop(lane.handle, None)
                    return
        self._sweep_lane(lane)
        if not watches:
            self._waiting.pop(lane.handle, None)
        elif ret and watches[0] is head:
            # The wait failed yet the point is not reached (a stopped stream, a bad
            # event): polling by the worker takes over rather than a wait that returns
            # at once, again and again.
            lane.unlendable = True
            self._wake_worker()

    def _wake_worker(self) -> None:
        """Make the worker go round once more (from the waiting thread)."""
        self._look = True
        if self._idle:
            self._rouse()

    def _await_loan(self, lane: Lane) -> None:
        """Wait (lock released meanwhile) until a stream sync lent on *lane* returned.

        The stream is not lent again meanwhile: a sync that times out would otherwise
        be lent straight back (a stream closed with force while a kernel still runs).
        """
        if lane.lent_stream:
            lane.held = True
            self._loan_returned.wait_for(lambda: not lane.lent_stream)
            lane.held = False

    def _stop_waiting_thread(self) -> None:
        waiting_thread, self._waiting_thread = self._waiting_thread, None
        if waiting_thread is not None:
            waiting_thread.stop()

    def _sweep_lane(self, lane: Lane) -> None:
        query = self._rt.query_event_status
        watches = lane.watches
        while watches:
            head = watches[0]
            if head.event:
                status, ret = query(head.event)
                reached = status == _EVENT_COMPLETE
            else:  # an open fence: reached once the stream is idle
                status, ret = self._rt.stream_query(lane.handle)
                reached = status == _STREAM_COMPLETE
            if not ret and not reached:
                return
            del watches[0]
            if head.fence and head.event:
                self.handles.fence_pool.append(head.event)
            if ret:
                failed = functools.partial(
                    self._error_outcome, ret, "acl.rt.query_event_status", lane
                )
                self._resolve_all(head, failed)
                continue
            if head.fence and head.launches > lane.collected:
                # Kernel failures are reported by synchronize_stream only; collect them
                # when the stream is idle (the call then returns at once). Work queued
                # after the fence leaves them for a later look.
                status, ret = self._rt.stream_query(lane.handle)
                if not ret and status == _STREAM_COMPLETE:
                    self._collect(lane)
            self._resolve_all(head, _done)

    def _idle_wait(self, ready: Ready) -> None:
        """Post *ready*, then sleep until a job arrives or it is time to look again.

        With nothing to watch (or only the stream lent to the waiting thread), sleep
        until a job arrives. While another FAST_SYNC stream has waiters, poll every
        ``fast_sync_poll_us``. While only default-mode streams have waiters and jobs
        have been quiet for ``busy_window_ms``, block on the device in a
        ``wait_slice_ms`` slice (GIL released; a job arriving meanwhile waits for the
        slice to end). During bursts of jobs, poll every ``busy_poll_us`` instead, so
        that jobs are picked up at once; that interval is close to the runtime's own
        wake-up latency for passive waits, so default streams keep their low-CPU,
        higher-latency character and FAST_SYNC streams their advantage.
        """
        options = self.options
        timeout: float | None = None
        watched: list[Lane] = []
        head: Watch | None = None
        if self._waiting:  # (a stale answer only costs a round)
            with self.lock:
                watched = [lane for lane in self._waiting.values() if not lane.lent]
                head = watched[0].watches[0] if watched else None
        if watched:
            if any(lane.fast_sync for lane in watched):
                timeout = options.fast_sync_poll_us / 1e6
            elif time.monotonic() - self._last_jobs < options.busy_window_ms / 1e3:
                timeout = options.busy_poll_us / 1e6
            else:
                assert head is not None  # a waiting stream has a watch
                if watched[0].open_fence is head:
                    self._close_fence(watched[0])  # the slice below needs its event
                if head.event:
                    _post(ready)
                    self._rt.synchronize_event_with_timeout(head.event, options.wait_slice_ms)
                    return
                timeout = options.busy_poll_us / 1e6
        self._idle = True
        if self._inbox or self._look:  # re-checked after _idle is set: no lost wake-up
            self._idle = False
            self._look = False
            _post(ready)
            return
        _post(ready)
        if timeout is None:
            self._wake.acquire()
        else:
            self._wake.acquire(timeout=timeout)
        self._idle = False

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
        event = self.handles.record(lane, timing)
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
            self._resolve_all(watch, _closed("the event was closed while this waited for it"))

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

    # -- resolving waiters and recording failures ------------------------------------

    def _collect(self, lane: Lane) -> None:
        """Take the stream's kernel failure, if any (blocks until the stream is idle).

        Call with the lock held: a stream sync lent to the waiting thread is waited
        for first, since the failure goes to whichever sync comes first.
        """
        self._await_loan(lane)
        if not lane.closed:
            launches = lane.launches
            self._take_sync_status(lane, self._rt.synchronize_stream(lane.handle))
            lane.collected = launches

    def _take_sync_status(self, lane: Lane, ret: int) -> None:
        if ret == _STREAM_ABORT:
            # A stopped stream: the failure that stopped it was reported by the first
            # sync after it; later syncs only repeat that it stopped.
            lane.aborted = True
        elif ret:
            self._fail(lane, self._error(ret, "acl.rt.synchronize_stream", lane))

    def _fail(self, lane: Lane, error: BaseException) -> None:
        lane.errors.append((next(self._error_seq), error))

    def _orphan(self, lane: Lane) -> None:
        while lane.errors:
            self.orphan_errors.append(lane.errors.popleft())

    def _error(self, code: int, api: str, lane: Lane | None = None) -> AclError:
        return self.handles.error(code, api, lane)

    def _error_outcome(self, code: int, api: str, lane: Lane) -> outcome.Error:
        return outcome.Error(self._error(code, api, lane))

    def _check(self, ret: int, api: str, lane: Lane | None = None) -> None:
        self.handles.check(ret, api, lane)

    def _fail_watches(self, lane: Lane, message: str) -> None:
        lane.open_fence = None
        for watch in lane.watches:
            if watch.fence and watch.event:
                self.handles.fence_pool.append(watch.event)
            self._resolve_all(watch, _closed(message))
        lane.watches.clear()

    def _resolve(self, waiter: Waiter, result: outcome.Outcome[Any]) -> None:
        waiter.result = result
        self._ready.setdefault(waiter.delivery, []).append(waiter)

    def _resolve_all(self, watch: Watch, make: Callable[[], outcome.Outcome[Any]]) -> None:
        ready = self._ready
        for waiter in watch.waiters:  # _resolve inlined: this runs on a just-woken CPU
            if not waiter.abandoned:
                waiter.result = make()
                ready.setdefault(waiter.delivery, []).append(waiter)

    def _flush(self) -> None:
        if self._ready:
            _post(self._take_ready())

    def _take_ready(self) -> dict[Delivery, list[Waiter]]:
        """The waiters resolved so far, by delivery (call with the lock held)."""
        ready, self._ready = self._ready, {}
        return ready

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


def _post(ready: dict[Delivery, list[Waiter]]) -> None:
    """Hand resolved waiters to their event loops; callable without the lock."""
    for delivery, waiters in ready.items():
        _post_to(delivery, waiters)


def _post_to(delivery: Delivery, waiters: Iterable[Waiter]) -> None:
    """Hand waiters to one event loop; a closed loop is skipped (nobody is left to
    resume), so that other loops' waiters are still served."""
    try:  # noqa: SIM105 - contextlib.suppress costs more on this hot path
        delivery.post(waiters)
    except RuntimeError:
        pass


def _is_coroutine(value: object) -> bool:
    return hasattr(value, "cr_frame") and hasattr(value, "close")
