"""Waiting without blocking: synchronize, events, timeouts, cancellation, ordering."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from frontend_support import Gate, Log, ProxyAcl, RecordingAcl, ms, opened

import aclasync
from aclasync import StreamFlag
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "flags", [StreamFlag.DEFAULT, StreamFlag.FAST_SYNC], ids=["default", "fast_sync"]
)
async def test_synchronize_leaves_the_loop_free_and_other_streams_running(
    rt: Any, flags: StreamFlag
) -> None:
    gate = Gate()
    ticked = anyio.Event()
    finished: list[str] = []

    async def ticker() -> None:
        for _ in range(5):  # five loop turns while the long wait is pending
            await anyio.sleep(0.001)
        ticked.set()

    async with opened(rt) as dev:
        assert dev.backend_name == "SimAcl"
        kernel = dev.acl.sim.launch_kernel
        async with dev.create_stream(flags=flags) as s1, dev.create_stream() as s2:

            async def wait_long() -> None:
                await s1.synchronize()
                finished.append("long")

            async with anyio.create_task_group() as tg:
                s1.launch(kernel, gate.kernel())
                tg.start_soon(wait_long)
                await anyio.wait_all_tasks_blocked()

                s2.launch(kernel, Kernel(duration_us=ms(1)))
                await s2.synchronize()  # another stream is not held up by s1's wait
                tg.start_soon(ticker)
                await ticked.wait()  # nor is the loop
                assert finished == []
                gate.open()
            assert finished == ["long"]


async def test_stream_and_event_timeouts_raise_and_leave_the_stream_usable(rt: Any) -> None:
    log = Log()
    gate = Gate()
    async with opened(rt) as dev, dev.create_stream() as s:
        kernel = dev.acl.sim.launch_kernel
        s.launch(kernel, gate.kernel())
        s.launch(kernel, Kernel(fn=log.add("done")))
        ev = await s.record_event()

        with pytest.raises(aclasync.AclTimeoutError) as stream_info:
            await s.synchronize(timeout=0.05)
        with pytest.raises(aclasync.AclTimeoutError) as event_info:
            await ev.synchronize(timeout=0.05)
        assert log.snapshot() == []

        err = stream_info.value
        assert isinstance(err, TimeoutError)
        assert isinstance(err, aclasync.AclError)
        assert err.code == 507046
        assert err.name == "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"
        assert err.device == 0
        assert err.stream == s.handle

        err = event_info.value
        assert isinstance(err, TimeoutError)
        assert err.code == 507047
        assert err.name == "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT"

        gate.open()
        await s.synchronize()
        assert log.snapshot() == ["done"]
        await ev.synchronize(timeout=5.0)
        assert await ev.query()

        s.launch(kernel, Kernel(duration_us=ms(5), fn=log.add("again")))
        await s.synchronize(timeout=5.0)
        assert log.snapshot() == ["done", "again"]


async def test_device_synchronize_timeout(rt: Any) -> None:
    gate = Gate()
    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        with pytest.raises(aclasync.AclTimeoutError) as info:
            await dev.synchronize(timeout=0.05)
        assert info.value.code == 507046
        gate.open()
        await dev.synchronize(timeout=5.0)
        assert await s.query()


async def test_cancelled_synchronize_ends_promptly_and_work_continues(rt: Any) -> None:
    log = Log()
    gate = Gate()
    async with opened(rt) as dev, dev.create_stream() as s:
        kernel = dev.acl.sim.launch_kernel
        s.launch(kernel, gate.kernel())
        s.launch(kernel, Kernel(fn=log.add("done")))
        ev = await s.record_event()

        with anyio.fail_after(5):  # "promptly": long before the gate's own limit
            with anyio.move_on_after(0.05) as scope:
                await s.synchronize()
            assert scope.cancelled_caught
            with anyio.move_on_after(0.05) as scope:
                await ev.synchronize()
            assert scope.cancelled_caught
        assert log.snapshot() == []

        gate.open()
        await s.synchronize()
        assert log.snapshot() == ["done"]
        s.launch(kernel, Kernel(fn=log.add("again")))
        await s.synchronize()
        assert log.snapshot() == ["done", "again"]


async def test_cancelled_waiters_do_not_disturb_other_waiters(rt: Any) -> None:
    log = Log()
    seen: dict[str, list[Any]] = {}
    async with opened(rt) as dev, dev.create_stream() as s:
        kernel = dev.acl.sim.launch_kernel
        gate = Gate()
        s.launch(kernel, gate.kernel())
        s.launch(kernel, Kernel(fn=log.add("done")))
        ev = await s.record_event()

        async def patient(name: str, wait: Any) -> None:
            await wait()
            seen[name] = log.snapshot()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(patient, "stream", s.synchronize)
                tg.start_soon(patient, "event", ev.synchronize)
                # Many cancelled waiters sharing the same watches as the patient ones.
                with anyio.move_on_after(0.05) as scope:
                    async with anyio.create_task_group() as doomed:
                        for _ in range(40):
                            doomed.start_soon(s.synchronize)
                            doomed.start_soon(ev.synchronize)
                assert scope.cancelled_caught
                tg.start_soon(patient, "late stream", s.synchronize)
                tg.start_soon(patient, "late event", ev.synchronize)
                await anyio.wait_all_tasks_blocked()
                gate.open()

    assert seen == {
        "stream": ["done"],
        "event": ["done"],
        "late stream": ["done"],
        "late event": ["done"],
    }


async def test_query_reports_busy_then_idle(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        assert await s.query() is True
        gate = Gate()
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        ev = await s.record_event()
        assert await s.query() is False
        assert await ev.query() is False
        gate.open()
        await ev.synchronize()
        assert await ev.query() is True
        assert await s.query() is True


async def test_device_synchronize_waits_for_all_streams(rt: Any) -> None:
    log = Log()
    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        async with dev.create_stream() as a, dev.create_stream() as b:
            for stream, name, duration in (
                (a, "a", 100),
                (b, "b", 200),
                (dev.default_stream, "default", 150),
            ):
                stream.launch(kernel, Kernel(duration_us=ms(duration)))
                stream.launch(kernel, Kernel(fn=log.add(name)))
            with anyio.fail_after(5):
                await dev.synchronize()
            assert sorted(log.snapshot()) == ["a", "b", "default"]
            assert await a.query()
            assert await b.query()


async def test_event_elapsed_time_measures_the_work_between(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        start = await s.record_event(timing=True)
        s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=ms(50)))
        end = await s.record_event(timing=True)
        assert start.timing
        assert end.timing
        elapsed = await start.elapsed_time(end)
        assert isinstance(elapsed, float)
        assert elapsed >= 49.0  # a kernel takes at least its duration; no upper bound:
        # a busy machine may delay the simulated device, never speed it up

        plain = await s.record_event()
        assert not plain.timing
        with pytest.raises(ValueError, match="timing=True"):
            await start.elapsed_time(plain)
        with pytest.raises(TypeError):
            await start.elapsed_time("end")  # type: ignore[arg-type]


async def test_wait_event_orders_work_across_streams(rt: Any) -> None:
    log = Log()
    seen: list[list[Any]] = []
    async with opened(rt) as dev:
        kernel = dev.acl.sim.launch_kernel
        async with dev.create_stream() as a, dev.create_stream() as b:
            gate = Gate()
            a.launch(kernel, gate.kernel())
            a.launch(kernel, Kernel(fn=log.add("a finished")))
            ev = await a.record_event()

            b.wait_event(ev)
            b.launch(kernel, Kernel(fn=lambda: seen.append(log.snapshot())))
            assert await b.query() is False  # held by a's event
            gate.open()
            await b.synchronize()
            assert seen == [["a finished"]]


async def test_event_synchronize_waits_for_the_recorded_work_only(rt: Any) -> None:
    log = Log()
    async with opened(rt) as dev, dev.create_stream() as s:
        kernel = dev.acl.sim.launch_kernel
        gate = Gate()
        s.launch(kernel, Kernel(duration_us=ms(5), fn=log.add("before")))
        ev = await s.record_event()
        s.launch(kernel, gate.kernel())
        s.launch(kernel, Kernel(fn=log.add("after")))
        await ev.synchronize()
        assert log.snapshot() == ["before"]
        assert await s.query() is False
        gate.open()
        await s.synchronize()
        assert log.snapshot() == ["before", "after"]


async def test_queueing_never_checkpoints_but_awaiting_always_does(rt: Any) -> None:
    log = Log()
    async with opened(rt) as dev, dev.create_stream() as a, dev.create_stream() as b:
        kernel = dev.acl.sim.launch_kernel
        ev = await a.record_event()
        queued = False
        with anyio.CancelScope() as scope:
            scope.cancel()
            a.launch(kernel, Kernel(fn=log.add("a")))  # synchronous: no Cancelled here
            b.wait_event(ev)
            b.launch(kernel, Kernel(fn=log.add("b")))
            queued = True
            await a.query()  # an idle stream's query still checkpoints
        assert queued
        assert scope.cancelled_caught
        with anyio.CancelScope() as scope:
            scope.cancel()
            await b.synchronize()
        assert scope.cancelled_caught

        await a.synchronize()
        await b.synchronize()
        assert sorted(log.snapshot()) == ["a", "b"]


class _WaitTaken(RecordingAcl):
    """Sets ``taken`` at the first timed stream sync: a wait has been taken."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.taken = threading.Event()

    def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
        super().on_rt_call(name, args)
        if name == "synchronize_stream_with_timeout":
            self.taken.set()


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "lent"])
async def test_a_lone_fast_sync_wait_never_holds_up_later_jobs(rt: Any, inline: bool) -> None:
    """A FAST_SYNC stream's sync, when it is all the device waits for, is waited for by
    the worker itself in ``wait_slice_ms`` slices (``inline_fast_sync``): jobs that
    arrive meanwhile still run while the kernel is held, and the held wait still ends."""
    acl = _WaitTaken(rt)
    gate = Gate()
    options = aclasync.WorkerOptions(inline_fast_sync=inline, wait_slice_ms=2)

    def waits_on(handle: int) -> dict[int, set[int]]:
        """The threads that made a timed stream sync of *handle*, and their timeouts."""
        threads: dict[int, set[int]] = {}
        for name, args, ident in acl.calls:
            if name == "synchronize_stream_with_timeout" and args[0] == handle:
                threads.setdefault(ident, set()).add(args[1])
        return threads

    with anyio.fail_after(10):
        async with aclasync.open_device(0, backend=acl, options=options) as dev:
            worker = dev.worker_thread.ident
            kernel = dev.acl.sim.launch_kernel
            async with (
                dev.create_stream(flags=StreamFlag.FAST_SYNC) as fast,
                dev.create_stream() as other,
            ):
                async with anyio.create_task_group() as tg:
                    fast.launch(kernel, gate.kernel())
                    tg.start_soon(fast.synchronize)
                    await anyio.to_thread.run_sync(acl.taken.wait, abandon_on_cancel=True)
                    other.launch(kernel, Kernel())
                    await other.synchronize()
                    assert await dev.call(lambda: 42) == 42
                    assert not await fast.query()  # all that while the kernel was held
                    gate.open()
                assert await fast.query()
                waits = waits_on(fast.handle)
                assert (worker in waits) is inline
                if inline:
                    assert waits[worker] == {2}  # one slice at a time


