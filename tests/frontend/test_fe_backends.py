"""Choosing a backend, driving a pyACL-shaped object, and a backend that dies under us."""

from __future__ import annotations

import sys
import threading
from typing import Any

import anyio
import pytest
from frontend_support import BreakableAcl, Gate, Log, RecordingAcl, ms, opened

import aclasync
import aclasync.sim
from aclasync import StreamFlag
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio


async def test_backend_sim_is_the_process_wide_simulator() -> None:
    log = Log()
    async with opened("sim", 7) as dev:  # the default runtime has eight devices
        assert dev.backend_name == "sim"
        assert dev.acl is aclasync.sim.acl
        worker = dev.worker_thread
        async with dev.create_stream() as s:
            s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=ms(10), fn=log.add("ran")))
            await s.synchronize()
    assert log.snapshot() == ["ran"]
    assert not worker.is_alive()
    assert not [t for t in threading.enumerate() if t.name.startswith("aclasync-sim-dev7")]


async def test_backend_none_follows_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACLASYNC_BACKEND", "sim")
    async with opened(None, 6) as dev:
        assert dev.backend_name == "sim"
        assert dev.acl is aclasync.sim.acl
        await dev.synchronize()

    monkeypatch.setenv("ACLASYNC_BACKEND", "bogus")
    with pytest.raises(ValueError, match="ACLASYNC_BACKEND"):
        async with aclasync.open_device(0):
            pytest.fail("opened a device with ACLASYNC_BACKEND=bogus")


@pytest.mark.parametrize(
    ("backend", "env"), [("native", None), (None, None), (None, "native")], ids=str
)
async def test_native_backend_without_cann_says_how_to_use_the_simulator(
    monkeypatch: pytest.MonkeyPatch, backend: str | None, env: str | None
) -> None:
    monkeypatch.setitem(sys.modules, "acl", None)  # `import acl` fails, as without CANN
    if env is None:
        monkeypatch.delenv("ACLASYNC_BACKEND", raising=False)
    else:
        monkeypatch.setenv("ACLASYNC_BACKEND", env)
    with pytest.raises(aclasync.BackendUnavailableError) as info:
        async with aclasync.open_device(0, backend=backend):
            pytest.fail("opened a native device without CANN")
    assert isinstance(info.value, aclasync.AclasyncError)
    message = str(info.value)
    assert "backend='sim'" in message
    assert "ACLASYNC_BACKEND" in message


async def test_runtime_calls_go_through_the_device_worker_in_pyacl_order(rt: Any) -> None:
    acl = RecordingAcl(rt)
    loop_thread = threading.get_ident()
    async with opened(acl) as dev:
        assert dev.backend_name == "RecordingAcl"
        assert dev.acl is acl
        worker = dev.worker_thread.ident
        kernel = dev.acl.sim.launch_kernel

        async with dev.create_stream(priority=3, flags=StreamFlag.FAST_SYNC) as early:
            early.launch(kernel, Kernel(duration_us=ms(5)))
            await early.synchronize()
        s = await dev.create_stream(priority=1)  # left open for the device to destroy
        s.launch(kernel, Kernel(duration_us=ms(20)))
        ev = await s.record_event(timing=True)
        await ev.synchronize()
        await s.synchronize()
        assert await s.query()
        assert await s.get_overflow_status() == 0
        dev.default_stream.launch(kernel, Kernel(duration_us=ms(5)))
        await dev.default_stream.synchronize()
        pending_calls = len(acl.calls)

    calls = acl.calls
    assert len(calls) > pending_calls  # leaving made calls too
    assert calls[0][:2] == ("set_device", (0,))
    assert worker != loop_thread
    # Besides the worker, only the device's waiting thread makes calls, and only its
    # own: make the device's context current, block in timed waits, and look at what
    # finished (queries, and the sync that collects an idle stream's failures).
    others = [(name, ident) for name, _, ident in calls if ident != worker]
    assert len({ident for _, ident in others}) <= 1
    assert loop_thread not in {ident for _, ident in others}
    assert others, "the waits were not lent to the waiting thread"
    assert others[0][0] == "set_context"
    assert {name for name, _ in others[1:]} <= {
        "synchronize_stream_with_timeout",
        "synchronize_event_with_timeout",
        "query_event_status",
        "stream_query",
        "synchronize_stream",
    }

    assert acl.named("create_stream_with_config") == [(3, int(StreamFlag.FAST_SYNC)), (1, 0)]
    assert (ev.handle, s.handle) in acl.named("record_event")
    for name in ("record_event", "stream_wait_event"):
        for args in acl.named(name):
            assert len(args) == 2
    assert (early.handle,) in acl.named("destroy_stream")  # explicit close

    names = [(name, args) for name, args, _ in calls]
    assert names[-1] == ("reset_device", (0,))
    teardown = names[pending_calls:]
    assert ("destroy_stream", (s.handle,)) in teardown
    for name in ("destroy_stream", "destroy_stream_force"):
        assert (0,) not in acl.named(name)  # the default stream is never destroyed
    assert ("destroy_event", (ev.handle,)) in teardown


async def _outcome(outcomes: dict[str, BaseException | None], name: str, wait: Any) -> None:
    try:
        await wait()
    except Exception as exc:
        outcomes[name] = exc
    else:
        outcomes[name] = None


async def _worker_went_round(probe: aclasync.Stream) -> None:
    """Return once the worker has taken every job submitted so far.

    A worker runs jobs in order, so once an idle stream's sync has come back, every
    wait submitted before it is registered.
    """
    await probe.synchronize()


