"""aclasync: Huawei Ascend's runtime (pyACL) with an async/await face, and a simulator of it.

.. code-block:: python

    import anyio, aclasync
    from aclasync.sim import Kernel

    async def main():
        async with aclasync.open_device(0, backend="sim") as dev:
            async with dev.create_stream(flags=aclasync.StreamFlag.FAST_SYNC) as s:
                s.launch(dev.acl.sim.launch_kernel, Kernel(duration_us=500))
                await s.synchronize(timeout=1.0)

    anyio.run(main)   # or anyio.run(main, backend="trio")
"""

from __future__ import annotations

from ._buffers import DeviceBuffer as DeviceBuffer
from ._buffers import HostBuffer as HostBuffer
from ._codes import ErrorCode as ErrorCode
from ._constants import EventFlag as EventFlag
from ._constants import FailureMode as FailureMode
from ._constants import MemcpyKind as MemcpyKind
from ._constants import StreamFlag as StreamFlag
from ._device import Device as Device
from ._device import StreamCreation as StreamCreation
from ._device import open_device as open_device
from ._errors import AclasyncError as AclasyncError
from ._errors import AclError as AclError
from ._errors import AclTimeoutError as AclTimeoutError
from ._errors import BackendUnavailableError as BackendUnavailableError
from ._errors import DeviceBrokenError as DeviceBrokenError
from ._event import Event as Event
from ._stream import Stream as Stream
from ._version import __version__ as __version__
from ._worker import WorkerOptions as WorkerOptions

__all__ = [
    "AclError",
    "AclTimeoutError",
    "AclasyncError",
    "BackendUnavailableError",
    "Device",
    "DeviceBrokenError",
    "DeviceBuffer",
    "ErrorCode",
    "Event",
    "EventFlag",
    "FailureMode",
    "HostBuffer",
    "MemcpyKind",
    "Stream",
    "StreamCreation",
    "StreamFlag",
    "WorkerOptions",
    "__version__",
    "open_device",
]
