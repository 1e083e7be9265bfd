"""The public surface: every advertised name exists, nothing private leaks."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import types

import pytest

import aclasync
import aclasync.sim
import aclasync.testing

#: Subpackages users import by name; they are attributes of the package, not exports.
_PUBLIC_SUBMODULES = {"ray", "sim", "testing"}


@pytest.mark.parametrize("module", [aclasync, aclasync.sim])
def test_every_name_in_all_exists(module: types.ModuleType) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("module", [aclasync, aclasync.sim])
def test_no_public_name_outside_all(module: types.ModuleType) -> None:
    # dir() and not vars(): aclasync re-exports lazily. Names that are not identifiers
    # (pytest's assertion rewriting adds "@py_builtins" to modules it rewrote, which on
    # pytest >= 9.2 is every module of a package that registers a plugin) are not API.
    leaked = {
        name
        for name in dir(module)
        if name.isidentifier()
        and not name.startswith("_")
        and name not in module.__all__
        and not (inspect.ismodule(getattr(module, name)) and name in _PUBLIC_SUBMODULES)
        and name != "annotations"  # from __future__ import annotations
    }
    assert leaked == set()


@pytest.mark.parametrize("module", [aclasync, aclasync.sim])
def test_all_is_unique(module: types.ModuleType) -> None:
    # Its order is ruff's to keep (RUF022).
    assert len(set(module.__all__)) == len(module.__all__)


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = aclasync.no_such_name  # type: ignore[attr-defined]


def test_the_names_design_fixes_are_exported() -> None:
    fixed = {
        "open_device",
        "Device",
        "Stream",
        "Event",
        "StreamFlag",
        "FailureMode",
        "AclasyncError",
        "AclError",
        "AclTimeoutError",
    }
    assert fixed <= set(aclasync.__all__)
    assert {"acl", "create", "Kernel"} <= set(aclasync.sim.__all__)
    assert (aclasync.StreamFlag.DEFAULT, aclasync.StreamFlag.FAST_LAUNCH) == (0, 1)
    assert aclasync.StreamFlag.FAST_SYNC == 2
    assert (aclasync.FailureMode.CONTINUE, aclasync.FailureMode.STOP) == (0, 1)
    assert issubclass(aclasync.AclTimeoutError, aclasync.AclError)
    assert issubclass(aclasync.AclTimeoutError, TimeoutError)
    assert issubclass(aclasync.AclError, aclasync.AclasyncError)


@pytest.mark.parametrize(
    "cls", [aclasync.Device, aclasync.Stream, aclasync.Event, aclasync.DeviceBuffer]
)
def test_objects_come_from_factories_only(cls: type) -> None:
    with pytest.raises(TypeError, match="no public constructor"):
        cls()


def test_exported_objects_are_defined_in_aclasync() -> None:
    for name in aclasync.__all__:
        value = getattr(aclasync, name)
        module = getattr(value, "__module__", "aclasync")
        assert module.startswith("aclasync"), (name, module)


def test_version_is_a_string() -> None:
    assert isinstance(aclasync.__version__, str)
    assert aclasync.__version__.count(".") == 2


def test_trio_is_a_core_dependency_and_uvloop_an_extra() -> None:
    # A plain install runs on asyncio and trio (the README's first example does both).
    requires = importlib.metadata.requires("aclasync") or []
    core = {re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0] for req in requires if "extra" not in req}
    assert {"anyio", "trio", "numpy", "outcome"} <= core
    assert "uvloop" not in core
    assert any(
        req.startswith("uvloop") and re.search(r"extra == .uvloop.", req) for req in requires
    )
