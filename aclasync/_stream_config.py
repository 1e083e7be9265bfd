"""Checking how a stream is to be created: its flags and priority, in one place.

``Device.create_stream``, ``Device.stream_pool`` and ``DevicePool`` all call
``check_stream_config`` before anything is made, so a flag aclasync cannot honour is
refused the same way whichever door it came through.
"""

from __future__ import annotations

import functools
import operator

from ._pyacl.constants import StreamFlag

__all__ = ["MAX_PRIORITY", "check_stream_config"]

#: The priority range of create_stream_with_config (pyACL 1.15 header: 0-7).
MAX_PRIORITY = 7

#: Every bit the runtime header defines for create_stream_with_config.
_DEFINED = int(functools.reduce(operator.or_, StreamFlag.__members__.values(), 0))

#: Flags pyACL documents but aclasync cannot honour, and why: on such a stream
#: ``synchronize_stream`` returns at once, so no await could tell when work is done.
_REFUSED = {
    StreamFlag.PERSISTENT: (
        "a PERSISTENT stream keeps its tasks for model capture instead of running them, "
        "and synchronize_stream returns at once on it"
    ),
    StreamFlag.CPU_SCHEDULE: (
        "a CPU_SCHEDULE stream is scheduled by the AI CPU for queue-mode models, "
        "and synchronize_stream returns at once on it"
    ),
    StreamFlag.DEVICE_USE_ONLY: (
        "a DEVICE_USE_ONLY stream is used by the device alone, "
        "and synchronize_stream returns at once on it"
    ),
}


def check_stream_config(flags: object, priority: object) -> tuple[StreamFlag, int]:
    """Return *flags* as a ``StreamFlag`` and *priority* as an int, or raise.

    Raises
    ------
    TypeError
        If either is not an int (``bool`` is not accepted).
    ValueError
        If *flags* is negative, has bits pyACL does not define, or asks for a stream
        whose sync returns at once (``PERSISTENT``, ``CPU_SCHEDULE``,
        ``DEVICE_USE_ONLY``: aclasync's awaits would then return before the work is
        done); or if *priority* is outside 0 to 7.
    """
    flags = _int(flags, "flags")
    priority = _int(priority, "priority")
    if flags < 0:
        raise ValueError(f"flags must be >= 0, got {flags}")
    unknown = flags & ~_DEFINED
    if unknown:
        defined = ", ".join(
            f"{name}={value:#x}" for name, value in StreamFlag.__members__.items() if value
        )
        raise ValueError(
            f"flags={flags:#x} has bits pyACL does not define ({unknown:#x}); "
            f"the stream flags are {defined}"
        )
    for flag, why in _REFUSED.items():
        if flags & flag:
            raise ValueError(
                f"flags: StreamFlag.{flag.name} is not supported by aclasync: {why}, "
                "so awaiting the stream could not wait for its work"
            )
    if not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be 0 to {MAX_PRIORITY}, got {priority}")
    return StreamFlag(flags), priority


def _int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return value
