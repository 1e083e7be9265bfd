"""Awaiting work aclasync did not launch (``Device.wrap_stream`` / ``wrap_event``), and
aclasync's streams and events handed out by protocol (``__acl_stream__``,
``__acl_event__``), on every loop.

The "owner" is a plain thread that uses pyACL the way torch_npu or a C++ extension
does: it sets the device (sharing its default context with aclasync's worker), creates
its own stream and event, and queues work aclasync knows nothing of.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
import pytest
from frontend_support import Gate, live_objects

import aclasync
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio

LIMIT_S = 10.0
AICORE_EXCEPTION = 507015


class Owner:
    """A thread with its own stream and event in the device's default context; it runs
    what it is handed (``do``) on itself, as the library that owns them would."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self._jobs: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self._results: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self.stream, self.event = self.do(self._make)

    def _make(self) -> tuple[int, int]:
        rt = self.rt.rt
        assert rt.set_device(0) == 0
        stream, ret = rt.create_stream()
        assert ret == 0
        event, ret = rt.create_event()
        assert ret == 0
        return stream, event

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                self._results.put(job())
            except BaseException as exc:
                self._results.put(exc)

    def do(self, job: Callable[[], Any]) -> Any:
        """Run *job* on the owner's thread and return what it returned (blocks)."""
        self._jobs.put(job)
        result = self._results.get(timeout=LIMIT_S)
        if isinstance(result, BaseException):
            raise result
        return result

    def queue_work(self, kernel: Any) -> None:
        """Launch *kernel* on the owner's stream, then record its event after it."""

        def work() -> None:
            assert self.rt.sim.launch_kernel(kernel, self.stream) == 0
            assert self.rt.rt.record_event(self.event, self.stream) == 0

        self.do(work)

    def finish(self) -> tuple[int, ...]:
        """What the owner's own calls return after aclasync let go: launch, sync,
        destroy the event and the stream, reset the device."""

        def end() -> tuple[int, ...]:
            rt = self.rt.rt
            return (
                self.rt.sim.launch_kernel(Kernel(), self.stream),
                rt.synchronize_stream(self.stream),
                rt.destroy_event(self.event),
                rt.destroy_stream(self.stream),
                rt.reset_device(0),
            )

        try:
            return self.do(end)
        finally:
            self._jobs.put(None)
            self._thread.join(LIMIT_S)


@pytest.fixture
def owner(rt: Any) -> Iterator[Owner]:
    made = Owner(rt)
    yield made
    if made._thread.is_alive():
        made._jobs.put(None)


class TorchLikeStream:
    """Like ``torch.npu.Stream``: its handle is the ``npu_stream`` attribute (reading it
    is what flushes torch_npu's task queue; here it is counted)."""

    def __init__(self, handle: int) -> None:
        self._handle = handle
        self.reads = 0

    @property
    def npu_stream(self) -> int:
        self.reads += 1
        return self._handle


async def _ticking(ticks: list[float]) -> None:
    while True:
        await anyio.sleep(0.005)
        ticks.append(anyio.current_time())


async def test_awaiting_an_owners_stream_and_event_while_the_loop_serves(
    rt: Any, owner: Owner
) -> None:
    gate = Gate()
    ticks: list[float] = []
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            stream = dev.wrap_stream(owner.stream)
            event = dev.wrap_event(owner.event)
            assert stream.wrapped
            assert event.wrapped
            assert event.stream is None
            owner.queue_work(gate.kernel())
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_ticking, ticks)
                    with anyio.move_on_after(0.1):
                        await event.synchronize()  # held: the wait goes on, the loop too
                    assert not await event.query()
                    assert not await stream.query()
                    before = len(ticks)
                    assert before >= 3  # the ticker ran meanwhile
                    gate.open()
                    await event.synchronize()
                    await stream.synchronize()
                    tg.cancel_scope.cancel()
            finally:
                gate.open()
            assert await event.query()
            assert await stream.query()
            # aclasync's own work on the owner's stream, and an event of its own there
            stream.launch(rt.sim.launch_kernel, Kernel())
            mine = await stream.record_event()
            await mine.synchronize()
            await mine.aclose()
            await stream.aclose()
            await event.aclose()
        # The device let go of both: the owner's handles are still there, and its own
        # calls on them all succeed.
        assert live_objects(rt)["streams"] == 1
        assert live_objects(rt)["events"] == 1
    assert owner.finish() == (0, 0, 0, 0, 0)
    assert live_objects(rt)["streams"] == 0


