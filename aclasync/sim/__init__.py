"""A simulated pyACL runtime: same names, return shapes, error codes and rules.

``from aclasync.sim import acl`` gives a process-wide runtime to use in place of
``import acl``; ``create()`` gives fresh, independent ones, and ``acl_module_path()``
a directory that makes ``import acl`` itself the process-wide runtime. See
``docs/simulator.md``.
"""

from __future__ import annotations

import typing as _typing

from ._environ import acl_module_path as acl_module_path
from ._kernel import Kernel as Kernel
from ._profiles import PROFILES as PROFILES
from ._profiles import SocProfile as SocProfile
from ._runtime import DEFAULT_DEVICE_COUNT as DEFAULT_DEVICE_COUNT
from ._runtime import SimAcl as SimAcl
from ._runtime import create as create
from ._unmodelled import UnmodelledWarning as UnmodelledWarning

__all__ = [
    "DEFAULT_DEVICE_COUNT",
    "PROFILES",
    "Kernel",
    "SimAcl",
    "SocProfile",
    "UnmodelledWarning",
    "acl",
    "acl_module_path",
    "create",
]


if _typing.TYPE_CHECKING:
    #: The process-wide simulated runtime: 8 ``Ascend910B3`` devices unless
    #: ``ACLASYNC_SIM_DEVICE_COUNT`` / ``ACLASYNC_SIM_SOC`` say otherwise. Built on first
    #: use; with ``ACLASYNC_SIM_STRICT=1`` it is strict (no ``acl.sim``).
    acl: SimAcl
else:

    def __getattr__(name: str) -> _typing.Any:
        if name == "acl":
            from ._environ import process_runtime

            runtime = process_runtime()
            globals()["acl"] = runtime
            return runtime
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), "acl"})
