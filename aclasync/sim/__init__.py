"""A simulated pyACL runtime: same names, return shapes, error codes and rules.

``from aclasync.sim import acl`` gives a process-wide runtime to use in place of
``import acl``; ``create()`` gives fresh, independent ones. See ``docs/simulator.md``.
"""

from __future__ import annotations

from typing import Any

from ._kernel import Kernel as Kernel
from ._profiles import PROFILES as PROFILES
from ._profiles import SocProfile as SocProfile
from ._profiles import resolve_profile
from ._runtime import SimAcl as SimAcl

__all__ = ["PROFILES", "Kernel", "SimAcl", "SocProfile", "acl", "create"]

#: Devices of the process-wide default runtime: an eight-card server.
DEFAULT_DEVICE_COUNT = 8


def create(
    *, device_count: int = 2, soc: str | SocProfile = "Ascend910B3", **model_params: Any
) -> SimAcl:
    """Return a fresh, independent simulated runtime.

    Parameters
    ----------
    device_count:
        Number of simulated devices (ids ``0 .. device_count - 1``).
    soc:
        Name of a profile in ``PROFILES``, or a ``SocProfile``.
    **model_params:
        Overrides of ``SocProfile`` fields, e.g. ``notify_latency_us=50``.
    """
    if isinstance(device_count, bool) or not isinstance(device_count, int):
        raise TypeError(f"device_count must be an int, got {type(device_count).__name__}")
    if device_count < 1:
        raise ValueError(f"device_count must be >= 1, got {device_count}")
    return SimAcl(device_count=device_count, profile=resolve_profile(soc, model_params))


#: The process-wide default simulated runtime (eight ``Ascend910B3`` devices).
acl: SimAcl = SimAcl(device_count=DEFAULT_DEVICE_COUNT, profile=PROFILES["Ascend910B3"])
