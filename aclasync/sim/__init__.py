"""A simulated pyACL runtime: same names, return shapes, error codes and rules.

``from aclasync.sim import acl`` gives a process-wide runtime to use in place of
``import acl``; ``create()`` gives fresh, independent ones. See ``docs/simulator.md``.
"""

from __future__ import annotations

from ._kernel import Kernel as Kernel
from ._profiles import PROFILES as PROFILES
from ._profiles import SocProfile as SocProfile
from ._runtime import DEFAULT_DEVICE_COUNT as DEFAULT_DEVICE_COUNT
from ._runtime import SimAcl as SimAcl
from ._runtime import create as create

__all__ = ["DEFAULT_DEVICE_COUNT", "PROFILES", "Kernel", "SimAcl", "SocProfile", "acl", "create"]

#: The process-wide default simulated runtime (eight ``Ascend910B3`` devices).
acl: SimAcl = SimAcl(device_count=DEFAULT_DEVICE_COUNT, profile=PROFILES["Ascend910B3"])
