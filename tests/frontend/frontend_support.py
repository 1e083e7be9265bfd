"""Helpers shared by the front-end tests: gates, thread checks, backend proxies, leak counts."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

import aclasync

THREAD_PREFIXES = ("aclasync-device", "aclasync-sim-dev")


def aclasync_threads() -> list[threading.Thread]:
    """The live device-worker and simulator threads of the whole process."""
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIXES)]


@contextlib.asynccontextmanager
async def opened(backend: Any, device_id: int = 0, limit: float = 10.0) -> AsyncIterator[Any]:
    """``aclasync.open_device(device_id, backend=backend)`` under a ``fail_after(limit)``.

    A lost wake-up then fails the test with ``TimeoutError`` instead of hanging the run
    (pytest-timeout's signal method cannot interrupt a hung trio test).
    """
    with anyio.fail_after(limit):
        async with aclasync.open_device(device_id, backend=backend) as dev:
            yield dev


def ms(value: float) -> float:
    """Milliseconds, as the microseconds ``Kernel(duration_us=...)`` takes."""
    return value * 1000.0


class Log:
    """A thread-safe list of side effects written by kernel bodies (``Kernel.fn``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: list[Any] = []

    def add(self, item: Any) -> Callable[[], None]:
        """A kernel body that appends *item* when it runs."""

        def fn() -> None:
            with self._lock:
                self.items.append(item)

        return fn

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.items)


class _RtProxy:
    """Forwards every ``acl.rt`` attribute, calling ``hook(name, args)`` before each call."""

    def __init__(self, rt: Any, hook: Callable[[str, tuple[Any, ...]], None]) -> None:
        self._rt = rt
        self._hook = hook

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._rt, name)
        if not callable(target):
            return target
        hook = self._hook

        def call(*args: Any) -> Any:
            hook(name, args)
            return target(*args)

        call.__name__ = name
        return call


class ProxyAcl:
    """A pyACL-shaped object wrapping a simulated runtime; subclasses hook ``rt`` calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.rt = _RtProxy(inner.rt, self.on_rt_call)
        self.util = inner.util
        self.sim = inner.sim

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
        """Called on the calling thread before ``acl.rt.<name>(*args)`` runs."""


class BreakableAcl(ProxyAcl):
    """Once armed, the calls that look for finished work raise ``RuntimeError`` (a dying
    backend): ``rt.query_event_status`` and the timed waits the device's waiting thread
    blocks in."""

    _BREAKING = frozenset(
        {
            "query_event_status",
            "synchronize_event_with_timeout",
            "synchronize_stream_with_timeout",
        }
    )

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.armed = threading.Event()
        #: Set once an armed call has raised.
        self.broke = threading.Event()

    def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
        if name in self._BREAKING and self.armed.is_set():
            self.broke.set()
            raise RuntimeError("injected backend failure")


class RecordingAcl(ProxyAcl):
    """Records every ``rt`` call as ``(name, args, thread ident)``, in call order."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._calls: list[tuple[str, tuple[Any, ...], int]] = []

    def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
        with self._lock:
            self._calls.append((name, args, threading.get_ident()))

    @property
    def calls(self) -> list[tuple[str, tuple[Any, ...], int]]:
        with self._lock:
            return list(self._calls)

    def named(self, name: str) -> list[tuple[Any, ...]]:
        """The argument tuples of every recorded call to ``acl.rt.<name>``."""
        return [args for call, args, _ in self.calls if call == name]


def live_objects(runtime: Any) -> dict[str, int]:
    """What a simulated runtime holds now: ``acl.sim.live_objects()`` as a plain dict.

    Keys: ``streams``, ``events``, ``contexts``, ``memory_regions``, ``device_refs``
    and ``threads`` (the simulator's own count; see docs/simulator.md).
    """
    return dict(runtime.sim.live_objects())


class Gate:
    """A kernel body that blocks until ``open()``: holds a stream without racing time.

    ``kernel()`` returns a ``Kernel`` whose ``fn`` waits on the gate (at most
    *limit* seconds, so a failing test cannot wedge a simulator thread for ever);
    ``started`` is set once such a kernel body runs on the device.
    """

    def __init__(self, limit: float = 20.0) -> None:
        self._event = threading.Event()
        self.started = threading.Event()
        self._limit = limit

    def kernel(self, **kwargs: Any) -> Any:
        from aclasync.sim import Kernel

        def body() -> None:
            self.started.set()
            self._event.wait(self._limit)

        return Kernel(fn=body, **kwargs)

    def open(self) -> None:
        self._event.set()


def failing_call(code: int) -> Callable[..., int]:
    """A stream-last call for ``Stream.launch`` that returns the ACL status *code*."""

    def call(*_args: Any) -> int:
        return code

    call.__name__ = f"fails_with_{code}"
    return call


async def worker_caught_up(dev: Any) -> None:
    """Return once the device worker has run every job submitted before this call."""
    await dev.call(lambda: None)
