"""The public surface: every advertised name exists, nothing private leaks."""

from __future__ import annotations

import inspect
import types

import pytest

import aclasync
import aclasync.sim
import aclasync.testing

#: Subpackages users import by name; they are attributes of the package, not exports.
_PUBLIC_SUBMODULES = {"sim", "testing"}


@pytest.mark.parametrize("module", [aclasync, aclasync.sim])
def test_every_name_in_all_exists(module: types.ModuleType) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("module", [aclasync, aclasync.sim])
def test_no_public_name_outside_all(module: types.ModuleType) -> None:
    leaked = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in module.__all__
        and not (inspect.ismodule(value) and name in _PUBLIC_SUBMODULES)
        and name != "annotations"  # from __future__ import annotations
    }
    assert leaked == set()


def test_all_is_sorted_and_unique() -> None:
    assert len(set(aclasync.__all__)) == len(aclasync.__all__)
    assert sorted(aclasync.__all__, key=str.lower) == sorted(aclasync.__all__, key=str.lower)


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
