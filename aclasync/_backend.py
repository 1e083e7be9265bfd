"""Choosing the pyACL-shaped backend a device runs on."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ._errors import BackendUnavailableError

if TYPE_CHECKING:
    from ._pyacl.backend import AclBackend

__all__ = [
    "ENV_VAR",
    "backend_from_env",
    "import_acl",
    "is_aclasync_simulator",
    "native_acl",
    "resolve_backend",
]

ENV_VAR = "ACLASYNC_BACKEND"

#: Calls the front end makes; a backend object must provide them under ``.rt``.
_REQUIRED_RT = (
    "set_device",
    "reset_device",
    "create_stream_with_config",
    "destroy_stream",
    "destroy_stream_force",
    "synchronize_stream",
    "stream_query",
    "create_event",
    "record_event",
    "query_event_status",
    "synchronize_event_with_timeout",
    "destroy_event",
)


def backend_from_env() -> str | None:
    """Return ``"sim"`` or ``"native"`` from ``$ACLASYNC_BACKEND``, or ``None`` if unset.

    Case and surrounding white space are ignored; an empty value counts as unset.

    Raises
    ------
    ValueError
        If the variable holds anything else.
    """
    raw = os.environ.get(ENV_VAR, "")
    choice = raw.strip().lower()
    if not choice:
        return None
    if choice not in ("sim", "native"):
        raise ValueError(f"{ENV_VAR}={raw!r}: expected 'sim' or 'native' (any case)")
    return choice


def resolve_backend(backend: object) -> tuple[AclBackend, str]:
    """Return ``(acl_module_like, backend_name)`` for an ``open_device(backend=...)`` value.

    ``None`` means ``$ACLASYNC_BACKEND`` (see ``backend_from_env``), else the native
    ``acl`` module, else ``BackendUnavailableError``: never a silent simulator.
    """
    if backend is None:
        choice = backend_from_env()
        if choice is not None:
            return resolve_backend(choice)
        try:
            return native_acl(), "native"
        except BackendUnavailableError as exc:
            raise BackendUnavailableError(
                f"no backend chosen and {exc}. Pass backend='sim' to use the simulator, "
                f"or set {ENV_VAR}=sim (or native)."
            ) from exc.__cause__
    if backend == "sim":
        from .sim import acl

        return acl, "sim"
    if backend == "native":
        try:
            return native_acl(), "native"
        except BackendUnavailableError as exc:
            raise BackendUnavailableError(
                f"backend='native' needs CANN: {exc}. Use backend='sim' (or "
                f"{ENV_VAR}=sim) to run on the simulator."
            ) from exc.__cause__
    if isinstance(backend, str):
        raise ValueError(f"unknown backend {backend!r}; expected 'sim', 'native' or None")
    missing = _missing_calls(backend)
    if missing:
        raise TypeError(f"backend {type(backend).__name__!r} does not look like pyACL: {missing}")
    return cast("AclBackend", backend), type(backend).__name__


def _missing_calls(backend: object) -> str:
    """What of pyACL's surface aclasync needs *backend* lacks ("" if nothing)."""
    rt = getattr(backend, "rt", None)
    missing = [name for name in _REQUIRED_RT if not callable(getattr(rt, name, None))]
    return f"missing acl.rt.{', acl.rt.'.join(missing)}" if missing else ""


def is_aclasync_simulator(module: object) -> bool:
    """Whether a pyACL-shaped object is aclasync's own simulator, by where it comes from.

    True when its type is defined in the aclasync package (a simulated runtime, strict
    or not) or its ``__file__`` lies inside the package (the ``acl`` module of
    ``aclasync.sim.acl_module_path()``). CANN's ``acl`` is a C extension module living
    in CANN's install directory: neither holds for it.
    """
    if type(module).__module__.partition(".")[0] == __package__:
        return True
    origin = getattr(module, "__file__", None)
    if not isinstance(origin, str):
        return False
    package = Path(__file__).resolve().parent
    return Path(origin).resolve().is_relative_to(package)


def import_acl() -> object:
    """``import acl``; ``BackendUnavailableError`` saying why if that fails, however."""
    try:
        return importlib.import_module("acl")
    except Exception as exc:  # an ImportError, or whatever a broken install raises
        detail = str(exc) if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}"
        raise BackendUnavailableError(f"`import acl` failed ({detail})") from exc


def native_acl() -> AclBackend:
    """``import acl``, checked for the pyACL calls aclasync needs; else
    ``BackendUnavailableError`` saying why."""
    module = import_acl()
    missing = _missing_calls(module)
    if missing:
        where = getattr(module, "__file__", None) or "?"
        raise BackendUnavailableError(f"the `acl` module ({where}) is not pyACL: {missing}")
    return cast("AclBackend", module)
