"""Turning worker results into return values or exceptions, with ``timeout=`` support."""

from __future__ import annotations

import math
from typing import Any

import anyio

from ._errors import AclTimeoutError, raise_for_status
from ._loop import Waiter
from ._pyacl.codes import ErrorCode
from ._worker import BROKEN, CLOSED

__all__ = ["check_timeout", "park", "timeout_error", "unpack_call", "unpack_wait"]


def check_timeout(timeout: float | None) -> float | None:
    """Validate a ``timeout=`` argument (seconds); ``None`` and ``inf`` mean no limit."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(
            f"timeout must be a number of seconds or None, not {type(timeout).__name__}"
        )
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
    return None if math.isinf(timeout) else float(timeout)


async def park(
    waiter: Waiter,
    timeout: float | None,
    *,
    api: str,
    device: int,
    stream: int | None = None,
    event: bool = False,
) -> Any:
    """Wait for *waiter*; on ``timeout`` expiry raise ``AclTimeoutError`` (the wait only ends)."""
    if timeout is None:
        return await waiter.wait()
    with anyio.move_on_after(timeout):
        return await waiter.wait()
    raise timeout_error(api, timeout, device=device, stream=stream, event=event)


def timeout_error(
    api: str, timeout: float, *, device: int, stream: int | None = None, event: bool = False
) -> AclTimeoutError:
    """The error for an expired ``timeout=``: 507046 for streams, 507047 for events."""
    code = (
        ErrorCode.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
        if event
        else ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    )
    return AclTimeoutError(
        int(code), api, device=device, stream=stream, detail=f"timeout={timeout}s expired"
    )


def _raise_lifecycle(value: tuple[Any, Any]) -> None:
    if value[0] is BROKEN:
        raise value[1]
    if value[0] is CLOSED:
        raise anyio.ClosedResourceError("the device was closed while this operation waited")


def unpack_call(value: tuple[Any, Any]) -> Any:
    """The result of a worker call, or raise what the call raised."""
    _raise_lifecycle(value)
    result, error = value
    if error is not None:
        raise error
    return result


def unpack_wait(value: tuple[Any, Any], *, device: int, stream: int | None) -> None:
    """Raise for a failed wait result ``(code, api)``."""
    _raise_lifecycle(value)
    code, api = value
    raise_for_status(code, api, device=device, stream=stream)
