"""Stand-ins for the pyACL functions the simulator does not model, made from the table.

``aclasync._pyacl.surface`` lists every function pyACL's wrappers define, with its
``PyArg_ParseTuple`` format and its result shape. A function of that table the
simulator has no model for still exists: it parses its arguments as pyACL does, warns
with ``UnmodelledWarning`` (once per name and runtime) and returns pyACL's result shape
with 207000 (ACL_ERROR_RT_FEATURE_NOT_SUPPORT) where the shape has ``ret``, and 0,
``""``, ``None`` or an empty container in the value slots.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .._pyacl.codes import ErrorCode
from .._pyacl.surface import PyFunction, functions, split_shape
from ._args import parsed

__all__ = ["UnmodelledWarning", "attach_unmodelled", "placeholder", "unmodelled"]

_NOT_SUPPORTED = int(ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
_EMPTY: dict[str, Any] = {
    "ret": _NOT_SUPPORTED,
    "int": 0,
    "float": 0.0,
    "str": "",
    "bytes": b"",
    "bool": False,
}


class UnmodelledWarning(UserWarning):
    """A pyACL call the simulator does not model was made; it answered 207000.

    Issued once per function name and simulated runtime. Filter it (``ignore`` keeps
    the 207000 codes coming; ``error`` turns the first such call into an exception)
    with ``warnings.filterwarnings`` or pytest's ``filterwarnings`` setting, e.g.
    ``ignore::aclasync.sim.UnmodelledWarning``.
    """


def placeholder(shape: str | None) -> Any:
    """What an unmodelled call returns for a table shape: ``"(int, ret)"`` -> ``(0, 207000)``."""
    if shape is None:
        return None
    values: list[Any] = []
    for element in split_shape(shape):
        kinds = [kind.strip() for kind in element.split("|")]
        if "None" in kinds or (kinds[0] not in _EMPTY and kinds[0] not in ("dict", "list")):
            values.append(None)
        elif kinds[0] == "dict":
            values.append({})
        elif kinds[0] == "list":
            values.append([])
        else:
            values.append(_EMPTY[kinds[0]])
    return tuple(values) if shape.startswith("(") else values[0]


def warn_unmodelled(core: Any, api: str, stacklevel: int) -> None:
    """Issue the ``UnmodelledWarning`` for *api*, unless this runtime already did."""
    with core.lock:
        if api in core.unmodelled_warned:
            return
        core.unmodelled_warned.add(api)
    warnings.warn(
        f"{api} is not modelled by aclasync's simulator: it answers "
        f"{_NOT_SUPPORTED} (ACL_ERROR_RT_FEATURE_NOT_SUPPORT)",
        UnmodelledWarning,
        stacklevel=stacklevel + 1,
    )


def unmodelled(function: PyFunction) -> Callable[..., Any]:
    """A method standing in for *function*: parses, warns, returns ``placeholder``.

    A non-zero ``ret`` becomes the calling thread's last error, as for every failed
    call; the method's owner must have a ``_core``.
    """
    api, result = function.api, placeholder(function.returns)

    def call(self: Any, *_args: Any) -> Any:
        warn_unmodelled(self._core, api, stacklevel=3)  # past parsed's wrapper
        return _copy(result)

    call.__name__ = call.__qualname__ = function.name
    call.__doc__ = f"Not modelled: warns and returns 207000 (pyACL shape {function.returns})."
    stand_in = parsed(api)(call)
    stand_in.__pyacl_unsupported__ = True  # type: ignore[attr-defined]
    return stand_in


def _copy(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_copy(item) for item in value)
    return type(value)() if isinstance(value, (dict, list)) else value


def attach_unmodelled(cls: type, namespace: str) -> list[str]:
    """Give *cls* a stand-in for each function of *namespace* it lacks; return their names.

    Only functions every build of pyACL has are added (not those behind a build flag).
    """
    added = []
    for function in functions():
        if function.namespace != namespace or function.condition is not None:
            continue
        if hasattr(cls, function.name):
            continue
        setattr(cls, function.name, unmodelled(function))
        added.append(function.name)
    return added
