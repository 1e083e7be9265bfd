"""The simulator against pyACL's table: strict runtimes, protocol conformance, stand-ins.

The table (``aclasync._pyacl.surface``), the protocol built from it
(``aclasync._pyacl.backend``) and the strict simulator must agree name for name.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterator
from typing import Any

import pytest

import aclasync.sim
from aclasync._backend import is_aclasync_simulator
from aclasync._pyacl import backend, surface
from aclasync._pyacl.codes import ErrorCode
from aclasync.sim import create
from aclasync.sim._environ import (
    DEVICE_COUNT_ENV,
    EVENT_FLAGS_ENV,
    SOC_ENV,
    STRICT_ENV,
    Settings,
    settings,
)

NOT_SUPPORTED = int(ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
SUBMODULES = ("rt", "mdl", "util")
PROTOCOLS = {
    "acl": backend.AclBackend,
    "acl.rt": backend.AclRt,
    "acl.mdl": backend.AclMdl,
    "acl.util": backend.AclUtil,
}


def public(obj: object) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def namespaces(acl: Any) -> dict[str, Any]:
    return {"acl": acl, **{f"acl.{sub}": getattr(acl, sub) for sub in SUBMODULES}}


@pytest.fixture
def strict() -> Iterator[Any]:
    acl = create(device_count=2, strict=True)
    yield acl
    for device in (0, 1):
        acl.rt.reset_device_force(device)


@pytest.fixture
def full() -> Iterator[aclasync.sim.SimAcl]:
    acl = create(device_count=2)
    yield acl
    acl.sim.close()


# -- strict runtimes expose the table, and only the table -------------------------------


def test_strict_surface_is_the_table(strict: Any) -> None:
    assert public(strict) == {*surface.names("acl"), *SUBMODULES}
    for sub in SUBMODULES:
        assert public(getattr(strict, sub)) == set(surface.names(f"acl.{sub}")), sub


def test_strict_runtime_has_no_simulator_extensions(strict: Any) -> None:
    for missing in ("sim", "media", "Kernel", "register_model"):
        assert not hasattr(strict, missing), missing
    assert not hasattr(strict.util, "live_threads")
    assert not hasattr(strict.mdl, "bundle_create_query_info")  # acl_mdl.h, not pyACL


def test_strict_runtime_is_modules_shaped_like_cann_acl(strict: Any) -> None:
    assert isinstance(strict, types.ModuleType)
    assert strict.__name__ == "acl"
    assert all(isinstance(getattr(strict, sub), types.ModuleType) for sub in SUBMODULES)
    assert strict.rt.__name__ == "acl.rt"
    assert is_aclasync_simulator(strict)


def test_strict_runtime_works_as_pyacl(strict: Any) -> None:
    assert strict.rt.set_device(0) == 0
    stream, ret = strict.rt.create_stream()
    assert ret == 0
    ptr, ret = strict.rt.malloc(64, 0)
    assert ret == 0
    assert strict.rt.memset_async(ptr, 64, 7, 64, stream) == 0
    assert strict.rt.synchronize_stream(stream) == 0
    host, ret = strict.rt.malloc_host(64)
    assert ret == 0
    assert strict.rt.memcpy(host, 64, ptr, 64, 2) == 0  # device to host
    assert strict.util.ptr_to_bytes(host, 64) == b"\x07" * 64
    assert strict.rt.free_host(host) == 0
    assert strict.rt.free(ptr) == 0
    assert strict.rt.destroy_stream(stream) == 0
    assert strict.rt.reset_device(0) == 0


def test_two_strict_runtimes_are_independent() -> None:
    a, b = create(device_count=1, strict=True), create(device_count=3, strict=True)
    assert a.rt.get_device_count() == (1, 0)
    assert b.rt.get_device_count() == (3, 0)


# -- every runtime conforms to the protocol ---------------------------------------------


def _members(protocol: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


@pytest.mark.parametrize("flavour", ["full", "strict"])
@pytest.mark.parametrize("namespace", sorted(PROTOCOLS))
def test_every_protocol_member_exists_and_is_callable(
    request: pytest.FixtureRequest, flavour: str, namespace: str
) -> None:
    target = namespaces(request.getfixturevalue(flavour))[namespace]
    missing = [n for n in _members(PROTOCOLS[namespace]) if not callable(getattr(target, n, None))]
    assert missing == []


@pytest.mark.parametrize("flavour", ["full", "strict"])
@pytest.mark.parametrize("namespace", sorted(PROTOCOLS))
def test_the_simulator_parses_as_the_table_says(
    request: pytest.FixtureRequest, flavour: str, namespace: str
) -> None:
    target = namespaces(request.getfixturevalue(flavour))[namespace]
    differing = []
    for function in surface.functions():
        if function.namespace != namespace or function.condition is not None:
            continue
        fn = getattr(target, function.name)
        declared = (getattr(fn, "__pyacl_api__", None), getattr(fn, "__pyacl_fmt__", "absent"))
        if declared != (function.api, function.format):
            differing.append((function.name, declared, function.format))
    assert differing == []


def test_the_full_simulator_keeps_its_extensions(full: aclasync.sim.SimAcl) -> None:
    assert callable(full.sim.launch_kernel)
    assert callable(full.media.dvpp_malloc)
    assert full.util.live_threads == 0
    assert {*surface.names("acl"), *SUBMODULES} <= public(full)


# -- stand-ins for what the simulator does not model ------------------------------------


def test_an_unmodelled_function_parses_warns_and_answers_207000(
    full: aclasync.sim.SimAcl,
) -> None:
    full.rt.set_device(0)
    with pytest.warns(aclasync.sim.UnmodelledWarning, match=r"acl\.mdl\.init_dump is not modelled"):
        assert full.mdl.init_dump() == NOT_SUPPORTED
    with pytest.warns(aclasync.sim.UnmodelledWarning, match="acl.get_cann_attribute "):
        assert full.get_cann_attribute(0) == (0, NOT_SUPPORTED)
    with pytest.warns(aclasync.sim.UnmodelledWarning):
        assert full.get_cann_version(0) == ({}, NOT_SUPPORTED)
    assert full.rt.peek_at_last_error(0) == NOT_SUPPORTED
    with pytest.raises(TypeError, match=r"acl\.get_cann_attribute args parse failed"):
        full.get_cann_attribute("zero")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no keyword arguments"):
        full.mdl.init_dump(flag=1)  # type: ignore[call-arg]
    full.rt.reset_device(0)


def test_each_call_returns_fresh_containers(full: aclasync.sim.SimAcl) -> None:
    with pytest.warns(aclasync.sim.UnmodelledWarning):
        first, _ = full.get_cann_version(0)
    first["changed"] = True
    assert full.get_cann_version(0) == ({}, NOT_SUPPORTED)


# -- the process-wide runtime's settings -------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, Settings(False, 8, "Ascend910B3", 0x8)),
        ({"ACLASYNC_SIM_STRICT": "1"}, Settings(True, 8, "Ascend910B3", 0x8)),
        ({"ACLASYNC_SIM_STRICT": " Yes "}, Settings(True, 8, "Ascend910B3", 0x8)),
        ({"ACLASYNC_SIM_STRICT": "off"}, Settings(False, 8, "Ascend910B3", 0x8)),
        ({"ACLASYNC_SIM_DEVICE_COUNT": "3"}, Settings(False, 3, "Ascend910B3", 0x8)),
        ({"ACLASYNC_SIM_SOC": "Ascend310B4"}, Settings(False, 8, "Ascend310B4", 0x8)),
        ({"ACLASYNC_SIM_EVENT_FLAGS": "Runtime"}, Settings(False, 8, "Ascend910B3", 0xF)),
        ({"ACLASYNC_SIM_EVENT_FLAGS": "reference"}, Settings(False, 8, "Ascend910B3", 0x8)),
    ],
)
def test_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: Settings
) -> None:
    for name in (STRICT_ENV, DEVICE_COUNT_ENV, SOC_ENV, EVENT_FLAGS_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert settings() == expected


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ACLASYNC_SIM_STRICT", "maybe"),
        ("ACLASYNC_SIM_DEVICE_COUNT", "0"),
        ("ACLASYNC_SIM_DEVICE_COUNT", "two"),
        ("ACLASYNC_SIM_SOC", "Ascend999"),
        ("ACLASYNC_SIM_EVENT_FLAGS", "all"),
    ],
)
def test_a_bad_setting_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        settings()
