"""What a hostile but realistic user does to streams, events and devices, and what they
must see (found by an adversarial review), on every event loop:

- a device closed from two event loops at once: the second close waits for the first;
- ``aclose(force=True)`` while another close waits for the queued work drops it;
- a forced close still reports failures of work that had all ended;
- an event of a force-closed stream is neither waited for nor queried as done;
- closing the default stream reports its failures (it is not destroyed);
- whatever a launched call raises, or its result's ``__index__``/``__repr__`` raises,
  is one failure of its stream: the device goes on;
- a ``timeout=`` beyond any float waits for ever;
- a worker's death found while a cancelled borrower's stream is taken back is raised
  by the device's close (the cancel scope swallows the cancellation and its notes);
- a cancelled wait stops the device looking for its stream's work (a FAST_SYNC stream
  was polled, at a quarter of a core, for as long as its kernel ran);
- two threads never both take a turn (a device's close, a stream's overflow read);
- a device id pyACL cannot parse is refused at the call; an object of another opening
  of the same device is named so; a buffer's close in a cancelled scope checkpoints.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from frontend_support import BreakableAcl, Gate, RecordingAcl, failing_call, opened

import aclasync
from aclasync import StreamFlag
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio

AICORE = 507015  # ACL_ERROR_RT_AICORE_EXCEPTION


@pytest.mark.parametrize("other_loop", ["asyncio", "trio"])
async def test_a_close_from_another_loop_waits_for_the_first(rt: Any, other_loop: str) -> None:
    gate = Gate()
    released = threading.Event()
    outcomes: dict[str, BaseException | None] = {}
    dev = await aclasync.open_device(0, backend=rt)
    stream = await dev.create_stream()
    stream.launch(dev.acl.sim.launch_kernel, gate.kernel())
    closing = threading.Event()

    def first_close() -> None:
        async def close() -> None:
            closing.set()
            try:
                await dev.aclose()
                outcomes["first"] = None
            except BaseException as exc:
                outcomes["first"] = exc

        anyio.run(close, backend=other_loop)

    thread = threading.Thread(target=first_close)
    thread.start()
    try:
        with anyio.fail_after(20):
            await anyio.to_thread.run_sync(closing.wait)
            while not dev.closed:  # noqa: ASYNC110 - set by the first close, on another loop
                await anyio.sleep(0.001)
            await _second_close(dev, released, outcomes, gate)
    finally:
        gate.open()
        await anyio.to_thread.run_sync(thread.join, 10)
    assert outcomes == {"first": None, "second released": None}


async def _second_close(
    dev: Any, released: threading.Event, outcomes: dict[str, Any], gate: Gate
) -> None:
    """Close *dev* while its first close waits for the gated kernel, then open it."""

    async def second_close() -> None:
        await dev.aclose()
        outcomes["second released"] = None if released.is_set() else AssertionError()

    async with anyio.create_task_group() as tg:
        tg.start_soon(second_close)
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        released.set()
        gate.open()


async def test_a_forced_close_while_a_close_waits_drops_the_work(rt: Any) -> None:
    gate = Gate()
    async with opened(rt) as dev:
        stream = await dev.create_stream()
        stream.launch(dev.acl.sim.launch_kernel, gate.kernel())
        results: dict[str, str] = {}

        async def record(name: str, coro: Any) -> None:
            try:
                await coro
                results[name] = "returned"
            except anyio.ClosedResourceError:
                results[name] = "ClosedResourceError"

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(record, "sync", stream.synchronize())
                tg.start_soon(record, "close", stream.aclose())
                await anyio.to_thread.run_sync(gate.started.wait, 10)
                for _ in range(10):
                    await anyio.lowlevel.checkpoint()
                await stream.aclose(force=True)
                results["forced, with the kernel still held"] = str(not gate._event.is_set())
        finally:
            gate.open()
    assert results == {
        "sync": "ClosedResourceError",
        "close": "returned",
        "forced, with the kernel still held": "True",
    }


async def _ended(dev: Any, stream: aclasync.Stream) -> None:
    """Return once the stream's work has ended, reporting nothing."""
    query = dev.acl.rt.stream_query
    while (await dev.call(lambda: query(stream.handle)))[0] != 0:  # noqa: ASYNC110
        await anyio.sleep(0.001)


async def test_a_forced_close_reports_failures_of_work_that_ended(rt: Any) -> None:
    async with opened(rt) as dev:
        stream = await dev.create_stream()
        stream.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
        await _ended(dev, stream)
        with pytest.raises(aclasync.AclError) as caught:
            await stream.aclose(force=True)
        assert caught.value.code == AICORE
        await dev.synchronize()  # reported once


