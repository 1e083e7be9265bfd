"""Fixtures for the stream-pool tests: a fresh simulated runtime and gated kernels."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import aclasync.sim


@pytest.fixture
def rt() -> Iterator[Any]:
    """A fresh two-device simulated runtime, closed at teardown."""
    runtime = aclasync.sim.create(device_count=2)
    yield runtime
    runtime.sim.close()


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """A gate for kernels (``Kernel(fn=gate.wait)``), always opened at teardown."""
    event = threading.Event()
    yield event
    event.set()
