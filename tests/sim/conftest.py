"""Fixtures for the simulator's own test suite.

Every test gets a fresh, independent runtime from ``aclasync.sim.create`` and the
runtime is closed (devices released, simulator threads joined) at teardown.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aclasync._pyacl.codes import code_name
from aclasync.sim import Kernel, create


def _describe(code: int) -> str:
    return f"{code_name(code)} ({int(code)})"


def _check(result: Any, expected: int = 0, what: str = "") -> Any:
    """Assert the ``ret`` of a pyACL-shaped result and return the other values.

    ``result`` is either a bare ``ret`` or a ``(value, ..., ret)`` tuple. For a tuple
    with one value the value itself is returned, for several a tuple of them.
    """
    if isinstance(result, tuple):
        assert result, f"{what}: empty result tuple"
        ret, values = result[-1], result[:-1]
    else:
        ret, values = result, ()
    assert isinstance(ret, int), f"{what}: ret is {ret!r}, not an int"
    assert ret == expected, f"{what}: expected {_describe(expected)}, got {_describe(ret)}"
    if len(values) == 1:
        return values[0]
    return values


@pytest.fixture
def check() -> Callable[..., Any]:
    """``check(result, expected=0, what="")`` asserts a return code readably."""
    return _check


@pytest.fixture
def make_rt() -> Iterator[Callable[..., Any]]:
    """Factory for extra runtimes (e.g. with profile overrides); all closed at teardown."""
    made: list[Any] = []

    def make(**kwargs: Any) -> Any:
        runtime = create(**kwargs)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.sim.close()


@pytest.fixture
def rt(make_rt: Callable[..., Any]) -> Any:
    """A fresh two-device ``Ascend910B3`` runtime; no device is set."""
    return make_rt()


@pytest.fixture
def dev0(rt: Any) -> Any:
    """``rt`` with device 0 set on the test's thread."""
    assert rt.rt.set_device(0) == 0
    return rt


class Worker:
    """A thread that runs the calls given to it one at a time, in order.

    The current context is per OS thread, so tests that need a second thread use one
    of these and establish order by waiting for each call's result.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def ident(self) -> int:
        ident = self._thread.ident
        assert ident is not None
        return ident

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((fn, args, future))
        return future

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 10.0) -> Any:
        return self.submit(fn, *args).result(timeout)

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(10.0)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, future = job
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the caller of submit()
                future.set_exception(exc)


@pytest.fixture
def spawn() -> Iterator[Callable[[], Worker]]:
    """Factory for ``Worker`` threads; all stopped at teardown."""
    workers: list[Worker] = []

    def make() -> Worker:
        worker = Worker(f"sim-test-worker-{len(workers)}")
        workers.append(worker)
        return worker

    yield make
    for worker in workers:
        worker.close()


class Gate:
    """Kernel work that lasts exactly until the test opens it: no race with the clock.

    ``kernel()`` gives a kernel whose body blocks until ``open()``; ``started`` and
    ``finished`` tell where it is. The body gives up after 30 s, so a test that forgets
    to open it fails instead of hanging.
    """

    def __init__(self) -> None:
        self.started = threading.Event()
        self.finished = threading.Event()
        self._open = threading.Event()

    def kernel(self) -> Kernel:
        return Kernel(fn=self._body)

    def open(self) -> None:
        self._open.set()

    def _body(self) -> None:
        self.started.set()
        self._open.wait(30)
        self.finished.set()


@pytest.fixture
def gate() -> Iterator[Callable[[], Gate]]:
    """Factory for ``Gate``s; every gate is opened at teardown.

    Request it after the runtime fixture so that it is torn down (opened) first.
    """
    gates: list[Gate] = []

    def make() -> Gate:
        made = Gate()
        gates.append(made)
        return made

    yield make
    for made in gates:
        made.open()