async def test_a_pool_closed_on_timeout_reports_a_borrowers_ended_failure(rt: Any) -> None:
    async with opened(rt) as dev:
        pool = await dev.stream_pool(1)  # opened
        borrowed = anyio.Event()
        outcome: list[type[BaseException]] = []

        async def borrower() -> None:
            try:
                async with pool.stream() as stream:
                    stream.launch(dev.acl.sim.launch_kernel, Kernel(error=AICORE))
                    await _ended(dev, stream)
                    borrowed.set()
                    await anyio.sleep_forever()
            except anyio.ClosedResourceError as exc:
                outcome.append(type(exc))

        async with anyio.create_task_group() as tg:
            tg.start_soon(borrower)
            await borrowed.wait()
            with pytest.raises(aclasync.AclError) as caught:
                await pool.aclose(timeout=0.01)
        assert caught.value.code == AICORE
        assert outcome == [anyio.ClosedResourceError]


async def test_an_event_of_a_force_closed_stream_is_not_reported_done(rt: Any) -> None:
    gate = Gate()
    async with opened(rt) as dev:
        stream = await dev.create_stream()
        stream.launch(dev.acl.sim.launch_kernel, gate.kernel())
        event = await stream.record_event()
        try:
            assert not await event.query()
            await stream.aclose(force=True)
            with pytest.raises(anyio.ClosedResourceError, match="force=True"):
                await event.query()
            with pytest.raises(anyio.ClosedResourceError, match="force=True"):
                await event.synchronize()
        finally:
            gate.open()
        await event.aclose()


async def test_closing_the_default_stream_reports_its_failures(rt: Any) -> None:
    async with opened(rt) as dev:
        dev.default_stream.launch(failing_call(507002))
        with pytest.raises(aclasync.AclError) as caught:
            await dev.default_stream.aclose()
        assert caught.value.code == 507002
        await dev.synchronize()  # reported once
        assert dev.default_stream.closed

    async with opened(rt) as dev:
        dev.default_stream.launch(failing_call(507002))
        with pytest.raises(KeyError) as raised:
            async with dev.default_stream:
                raise KeyError("the body's own")
        assert any("507002" in note for note in raised.value.__notes__)
        await dev.synchronize()


class _BrokenIndex:
    def __index__(self) -> int:
        raise ValueError("a broken __index__")


class _BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("a broken __repr__")


class _Interrupt(BaseException):
    pass


def _raises_base(_stream: int) -> int:
    raise _Interrupt("a BaseException of the user's")


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda _stream: _BrokenIndex(), ValueError),
        (lambda _stream: _BrokenRepr(), TypeError),
        (_raises_base, _Interrupt),
    ],
    ids=["broken-index", "broken-repr", "base-exception"],
)
async def test_whatever_a_launched_call_raises_fails_only_its_stream(
    rt: Any, fn: Any, expected: type[BaseException]
) -> None:
    async with opened(rt) as dev:
        other = await dev.create_stream()
        stream = await dev.create_stream()
        stream.launch(fn)
        with pytest.raises(expected):
            await stream.synchronize()
        other.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=10))
        await other.synchronize()  # the device goes on
        await stream.synchronize()  # reported once


async def test_a_timeout_beyond_any_float_waits_for_ever(rt: Any) -> None:
    async with opened(rt) as dev:
        stream = await dev.create_stream()
        event = await stream.record_event()
        huge = 10**400
        await stream.synchronize(timeout=huge)
        await event.synchronize(timeout=huge)
        await dev.synchronize(timeout=huge)
        with pytest.raises(ValueError, match="timeout must be >= 0"):
            await stream.synchronize(timeout=-huge)
        await event.aclose()


async def test_a_death_found_by_a_cancelled_borrowers_return_is_raised_by_the_close(
    rt: Any,
) -> None:
    acl = BreakableAcl(rt)
    with anyio.fail_after(20), pytest.raises(aclasync.DeviceBrokenError):
        await _cancelled_borrower_meets_a_death(acl)


async def _cancelled_borrower_meets_a_death(acl: BreakableAcl) -> None:
    """A borrower is cancelled while its kernel is held; the worker dies while the pool
    takes the stream back; then the pool and the device close."""
    gate = Gate()
    async with aclasync.open_device(0, backend=acl) as dev:
        pool = await dev.stream_pool(1)
        scope = anyio.CancelScope()

        async def borrower() -> None:
            with scope:
                async with pool.stream() as stream:
                    stream.launch(dev.acl.sim.launch_kernel, gate.kernel())
                    await stream.synchronize()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(borrower)
                await anyio.to_thread.run_sync(gate.started.wait, 10)
                scope.cancel()  # the pool then takes the stream back, shielded
                for _ in range(10):
                    await anyio.lowlevel.checkpoint()
                acl.armed.set()  # and the worker dies in that wait
        finally:
            gate.open()
        assert scope.cancelled_caught
        await pool.aclose()


_LOOKS = ("synchronize_stream_with_timeout", "stream_query", "query_event_status")