@pytest.mark.parametrize(
    ("flags", "inline_default"),
    [(StreamFlag.DEFAULT, True), (StreamFlag.DEFAULT, False), (StreamFlag.FAST_SYNC, True)],
    ids=["default", "default-lent", "fast_sync"],
)
async def test_an_untimed_sync_starts_without_asking_first(
    rt: Any, flags: int, inline_default: bool
) -> None:
    """A stream sync answers an idle stream too, so an untimed sync is not preceded by a
    ``stream_query`` (which would put one more runtime call before the wait), whether
    the worker waits for it itself (a FAST_SYNC stream's, or a default stream's with
    short waits) or lends it to the waiting thread; a timed one still asks (its timeout
    abandons it once the worker has seen it, so the first look must answer); every
    answer is still right."""
    acl = RecordingAcl(rt)
    gate = Gate()

    def queries() -> int:
        return len([args for args in acl.named("stream_query") if args[0] == stream.handle])

    # A long slice: a default stream's wait stays the worker's only while it ends within
    # one, whatever the machine's load.
    options = aclasync.WorkerOptions(inline_default_sync=inline_default, wait_slice_ms=50)
    with anyio.fail_after(10):
        async with aclasync.open_device(0, backend=acl, options=options) as dev:
            kernel = dev.acl.sim.launch_kernel
            async with dev.create_stream(flags=flags) as stream:
                for _ in range(3):
                    stream.launch(kernel, Kernel(duration_us=200))
                    await stream.synchronize()
                await stream.synchronize()  # idle: answered at once either way
                asked = queries()
                assert asked == 0
                stream.launch(kernel, gate.kernel())
                try:
                    with pytest.raises(aclasync.AclTimeoutError):
                        await stream.synchronize(timeout=0)  # busy: a poll says so at once
                    assert queries() > asked  # a timed wait asks, even right after a launch
                finally:
                    gate.open()
                await stream.synchronize()
                for _ in range(20):  # idle: a poll succeeds, however soon the worker looks
                    await stream.synchronize(timeout=0)
                    stream.launch(kernel, Kernel())
                    await stream.synchronize()
                assert await stream.query()