async def test_the_device_close_lets_go_without_waiting_for_the_owners_work(
    rt: Any, owner: Owner
) -> None:
    gate = Gate()
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            stream = dev.wrap_stream(owner.stream)
            owner.queue_work(gate.kernel())
            assert not await stream.query()
        # Closed while the owner's kernel is still held (a close that waited for it would
        # hang until the test's limit): the device let go of the stream.
        assert stream.closed
        gate.open()
    assert owner.finish() == (0, 0, 0, 0, 0)


async def test_a_torch_like_stream_is_read_again_at_each_wrap(rt: Any, owner: Owner) -> None:
    torch_stream = TorchLikeStream(owner.stream)
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            first = dev.wrap_stream(torch_stream)
            owner.queue_work(Kernel(duration_us=100))
            again = dev.wrap_stream(torch_stream)  # after queuing: the flush point
            assert again is first
            assert torch_stream.reads == 2
            await again.synchronize()
            assert await again.query()
    assert owner.finish() == (0, 0, 0, 0, 0)


async def test_a_failure_of_the_owners_work_is_raised_by_the_first_await(
    rt: Any, owner: Owner
) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            stream = dev.wrap_stream(owner.stream)
            owner.queue_work(Kernel(error=AICORE_EXCEPTION))
            with pytest.raises(aclasync.AclError) as failure:
                await stream.synchronize()
            assert failure.value.code == AICORE_EXCEPTION
            assert failure.value.stream == owner.stream
            await stream.synchronize()  # reported once
    assert owner.finish() == (0, 0, 0, 0, 0)


