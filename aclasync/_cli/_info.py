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
from .._errors import AclError, BackendUnavailableError, raise_for_status
from .._pyacl.codes import ErrorCode, code_name
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

    ``init`` is ``acl.init()``'s status: 0, or 100002 (initialised already) when the
    runtime is usable; ``run_info`` fails on any other, after the report.

    Raises
    ------
    aclasync.BackendUnavailableError
        If the native backend was asked for and ``import acl`` fails.
    aclasync.AclError
        If a runtime query returns a non-zero status.
    CliError
        If a query is missing, raises or answers otherwise than pyACL does (naming the
        call and what it gave), or fails after ``acl.init()`` did (naming both).
    """
    name, reason = choose_backend(requested)
    acl, _ = resolve_backend(name)
    init = pyacl_call(acl, "init", size=1)
    try:
        try:
            count = _int_value(pyacl_call(acl, "rt.get_device_count"), "acl.rt.get_device_count")
            mode = _int_value(pyacl_call(acl, "rt.get_run_mode"), "acl.rt.get_run_mode")
            soc = pyacl_call(acl, "get_soc_name", size=0)
            if not (soc is None or isinstance(soc, str)):
                raise CliError(f"acl.get_soc_name() returned {soc!r}, not the str pyACL returns")
        except (CliError, AclError) as exc:
            if _init_failed(init):  # the cause, most likely: name it first
                raise CliError(f"{_init_failure(init)}; then {exc}") from exc
            raise
    finally:
        # Only undo our own init: a runtime someone else initialised stays initialised.
        if init == 0:
            pyacl_call(acl, "finalize", size=1)
    try:
        mode_name = RunMode(mode).name
    except ValueError:
        mode_name = f"unknown ({mode})"
    info: dict[str, Any] = {
        "version": __version__,
        "backend": name,
        "backend_reason": reason,
        "init": {"status": init, "name": code_name(init)},
        "device_count": count,
        "soc_name": soc,
        "run_mode": mode_name,
        "run_mode_code": mode,
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
        ("init", f"acl.init() gave {info['init']['status']} ({info['init']['name']})"),
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
    status = info["init"]["status"]
    if _init_failed(status):
        raise CliError(_init_failure(status))
    return 0


def _init_failed(status: int) -> bool:
    return status not in (0, int(ErrorCode.ACL_ERROR_REPEAT_INITIALIZE))


def _init_failure(status: int) -> str:
    return f"acl.init() gave {status} ({code_name(status)}): the runtime did not initialise"


def _int_value(result: tuple[Any, int], call: str) -> int:
    """The value of a ``(value, ret)`` answer: ``AclError`` on a failing ``ret``,
    ``CliError`` naming *call* if the value is no int."""
    value, ret = result
    raise_for_status(ret, call)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CliError(f"{call}() returned {result!r}: {value!r} is not the int pyACL gives")
    return value
