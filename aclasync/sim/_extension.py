"""``acl.sim`` and ``acl.media``: what only the simulator has, and DVPP memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._args import parsed
from ._calls import CallGroup
from ._core import check_ints
from ._kernel import Kernel
from ._mdl_runtime import ModelExtension
from ._objects import Task
from ._profiles import SocProfile
from ._rc import RC
from ._rt_memory import allocate_device_memory, free_device_memory
from ._util import Util

__all__ = ["Media", "SimExtension"]


class SimExtension(ModelExtension, CallGroup):
    """``acl.sim``: what only the simulator has."""

    _util: Util | None = None

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
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        duration_us, error = kernel.duration_us, kernel.error
        limit = self._core.op_execute_timeout_us
        if limit and duration_us > limit:  # set_op_execute_timeout*: stopped at the limit
            duration_us, error = limit, error or RC.AICORE_TIMEOUT
        task = Task(
            found,
            "kernel",
            duration=duration_us / 1e6,
            fn=kernel.fn,
            overflow=kernel.overflow and found.overflow_switch == 1,
            error=error,
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
        if any(dim < 0 for dim in dims):
            raise ValueError(f"device_array: shape {shape!r} has a negative dimension")
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

    def live_objects(self) -> dict[str, int]:
        """Count what the runtime holds now, for leak checks. Never blocks for long.

        Keys: ``streams`` (created with ``create_stream*``; default streams come and go
        with their contexts and are not counted), ``events``, ``contexts`` (the default
        context of every active device plus explicit ones), ``memory_regions`` (live
        ``malloc`` and ``malloc_host`` blocks), ``device_refs`` (the sum of the devices'
        ``set_device`` reference counts), ``threads`` (simulator threads alive: device
        schedulers and kernel-body cores), ``notifies``, ``host_registrations``
        (``host_register`` ranges) and ``util_threads`` (``util.start_thread`` threads not
        yet joined by ``stop_thread``), and those of ``acl.mdl``: ``models``, ``model_descs``,
        ``datasets``, ``data_buffers``, and ``tensor_descs`` (``acl.create_tensor_desc``
        descriptions and the copies datasets own). All are 0 for a fresh runtime and
        again after every device is released, every host block freed and every model
        object destroyed.
        """
        core = self._core
        with core.lock:
            contexts = [ctx for device in core.devices for ctx in device.all_contexts()]
            engines = [d.engine.thread for d in core.devices if d.engine is not None]
            counts = {
                "streams": sum(len(ctx.streams) for ctx in contexts),
                "events": sum(len(ctx.events) for ctx in contexts),
                "contexts": len(contexts),
                "memory_regions": core.host.allocations
                + sum(d.memory.allocations for d in core.devices),
                "device_refs": sum(d.refcount for d in core.devices),
                "threads": sum(t.is_alive() for t in (*engines, *core.cores.threads)),
                "notifies": sum(len(d.notifies) for d in core.devices),
                "host_registrations": len(core.host_registrations),
            }
        counts["util_threads"] = self._util.live_threads if self._util is not None else 0
        counts.update(self.model_objects())
        with self._models.lock:
            counts["tensor_descs"] = len(self._models.tensor_descs)
        return counts

    def close(self) -> None:
        """Release every active device (waiting for its work) and join all threads.

        Idempotent. The runtime stays usable: ``set_device`` starts a device again.
        """
        for device in self._core.devices:
            if device.active:
                self._release_device(device)
        if self._util is not None:
            self._util.close()


class Media(CallGroup):
    """``acl.media``: only the DVPP memory calls, which are device memory here.

    The image and video processing calls (JPEG, VPC, video codecs) are not simulated.
    """

    @parsed("acl.media.dvpp_malloc", "k", records=True)
    def dvpp_malloc(self, size: int, /) -> tuple[int, int]:
        """Allocate device memory for DVPP: ``(dev_ptr, ret)``, as ``acl.rt.malloc``."""
        return allocate_device_memory(self._core, size)

    @parsed("acl.media.dvpp_free", "k", records=True)
    def dvpp_free(self, dev_ptr: int, /) -> int:
        """Free ``dvpp_malloc`` memory; the codes of ``acl.rt.free``."""
        return free_device_memory(self._core, dev_ptr)
