"""Numeric constants of pyACL, as enums carrying the documented values.

pyACL itself exports no constants; callers pass plain ints. The values here come from
the CANN runtime header ``acl_rt.h`` (ACL 1.17), cross-checked with the 1.15 copy in
torch_npu. Every member is an ``int`` and can be passed straight to ``acl.rt.*``.
"""

from __future__ import annotations

import enum

__all__ = [
    "CallbackBlockType",
    "EventFlag",
    "EventRecordedStatus",
    "EventStatus",
    "FailureMode",
    "MallocPolicy",
    "MemAttr",
    "MemcpyKind",
    "OverflowMode",
    "RunMode",
    "StreamFlag",
    "StreamStatus",
]


class StreamFlag(enum.IntFlag):
    """Stream creation flags for ``acl.rt.create_stream_with_config(priority, flag)``.

    Every bit the runtime header defines. ``FAST_LAUNCH``, ``FAST_SYNC`` and ``HUGE``
    (a deeper task queue) leave what a sync means unchanged. On ``PERSISTENT``,
    ``CPU_SCHEDULE`` and ``DEVICE_USE_ONLY`` streams ``synchronize_stream`` returns at
    once and ``stream_query`` means nothing, so the async front end refuses them.
    """

    DEFAULT = 0
    FAST_LAUNCH = 0x1
    FAST_SYNC = 0x2
    PERSISTENT = 0x4
    HUGE = 0x8
    CPU_SCHEDULE = 0x10
    DEVICE_USE_ONLY = 0x20


class FailureMode(enum.IntEnum):
    """Task failure policy for ``acl.rt.set_stream_failure_mode(stream, mode)``."""

    CONTINUE = 0
    STOP = 1


class RunMode(enum.IntEnum):
    """Where the application runs, as returned by ``acl.rt.get_run_mode()``."""

    DEVICE = 0
    HOST = 1


class EventFlag(enum.IntFlag):
    """Event creation flags for ``acl.rt.create_event_with_flag`` and ``_ex_with_flag``."""

    SYNC = 0x1
    CAPTURE_STREAM_PROGRESS = 0x2
    TIME_LINE = 0x8
    DEVICE_USE_ONLY = 0x10
    EXTERNAL = 0x20
    IPC = 0x40


class EventStatus(enum.IntEnum):
    """Event status from the deprecated ``acl.rt.query_event(event)``; opposite of the new one."""

    COMPLETE = 0
    NOT_READY = 1


class EventRecordedStatus(enum.IntEnum):
    """Event status from ``acl.rt.query_event_status(event)``; opposite of ``EventStatus``."""

    NOT_READY = 0
    COMPLETE = 1


class StreamStatus(enum.IntEnum):
    """Stream status from ``acl.rt.stream_query(stream)``."""

    COMPLETE = 0
    NOT_READY = 1


class CallbackBlockType(enum.IntEnum):
    """Whether the stream waits for the callback, for ``acl.rt.launch_callback``."""

    NO_BLOCK = 0
    BLOCK = 1


class OverflowMode(enum.IntEnum):
    """Float overflow mode for ``acl.rt.set_device_sat_mode`` / ``get_device_sat_mode``."""

    SATURATION = 0
    INFNAN = 1
    UNDEF = 2


class MemcpyKind(enum.IntEnum):
    """Copy direction for ``acl.rt.memcpy`` / ``memcpy_async``; 4 to 7 only in newer headers."""

    HOST_TO_HOST = 0
    HOST_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    DEVICE_TO_DEVICE = 3
    DEFAULT = 4
    HOST_TO_BUF_TO_DEVICE = 5
    INNER_DEVICE_TO_DEVICE = 6
    INTER_DEVICE_TO_DEVICE = 7


class MallocPolicy(enum.IntEnum):
    """Page policy for ``acl.rt.malloc(size, policy)``; 6 and 7 only in newer headers."""

    HUGE_FIRST = 0
    HUGE_ONLY = 1
    NORMAL_ONLY = 2
    HUGE_FIRST_P2P = 3
    HUGE_ONLY_P2P = 4
    NORMAL_ONLY_P2P = 5
    HUGE1G_ONLY = 6
    HUGE1G_ONLY_P2P = 7


class MemAttr(enum.IntEnum):
    """Memory kind queried by ``acl.rt.get_mem_info(attr)``; 12 to 17 only in the newest header."""

    DDR_MEM = 0
    HBM_MEM = 1
    DDR_MEM_HUGE = 2
    DDR_MEM_NORMAL = 3
    HBM_MEM_HUGE = 4
    HBM_MEM_NORMAL = 5
    DDR_MEM_P2P_HUGE = 6
    DDR_MEM_P2P_NORMAL = 7
    HBM_MEM_P2P_HUGE = 8
    HBM_MEM_P2P_NORMAL = 9
    HBM_MEM_HUGE1G = 10
    HBM_MEM_P2P_HUGE1G = 11
    MEM_NORMAL = 12
    MEM_HUGE = 13
    MEM_HUGE1G = 14
    MEM_P2P_NORMAL = 15
    MEM_P2P_HUGE = 16
    MEM_P2P_HUGE1G = 17
