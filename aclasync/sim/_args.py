"""pyACL's argument parsing: each wrapper's ``PyArg_ParseTuple`` format, unit by unit.

Every pyACL function is a CPython ``METH_VARARGS`` function. A wrapper with a format
parses its arguments with ``PyArg_ParseTuple`` and, when that fails, replaces the
parser's error with ``TypeError("acl.<group>.<name> args parse failed")``; a wrapper
without one never looks at its arguments, so it accepts any positional arguments and
ignores them. Keyword arguments are refused by CPython before the wrapper runs.

``parsed`` gives the simulator's calls the same front door. The format comes from
pyACL's table (``aclasync._pyacl.surface``), so the two cannot drift apart. Each unit
converts as CPython's does (``convert_unit``): ``b``, ``h``, ``i``, ``l``, ``L`` and
``n`` take anything with ``__index__`` and raise ``OverflowError`` out of range; ``B``,
``H`` and ``I`` take the same and keep the low bits; ``k`` and ``K`` take exact ``int``
(or a subclass) only and keep the low 64 bits; ``f`` and ``d`` take real numbers
(``f`` rounds to a C float); ``s`` takes a ``str`` without NUL; ``O`` takes anything.
The method then receives the converted values, as the C code does. CPython's own
conversion error is kept as the ``__cause__`` of pyACL's ``TypeError`` (pyACL's
wrapper drops it; the traceback is the only difference).
"""

from __future__ import annotations

import ctypes
import functools
import operator
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from .._pyacl.surface import PyFunction, format_units, functions, split_shape

__all__ = ["argument_count_message", "convert_args", "convert_unit", "parsed", "table_entry"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_U64 = (1 << 64) - 1
_LONG = (-(1 << 63), (1 << 63) - 1)
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: such types' tp_name is their bare __name__

#: Wrappers whose parse failure is *not* replaced by pyACL's message: CPython's own
#: exception reaches the caller. ``start_thread`` checks ``PyArg_ParseTuple``'s result
#: without setting a message (util/thread.cpp); ``get_event_id`` passes its message to
#: ``PyArg_ParseTuple`` instead of to the check (rt/rt_synchronize.cpp).
PASS_THROUGH = frozenset({"acl.util.start_thread", "acl.rt.get_event_id"})

#: Unit -> (low, high, what) for the signed range-checked units, as getargs.c words them.
_RANGES = {
    "b": (0, 255, "unsigned byte integer"),
    "h": (-(1 << 15), (1 << 15) - 1, "signed short integer"),
    "i": (-(1 << 31), (1 << 31) - 1, "signed integer"),
}
_MASKS = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFF_FFFF}


def tp_name(value: object) -> str:
    """``Py_TYPE(value)->tp_name``, as CPython's messages print it."""
    kind = type(value)
    if kind.__flags__ & _HEAPTYPE or kind.__module__ == "builtins":
        return kind.__name__
    return f"{kind.__module__}.{kind.__name__}"


def _c_long(value: object) -> int:
    number = operator.index(value)  # type: ignore[arg-type]
    if not _LONG[0] <= number <= _LONG[1]:
        raise OverflowError("Python int too large to convert to C long")
    return number


def _real(value: object) -> float:
    """``PyFloat_AsDouble``: floats, ``__float__``, then ``__index__``."""
    if isinstance(value, float):
        return float(value)
    kind = type(value)
    if hasattr(kind, "__float__"):
        result = kind.__float__(value)
        if not isinstance(result, float):
            raise TypeError(
                f"{tp_name(value)}.__float__ returned non-float (type {tp_name(result)})"
            )
        return result
    if hasattr(kind, "__index__"):
        return float(operator.index(value))  # type: ignore[arg-type]
    raise TypeError(f"must be real number, not {tp_name(value)}")


