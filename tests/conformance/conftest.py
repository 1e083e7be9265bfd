"""Backends for the conformance suite: the simulator always, CANN's ``acl`` when present.

Only backends that exist on this machine are generated (nothing is skipped): on a
machine with CANN, every test here also runs against the real runtime, which is how
the simulator's conventions are checked against the hardware's.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest

import aclasync.sim


def _backends() -> list[str]:
    names = ["sim"]
    try:
        importlib.import_module("acl")
    except ImportError:
        pass
    else:
        names.append("native")
    return names


@pytest.fixture(params=_backends())
def acl(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A pyACL module with device 0 set on the test thread; reset afterwards.

    The simulator is strict (``aclasync.sim.create(strict=True)``): it has pyACL's own
    surface and nothing else, so these tests can use nothing CANN lacks.
    """
    if request.param == "sim":
        module: Any = aclasync.sim.create(device_count=2, strict=True)
    else:
        module = importlib.import_module("acl")
    assert module.rt.set_device(0) == 0
    try:
        yield module
    finally:
        module.rt.reset_device(0)
