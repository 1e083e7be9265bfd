"""Stream pools keep their promises under adversarial use (issue 21), on every loop.

- every failure of a returned stream is reported exactly once;
- a body that raises carries the borrowed stream's failure as a note;
- every ``aclose`` returns only once the close is complete;
- a backend fault while a failed stream is replaced never leaves the pool waiting.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pool_support import HookedAcl, passing

import aclasync
from aclasync.sim import Kernel

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

pytestmark = pytest.mark.anyio

LIMIT_S = 10.0


def fails_with(code: int) -> Any:
    def call(*_: Any) -> int:
        return code

    call.__name__ = f"fails_with_{code}"
    return call


def codes(exc: BaseException) -> list[int]:
    if isinstance(exc, ExceptionGroup):
        return [code for inner in exc.exceptions for code in codes(inner)]
    assert isinstance(exc, aclasync.AclError), exc
    return [exc.code]


async def test_a_returned_stream_reports_each_of_its_failures_once(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            with pytest.raises((aclasync.AclError, ExceptionGroup)) as caught:  # noqa: PT012
                async with pool.stream() as s:
                    s.launch(fails_with(107000))
                    s.launch(fails_with(107001))
            assert sorted(codes(caught.value)) == [107000, 107001]
            async with pool.stream() as fresh:
                await fresh.synchronize()
            await dev.synchronize()  # nothing left to report


async def test_a_raising_body_carries_the_borrowed_streams_failure(rt: Any) -> None:
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            with pytest.raises(KeyError) as caught:  # noqa: PT012 - the block's exit
                async with pool.stream() as s:
                    s.launch(rt.sim.launch_kernel, Kernel(error=507015))
                    raise KeyError("the body's own error")
            notes = getattr(caught.value, "__notes__", [])
            assert any("507015" in note for note in notes), notes
            async with pool.stream() as again:
                await again.synchronize()
            await dev.synchronize()  # reported once, as the note


@pytest.mark.parametrize("kind", ["device pool", "stream pool"])
async def test_every_aclose_returns_once_the_close_is_complete(
    rt: Any, gate: threading.Event, kind: str
) -> None:
    release = anyio.Event()
    finished: list[str] = []
    borrower_result: list[Any] = []

    async def borrower(pool: Any) -> None:
        try:
            async with pool.stream() as s:
                borrowed.set()
                await release.wait()
                s.launch(rt.sim.launch_kernel, Kernel(duration_us=100))
                await s.synchronize()
            borrower_result.append("ok")
        except BaseException as exc:
            borrower_result.append(exc)
            raise

    async def closer(pool: Any, name: str) -> None:
        await pool.aclose()
        finished.append(name)

    with anyio.fail_after(LIMIT_S):
        if kind == "device pool":
            pool: Any = aclasync.DevicePool([0, 1], backend=rt)
            await pool.__aenter__()
            devices = pool.devices
        else:
            dev = await aclasync.open_device(0, backend=rt)
            pool = await dev.stream_pool(2)
            devices = (dev,)
        borrowed = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(borrower, pool)
            await borrowed.wait()
            tg.start_soon(closer, pool, "A")
            tg.start_soon(closer, pool, "B")
            # The borrower works on (0.3 s here): no close is complete meanwhile.
            await anyio.sleep(0.3)
            assert finished == []
            release.set()
        assert borrower_result == ["ok"]
        assert sorted(finished) == ["A", "B"]
        if kind == "device pool":
            assert all(d.closed for d in devices)
        else:
            assert pool.closed
            await devices[0].aclose()


def fault_replacements(name: str, args: tuple[Any, ...], call: Any) -> Any:
    """A hook: ``destroy_stream_force`` meets a backend fault."""
    if name == "destroy_stream_force":
        raise RuntimeError("injected backend fault")
    return call(*args)


async def test_a_backend_fault_while_replacing_a_stream_never_hangs_the_pool(rt: Any) -> None:
    acl = HookedAcl(rt)
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=acl) as dev:
            pool = await dev.stream_pool(1)
            acl.hook = fault_replacements
            with pytest.raises(BaseException) as caught:  # noqa: PT011 - any, but no hang
                async with pool.stream() as s:
                    s.launch(fails_with(107000))
            assert "107000" in repr(caught.value) or "injected" in repr(caught.value)
            assert pool.statistics().borrowed == 0
            acl.hook = passing
            await pool.aclose()


async def test_a_device_sync_never_takes_a_borrowed_streams_failure(rt: Any) -> None:
    """The borrower learns of its own failure, whatever else awaits the device."""
    with anyio.fail_after(LIMIT_S):
        async with aclasync.open_device(0, backend=rt) as dev, dev.stream_pool(1) as pool:
            with pytest.raises(aclasync.AclError) as caught:  # noqa: PT012 - the block's exit
                async with pool.stream() as s:
                    s.launch(fails_with(107000))
                    await dev.call(lambda: None)  # the worker has seen the failure
                    await dev.synchronize()  # waits for s, leaves its failure to s
            assert caught.value.code == 107000
            await dev.synchronize()
