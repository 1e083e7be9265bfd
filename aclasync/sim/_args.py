"""pyACL's argument parsing: the exceptions its C extension raises for bad arguments.

Every pyACL function is a CPython ``METH_VARARGS`` function that parses its arguments
with ``PyArg_ParseTuple`` and, on failure, replaces the parser's error with
``TypeError("acl.<module>.<name> args parse failed")``. ``parsed`` gives the simulator's
calls the same front door, so that client code catching those exceptions behaves the
same on both.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["argument_count_message", "check_args", "parsed"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_INT_RANGES = {"i": (-(2**31), 2**31 - 1), "l": (-(2**63), 2**63 - 1), "L": (-(2**63), 2**63 - 1)}


def argument_count_message(fmt: str, given: int) -> str | None:
    """CPython's own message for a wrong argument count, or None if the count fits."""
    required, _, optional = fmt.partition("|")
    low, high = len(required), len(required) + len(optional)
    if low <= given <= high:
        return None
    plural = "" if high == 1 else "s"
    if low == high:
        return f"function takes exactly {high} argument{plural} ({given} given)"
    if given < low:
        return f"function takes at least {low} argument{'' if low == 1 else 's'} ({given} given)"
    return f"function takes at most {high} argument{plural} ({given} given)"


def _fits(code: str, value: object) -> bool:
    if code == "O":
        return True
    if code == "s":
        return isinstance(value, str) and "\0" not in value
    if code in "kK":
        # PyArg_ParseTuple's k and K take exact ints only (no __index__), masking the value.
        return isinstance(value, int)
    if code == "f":
        return isinstance(value, (int, float))
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    low_high = _INT_RANGES.get(code)
    return low_high is None or low_high[0] <= number <= low_high[1]


def check_args(api: str, fmt: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise pyACL's TypeError unless *args* parse with ``PyArg_ParseTuple`` format *fmt*."""
    name = api.rpartition(".")[2]
    if kwargs:
        raise TypeError(f"{name}() takes no keyword arguments")
    codes = fmt.replace("|", "")
    if argument_count_message(fmt, len(args)) is not None or not all(
        _fits(code, value) for code, value in zip(codes, args, strict=False)
    ):
        raise TypeError(f"{api} args parse failed")


def parsed(
    api: str, fmt: str, *, records: bool = True
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate a method so its positional arguments are checked as pyACL parses them.

    *api* is the full pyACL name (``"acl.rt.memcpy"``); *fmt* the ``PyArg_ParseTuple``
    format (``"kkkki"``; ``"|s"`` for an optional string). Wrong counts, types or keyword
    arguments raise ``TypeError("<api> args parse failed")`` before the call runs. With
    *records*, a non-zero ``ret`` becomes the calling thread's last error
    (``peek_at_last_error``); the method's owner must have a ``_core``.
    """

    def decorate(method: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(method)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            check_args(api, fmt, args[1:], kwargs)
            result = method(*args, **kwargs)
            if records:
                ret = result[-1] if isinstance(result, tuple) else result
                if isinstance(ret, int) and ret:
                    args[0]._core.record_error(ret, api)  # type: ignore[attr-defined]
            return result

        wrapper.__pyacl_api__ = api  # type: ignore[attr-defined]
        wrapper.__pyacl_fmt__ = fmt  # type: ignore[attr-defined]
        return wrapper

    return decorate
