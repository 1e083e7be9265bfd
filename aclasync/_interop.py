"""Handles of streams and events that other libraries made, taken by protocol.

A stream is given as an ``aclrtStream`` handle (an ``int``), as an object with an
``npu_stream`` attribute (torch_npu's ``torch.npu.Stream``, whose getter first flushes
torch_npu's own task queue onto the stream), or as an object with
``__acl_stream__()`` returning ``(0, handle)``, in the manner of CUDA's
``__cuda_stream__``; an event likewise as an ``int`` or by ``__acl_event__()``.
"""

from __future__ import annotations

import operator

__all__ = ["event_handle", "stream_handle"]

_MISSING = object()


def stream_handle(obj: object) -> int:
    """The ``aclrtStream`` handle *obj* gives (see the module docstring).

    Raises ``TypeError`` for anything else, ``ValueError`` for a negative handle or a
    protocol version other than 0.
    """
    protocol = getattr(type(obj), "__acl_stream__", None)
    if protocol is not None:
        return _versioned(protocol(obj), "__acl_stream__")
    if _is_int(obj):
        return _handle(obj, "the stream handle")
    npu_stream = getattr(obj, "npu_stream", _MISSING)  # read once: torch_npu flushes here
    if npu_stream is not _MISSING:
        return _handle(npu_stream, "npu_stream")
    raise TypeError(
        "wrap_stream() takes an aclrtStream handle (an int), an object with an npu_stream "
        f"attribute (torch_npu's Stream) or one with __acl_stream__(); got {type(obj).__name__}"
    )


def event_handle(obj: object) -> int:
    """The ``aclrtEvent`` handle *obj* gives: an ``int``, or by ``__acl_event__()``."""
    protocol = getattr(type(obj), "__acl_event__", None)
    if protocol is not None:
        return _versioned(protocol(obj), "__acl_event__")
    if _is_int(obj):
        return _handle(obj, "the event handle")
    raise TypeError(
        "wrap_event() takes an aclrtEvent handle (an int) or an object with "
        f"__acl_event__(); got {type(obj).__name__}"
    )


def _is_int(value: object) -> bool:
    return not isinstance(value, bool) and hasattr(type(value), "__index__")


def _handle(value: object, what: str) -> int:
    if not _is_int(value):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    handle = operator.index(value)  # type: ignore[arg-type]
    if handle < 0:
        raise ValueError(f"{what} must be >= 0, got {handle}")
    if handle >= 2**64:  # a pointer: pyACL would take its low 64 bits, another handle
        raise ValueError(f"{what} must be below 2**64, got {handle:#x}")
    return handle


def _versioned(answer: object, protocol: str) -> int:
    if not (isinstance(answer, tuple) and len(answer) == 2):
        raise TypeError(f"{protocol}() must return (version, handle), got {answer!r}")
    version, handle = answer
    if version != 0:
        raise ValueError(f"{protocol}() gave version {version!r}; aclasync knows version 0")
    return _handle(handle, f"the handle {protocol}() gave")
