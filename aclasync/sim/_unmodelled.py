"""Stand-ins for the pyACL functions the simulator does not model, made from the table.

``aclasync._pyacl.surface`` lists every function pyACL's wrappers define, with its
``PyArg_ParseTuple`` format and its result shape. A function of that table the
simulator has no model for still exists: it parses its arguments as pyACL does, logs a
line naming itself on the ``aclasync.sim`` logger and returns pyACL's result shape with
207000 (ACL_ERROR_RT_FEATURE_NOT_SUPPORT) where the shape has ``ret``, and 0, ``""``,
``None`` or an empty container in the value slots.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .._pyacl.codes import ErrorCode
from .._pyacl.surface import PyFunction, functions, split_shape
from ._args import check_args

__all__ = ["attach_unmodelled", "placeholder", "unmodelled"]

_log = logging.getLogger("aclasync.sim")
_NOT_SUPPORTED = int(ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
_EMPTY: dict[str, Any] = {
    "ret": _NOT_SUPPORTED,
    "int": 0,
    "float": 0.0,
    "str": "",
    "bytes": b"",
    "bool": False,
}


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


def unmodelled(
    function: PyFunction, record: Callable[[Any, int, str], None] | None = None
) -> Callable[..., Any]:
    """A method standing in for *function*: parses, logs, returns ``placeholder``.

    *record(self, code, api)* is called with 207000 when the shape has ``ret`` (the
    calling thread's last error, as for every failed call).
    """
    api, fmt, result = function.api, function.format, placeholder(function.returns)
    has_ret = "ret" in split_shape(function.returns or "")

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if fmt is not None:
            check_args(api, fmt, args, kwargs)
        elif kwargs:
            raise TypeError(f"{function.name}() takes no keyword arguments")
        _log.warning("%s is not supported by the simulator: returning 207000", api)
        if has_ret and record is not None:
            record(self, _NOT_SUPPORTED, api)
        return _copy(result)

    call.__name__ = call.__qualname__ = function.name
    call.__doc__ = f"Not modelled: logs a line and returns 207000 (pyACL shape {function.returns})."
    call.__pyacl_api__ = api  # type: ignore[attr-defined]
    call.__pyacl_fmt__ = fmt  # type: ignore[attr-defined]
    call.__pyacl_unsupported__ = True  # type: ignore[attr-defined]
    return call


def _copy(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_copy(item) for item in value)
    return type(value)() if isinstance(value, (dict, list)) else value


def attach_unmodelled(
    cls: type,
    namespace: str,
    record: Callable[[Any, int, str], None] | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """Give *cls* a stand-in for each function of *namespace* it lacks; return their names.

    Only functions every build of pyACL has are added (not those behind a build flag);
    names in *skip* are left alone (the class answers them some other way).
    """
    added = []
    for function in functions():
        if function.namespace != namespace or function.condition is not None:
            continue
        if function.name in skip or hasattr(cls, function.name):
            continue
        setattr(cls, function.name, unmodelled(function, record))
        added.append(function.name)
    return added
