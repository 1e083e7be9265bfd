"""A device used from two event loops on two threads while one of them closes it.

``Device`` may be used from any event loop, in any thread, so another thread's close
can fall between a caller's "is it closed?" check and its job reaching the worker.
Found by an adversarial review: such a wait was never answered (it came after the
worker's stop), such a launch was dropped without a word, and a device sync walking
the device's streams raised ``RuntimeError`` when another loop created one meanwhile.
Now a job that reaches the worker after its stop is refused (``ClosedResourceError``)
and one that came before the worker took the stop runs, its failure reported by the
close. Each race is forced: the second loop's thread is paused inside the gap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from frontend_support import ProxyAcl, failing_call

import aclasync
from aclasync import _device_state
from aclasync._lanes import Lane

pytestmark = pytest.mark.anyio

AICORE = 507015  # ACL_ERROR_RT_AICORE_EXCEPTION


class Pause:
    """Pauses the thread named ``loop-B`` once, where a patched function is called."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.paused = threading.Event()
        self.go_on = threading.Event()

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def paused(*args: Any) -> Any:
            if self.armed.is_set() and threading.current_thread().name == "loop-B":
                self.armed.clear()
                self.paused.set()
                assert self.go_on.wait(20)
            return fn(*args)

        return paused


def _other_loop(body: Callable[[], Any], outcomes: list[str]) -> threading.Thread:
    """Run *body* on a new asyncio loop on thread ``loop-B``; what it did goes to
    *outcomes*."""

    async def run() -> None:
        try:
            with anyio.fail_after(10):
                await body()
            outcomes.append("returned")
        except TimeoutError:
            outcomes.append("hung")
        except anyio.ClosedResourceError:
            outcomes.append("closed")

    thread = threading.Thread(target=anyio.run, args=(run,), name="loop-B")
    thread.start()
    return thread


@pytest.fixture
def pause_between_check_and_submit(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pause]:
    """Pause ``loop-B`` after a wait's or a launch's closed check, before its submit."""
    pause = Pause()
    monkeypatch.setattr(
        _device_state, "current_delivery", pause.wrap(_device_state.current_delivery)
    )
    monkeypatch.setattr(Lane, "submit", pause.wrap(Lane.submit))
    yield pause
    pause.go_on.set()


@pytest.mark.parametrize("what", ["wait", "launch"])
async def test_a_job_after_another_threads_close_is_refused(
    rt: Any, pause_between_check_and_submit: Pause, what: str
) -> None:
    pause = pause_between_check_and_submit
    ran: list[str] = []
    outcomes: list[str] = []
    dev = await aclasync.open_device(0, backend=rt)
    stream = dev.default_stream

    async def body() -> None:
        pause.armed.set()
        if what == "wait":
            await stream.synchronize()
        else:
            stream.launch(lambda s: ran.append("ran") or 0)

    thread = _other_loop(body, outcomes)
    with anyio.fail_after(20):
        await anyio.to_thread.run_sync(pause.paused.wait)
        await dev.aclose()  # the worker has stopped and released the device
        pause.go_on.set()
        await anyio.to_thread.run_sync(thread.join)
    assert outcomes == ["closed"]
    assert ran == []


async def test_a_launch_that_came_before_the_stop_was_taken_runs_and_is_reported(
    rt: Any, pause_between_check_and_submit: Pause
) -> None:
    pause = pause_between_check_and_submit
    outcomes: list[str] = []
    worker_held = threading.Event()
    dev = await aclasync.open_device(0, backend=rt)
    stream = dev.default_stream

    async def body() -> None:
        pause.armed.set()
        stream.launch(failing_call(AICORE))

    thread = _other_loop(body, outcomes)
    closed: list[BaseException | None] = []

    async def close() -> None:
        try:
            await dev.aclose()
            closed.append(None)
        except BaseException as exc:
            closed.append(exc)

    with anyio.fail_after(20):
        await anyio.to_thread.run_sync(pause.paused.wait)
        async with anyio.create_task_group() as tg:
            tg.start_soon(dev.call, lambda: worker_held.wait(20))  # the worker is busy
            await anyio.lowlevel.checkpoint()
            tg.start_soon(close)
            while not dev.closed:
                await anyio.lowlevel.checkpoint()
            pause.go_on.set()  # the launch goes in after the stop
            await anyio.to_thread.run_sync(thread.join)
            worker_held.set()
    assert outcomes == ["returned"]
    [error] = closed
    assert isinstance(error, aclasync.AclError)
    assert error.code == AICORE


async def test_a_device_sync_while_another_loop_creates_a_stream(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = threading.Event()
    walking = threading.Event()
    outcomes: list[str] = []
    dev = await aclasync.open_device(0, backend=rt)
    closed_stream = await dev.create_stream()
    await closed_stream.aclose()
    plain_closed = Lane.closed
    ours = threading.current_thread()
    plain_prune = _device_state.DeviceState._prune_closed

    def prune(state: _device_state.DeviceState) -> None:
        walking.set()
        plain_prune(state)

    def closed(lane: Lane) -> bool:
        # The device sync asks every stream whether it closed, as it walks them after
        # the waits: the first time, it waits until loop B has made a stream.
        if threading.current_thread() is ours and walking.is_set() and not created.is_set():
            assert created.wait(20)
        return bool(plain_closed.__get__(lane))

    monkeypatch.setattr(_device_state.DeviceState, "_prune_closed", prune)
    monkeypatch.setattr(Lane, "closed", property(closed))

    async def body() -> None:
        await anyio.to_thread.run_sync(walking.wait, 20)
        async with dev.create_stream():
            created.set()

    thread = _other_loop(body, outcomes)
    try:
        with anyio.fail_after(20):
            await dev.synchronize()
    finally:
        created.set()
        await anyio.to_thread.run_sync(thread.join)
        await dev.aclose()
    assert outcomes == ["returned"]


@pytest.mark.parametrize("call", ["synchronize_stream", "destroy_stream", "reset_device"])
async def test_a_worker_that_dies_tearing_down_answers_the_close(rt: Any, call: str) -> None:
    # The worker had taken the stop when the runtime call failed: the close hung for
    # ever (the death answered every job but the stop).
    class FailingRelease(ProxyAcl):
        armed = False

        def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
            if self.armed and name == call:
                raise RuntimeError(f"injected failure in {name}")

    backend = FailingRelease(rt)
    dev = await aclasync.open_device(0, backend=backend)
    await dev.create_stream()
    backend.armed = True
    with anyio.fail_after(20), pytest.raises(aclasync.DeviceBrokenError, match=call):
        await dev.aclose()
    assert dev.closed
