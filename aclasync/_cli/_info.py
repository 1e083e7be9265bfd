"""``aclasync info``: which backend is in use and what it reports."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .._backend import (
    ENV_VAR,
    backend_from_env,
    is_aclasync_simulator,
    native_acl,
    resolve_backend,
)
from .._errors import BackendUnavailableError, raise_for_status
from .._pyacl.constants import RunMode
from .._version import __version__
from ._common import CliError, pyacl_call

__all__ = ["choose_backend", "collect_info", "format_info", "run_info"]


def choose_backend(requested: str | None) -> tuple[str, str]:
    """Return ``(backend, reason)``: the backend ``info`` reports on, and why that one.

    ``--backend`` wins, then ``$ACLASYNC_BACKEND``, then native if ``import acl``
    works, else the simulator. Unlike ``open_device(backend=None)``, which refuses to
    guess, ``info`` is a diagnostic: it falls back to the simulator and says so.
    """
    if requested is not None:
        return requested, "chosen with --backend"
    try:
        env = backend_from_env()
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None
    if env is not None:
        return env, f"from ${ENV_VAR}"
    try:
        native_acl()
    except BackendUnavailableError as exc:  # (no acl, or an `acl` that is not pyACL)
        return "sim", f"{exc}, so the simulator"
    return "native", "`import acl` works"


def collect_info(requested: str | None) -> dict[str, Any]:
    """Query the chosen backend and return what ``info`` prints, as a JSON-ready dict.

    Blocks for as long as the runtime's queries take (instantly on the simulator).

    Raises
    ------
    aclasync.BackendUnavailableError
        If the native backend was asked for and ``import acl`` fails.
    aclasync.AclError
        If a runtime query returns a non-zero status.
    """
    name, reason = choose_backend(requested)
    acl, _ = resolve_backend(name)
    initialised = pyacl_call(acl, "init", size=1) == 0
    try:
        count, ret = pyacl_call(acl, "rt.get_device_count")
        raise_for_status(ret, "acl.rt.get_device_count")
        mode, ret = pyacl_call(acl, "rt.get_run_mode")
        raise_for_status(ret, "acl.rt.get_run_mode")
        soc = pyacl_call(acl, "get_soc_name", size=0)
    finally:
        # Only undo our own init: a runtime someone else initialised stays initialised.
        if initialised:
            pyacl_call(acl, "finalize", size=1)
    try:
        mode_name = RunMode(mode).name
    except ValueError:
        mode_name = f"unknown ({mode})"
    info: dict[str, Any] = {
        "version": __version__,
        "backend": name,
        "backend_reason": reason,
        "device_count": int(count),
        "soc_name": soc,
        "run_mode": mode_name,
        "run_mode_code": int(mode),
        "acl_module": None,
        "acl_is_simulator": is_aclasync_simulator(acl),
        "simulator_strict": None,
        "profile": None,
    }
    if name == "native":
        origin = getattr(acl, "__file__", None)
        info["acl_module"] = origin if isinstance(origin, str) else None
    if info["acl_is_simulator"]:
        from ..sim._strict import StrictAcl

        info["simulator_strict"] = isinstance(acl, StrictAcl)
    sim = getattr(acl, "sim", None)
    profile = getattr(sim, "profile", None)
    if dataclasses.is_dataclass(profile) and not isinstance(profile, type):
        info["profile"] = dataclasses.asdict(profile)
    return info


def format_info(info: dict[str, Any]) -> str:
    """Render the dict from ``collect_info`` as aligned text."""
    rows = [
        ("aclasync", info["version"]),
        ("backend", f"{info['backend']} ({info['backend_reason']})"),
        ("acl", _describe_acl(info)),
        ("devices", str(info["device_count"])),
        ("SoC", str(info["soc_name"])),
        ("run mode", f"{info['run_mode']} ({info['run_mode_code']})"),
    ]
    profile = info["profile"]
    lines = [f"{key:<9} {value}" for key, value in rows if value is not None]
    if profile is not None:
        lines.append(f"simulator profile {profile['name']!r}:")
        width = max(len(key) for key in profile)
        lines.extend(
            f"  {key:<{width}}  {value}" for key, value in profile.items() if key != "name"
        )
    return "\n".join(lines)


def _describe_acl(info: dict[str, Any]) -> str | None:
    """The ``acl`` row: what the native backend's ``acl`` module is (None for ``sim``)."""
    if info["backend"] != "native":
        return None
    where = info["acl_module"] or "built in"
    if not info["acl_is_simulator"]:
        return f"CANN's pyACL ({where})"
    strict = " (strict: pyACL's surface only)" if info["simulator_strict"] else ""
    return f"aclasync's simulator{strict}, from {where}"


def run_info(backend: str | None, as_json: bool) -> int:
    """Print the backend report (text or JSON) to stdout; return the exit status.

    Blocks for as long as the runtime's queries take (instantly on the simulator).
    """
    info = collect_info(backend)
    print(json.dumps(info, indent=2) if as_json else format_info(info), flush=True)
    return 0