class _HeldCalls(ProxyAcl):
    """Once armed, the calls named (made on a thread whose name ends with *thread*, if
    given) say when they begin and return only once released: a slow driver call, or a
    waiting thread held before its runtime wait."""

    def __init__(self, inner: Any, names: tuple[str, ...], thread: str = "") -> None:
        super().__init__(inner)
        self.names, self.thread = names, thread
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
        on_thread = threading.current_thread().name.endswith(self.thread)
        if self.armed and name in self.names and on_thread:
            self.entered.set()
            assert self.release.wait(10.0), "never released"


@pytest.mark.parametrize("what", ["stream", "event"])
async def test_timeout_zero_on_idle_work_is_answered_by_a_slow_first_look(
    rt: Any, what: str
) -> None:
    # timeout=0 polls once: the look decides, however long it takes. The loop's timeout
    # used to raise AclTimeoutError as soon as the worker had begun the look.
    acl = _HeldCalls(rt, ("stream_query", "query_event_status"))
    async with opened(acl) as dev, dev.create_stream() as s:
        event = await s.record_event()
        await s.synchronize()
        await dev.call(lambda: None)  # the stream is no longer known idle: a look is needed
        results: list[str] = []
        submitted = anyio.Event()

        async def poll() -> None:
            waitable = s if what == "stream" else event
            acl.armed = True
            submitted.set()  # the wait is submitted before its first checkpoint
            try:
                await waitable.synchronize(timeout=0)
                results.append("done")
            except aclasync.AclTimeoutError:
                results.append("timed out")

        async def hold_the_loop() -> None:
            await submitted.wait()
            assert acl.entered.wait(10.0)  # blocks the loop until the look has begun
            await anyio.sleep(0.05)  # the poll's timeout is due: it decides here
            acl.armed = False
            acl.release.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(poll)
            tg.start_soon(hold_the_loop)
        assert results == ["done"]
        await event.aclose()


