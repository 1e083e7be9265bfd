"""Fixtures for the service tests: which server and event loop to run."""

from __future__ import annotations

import importlib

import pytest
from serve_support import SERVERS


@pytest.fixture(params=SERVERS)
def server_kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    kind: tuple[str, str] = request.param
    # The test extra installs every server and loop: a missing one is an error, not a skip.
    importlib.import_module(kind[0])
    if kind[1] == "uvloop":
        importlib.import_module("uvloop")
    return kind
