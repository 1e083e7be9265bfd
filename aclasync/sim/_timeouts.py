"""pyACL millisecond timeouts turned into deadlines."""

from __future__ import annotations

import time

__all__ = ["timeout_deadline"]

#: Timeouts longer than this (a year) wait forever: the OS cannot time such waits.
_LONGEST_TIMEOUT_MS = 365 * 24 * 3600 * 1000


def timeout_deadline(timeout_ms: int) -> float | None:
    """Deadline for a pyACL millisecond timeout (-1 or absurdly long: none; 0: now)."""
    if timeout_ms == -1 or timeout_ms > _LONGEST_TIMEOUT_MS:
        return None
    return time.monotonic() + timeout_ms / 1000.0
