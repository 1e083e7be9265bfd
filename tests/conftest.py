"""Shared pytest configuration: every async test runs on asyncio, uvloop and trio."""

from __future__ import annotations

import pytest


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        pytest.param(("trio", {}), id="trio"),
    ],
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    """Select the event loop (and its options) for anyio's pytest plugin."""
    backend: tuple[str, dict[str, object]] = request.param
    return backend
