"""Fixtures for ``Model`` tests: fresh simulated runtimes and a registered model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from model_support import scale_shift

import aclasync.sim


@pytest.fixture
def rt() -> Iterator[Any]:
    """A fresh two-device simulated runtime, closed at teardown."""
    runtime = aclasync.sim.create(device_count=2)
    yield runtime
    runtime.sim.close()


@pytest.fixture
def model_path(rt: Any, tmp_path: Path) -> str:
    """A registered two-input, two-output model on ``rt``."""
    return str(
        rt.sim.register_model(
            tmp_path / "scale_shift.om",
            inputs=[("x", (4, 8), "float32"), ("bias", (8,), "float32")],
            outputs=[("y", (4, 8), "float32"), ("total", (4,), "int64")],
            fn=scale_shift,
            duration_us=100,
        )
    )