@pytest.mark.parametrize("what", ["stream", "event"])
async def test_timeout_zero_looks_even_when_another_wait_holds_the_point(
    rt: Any, what: str
) -> None:
    # The timed wait joined the untimed one's point without a look: with its timeout
    # run out first, it was answered "timed out" though the work was done.
    lent = ("synchronize_stream_with_timeout", "synchronize_event_with_timeout")
    acl = _HeldCalls(rt, lent, thread="-wait")  # the waiting thread, held in its wait
    acl.armed = True
    gate = Gate()
    try:
        async with opened(acl) as dev, dev.create_stream() as s:
            s.launch(dev.acl.sim.launch_kernel, gate.kernel())
            event = await s.record_event()
            waitable = s if what == "stream" else event
            results: list[str] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(waitable.synchronize)  # untimed: its point is registered
                assert await anyio.to_thread.run_sync(acl.entered.wait, 10.0)
                gate.open()

                def until_done() -> tuple[int, int, int]:  # a pyACL thread: device first
                    acl_rt = dev.acl.rt
                    setting = acl_rt.set_device(0)
                    return setting, acl_rt.synchronize_event(event.handle), acl_rt.reset_device(0)

                assert await anyio.to_thread.run_sync(until_done) == (0, 0, 0)
                hold, in_call = threading.Event(), threading.Event()
                tg.start_soon(dev.call, lambda: (in_call.set(), hold.wait(10.0)))
                assert await anyio.to_thread.run_sync(in_call.wait, 10.0)  # worker busy

                async def poll() -> None:
                    try:
                        await waitable.synchronize(timeout=0)
                        results.append("done")
                    except aclasync.AclTimeoutError:
                        results.append("timed out")

                tg.start_soon(poll)
                await anyio.wait_all_tasks_blocked()  # its timeout ran out before a look
                hold.set()
                acl.release.set()
            assert results == ["done"]
            await event.aclose()
    finally:
        gate.open()
        acl.release.set()
