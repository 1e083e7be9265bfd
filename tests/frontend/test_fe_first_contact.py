"""Issue 22: the doors a newcomer opens first answer clearly.

``launch`` with the wrong kind of function, stream flags aclasync cannot honour, an
opener used as a device, a device never closed, a device used from another thread's
loop.
"""

from __future__ import annotations

import functools
import gc
import re
import threading
from typing import Any

import anyio
import numpy as np
import pytest
from frontend_support import opened

import aclasync
from aclasync import StreamFlag
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio


async def _kernel_async(*args: Any) -> int:  # pragma: no cover - never awaited
    return 0


class _AsyncCallable:
    async def __call__(self, *args: Any) -> int:  # pragma: no cover - never awaited
        return 0


# -- launch ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        _kernel_async,
        _AsyncCallable(),
        functools.partial(_kernel_async, 1),
        functools.partial(functools.partial(_AsyncCallable()), 1),
    ],
    ids=["async-def", "async-call", "partial", "nested-partial"],
)
async def test_launching_a_coroutine_function_is_a_type_error_at_the_call(rt: Any, fn: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        with pytest.raises(TypeError, match=r"launch\(\) runs fn on the device's worker thread"):
            s.launch(fn)
        await s.synchronize()  # nothing was queued, nothing fails later


@pytest.mark.parametrize(
    ("result", "shown"),
    [
        ("oops", "str 'oops'"),
        (1.5, "float 1.5"),
        (None, "NoneType None"),
        (True, "bool True"),
        ((7, "x"), "tuple (7, 'x')"),
        ((), "tuple ()"),
    ],
)
async def test_a_launched_result_that_is_no_status_is_a_type_error_of_the_stream(
    rt: Any, result: object, shown: str
) -> None:
    def call(stream: int) -> object:
        return result

    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(call)
        with pytest.raises(TypeError) as caught:
            await s.synchronize()
        assert not isinstance(caught.value, aclasync.AclError)
        message = str(caught.value)
        assert message.startswith(
            "launch() expects fn to return a pyACL status: an int (0 for success), or a "
            "tuple whose last item is one, as pyACL's calls return; "
        )
        assert message.endswith(f" returned {shown}")
        await s.synchronize()  # reported once, as the error rule says; the stream goes on


async def test_a_function_returning_a_coroutine_is_reported_without_a_warning(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(lambda stream: _kernel_async(stream))  # a coroutine, closed by the worker
        with pytest.raises(TypeError, match="returned a coroutine"):
            await s.synchronize()
    gc.collect()  # filterwarnings=error: a "never awaited" RuntimeWarning would fail here


@pytest.mark.parametrize(
    "result", [0, np.int32(0), np.int64(0), (5, 0), (1, 2, np.uint32(0))], ids=repr
)
async def test_ints_numpy_ints_and_tuples_ending_in_one_are_statuses(
    rt: Any, result: object
) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(lambda stream: result)
        await s.synchronize()


async def test_a_non_zero_numpy_status_is_an_acl_error_with_an_int_code(rt: Any) -> None:
    async with opened(rt) as dev, dev.create_stream() as s:
        s.launch(lambda stream: (1, np.int64(507015)))
        with pytest.raises(aclasync.AclError) as caught:
            await s.synchronize()
        assert type(caught.value.code) is int
        assert caught.value.code == 507015


# -- stream flags ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        StreamFlag.DEFAULT,
        StreamFlag.FAST_SYNC,
        StreamFlag.FAST_LAUNCH | StreamFlag.FAST_SYNC,
        StreamFlag.HUGE | StreamFlag.FAST_SYNC,
        3,
    ],
)
async def test_flags_show_exactly_what_was_passed(rt: Any, flags: int) -> None:
    async with opened(rt) as dev, dev.create_stream(flags=flags) as s:
        assert s.flags == flags
        assert isinstance(s.flags, StreamFlag)
        s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=100))
        await s.synchronize()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (999, r"flags=0x3e7 has bits pyACL does not define \(0x3c0\)"),
        (0x40, r"flags=0x40 has bits pyACL does not define \(0x40\)"),
        (StreamFlag.PERSISTENT, r"StreamFlag\.PERSISTENT .*synchronize_stream returns at once"),
        (StreamFlag.CPU_SCHEDULE, r"StreamFlag\.CPU_SCHEDULE .*returns at once"),
        (
            StreamFlag.DEVICE_USE_ONLY | StreamFlag.FAST_SYNC,
            r"StreamFlag\.DEVICE_USE_ONLY .*returns at once",
        ),
        (-1, "flags must be >= 0"),
    ],
)
async def test_flags_are_checked_at_every_door_that_creates_streams(
    rt: Any, flags: int, message: str
) -> None:
    async with opened(rt) as dev:
        with pytest.raises(ValueError, match=message):
            dev.create_stream(flags=flags)
        with pytest.raises(ValueError, match=message):
            dev.stream_pool(2, flags=flags)
    with pytest.raises(ValueError, match=message):
        aclasync.DevicePool([0], backend=rt, flags=flags)
    assert rt.sim.live_objects()["streams"] == 0