def convert_unit(unit: str, value: object, position: int) -> Any:
    """Convert *value* as ``PyArg_ParseTuple`` converts format unit *unit*.

    *position* (1-based) is the argument's place, for CPython's messages. Raises the
    exception CPython raises (``TypeError``, ``OverflowError``, ``ValueError`` or
    ``UnicodeEncodeError``) with CPython's message.
    """
    if unit == "O":
        return value
    if unit in "kK":
        if not isinstance(value, int):
            shown = "None" if value is None else tp_name(value)
            raise TypeError(f"argument {position} must be int, not {shown}")
        return value & _U64
    if unit in _MASKS:
        return operator.index(value) & _MASKS[unit]  # type: ignore[arg-type]
    if unit in _RANGES:
        low, high, what = _RANGES[unit]
        number = _c_long(value)
        if number < low:
            raise OverflowError(f"{what} is less than minimum")
        if number > high:
            raise OverflowError(f"{what} is greater than maximum")
        return number
    if unit == "l":
        return _c_long(value)
    if unit == "L":
        number = operator.index(value)  # type: ignore[arg-type]
        if not _LONG[0] <= number <= _LONG[1]:
            raise OverflowError("int too big to convert")
        return number
    if unit == "n":
        number = operator.index(value)  # type: ignore[arg-type]
        if not _LONG[0] <= number <= _LONG[1]:
            raise OverflowError("Python int too large to convert to C ssize_t")
        return number
    if unit == "f":
        return ctypes.c_float(_real(value)).value  # a C float: rounded, inf past its range
    if unit == "d":
        return _real(value)
    if unit == "s":
        if not isinstance(value, str):
            shown = "None" if value is None else tp_name(value)
            raise TypeError(f"argument {position} must be str, not {shown}")
        value.encode("utf-8")  # lone surrogates raise UnicodeEncodeError, as in CPython
        if "\0" in value:
            raise ValueError("embedded null character")
        return value
    raise ValueError(f"format unit {unit!r} is not modelled")


@functools.cache
def _compiled(fmt: str) -> tuple[tuple[str, ...], int, int]:
    units, low = format_units(fmt)
    return tuple(units), low, len(units)


def argument_count_message(fmt: str, given: int) -> str | None:
    """CPython's own message for a wrong argument count, or None if the count fits."""
    _, low, high = _compiled(fmt)
    if low <= given <= high:
        return None
    shown = low if given < low else high
    plural = "" if shown == 1 else "s"
    how = "exactly" if low == high else "at least" if given < low else "at most"
    return f"function takes {how} {shown} argument{plural} ({given} given)"


def convert_args(fmt: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Convert *args* as ``PyArg_ParseTuple(args, fmt, ...)`` does; raise CPython's error."""
    units, low, high = _compiled(fmt)
    if not low <= len(args) <= high:
        raise TypeError(argument_count_message(fmt, len(args)))
    return tuple(
        convert_unit(unit, value, position)
        for position, (unit, value) in enumerate(zip(units, args, strict=False), 1)
    )


@functools.cache
def _table() -> dict[str, PyFunction]:
    return {f.api: f for f in functions()}


def table_entry(api: str) -> PyFunction | None:
    """The row of pyACL's table for *api* (``"acl.rt.malloc"``), or None."""
    return _table().get(api)


_FROM_TABLE: Any = object()


def parsed(
    api: str, fmt: str | None = _FROM_TABLE, *, records: bool | None = None
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate a method so its positional arguments are parsed as pyACL parses them.

    *api* is the full pyACL name (``"acl.rt.memcpy"``). Its format comes from pyACL's
    table; simulator-only calls (``acl.sim``, ``acl.media``) give *fmt* themselves.
    With a format, the method receives the converted values; a wrong count, type or
    value, or a keyword argument, raises ``TypeError("<api> args parse failed")``
    before it runs. Without one (the wrapper parses nothing), any positional
    arguments are accepted and the method is called without them. With *records*
    (by default: when the table's result has a ``ret``), a non-zero ``ret`` becomes
    the calling thread's last error; the method's owner must have a ``_core``.
    """
    entry = table_entry(api)
    if fmt is _FROM_TABLE:
        if entry is None:
            raise ValueError(f"{api} is not in pyACL's table: give its format")
        fmt = entry.format
    elif entry is not None:
        raise ValueError(f"{api} is in pyACL's table: its format comes from there")
    if records is None:
        records = entry is not None and "ret" in split_shape(entry.returns or "")
    return _decorator(api, fmt, records)


def _decorator(
    api: str, fmt: str | None, records: bool
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    name = api.rpartition(".")[2]
    failure = f"{api} args parse failed"
    pass_through = api in PASS_THROUGH

    def decorate(method: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                raise TypeError(f"{name}() takes no keyword arguments")
            owner, given = args[0], args[1:]
            if fmt is None:
                result = method(owner)  # type: ignore[call-arg]
            else:
                try:
                    values = convert_args(fmt, given)
                except (TypeError, ValueError, OverflowError) as exc:
                    if pass_through:
                        raise
                    raise TypeError(failure) from exc
                result = method(owner, *values)  # type: ignore[call-arg]
            if records:
                ret = result[-1] if isinstance(result, tuple) else result
                if isinstance(ret, int) and ret:
                    owner._core.record_error(ret, api)
            return result

        wrapper.__pyacl_api__ = api  # type: ignore[attr-defined]
        wrapper.__pyacl_fmt__ = fmt  # type: ignore[attr-defined]
        return wrapper

    return decorate
