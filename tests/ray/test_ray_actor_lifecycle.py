"""``NpuActor``'s own life, without a Ray cluster: a close while the device opens, and
Ray's shutdown hook on an actor whose construction failed."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

from aclasync.ray import NpuActor


def _device_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("aclasync-device")]


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


def test_ray_shutdown_after_a_failed_construction_does_nothing() -> None:
    class Failing(NpuActor):
        def __init__(self) -> None:
            raise ValueError("a subclass's own check, before NpuActor's")

    with pytest.raises(ValueError, match="own check"):
        Failing()
    half_made = Failing.__new__(Failing)  # what Ray still holds and shuts down
    half_made.__ray_shutdown__()
