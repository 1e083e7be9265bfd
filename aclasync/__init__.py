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

The public names are re-exported lazily (through a module ``__getattr__``, as anyio
does), so ``import aclasync.sim`` loads the simulator alone: neither anyio nor the
async front end. The simulator subpackage loads the same way on first use:
``import aclasync`` then ``aclasync.sim.create()`` works without ``import aclasync.sim``.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from ._version import __version__ as __version__

if _typing.TYPE_CHECKING:
    from . import sim as sim
    from ._buffers import DeviceBuffer as DeviceBuffer
    from ._buffers import HostBuffer as HostBuffer
    from ._device import Device as Device
    from ._device import StreamCreation as StreamCreation
    from ._device import open_device as open_device
    from ._device_pool import DevicePool as DevicePool
    from ._errors import AclasyncError as AclasyncError
    from ._errors import AclError as AclError
    from ._errors import AclTimeoutError as AclTimeoutError
    from ._errors import BackendUnavailableError as BackendUnavailableError
    from ._errors import DeviceBrokenError as DeviceBrokenError
    from ._event import Event as Event
    from ._model import Model as Model
    from ._model import ModelLoading as ModelLoading
    from ._model import TensorInfo as TensorInfo
    from ._pyacl.backend import AclBackend as AclBackend
    from ._pyacl.codes import ErrorCode as ErrorCode
    from ._pyacl.constants import EventFlag as EventFlag
    from ._pyacl.constants import FailureMode as FailureMode
    from ._pyacl.constants import MemcpyKind as MemcpyKind
    from ._pyacl.constants import StreamFlag as StreamFlag
    from ._stream import Stream as Stream
    from ._stream_pool import PoolStatistics as PoolStatistics
    from ._stream_pool import StreamPool as StreamPool
    from ._worker import WorkerOptions as WorkerOptions

#: Where each public name lives: its module, relative to this package.
_EXPORTS: dict[str, str] = {
    "AclBackend": "._pyacl.backend",
    "AclError": "._errors",
    "AclTimeoutError": "._errors",
    "AclasyncError": "._errors",
    "BackendUnavailableError": "._errors",
    "Device": "._device",
    "DeviceBrokenError": "._errors",
    "DevicePool": "._device_pool",
    "DeviceBuffer": "._buffers",
    "ErrorCode": "._pyacl.codes",
    "Event": "._event",
    "EventFlag": "._pyacl.constants",
    "FailureMode": "._pyacl.constants",
    "HostBuffer": "._buffers",
    "MemcpyKind": "._pyacl.constants",
    "Model": "._model",
    "ModelLoading": "._model",
    "PoolStatistics": "._stream_pool",
    "Stream": "._stream",
    "StreamCreation": "._device",
    "StreamFlag": "._pyacl.constants",
    "StreamPool": "._stream_pool",
    "TensorInfo": "._model",
    "WorkerOptions": "._worker",
    "open_device": "._device",
}

__all__ = [
    "AclBackend",
    "AclError",
    "AclTimeoutError",
    "AclasyncError",
    "BackendUnavailableError",
    "Device",
    "DeviceBrokenError",
    "DeviceBuffer",
    "DevicePool",
    "ErrorCode",
    "Event",
    "EventFlag",
    "FailureMode",
    "HostBuffer",
    "MemcpyKind",
    "Model",
    "ModelLoading",
    "PoolStatistics",
    "Stream",
    "StreamCreation",
    "StreamFlag",
    "StreamPool",
    "TensorInfo",
    "WorkerOptions",
    "__version__",
    "open_device",
]


#: Subpackages loaded on first attribute access (``aclasync.sim.create()`` after a plain
#: ``import aclasync``). Not ``aclasync.ray`` nor ``aclasync.testing``: they import Ray
#: and pytest, which a plain install does not have.
_SUBPACKAGES = frozenset({"sim"})


def __getattr__(name: str) -> _typing.Any:
    if name in _SUBPACKAGES:
        # import_module sets the attribute on this package, so this runs once.
        return _importlib.import_module(f".{name}", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aclasync' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
