"""Fixtures for the async front end's tests: isolated simulated runtimes and helpers.

Every test that needs a device opens it itself with ``aclasync.open_device(..., backend=rt)``
on a fresh two-device runtime from ``aclasync.sim.create``; the fixture closes the runtime
at teardown and checks that no device worker or simulator thread is left running.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from frontend_support import aclasync_threads

import aclasync.sim


@pytest.fixture
def make_rt() -> Iterator[Callable[..., Any]]:
    """Factory for fresh simulated runtimes; each is closed at teardown.

    Teardown also checks that closing left no new aclasync thread alive, so every test
    using a runtime shows that its devices and the runtime shut down cleanly. (Threads
    that other suites' runtimes had already started are not this test's business.)
    """
    before = set(aclasync_threads())
    made: list[Any] = []

    def make(**kwargs: Any) -> Any:
        kwargs.setdefault("device_count", 2)
        runtime = aclasync.sim.create(**kwargs)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.sim.close()
    # A worker that died releases what it can on its own time (after work still
    # running); give threads already ending a bounded chance, as
    # aclasync.testing.assert_no_leaked_threads does.
    deadline = time.monotonic() + 5.0
    for thread in aclasync_threads():
        if thread not in before:
            thread.join(max(0.0, deadline - time.monotonic()))
    leftover = [t for t in aclasync_threads() if t not in before]
    assert not leftover, f"threads left after closing the runtimes: {leftover}"


@pytest.fixture
def rt(make_rt: Callable[..., Any]) -> Any:
    """A fresh two-device simulated runtime (``aclasync.sim.create(device_count=2)``)."""
    return make_rt()
