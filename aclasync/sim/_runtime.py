"""The simulated runtime object: ``acl`` with its ``rt``, ``util`` and ``sim`` namespaces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._calls import CallGroup
from ._core import Core, check_ints
from ._kernel import Kernel
from ._mdl_dataset import DataBufferCalls  # acl.mdl hook
from ._mdl_runtime import Mdl, ModelExtension  # acl.mdl hook
from ._mdl_state import ModelRegistry  # acl.mdl hook
from ._objects import Task
from ._profiles import SocProfile, resolve_profile
from ._rc import RC
from ._rt_callback import CallbackCalls
from ._rt_device import DeviceCalls
from ._rt_event import EventCalls
from ._rt_memory import MemoryCalls
from ._rt_stream import StreamCalls
from ._util import Util

__all__ = ["DEFAULT_DEVICE_COUNT", "Rt", "SimAcl", "SimExtension", "create"]


class Rt(DeviceCalls, StreamCalls, EventCalls, MemoryCalls, CallbackCalls):
    """The ``acl.rt`` namespace of a simulated runtime."""


class SimExtension(ModelExtension, CallGroup):
    """``acl.sim``: what only the simulator has."""

    @property
    def profile(self) -> SocProfile:
        """The SoC profile (limits, features and model parameters) in use."""
        return self._core.profile

    def launch_kernel(self, kernel: Kernel, stream: int, /) -> int:
        """Queue *kernel* on *stream*; returns ``ret`` like every pyACL launch."""
        if not isinstance(kernel, Kernel):
            raise TypeError(
                f"launch_kernel: expected aclasync.sim.Kernel, not {type(kernel).__name__}"
            )
        check_ints("launch_kernel", stream)
        _, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        task = Task(
            found,
            "kernel",
            duration=kernel.duration_us / 1e6,
            fn=kernel.fn,
            overflow=kernel.overflow and found.overflow_switch == 1,
            error=kernel.error,
        )
        return self._submit(found, task)

    def device_array(self, dev_ptr: int, shape: int | tuple[int, ...], dtype: Any) -> Any:
        """Return a numpy array viewing simulated device memory at *dev_ptr*.

        Simulator-only, for kernel bodies (``Kernel.fn``) that compute on device
        buffers. Raises ``ValueError`` if the range is not inside one allocation.
        """
        check_ints("device_array", dev_ptr)
        kind = np.dtype(dtype)
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        count = int(np.prod(dims, dtype=np.int64)) * kind.itemsize
        region = self._core.device_region(dev_ptr)
        view = None if region is None else region.view(dev_ptr, count)
        if view is None:
            raise ValueError(f"device_array: {dev_ptr:#x} (+{count} bytes) is not device memory")
        return np.frombuffer(view, dtype=kind).reshape(dims)

    def set_observer(self, observer: Callable[[int, int, str, float, float], None] | None) -> None:
        """Call ``observer(device_id, stream, task_name, start, finish)`` as tasks finish.

        Times are ``time.monotonic()`` seconds; dropped tasks report ``start == 0``.
        The observer runs on simulator threads with the runtime locked: it must be
        quick and must not call the runtime. ``None`` removes it. Devices activated
        later get it too. An observer that raises is removed.
        """
        if observer is not None and not callable(observer):
            raise TypeError(f"observer must be callable or None, not {type(observer).__name__}")
        with self._core.lock:
            for device in self._core.devices:
                device.observer = observer
                if device.engine is not None:
                    device.engine.observer = observer

    def close(self) -> None:
        """Release every active device (waiting for its work) and join all threads.

        Idempotent. The runtime stays usable: ``set_device`` starts a device again.
        """
        for device in self._core.devices:
            if device.active:
                self._release_device(device)


class SimAcl(DataBufferCalls):
    """A simulated pyACL runtime: use it where you would use ``import acl``."""

    def __init__(self, *, device_count: int, profile: SocProfile) -> None:
        core = Core(device_count, profile)
        self._core = core
        self.rt = Rt(core)
        self.util = Util(core)
        self.sim = SimExtension(core)
        self._models = self.sim._models = ModelRegistry()  # acl.mdl hook
        self.mdl = Mdl(core, self._models)  # acl.mdl hook

    def __repr__(self) -> str:
        return (
            f"<aclasync.sim runtime soc={self._core.profile.name!r} "
            f"devices={len(self._core.devices)}>"
        )

    def init(self, config_path: str = "", /) -> int:
        """Initialise (ref-counted): a repeat call returns 100002 and still counts."""
        if not isinstance(config_path, str):
            raise TypeError(f"init: argument 1 must be str, not {type(config_path).__name__}")
        with self._core.lock:
            self._core.init_count += 1
            return RC.OK if self._core.init_count == 1 else RC.REPEAT_INITIALIZE

    def finalize(self) -> int:
        """Clear the init count at once; 100037 if not initialised."""
        with self._core.lock:
            if self._core.init_count == 0:
                return RC.REPEAT_FINALIZE
            self._core.init_count = 0
            return RC.OK

    def get_soc_name(self) -> str | None:
        """The SoC name of the profile (device 0's, as the real call reports)."""
        return self._core.profile.name


#: Devices of the process-wide default runtime: an eight-card server.
DEFAULT_DEVICE_COUNT = 8


def create(
    *, device_count: int = 2, soc: str | SocProfile = "Ascend910B3", **model_params: Any
) -> SimAcl:
    """Return a fresh, independent simulated runtime.

    Parameters
    ----------
    device_count:
        Number of simulated devices (ids ``0 .. device_count - 1``).
    soc:
        Name of a profile in ``PROFILES``, or a ``SocProfile``.
    **model_params:
        Overrides of ``SocProfile`` fields, e.g. ``notify_latency_us=50``.
    """
    if isinstance(device_count, bool) or not isinstance(device_count, int):
        raise TypeError(f"device_count must be an int, got {type(device_count).__name__}")
    if device_count < 1:
        raise ValueError(f"device_count must be >= 1, got {device_count}")
    return SimAcl(device_count=device_count, profile=resolve_profile(soc, model_params))
