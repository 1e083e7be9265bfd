"""Fixtures for the service tests: which server and event loop to run."""

from __future__ import annotations

import pytest
from serve_support import SERVERS


@pytest.fixture(params=SERVERS)
def server_kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    kind: tuple[str, str] = request.param
    if kind[1] == "uvloop":
        pytest.importorskip("uvloop")
    pytest.importorskip(kind[0])
    return kind