async def test_the_refusal_says_why(rt: Any) -> None:
    async with opened(rt) as dev:
        with pytest.raises(ValueError, match="PERSISTENT") as caught:
            dev.create_stream(flags=StreamFlag.PERSISTENT)
    assert str(caught.value) == (
        "flags: StreamFlag.PERSISTENT is not supported by aclasync: a PERSISTENT stream "
        "keeps its tasks for model capture instead of running them, and "
        "synchronize_stream returns at once on it, so awaiting the stream could not wait "
        "for its work"
    )


# -- open_device -------------------------------------------------------------------------


async def test_an_opener_used_as_a_device_says_how_to_open_it(rt: Any) -> None:
    opener = aclasync.open_device(0, backend=rt)
    for name in ("create_stream", "synchronize", "acl", "default_stream"):
        with pytest.raises(AttributeError) as caught:
            getattr(opener, name)
        message = str(caught.value)
        assert f"open_device() returns an opener, not a Device: it has no {name!r}" in message
        assert "async with aclasync.open_device(...) as dev" in message
        assert "dev = await aclasync.open_device(...)" in message
        assert "await dev.aclose()" in message
    with pytest.raises(AttributeError, match="'_DeviceOpener' object has no attribute 'nope'"):
        opener.nope  # noqa: B018 - the attribute access is the test
    assert rt.sim.live_objects()["device_refs"] == 0  # nothing was opened


async def test_await_open_device_then_aclose(rt: Any) -> None:
    dev = await aclasync.open_device(0, backend=rt)
    try:
        async with dev.create_stream() as s:
            s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=100))
            await s.synchronize()
    finally:
        await dev.aclose()
    assert dev.closed


async def test_a_device_collected_unclosed_warns_like_an_asyncio_transport(rt: Any) -> None:
    dev = await aclasync.open_device(0, backend=rt)
    text = repr(dev)
    state = dev._state  # to end the worker thread afterwards, as nobody else can
    del dev
    with pytest.warns(ResourceWarning, match=re.escape(f"unclosed {text}")):
        gc.collect()
    await state.aclose()


async def test_a_closed_device_collects_quietly(rt: Any) -> None:
    dev = await aclasync.open_device(0, backend=rt)
    await dev.aclose()
    del dev
    gc.collect()  # filterwarnings=error: a ResourceWarning would fail the test


async def test_a_device_is_usable_from_another_threads_event_loop(rt: Any) -> None:
    """Opened here; streams made, launched on and awaited from loops in other threads."""

    async def use(dev: aclasync.Device) -> float:
        async with dev.create_stream() as s:
            start = await s.record_event(timing=True)
            s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=2_000))
            end = await s.record_event(timing=True)
            await end.synchronize(timeout=10)
            await s.synchronize(timeout=10)
            await dev.synchronize(timeout=10)
            elapsed: float = await start.elapsed_time(end)
            return elapsed

    results: dict[str, float] = {}
    errors: list[BaseException] = []

    def in_thread(backend: str, dev: aclasync.Device) -> None:
        try:
            results[backend] = anyio.run(use, dev, backend=backend)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    async with opened(rt) as dev:
        threads = [
            threading.Thread(target=in_thread, args=(backend, dev))
            for backend in ("asyncio", "trio")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            await anyio.to_thread.run_sync(thread.join, 30.0)
        assert errors == []
        assert sorted(results) == ["asyncio", "trio"]
        assert all(ms >= 2.0 for ms in results.values())
        assert await use(dev) >= 2.0  # and still from its own loop
