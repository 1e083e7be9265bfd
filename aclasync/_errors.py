"""Exceptions, and the one place where ACL status codes become them."""

from __future__ import annotations

from typing import Any

import anyio

from ._pyacl.codes import TIMEOUT_CODES, code_name

__all__ = [
    "AclError",
    "AclTimeoutError",
    "AclasyncError",
    "BackendUnavailableError",
    "DeviceBrokenError",
    "raise_for_status",
]


class AclasyncError(Exception):
    """Root of every exception aclasync raises on its own account."""


class AclError(AclasyncError):
    """A runtime call returned a non-zero ACL status.

    Attributes
    ----------
    code:
        The ACL error code (an ``int``).
    name:
        Its macro name, e.g. ``"ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"``.
    api:
        The call that failed, e.g. ``"acl.rt.synchronize_stream"``.
    device, stream:
        The device id and stream handle involved, where known.
    """

    def __init__(
        self,
        code: int,
        api: str,
        *,
        device: int | None = None,
        stream: int | None = None,
        detail: str = "",
    ) -> None:
        self.code = code
        self.name = code_name(code)
        self.api = api
        self.device = device
        self.stream = stream
        self.detail = detail
        where = []
        if device is not None:
            where.append(f"device {device}")
        if stream is not None:
            where.append("default stream" if stream == 0 else f"stream {stream:#x}")
        message = f"{api} failed with {code} ({self.name})"
        if where:
            message += f" on {', '.join(where)}"
        if detail:
            message += f": {detail}"
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its fields (the default pickles only the message), so that the
        # error crosses process boundaries (Ray actors, multiprocessing) intact.
        fields = {"device": self.device, "stream": self.stream, "detail": self.detail}
        return (_rebuild_acl_error, (type(self), self.code, self.api, fields), self.__dict__)


def _rebuild_acl_error(
    cls: type[AclError], code: int, api: str, fields: dict[str, Any]
) -> AclError:
    return cls(code, api, **fields)


class AclTimeoutError(AclError, TimeoutError):
    """A wait ran out of time: a ``timeout=`` expired, or the runtime said 507046/507047."""


class DeviceBrokenError(AclasyncError, anyio.BrokenResourceError):
    """The device's worker thread died; every pending and later await on it fails."""


class BackendUnavailableError(AclasyncError, RuntimeError):
    """The requested backend cannot be used here (for example CANN is not installed)."""


def raise_for_status(
    code: int, api: str, *, device: int | None = None, stream: int | None = None
) -> None:
    """Raise the exception for a non-zero ACL status *code*; do nothing for 0."""
    if code:
        kind = AclTimeoutError if code in TIMEOUT_CODES else AclError
        raise kind(code, api, device=device, stream=stream)