@pytest.mark.parametrize("inline", [True, False], ids=["worker-waits", "waiting-thread"])
async def test_a_cancelled_fast_sync_wait_stops_the_polling(rt: Any, inline: bool) -> None:
    acl = RecordingAcl(rt)
    gate = Gate()
    options = aclasync.WorkerOptions(inline_fast_sync=inline)
    with anyio.fail_after(20):
        async with aclasync.open_device(0, backend=acl, options=options) as dev:
            stream = await dev.create_stream(flags=StreamFlag.FAST_SYNC)
            stream.launch(dev.acl.sim.launch_kernel, gate.kernel())
            try:
                with anyio.move_on_after(0.05):
                    await stream.synchronize()
                await anyio.sleep(0.15)  # a lent wait's slice (100 ms) ends meanwhile
                before = sum(len(acl.named(name)) for name in _LOOKS)
                await anyio.sleep(0.3)  # about 300 looks, 1 ms apart, if it went on
                looks = sum(len(acl.named(name)) for name in _LOOKS) - before
            finally:
                gate.open()
            await stream.synchronize()  # a new wait is answered
            await stream.aclose()
    assert looks <= 1, looks  # before: ~300 (the worker), 3 (the waiting thread)


def test_two_threads_never_both_take_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    # get_overflow_status (one status buffer per stream) and a device's close take a
    # Turn; two event loops in two threads once could both find it free (the look and
    # the taking were two steps). Here the first taker is held inside the taking until
    # the second has taken too, or for 2 s: only one may come out holding it.
    from aclasync import _loop

    made = threading.Condition()
    takers: list[object] = []

    class SlowFlag(_loop.Flag):
        __slots__ = ()

        def __init__(self) -> None:
            super().__init__()
            with made:
                takers.append(self)
                made.notify_all()
                made.wait_for(lambda: len(takers) > 1, timeout=2)

    monkeypatch.setattr(_loop, "Flag", SlowFlag)
    turn = _loop.Turn()
    held: list[bool] = []
    threads = [
        threading.Thread(target=lambda: held.append(turn.take() is None), daemon=True) for _ in "ab"
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(held) == [False, True]
    turn.end()
    assert turn.take() is None  # ended: free again


async def test_two_threads_recording_while_a_dropped_event_waits_to_go_back(rt: Any) -> None:
    # Each record gives back the events collected unclosed: one reader, held after it
    # saw one waiting, found the deque emptied by the other (IndexError from
    # record_event). The first reader is held until the other has popped.
    import collections
    import gc

    popped = threading.Event()

    class HeldDeque(collections.deque[Any]):
        held = False

        def __len__(self) -> int:
            count = super().__len__()
            if count and not HeldDeque.held:
                HeldDeque.held = True
                popped.wait(2)  # the other thread pops meanwhile
            return count

        def popleft(self) -> Any:
            item = super().popleft()
            popped.set()
            return item

    async with opened(rt) as dev, dev.create_stream() as s1, dev.create_stream() as s2:
        dev._state._dropped_events = HeldDeque()
        event = await s1.record_event()
        await event.synchronize()
        del event
        gc.collect()
        errors: list[BaseException] = []

        def record_on_another_loop(stream: Any) -> None:
            async def record() -> None:
                try:
                    await (await stream.record_event()).aclose()
                except BaseException as exc:
                    errors.append(exc)

            anyio.run(record)

        threads = [threading.Thread(target=record_on_another_loop, args=(s,)) for s in (s1, s2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            await anyio.to_thread.run_sync(thread.join, 10)
        assert errors == []


async def test_a_device_id_pyacl_cannot_parse_is_refused_at_the_call(rt: Any) -> None:
    with pytest.raises(ValueError, match=r"device_id must be >= 0 and < 2\*\*31, got 2147483648"):
        aclasync.open_device(2**31, backend=rt)


async def test_an_event_of_another_opening_of_the_same_device_is_named_so(rt: Any) -> None:
    async with (
        aclasync.open_device(0, backend=rt) as one,
        aclasync.open_device(0, backend=rt) as two,
    ):
        event = await two.default_stream.record_event()
        with pytest.raises(aclasync.AclError, match=r"another open_device\(0\)"):
            one.default_stream.wait_event(event)
        async with await two.create_stream() as theirs:
            with pytest.raises(ValueError, match=r"another open_device\(0\)"):
                one.wrap_stream(theirs)


@pytest.mark.parametrize("host", [False, True])
async def test_a_buffers_close_in_a_cancelled_scope_frees_it_then_raises(
    rt: Any, host: bool
) -> None:
    async with opened(rt) as dev:
        buffer = await (dev.alloc_host(64) if host else dev.alloc(64))
        with anyio.CancelScope() as scope:
            scope.cancel()
            await buffer.aclose()
            pytest.fail("the close checkpoints")  # (a trio loop could not be cancelled)
        assert buffer.closed
        assert dev.acl.sim.live_objects()["memory_regions"] == 0
