"""Validation of the arguments that waits, creations and calls run on the worker take."""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import numbers
import operator
import types
from collections.abc import Callable
from typing import Any, cast

__all__ = [
    "check_bool",
    "check_plain_callable",
    "check_timeout",
    "is_coroutine",
    "launch_status",
]


def check_timeout(timeout: object) -> float | None:
    """Validate a ``timeout=`` argument (seconds); ``None`` and ``inf`` mean no limit."""
    if timeout is None:
        return None
    # Any real number type (numpy's integers and floats too), but not a bool.
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(
            f"timeout must be a number of seconds or None, not {type(timeout).__name__}"
        )
    try:
        seconds = float(timeout)
    except OverflowError:  # an int beyond any float: longer than any wait can last
        seconds = math.inf if cast(float, timeout) > 0 else -math.inf
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {seconds!r}")
    return None if math.isinf(seconds) else seconds


def check_bool(value: object, name: str) -> bool:
    """Validate a flag argument: a real ``bool`` (``0``/``1`` ints are taken too)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {value!r}")


def check_plain_callable(fn: object, what: str) -> Callable[..., Any]:
    """Return *fn* if the device worker can call it; raise ``TypeError`` otherwise.

    The worker is a plain thread with no event loop, so a coroutine function (an
    ``async def``, an object whose ``__call__`` is one, or a ``functools.partial`` of
    either) would only make a coroutine nobody awaits. *what* names the caller in the
    message (``"launch()"``).
    """
    kind = fn.__class__
    if kind is _BUILTIN:  # a C function, as pyACL's: the fast path
        return fn  # type: ignore[return-value]
    func = fn.__func__ if kind is types.MethodType else fn  # type: ignore[attr-defined]
    if func.__class__ is types.FunctionType:  # a plain function or method: its code says
        if func.__code__.co_flags & inspect.CO_COROUTINE or getattr(func, _MARKER, None):
            raise TypeError(_coroutine_message(what, fn))
        return fn  # type: ignore[return-value]
    if not callable(fn):
        raise TypeError(f"{what} needs a callable, got {type(fn).__name__}")
    target: object = fn
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(type(target), "__call__", None)  # noqa: B004 - callable objects too
    ):
        raise TypeError(_coroutine_message(what, fn))
    return fn


_BUILTIN = types.BuiltinFunctionType
#: The attribute ``inspect.markcoroutinefunction`` (Python 3.12+) sets on a function.
_MARKER = "_is_coroutine_marker"


def _coroutine_message(what: str, fn: object) -> str:
    return (
        f"{what} runs fn on the device's worker thread: pass a plain function, "
        f"not a coroutine function (async def); got {fn!r}"
    )


def is_coroutine(value: object) -> bool:
    return hasattr(value, "cr_frame") and hasattr(value, "close")


def launch_status(ret: object, result: object, api: str) -> int:
    """The pyACL status *ret* (from the launched call's *result*) as an ``int``.

    numpy integers and other ``__index__`` types are statuses; ``bool`` is not, nor is
    anything else.

    Raises
    ------
    TypeError
        Saying what ``launch`` expects and what *api* returned instead.
    """
    if not isinstance(ret, bool) and hasattr(type(ret), "__index__"):
        with contextlib.suppress(TypeError):
            return operator.index(ret)  # type: ignore[arg-type]
    try:
        shown = repr(result)
    except Exception:  # a broken __repr__ must not hide what launch expects
        shown = object.__repr__(result)
    got = f"{type(result).__name__} {shown}"
    if is_coroutine(result):
        result.close()  # type: ignore[attr-defined]  # never awaited: say so here, once
        got = "a coroutine (the worker thread never awaits one)"
    if len(got) > 120:
        got = got[:117] + "..."
    raise TypeError(
        f"launch() expects fn to return a pyACL status: an int (0 for success), or a "
        f"tuple whose last item is one, as pyACL's calls return; {api} returned {got}"
    )