async def test_wrapping_what_the_device_has_gives_the_same_object(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as mine:
            assert dev.wrap_stream(0) is dev.default_stream
            assert dev.wrap_stream(mine.handle) is mine
            assert dev.wrap_stream(mine) is mine  # by __acl_stream__
            assert not mine.wrapped
            assert mine.__acl_stream__() == (0, mine.handle)
            event = await mine.record_event()
            assert event.__acl_event__() == (0, event.handle)
            wrapped = dev.wrap_event(event)  # by __acl_event__
            await wrapped.synchronize()
            assert await wrapped.query()
            await wrapped.aclose()  # lets go of the handle only: the event still works
            await event.synchronize()
            await event.aclose()


async def test_another_thread_syncs_an_aclasync_stream_by_the_protocol(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as mine:
            mine.launch(rt.sim.launch_kernel, Kernel(duration_us=20_000))
            await dev.call(lambda: None)  # the worker has queued the kernel
            version, handle = mine.__acl_stream__()
            assert version == 0

            def other_thread() -> tuple[int, int, int]:
                acl = rt.rt
                setting = acl.set_device(0)  # pyACL's rule: set the device first
                return setting, acl.synchronize_stream(handle), acl.reset_device(0)

            async with anyio.create_task_group() as tg:
                results: list[tuple[int, int, int]] = []

                async def run() -> None:
                    results.append(await anyio.to_thread.run_sync(other_thread))

                tg.start_soon(run)
            assert results == [(0, 0, 0)]
            assert await mine.query()  # the other thread's sync waited for aclasync's work


async def test_an_event_never_recorded_is_never_complete(rt: Any, owner: Owner) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            event = dev.wrap_event(owner.event)
            assert not await event.query()
            with pytest.raises(aclasync.AclTimeoutError):
                await event.synchronize(timeout=0.05)
            waiting = anyio.Event()
            outcome: list[str] = []

            async def wait() -> None:
                waiting.set()
                await event.synchronize()
                outcome.append("done")

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await waiting.wait()
                await anyio.sleep(0.05)
                assert outcome == []
                owner.queue_work(Kernel())  # now it is recorded, after a kernel
            assert outcome == ["done"]
            assert await event.query()
            await event.aclose()
    assert owner.finish() == (0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    "bad",
    [
        "0x5a",
        1.5,
        True,
        None,
        object(),
        type("Bad", (), {"__acl_stream__": lambda self: 7})(),
    ],
    ids=["str", "float", "bool", "none", "object", "bad-protocol"],
)
async def test_a_handle_of_the_wrong_type_is_a_type_error(rt: Any, bad: object) -> None:
    async with aclasync.open_device(0, backend=rt) as dev:
        with pytest.raises(TypeError):
            dev.wrap_stream(bad)
        with pytest.raises(TypeError):
            dev.wrap_event(bad)


async def test_bad_values_are_value_errors(rt: Any) -> None:
    newer = type("Newer", (), {"__acl_stream__": lambda self: (1, 5)})()
    async with aclasync.open_device(0, backend=rt) as dev:
        with pytest.raises(ValueError, match=">= 0"):
            dev.wrap_stream(-1)
        with pytest.raises(ValueError, match="version 1"):
            dev.wrap_stream(newer)


async def test_an_unknown_destroyed_or_foreign_handle_raises_the_runtimes_code(
    rt: Any, owner: Owner
) -> None:
    """On the simulator, at the first operation: never a hang, never a dead worker."""
    with anyio.fail_after(LIMIT_S):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            aclasync.open_device(1, backend=rt) as other,
            other.create_stream() as foreign,
        ):
            gone, ret = await dev.call(lambda: rt.rt.create_stream())
            assert ret == 0
            assert await dev.call(lambda: rt.rt.destroy_stream(gone)) == 0
            for handle in (0x1234_5678, gone):
                stream = dev.wrap_stream(handle)
                with pytest.raises(aclasync.AclError) as failure:
                    await stream.synchronize()
                assert failure.value.code == 107000  # ACL_ERROR_RT_PARAM_INVALID
                await _let_go(stream)
            # Another device's stream: a sync may reach it (pyACL switches to the
            # stream's context for a sync), but a record on it from this device's
            # context is refused with 107003 ACL_ERROR_RT_STREAM_CONTEXT.
            stream = dev.wrap_stream(foreign.handle)
            with pytest.raises(aclasync.AclError) as failure:
                await stream.record_event()
            assert failure.value.code == 107003
            await _let_go(stream)
            unknown = dev.wrap_event(0x7777)
            with pytest.raises(aclasync.AclError) as failure:
                await unknown.synchronize()
            assert failure.value.code == 107000
            await dev.synchronize()  # the worker is alive and well
    assert owner.finish() == (0, 0, 0, 0, 0)


async def _let_go(stream: aclasync.Stream) -> None:
    """Let go of a stream whose handle is bad: its close raises what it still holds."""
    left: list[aclasync.AclError] = []
    try:
        await stream.aclose(force=True)
    except aclasync.AclError as exc:
        left.append(exc)
    assert all(error.code in (107000, 107003) for error in left), left
    assert stream.closed


async def test_a_wrapper_made_again_finds_its_streams_failure(rt: Any, owner: Owner) -> None:
    """torch_npu's pattern: a request wraps the stream and lets the wrapper go. The next
    request's wrapper of the same handle is the same stream: it reports the owner's
    failure that the first one's abandoned wait saw, and the device keeps one stream
    for the handle however many requests wrapped it."""
    import gc

    gate = Gate()
    async with aclasync.open_device(0, backend=rt) as dev:
        lanes = len(dev._state._lanes)
        owner.queue_work(gate.kernel(error=AICORE_EXCEPTION))
        first = dev.wrap_stream(owner.stream)
        with anyio.move_on_after(0.05):
            await first.synchronize()  # abandoned: it consumes nothing
        del first
        gate.open()
        for _ in range(20):
            gc.collect()
            await dev.wrap_stream(owner.stream)._drain()  # a wrapper per request
        with pytest.raises(aclasync.AclError) as caught:
            await dev.wrap_stream(owner.stream).synchronize()
        assert caught.value.code == AICORE_EXCEPTION
        assert len(dev._state._lanes) == lanes + 1
        await dev.wrap_stream(owner.stream).aclose()
    owner.finish()


async def test_wrap_stream_refuses_another_devices_stream_and_wide_handles(rt: Any) -> None:
    async with (
        aclasync.open_device(0, backend=rt) as d0,
        aclasync.open_device(1, backend=rt) as d1,
    ):
        for other in (d1.default_stream, await d1.create_stream()):
            with pytest.raises(ValueError, match="another device"):
                d0.wrap_stream(other)
        for handle in (2**64, 2**64 + 0x80):
            with pytest.raises(ValueError, match=r"below 2\*\*64"):
                d0.wrap_stream(handle)


async def test_a_wrapper_made_while_another_closes_waits_for_its_own_work(
    rt: Any, owner: Owner
) -> None:
    first_gate, second_gate = Gate(), Gate()
    async with aclasync.open_device(0, backend=rt) as dev:
        first = dev.wrap_stream(owner.stream)
        first.launch(dev.acl.sim.launch_kernel, first_gate.kernel())
        async with anyio.create_task_group() as tg:
            tg.start_soon(first.aclose)  # waits for the first kernel
            while not first.closed:  # noqa: ASYNC110 - its close has begun
                await anyio.sleep(0.001)
            second = dev.wrap_stream(owner.stream)  # made while the first closes
            assert second is not first
            first_gate.open()
        # (Queued after the first close: a wrapper's close waits for all the stream's
        # work queued meanwhile, whoever queued it.)
        second.launch(dev.acl.sim.launch_kernel, second_gate.kernel())
        try:
            with anyio.move_on_after(0.3) as held:
                await second.synchronize()  # its kernel is held: it cannot return
            assert held.cancelled_caught
        finally:
            second_gate.open()
        await second.synchronize()
        await second.aclose()
    owner.finish()


async def _held_until_opened(sync: Any, gate: Gate) -> None:
    """Await *sync* while *gate* holds the stream's kernel: it must not end first."""
    done = anyio.Event()

    async def run() -> None:
        await sync()
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        assert await anyio.to_thread.run_sync(gate.started.wait, LIMIT_S)
        await anyio.sleep(0.05)  # the kernel cannot end while the gate is closed
        assert not done.is_set(), "the sync returned while the owner's kernel ran"
        gate.open()


@pytest.mark.parametrize("how", ["stream", "device"])
async def test_a_wrapped_stream_found_idle_once_still_waits_for_the_owners_next_work(
    rt: Any, owner: Owner, how: str
) -> None:
    # The torch_npu pattern: each request queues work, then awaits the stream. A sync
    # that had found the stream idle made the next ones answer at once from aclasync's
    # own counts, which never see the owner's work or its failures.
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev:
            stream = dev.wrap_stream(owner.stream)
            sync = stream.synchronize if how == "stream" else dev.synchronize
            owner.queue_work(Kernel())
            await sync()
            await sync()  # found idle twice: the case that was answered from the counts
            gate = Gate()
            owner.queue_work(gate.kernel())
            await _held_until_opened(sync, gate)
            owner.queue_work(Kernel(error=AICORE_EXCEPTION))
            with pytest.raises(aclasync.AclError) as failure:
                await sync()
            assert failure.value.code == AICORE_EXCEPTION
            await sync()  # reported once
    assert owner.finish() == (0, 0, 0, 0, 0)


@pytest.mark.parametrize("taken", ["__acl_stream__", "handle"])
async def test_work_another_thread_queues_by_the_protocol_is_awaited_and_reported(
    rt: Any, taken: str
) -> None:
    # Taken by the public ``handle`` (what one passes to torch_npu's ExternalStream),
    # the stream stayed known idle: a sync returned while the other thread's work ran.
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as mine:
            await mine.synchronize()
            await mine.synchronize()  # known idle, by aclasync's counts
            handle = mine.__acl_stream__()[1] if taken == "__acl_stream__" else mine.handle

            def other_thread(kernel: Kernel) -> tuple[int, int, int]:
                acl = rt.rt
                setting = acl.set_device(0)
                return setting, rt.sim.launch_kernel(kernel, handle), acl.reset_device(0)

            gate = Gate()
            assert await anyio.to_thread.run_sync(other_thread, gate.kernel()) == (0, 0, 0)
            await _held_until_opened(mine.synchronize, gate)
            failing = Kernel(error=AICORE_EXCEPTION)
            assert await anyio.to_thread.run_sync(other_thread, failing) == (0, 0, 0)
            with pytest.raises(aclasync.AclError) as failure:
                await mine.synchronize()
            assert failure.value.code == AICORE_EXCEPTION
            await mine.synchronize()


@pytest.mark.parametrize("how", ["default stream", "wrapped by its handle"])
async def test_streams_others_can_reach_are_never_known_idle(rt: Any, how: str) -> None:
    # Threads that set the device share the default stream; wrapping a stream of the
    # device by its handle gives that handle out as __acl_stream__ does.
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.create_stream() as mine:
            stream = dev.default_stream if how == "default stream" else mine
            await stream.synchronize()
            await stream.synchronize()  # known idle, by aclasync's counts
            if how != "default stream":
                assert dev.wrap_stream(mine.handle) is mine

            def other_thread(kernel: Kernel) -> tuple[int, int, int]:
                acl = rt.rt
                setting = acl.set_device(0)
                return setting, rt.sim.launch_kernel(kernel, stream.handle), acl.reset_device(0)

            gate = Gate()
            assert await anyio.to_thread.run_sync(other_thread, gate.kernel()) == (0, 0, 0)
            await _held_until_opened(stream.synchronize, gate)


async def test_a_stream_the_device_made_stays_its_own_when_wrapped_again(rt: Any) -> None:
    """Its ``Stream`` collected unclosed, a wrap of its handle is the device's stream
    again (not a wrapped one): the device's close raises its failure and destroys it."""
    import gc

    made = live_objects(rt)["streams"]
    with pytest.raises(aclasync.AclError) as caught:  # noqa: PT012 - the close raises
        async with aclasync.open_device(0, backend=rt) as dev:
            mine = await dev.create_stream(priority=3)
            mine.launch(rt.sim.launch_kernel, Kernel(error=AICORE_EXCEPTION))
            handle = mine.handle
            del mine
            gc.collect()
            again = dev.wrap_stream(handle)
            assert not again.wrapped
            assert again.priority == 3
            assert live_objects(rt)["streams"] == made + 1
    assert caught.value.code == AICORE_EXCEPTION
    assert live_objects(rt)["streams"] == made  # destroyed by the device's close


async def test_a_dropped_wrapper_is_let_go_of(rt: Any, owner: Owner) -> None:
    """The torch_npu pattern with streams made per request: a wrapper is awaited, then
    dropped unclosed, and its owner destroys the stream. The device's next sync lets go
    of it (it no longer waits on it, nor raises for the destroyed handle), and the
    device keeps no stream per request; a failure it held goes to the device."""
    import gc

    async with aclasync.open_device(0, backend=rt) as dev:
        lanes = len(dev._state._lanes)

        def make() -> int:
            handle, ret = rt.rt.create_stream()
            assert ret == 0
            return int(handle)

        for round_ in range(3):
            handle = owner.do(make)
            wrapper = dev.wrap_stream(handle)
            await wrapper.query()
            if round_ == 2:  # a failed launch it never reported
                wrapper.launch(lambda stream: 107000)
            del wrapper
            gc.collect()
            assert owner.do(lambda handle=handle: rt.rt.destroy_stream(handle)) == 0
            if round_ < 2:
                await dev.synchronize()
                assert len(dev._state._lanes) == lanes
        with pytest.raises(aclasync.AclError) as caught:
            await dev.synchronize()
        assert caught.value.code == 107000
        await dev.synchronize()
        assert len(dev._state._lanes) == lanes
    assert owner.finish() == (0, 0, 0, 0, 0)


async def test_closed_objects_give_no_handle(rt: Any) -> None:
    async with aclasync.open_device(0, backend=rt) as dev:
        stream = await dev.create_stream()
        event = await stream.record_event()
        await event.aclose()
        await stream.aclose()
        for give in (stream.__acl_stream__, event.__acl_event__):
            with pytest.raises(anyio.ClosedResourceError):
                give()
        with pytest.raises(anyio.ClosedResourceError):
            dev.wrap_stream(stream)
        with pytest.raises(anyio.ClosedResourceError):
            dev.wrap_event(event)


async def test_wrap_event_refuses_another_devices_event(rt: Any) -> None:
    async with (
        aclasync.open_device(0, backend=rt) as d0,
        aclasync.open_device(1, backend=rt) as d1,
    ):
        event = await d1.default_stream.record_event()
        with pytest.raises(ValueError, match="another device"):
            d0.wrap_event(event)
        await event.aclose()


async def test_events_recorded_on_a_wrapped_stream_go_back_to_the_pool(
    rt: Any, owner: Owner
) -> None:
    # They are aclasync's own events (only wrap_event's are another's): closed or
    # collected, each stayed out of the pool, a runtime event, until the device closed.
    async with aclasync.open_device(0, backend=rt) as dev:
        wrapped = dev.wrap_stream(owner.stream)
        first = await wrapped.record_event()
        await first.synchronize()
        await first.aclose()
        before = live_objects(rt)["events"]
        for request in range(40):
            done = await wrapped.record_event()
            await done.synchronize()
            if request % 2:
                await done.aclose()
            del done
        assert live_objects(rt)["events"] <= before + 2
        await wrapped.aclose()
    owner.finish()


async def test_a_dropped_wrapper_with_an_abandoned_wait_is_let_go_of_too(
    rt: Any, owner: Owner
) -> None:
    # A wait that timed out left its point on the stream: the let-go kept the stream,
    # and the device's close looked at it (and could take the owner's failure).
    import gc

    gate = Gate()
    owner.queue_work(gate.kernel(error=AICORE_EXCEPTION))
    try:
        async with aclasync.open_device(0, backend=rt) as dev:
            wrapper = dev.wrap_stream(owner.stream)
            with pytest.raises(aclasync.AclTimeoutError):
                await wrapper.synchronize(timeout=0.01)  # the kernel is held: times out
            del wrapper
            gc.collect()
            await dev.synchronize()  # lets go of it, without waiting for the owner's work
            await dev.call(lambda: None)  # (the let-go ran before this)
            assert owner.stream not in dev._state.worker.handles.lanes
    finally:
        gate.open()
    assert owner.do(lambda: rt.rt.synchronize_stream(owner.stream)) == AICORE_EXCEPTION
    owner.finish()


async def test_a_closed_device_wraps_nothing(rt: Any) -> None:
    # wrap_stream(0) gave back the closed default stream, where every other handle
    # (and wrap_event) was refused.
    async with aclasync.open_device(0, backend=rt) as dev:
        handle = (await dev.create_stream()).handle
    for obj in (0, handle):
        with pytest.raises(anyio.ClosedResourceError):
            dev.wrap_stream(obj)
