"""The process-wide simulated runtime, configured from the environment, and ``import acl``.

``aclasync.sim.acl`` is built on first use (so a bad variable breaks only its users):

- ``ACLASYNC_SIM_STRICT``: ``1`` (or ``true``/``yes``/``on``) makes it strict, exposing
  only pyACL's own surface (``aclasync.sim.create(strict=True)``); ``0`` or unset: not.
- ``ACLASYNC_SIM_DEVICE_COUNT``: its number of devices (default 8).
- ``ACLASYNC_SIM_SOC``: its SoC profile (default ``Ascend910B3``).
- ``ACLASYNC_SIM_EVENT_FLAGS``: the flags ``create_event_with_flag`` accepts:
  ``reference`` (default: ``TIME_LINE`` alone, as pyACL's reference page says) or
  ``runtime`` (any of ``SYNC``, ``CAPTURE_STREAM_PROGRESS``, 0x4 and ``TIME_LINE``
  OR-ed, as CANN's runtime takes them: programs written for it wait on such events).

``install_as_acl`` makes ``import acl`` (and ``import acl.rt``, ``from acl import mdl``)
yield that runtime: the ``acl`` module in ``acl_module_path()`` calls it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ._profiles import PROFILES
from ._runtime import DEFAULT_DEVICE_COUNT, MAX_DEVICE_COUNT, SimAcl, create

if TYPE_CHECKING:
    from .._pyacl.backend import AclBackend

__all__ = [
    "DEVICE_COUNT_ENV",
    "EVENT_FLAGS_ENV",
    "SOC_ENV",
    "STRICT_ENV",
    "Settings",
    "acl_module_path",
    "install_as_acl",
    "process_runtime",
    "settings",
]

STRICT_ENV = "ACLASYNC_SIM_STRICT"
DEVICE_COUNT_ENV = "ACLASYNC_SIM_DEVICE_COUNT"
SOC_ENV = "ACLASYNC_SIM_SOC"
EVENT_FLAGS_ENV = "ACLASYNC_SIM_EVENT_FLAGS"
DEFAULT_SOC = "Ascend910B3"
#: ``create_event_with_flag``'s accepted flags per ``ACLASYNC_SIM_EVENT_FLAGS`` value.
EVENT_FLAG_MASKS = {"reference": 0x8, "runtime": 0xF}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")

_lock = threading.Lock()
_runtime: SimAcl | AclBackend | None = None


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the environment asks of the process-wide runtime (``settings()``)."""

    strict: bool = False
    device_count: int = DEFAULT_DEVICE_COUNT
    soc: str = DEFAULT_SOC
    #: The bits ``create_event_with_flag`` accepts (``EVENT_FLAG_MASKS``).
    event_flags: int = EVENT_FLAG_MASKS["reference"]


def settings() -> Settings:
    """The process-wide runtime's settings, from the environment.

    Raises
    ------
    ValueError
        Naming the variable, if one holds something it cannot mean.
    """
    raw = os.environ.get(STRICT_ENV, "")
    flag = raw.strip().lower()
    if flag not in _TRUE + _FALSE:
        raise ValueError(f"{STRICT_ENV}={raw!r}: expected 1 or 0 (or true/false, yes/no, on/off)")
    raw = os.environ.get(DEVICE_COUNT_ENV, "").strip()
    count = DEFAULT_DEVICE_COUNT
    if raw:
        try:
            count = int(raw)
        except ValueError:
            count = 0
        if not 1 <= count <= MAX_DEVICE_COUNT:
            raise ValueError(
                f"{DEVICE_COUNT_ENV}={raw!r}: expected a whole number from 1 to {MAX_DEVICE_COUNT}"
            )
    soc = os.environ.get(SOC_ENV, "").strip() or DEFAULT_SOC
    if soc not in PROFILES:
        raise ValueError(f"{SOC_ENV}={soc!r}: expected one of {', '.join(sorted(PROFILES))}")
    raw = os.environ.get(EVENT_FLAGS_ENV, "")
    flags = raw.strip().lower() or "reference"
    if flags not in EVENT_FLAG_MASKS:
        raise ValueError(f"{EVENT_FLAGS_ENV}={raw!r}: expected reference or runtime")
    return Settings(flag in _TRUE, count, soc, EVENT_FLAG_MASKS[flags])


def process_runtime() -> SimAcl | AclBackend:
    """The process-wide runtime, built from ``settings()`` on the first call.

    Later changes to the environment do not affect it. Raises ``ValueError`` (see
    ``settings``) while the environment is invalid.
    """
    global _runtime
    with _lock:
        if _runtime is None:
            asked = settings()
            profile = dataclasses.replace(
                PROFILES[asked.soc], event_with_flag_mask=asked.event_flags
            )
            if asked.strict:
                _runtime = create(device_count=asked.device_count, soc=profile, strict=True)
            else:  # built on first use, as the visible devices are read then
                _runtime = SimAcl(  # type: ignore[abstract]  # see _runtime.create
                    device_count=asked.device_count, profile=profile
                )
        return _runtime


def acl_module_path() -> str:
    """Return a directory whose ``acl`` module is the process-wide runtime, ``acl``.

    With it on ``sys.path`` (``PYTHONPATH=<it> python prog.py``), ``import acl`` in an
    unmodified pyACL program yields ``aclasync.sim.acl``, and aclasync's own backend
    detection takes it for the native backend. Set ``ACLASYNC_SIM_STRICT=1`` to expose
    only pyACL's surface; ``ACLASYNC_SIM_DEVICE_COUNT``, ``ACLASYNC_SIM_SOC`` and
    ``ACLASYNC_SIM_EVENT_FLAGS`` choose the devices, the SoC and the event flags taken.
    The directory is part of the installed package.
    """
    return str(Path(__file__).with_name("_as_acl"))


def install_as_acl(name: str) -> None:
    """Make the module being imported as *name* the process-wide runtime.

    Called by the ``acl`` module of ``acl_module_path()`` while Python imports it: the
    runtime replaces it in ``sys.modules``, and its submodules are registered as
    ``acl.rt``, ``acl.mdl`` ... so that ``import acl.rt`` works too. The runtime takes
    the ``__file__``, ``__spec__`` and ``__loader__`` of the module it replaces, as a
    module loaded from there would have them (``aclasync info`` shows the file).
    """
    shim = sys.modules[name]
    runtime = process_runtime()
    for attribute in ("__file__", "__spec__", "__loader__"):
        setattr(runtime, attribute, getattr(shim, attribute, None))
    sys.modules[name] = runtime  # type: ignore[assignment]  # a runtime, not a module
    for sub in ("rt", "mdl", "util", "media", "sim"):
        namespace = getattr(runtime, sub, None)
        if namespace is not None:
            sys.modules[f"{name}.{sub}"] = namespace
