"""The native path, on the strict simulator made importable as ``acl``.

Each test opens its devices as a user with CANN does, with ``ACLASYNC_BACKEND=native``
and ``open_device(0)``: ``import acl`` gives a strict simulated runtime (pyACL's surface
and nothing else, no ``acl.sim``), so what runs here uses only what CANN's ``acl`` has.
Device work is held by gates (blocking ``acl.rt.launch_callback`` callbacks, see
``aclasync._cli._gates``), never raced against durations.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

import aclasync.sim
from aclasync.sim._strict import strict_view


@pytest.fixture
def native_acl(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A strict two-device runtime as ``import acl`` and ``ACLASYNC_BACKEND=native``.

    At teardown the runtime must hold nothing: every device the test opened was closed
    and released what it had.
    """
    runtime = aclasync.sim.create(device_count=2)
    acl = strict_view(runtime)
    monkeypatch.setitem(sys.modules, "acl", acl)
    for sub in ("rt", "mdl", "util"):
        monkeypatch.setitem(sys.modules, f"acl.{sub}", getattr(acl, sub))
    monkeypatch.setenv("ACLASYNC_BACKEND", "native")
    yield acl
    try:
        held = {k: v for k, v in runtime.sim.live_objects().items() if v}
        assert held == {}, f"left on the runtime: {held}"
    finally:
        runtime.sim.close()
