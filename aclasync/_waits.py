"""Validation of the arguments waits and creations take."""

from __future__ import annotations

import math
import numbers

__all__ = ["check_bool", "check_timeout"]


def check_timeout(timeout: object) -> float | None:
    """Validate a ``timeout=`` argument (seconds); ``None`` and ``inf`` mean no limit."""
    if timeout is None:
        return None
    # Any real number type (numpy's integers and floats too), but not a bool.
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(
            f"timeout must be a number of seconds or None, not {type(timeout).__name__}"
        )
    seconds = float(timeout)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
    return None if math.isinf(seconds) else seconds


def check_bool(value: object, name: str) -> bool:
    """Validate a flag argument: a real ``bool`` (``0``/``1`` ints are taken too)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {value!r}")
