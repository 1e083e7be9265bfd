"""Exceptions, and the one place where ACL status codes become them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel

from ._pyacl.codes import TIMEOUT_CODES, code_name

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import ExceptionGroup

__all__ = [
    "AclError",
    "AclTimeoutError",
    "AclasyncError",
    "BackendUnavailableError",
    "DeviceBrokenError",
    "call_name",
    "never_recorded",
    "raise_for_status",
    "report",
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

    @classmethod
    def from_status(
        cls, code: int, api: str, *, device: int | None = None, stream: int | None = None
    ) -> AclError:
        """The exception for a non-zero status: ``AclTimeoutError`` for 507046/507047."""
        kind = AclTimeoutError if code in TIMEOUT_CODES else AclError
        return kind(code, api, device=device, stream=stream)

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
        raise AclError.from_status(code, api, device=device, stream=stream)


def call_name(acl: object, fn: object) -> str:
    """A readable ``acl.<namespace>.<call>`` name for a backend function *fn*."""
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", repr(fn))
    for namespace in ("rt", "sim", "util", "mdl"):
        if owner is not None and owner is getattr(acl, namespace, None):
            return f"acl.{namespace}.{name}"
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else name


def never_recorded(failure: BaseException, device: int, stream: int) -> AclasyncError:
    """A fresh exception for a wait on an event whose record failed with *failure*."""
    if isinstance(failure, AclError):
        error: AclasyncError = AclError.from_status(
            failure.code, failure.api, device=device, stream=stream
        )
    else:
        error = AclasyncError(f"acl.rt.record_event raised {failure!r}")
        error.__cause__ = failure
    notes = error.__dict__.setdefault("__notes__", [])  # BaseException.add_note, 3.10 too
    notes.append("the event's record failed: it was never recorded and cannot be waited on")
    return error


def report(errors: list[BaseException], propagating: BaseException | None = None) -> None:
    """Raise failures found by a close, or attach them to an exception in flight.

    One failure is raised as itself, several as an ``ExceptionGroup`` in the order
    they were found. With *propagating* (the exception a close runs under, most often
    a cancellation) nothing is raised: each failure becomes a note on it, so the
    exception in flight is never replaced and no failure goes unmentioned. Except a
    ``KeyboardInterrupt``, ``SystemExit`` or other ``BaseException`` that is not a
    cancellation: it is raised as itself, whatever else (the other failures as notes
    on it, *propagating* as its context).
    """
    if not errors:
        return
    fatal = _fatal(errors)
    if fatal is not None and fatal is not propagating:
        report([e for e in errors if e is not fatal], fatal)
        if fatal.__context__ is None:
            fatal.__context__ = propagating
        raise fatal
    if propagating is not None:
        notes = propagating.__dict__.setdefault("__notes__", [])
        for error in errors:  # what BaseException.add_note does (Python >= 3.11)
            notes.append(f"aclasync: unreported failure found while closing: {error!r}")
        return
    if len(errors) == 1:
        raise errors[0]
    exceptions = [e if isinstance(e, Exception) else RuntimeError(repr(e)) for e in errors]
    raise ExceptionGroup(f"{len(errors)} unreported failures found while closing", exceptions)


async def raise_closing(
    errors: list[BaseException],
    cancelled: BaseException | None,
    propagating: BaseException | None = None,
    settle: Callable[[list[BaseException], BaseException | None], None] | None = None,
) -> None:
    """End a close by rule 6, *settle* (default ``report``) saying what it found.

    With *propagating* (the exception the close runs under), ``settle(errors,
    propagating)`` and nothing else, but for a Ctrl-C held meanwhile (*cancelled* a
    ``KeyboardInterrupt``), raised after ``settle(errors, it)``. Else *cancelled*
    (asyncio's own cancellation, or a Ctrl-C, that came during the close), or a
    cancellation pending now, is raised after ``settle(errors, it)`` (a cancelled close
    never lets a failure out of its cancel scope); else ``settle(errors, None)``
    (``report`` raises them).
    """
    settle = settle or report
    if propagating is None:
        try:
            if cancelled is not None:
                raise cancelled
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException as exc:
            settle(errors, exc)
            raise
    if isinstance(cancelled, KeyboardInterrupt):  # a Ctrl-C held meanwhile: it goes on
        settle(errors, cancelled)
        if cancelled.__context__ is None:
            cancelled.__context__ = propagating
        raise cancelled
    settle(errors, propagating)


def _fatal(errors: list[BaseException]) -> BaseException | None:
    """The first failure that must end the program's current work: a ``BaseException``
    that is neither an ``Exception`` nor a cancellation (``KeyboardInterrupt``, say)."""
    try:
        ordinary: tuple[type[BaseException], ...] = (Exception, anyio.get_cancelled_exc_class())
    except Exception:  # (no event loop here)
        ordinary = (Exception,)
    return next((e for e in errors if not isinstance(e, ordinary)), None)