def _assert_broken(exc: BaseException | None) -> None:
    assert isinstance(exc, aclasync.DeviceBrokenError), exc
    assert isinstance(exc, anyio.BrokenResourceError)
    assert isinstance(exc, aclasync.AclasyncError)
    assert isinstance(exc.__cause__, RuntimeError)


async def test_worker_death_fails_pending_and_later_awaits_promptly(rt: Any) -> None:
    acl = BreakableAcl(rt)
    outcomes: dict[str, BaseException | None] = {}
    async with opened(acl) as dev:
        kernel = dev.acl.sim.launch_kernel
        s = await dev.create_stream()
        other = await dev.create_stream()
        gate = Gate()  # never opened before the end: nobody may wait for this kernel
        s.launch(kernel, gate.kernel())
        ev = await s.record_event()

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(_outcome, outcomes, f"stream {i}", s.synchronize)
                    tg.start_soon(_outcome, outcomes, f"event {i}", ev.synchronize)
                await anyio.wait_all_tasks_blocked()
                await _worker_went_round(other)
                acl.armed.set()

        assert len(outcomes) == 6
        for exc in outcomes.values():
            _assert_broken(exc)

        with anyio.fail_after(2):
            for later in (
                s.synchronize,
                other.synchronize,
                other.query,
                ev.synchronize,
                ev.query,
                s.record_event,
                dev.synchronize,
                dev.create_stream,
            ):
                with pytest.raises(aclasync.DeviceBrokenError):
                    await later()
        with pytest.raises(aclasync.DeviceBrokenError):
            other.launch(kernel, Kernel())

    # Leaving a broken device neither hangs nor waits for its work: the gate is still
    # shut (and ``opened`` fails the test after 10 s, half the gate's own limit).
    gate.open()  # the dying worker's own release finishes after the kernel
    dev.worker_thread.join(10)
    assert not dev.worker_thread.is_alive()


async def test_worker_death_while_taking_a_new_wait_fails_that_wait(rt: Any) -> None:
    acl = BreakableAcl(rt)
    outcomes: dict[str, BaseException | None] = {}
    async with opened(acl) as dev:
        s = await dev.create_stream()
        gate = Gate()
        s.launch(dev.acl.sim.launch_kernel, gate.kernel())
        ev = await s.record_event()
        acl.armed.set()  # the worker dies in the very call that registers the wait
        with anyio.fail_after(3):
            await _outcome(outcomes, "event", ev.synchronize)
        _assert_broken(outcomes["event"])
        with pytest.raises(aclasync.DeviceBrokenError):
            await s.synchronize()
        gate.open()


async def test_worker_death_fails_a_pending_device_synchronize(rt: Any) -> None:
    acl = BreakableAcl(rt)
    outcomes: dict[str, BaseException | None] = {}
    async with opened(acl) as dev:
        kernel = dev.acl.sim.launch_kernel
        a = await dev.create_stream()
        b = await dev.create_stream()
        probe = await dev.create_stream()
        gate = Gate()
        a.launch(kernel, gate.kernel())
        b.launch(kernel, gate.kernel())
        with anyio.fail_after(3):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_outcome, outcomes, "device", dev.synchronize)
                await anyio.wait_all_tasks_blocked()
                await _worker_went_round(probe)
                acl.armed.set()
        _assert_broken(outcomes["device"])
        gate.open()


class _CollectBreaksAcl(BreakableAcl):
    """Once armed, ``synchronize_stream`` raises: the call that collects a stream's
    failure once a look found its work done."""

    _BREAKING = frozenset({"synchronize_stream"})


async def test_worker_death_while_collecting_a_reached_point_fails_its_waiters(rt: Any) -> None:
    # The point was taken off its stream before the failure was collected; the death
    # there left its waiters out of the death's roll call: they waited for ever.
    acl = _CollectBreaksAcl(rt)
    outcomes: dict[str, BaseException | None] = {}
    async with opened(acl) as dev:
        kernel = dev.acl.sim.launch_kernel
        streams = [await dev.create_stream() for _ in range(2)]
        gate = Gate()
        for s in streams:
            s.launch(kernel, gate.kernel())
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for i, s in enumerate(streams):
                    tg.start_soon(_outcome, outcomes, f"stream {i}", s.synchronize)
                await anyio.wait_all_tasks_blocked()
                acl.armed.set()
                gate.open()
        assert acl.broke.is_set()
        assert len(outcomes) == 2
        for exc in outcomes.values():  # each ends: done, if it was not looked at by
            if exc is not None:  # the dying call, or the death
                _assert_broken(exc)
        with pytest.raises(aclasync.DeviceBrokenError):
            await dev.synchronize()


async def test_a_death_while_a_cancelled_close_waits_is_raised_by_the_device_close(
    rt: Any,
) -> None:
    acl = BreakableAcl(rt)
    gate = Gate()
    try:
        with anyio.fail_after(10), pytest.raises(aclasync.DeviceBrokenError):  # noqa: PT012
            async with opened(acl) as dev:
                s = await dev.create_stream()
                s.launch(dev.acl.sim.launch_kernel, gate.kernel())
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await s.aclose()  # destroyed once the kernel ends: never, here
                acl.armed.set()  # the worker dies at its next look
                assert await anyio.to_thread.run_sync(acl.broke.wait, 5)
                gate.open()  # its release after the death waits for the kernel
    finally:
        gate.open()
