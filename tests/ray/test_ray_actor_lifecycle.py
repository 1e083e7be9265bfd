"""``NpuActor``'s own life, without a Ray cluster: a close while the device opens, first
calls from two event loops (as Ray's concurrency groups make them), and Ray's shutdown
hook on an actor whose construction failed."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from aclasync.ray import NpuActor


def _device_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("aclasync-device")]


class _HeldOpen(NpuActor):
    """An actor whose first open, once the device is open, waits for ``release``
    before it finishes (``_closed_meanwhile`` runs inside the open's turn)."""

    def __init__(self) -> None:
        super().__init__(backend="sim")
        self.inside = threading.Event()
        self.release = threading.Event()

    def _closed_meanwhile(self) -> bool:
        self.inside.set()
        self.release.wait(30)  # blocks this loop's thread only: the other loop runs on
        return super()._closed_meanwhile()


class _LoopThread(threading.Thread):
    """Runs ``asyncio.run(fn())`` in a thread of its own (as Ray runs a concurrency
    group); keeps what it returned or raised."""

    def __init__(self, fn: Callable[[], Awaitable[Any]]) -> None:
        super().__init__(daemon=True)
        self._fn = fn
        self.loop: asyncio.AbstractEventLoop | None = None
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        async def main() -> Any:
            self.loop = asyncio.get_running_loop()
            return await self._fn()

        try:
            self.result = asyncio.run(main())
        except BaseException as exc:
            self.error = exc

    def finish(self, timeout: float = 10.0) -> bool:
        """Wait for the thread; whether it ended within *timeout*. A loop left asleep
        (its waiter woken from a foreign thread) is woken then, so the thread ends."""
        self.join(timeout)
        if not self.is_alive():
            return True
        if self.loop is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(lambda: None)
        self.join(timeout)
        return False


def _waiting(call: Callable[[], Awaitable[Any]], parked: threading.Event) -> Any:
    """A coroutine function: start *call*, set *parked* once it waits, return its result."""

    async def run() -> Any:
        task = asyncio.ensure_future(call())
        await asyncio.sleep(0)  # the task ran up to its first wait: the other's open
        parked.set()
        return await task

    return run


def test_a_close_while_the_device_opens_leaves_it_closed() -> None:
    async def main() -> None:
        actor = NpuActor(backend="sim")
        opening = asyncio.ensure_future(actor.device())
        await asyncio.sleep(0)  # the open is under way
        await actor.close()
        with pytest.raises(anyio.ClosedResourceError):
            await opening
        with pytest.raises(anyio.ClosedResourceError):
            await actor.device()

    before = _device_threads()
    asyncio.run(main())
    assert _device_threads() == before


def _second_loop_meets_the_open(actor: _HeldOpen, call: Any) -> tuple[_LoopThread, _LoopThread]:
    """Open *actor*'s device on one event loop, held inside its open; run *call* on a
    second loop once that one waits for the turn; let the open go on. The two threads."""
    first = _LoopThread(actor.device)
    first.start()
    try:
        assert actor.inside.wait(10), "the first open never got under way"
        parked = threading.Event()
        second = _LoopThread(_waiting(call, parked))
        second.start()
        assert parked.wait(10)
    finally:
        actor.release.set()
    return first, second


def test_first_device_calls_on_two_event_loops_open_it_once_and_both_return() -> None:
    before = _device_threads()
    actor = _HeldOpen()
    first, second = _second_loop_meets_the_open(actor, actor.device)
    assert first.finish()
    assert second.finish(), "device() on the second event loop never returned"
    assert first.error is None, first.error
    assert second.error is None, second.error
    assert second.result is first.result
    assert len(_device_threads()) == len(before) + 1  # opened once
    asyncio.run(actor.close())
    assert _device_threads() == before


def test_a_close_on_another_event_loop_waits_for_the_open_under_way() -> None:
    before = _device_threads()
    actor = _HeldOpen()
    opening, closing = _second_loop_meets_the_open(actor, actor.close)
    assert opening.finish()
    assert closing.finish(), "close() on the second event loop never returned"
    assert closing.error is None, closing.error
    assert isinstance(opening.error, anyio.ClosedResourceError), opening.error
    assert _device_threads() == before
    with pytest.raises(anyio.ClosedResourceError):
        asyncio.run(actor.device())


def test_ray_shutdown_after_a_failed_construction_does_nothing() -> None:
    class Failing(NpuActor):
        def __init__(self) -> None:
            raise ValueError("a subclass's own check, before NpuActor's")

    with pytest.raises(ValueError, match="own check"):
        Failing()
    half_made = Failing.__new__(Failing)  # what Ray still holds and shuts down
    half_made.__ray_shutdown__()
