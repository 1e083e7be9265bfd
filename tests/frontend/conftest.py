"""Fixtures for the async front end's tests: isolated simulated runtimes and helpers.

Every test that needs a device opens it itself with ``aclasync.open_device(..., backend=rt)``
on a fresh two-device runtime from ``aclasync.sim.create``; the fixture closes the runtime
at teardown and checks that no device worker or simulator thread is left running.
"""

from __future__ import annotations

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
    leftover = [t for t in aclasync_threads() if t not in before]
    assert not leftover, f"threads left after closing the runtimes: {leftover}"


@pytest.fixture
def rt(make_rt: Callable[..., Any]) -> Any:
    """A fresh two-device simulated runtime (``aclasync.sim.create(device_count=2)``)."""
    return make_rt()
