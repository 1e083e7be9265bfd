"""``acl.rt`` memory calls: device and host allocation, copies and fills."""

from __future__ import annotations

import ctypes
import time

from ._args import parsed
from ._calls import CallGroup
from ._core import Core, check_ints
from ._objects import Task
from ._rc import RC

__all__ = ["MemoryCalls", "allocate_device_memory", "free_device_memory"]

_MEMCPY_KIND_MAX = 7


class MemoryCalls(CallGroup):
    """malloc/free, malloc_host/free_host, memcpy(_async), memset(_async)."""

    @parsed("acl.rt.malloc")
    def malloc(self, size: int, policy: int, /) -> tuple[int, int]:
        check_ints("malloc", size, policy)
        return allocate_device_memory(self._core, size)

    @parsed("acl.rt.free")
    def free(self, dev_ptr: int, /) -> int:
        check_ints("free", dev_ptr)
        if dev_ptr != 0 and self._core.context is None:
            return RC.CONTEXT_NULL
        return free_device_memory(self._core, dev_ptr)

    @parsed("acl.rt.malloc_host")
    def malloc_host(self, size: int, /) -> tuple[int, int]:
        check_ints("malloc_host", size)
        if size <= 0:
            return 0, RC.INVALID_PARAM
        with self._core.lock:
            address = self._core.host.allocate(size)
        if address is None:
            return 0, RC.MEMORY_ALLOCATION
        return address, RC.OK

    @parsed("acl.rt.free_host")
    def free_host(self, host_ptr: int, /) -> int:
        check_ints("free_host", host_ptr)
        if host_ptr == 0:
            return RC.INVALID_PARAM
        with self._core.lock:
            return RC.OK if self._core.host.release(host_ptr) else RC.MEMORY_FREE

    @parsed("acl.rt.memcpy")
    def memcpy(self, dst: int, dst_max: int, src: int, count: int, kind: int, /) -> int:
        check_ints("memcpy", dst, dst_max, src, count, kind)
        if count == 0:
            return RC.OK
        ret = _copy_arguments(dst, dst_max, src, count, kind, synchronous=True)
        if ret:
            return ret
        plan, ret = self._plan_copy(dst, src, count)
        if plan is None:
            return ret
        target, source, seconds, _ = plan
        target[:] = source
        if seconds > 0:
            time.sleep(seconds)
        return RC.OK

    @parsed("acl.rt.memcpy_async")
    def memcpy_async(
        self, dst: int, dst_max: int, src: int, count: int, kind: int, stream: int, /
    ) -> int:
        check_ints("memcpy_async", dst, dst_max, src, count, kind, stream)
        if count == 0:
            return RC.OK
        ret = _copy_arguments(dst, dst_max, src, count, kind, synchronous=False)
        if ret:
            return ret
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        plan, ret = self._plan_copy(dst, src, count)
        if plan is None:
            return ret
        target, source, seconds, pinned = plan
        pending = [(target, source)]  # emptied when it runs: a finished task keeps no memory

        def copy(_: Task) -> None:
            into, out_of = pending.pop()
            into[:] = out_of

        return self._queue(
            found, Task(found, "memcpy", duration=seconds, action=copy), wait=not pinned
        )

    @parsed("acl.rt.memset")
    def memset(self, dev_ptr: int, max_count: int, value: int, count: int, /) -> int:
        check_ints("memset", dev_ptr, max_count, value, count)
        if count == 0:
            return RC.OK
        if dev_ptr == 0:
            return RC.INVALID_PARAM
        if self._core.context is None:
            return RC.CONTEXT_NULL
        if count > max_count:  # the driver refuses it; the simulator's code for that
            return RC.INVALID_PARAM
        plan, ret = self._plan_fill(dev_ptr, count)
        if plan is None:
            return ret
        target, seconds, _ = plan
        _fill(target, value)
        if seconds > 0:
            time.sleep(seconds)
        return RC.OK

    @parsed("acl.rt.memset_async")
    def memset_async(
        self, dev_ptr: int, max_count: int, value: int, count: int, stream: int, /
    ) -> int:
        check_ints("memset_async", dev_ptr, max_count, value, count, stream)
        if count == 0:
            return RC.OK
        if dev_ptr == 0:
            return RC.INVALID_PARAM
        if count > max_count:  # ApiErrorDecorator::MemsetAsync, before the stream
            return RC.PARAM_INVALID
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        plan, ret = self._plan_fill(dev_ptr, count)
        if plan is None:
            return ret
        target, seconds, pinned = plan
        pending = [target]  # emptied when it runs: a finished task keeps no memory alive

        def write(_: Task) -> None:
            _fill(pending.pop(), value)

        # As a copy from pageable memory: done before the call returns (the caller may
        # free or reuse the memory at once).
        task = Task(found, "memset", duration=seconds, action=write)
        return self._queue(found, task, wait=not pinned)

    # -- helpers ---------------------------------------------------------------------

    def _plan_copy(
        self, dst: int, src: int, count: int
    ) -> tuple[tuple[memoryview, memoryview, float, bool] | None, int]:
        """Resolve a copy of *count* > 0 bytes whose arguments passed ``_copy_arguments``:
        (target, source, seconds, pinned) or a code."""
        if self._core.context is None:
            return None, RC.CONTEXT_NULL
        target, dst_device, dst_pinned = self._core.resolve(dst, count, write=True)
        source, src_device, src_pinned = self._core.resolve(src, count, write=False)
        if target is None or source is None:
            return None, RC.PARAM_INVALID
        profile = self._core.profile
        if dst_device is not None and src_device is not None:
            if dst_device != src_device and not self._core.peer_linked(dst_device, src_device):
                return None, RC.PARAM_INVALID
            gbps = profile.d2d_gbps
        elif dst_device is not None:
            gbps = profile.h2d_gbps
        elif src_device is not None:
            gbps = profile.d2h_gbps
        else:
            gbps = 0.0
        seconds = count / (gbps * 1e9) if gbps else 0.0
        return (target, source, seconds, dst_pinned and src_pinned), RC.OK

    def _plan_fill(
        self, address: int, count: int
    ) -> tuple[tuple[memoryview, float, bool] | None, int]:
        """Resolve a fill of *count* > 0 bytes at a non-null *address* (the arguments are
        checked): (target view, seconds, pinned) or a code.

        A fill of device memory lasts ``count / d2d_gbps`` (the device writes its own
        memory), one of host memory ``count / h2d_gbps`` (written across the bus).
        """
        if self._core.context is None:
            return None, RC.CONTEXT_NULL
        target, device, pinned = self._core.resolve(address, count, write=True)
        if target is None:
            return None, RC.PARAM_INVALID
        profile = self._core.profile
        gbps = profile.d2d_gbps if device is not None else profile.h2d_gbps
        return (target, count / (gbps * 1e9), pinned), RC.OK


def _copy_arguments(
    dst: int, dst_max: int, src: int, count: int, kind: int, *, synchronous: bool
) -> int:
    """The checks of a copy of *count* > 0 bytes that come before the context and stream.

    ``aclrtMemcpy(Async)Impl`` refuses null pointers and an unknown kind (100000);
    the runtime's ``ApiErrorDecorator::MemCopySync`` / ``MemcpyAsync`` then refuse
    ``count > destMax`` (and, for the synchronous copy, ``destMax == 0``) with
    RT_ERROR_INVALID_VALUE (107000), before ``ApiImpl`` looks at the context.
    """
    if dst == 0 or src == 0 or not 0 <= kind <= _MEMCPY_KIND_MAX:
        return RC.INVALID_PARAM
    if (synchronous and dst_max == 0) or count > dst_max:
        return RC.PARAM_INVALID
    return RC.OK


def _fill(target: memoryview, value: int) -> None:
    """Set every byte of *target* to ``value & 0xFF``, in place.

    ``ctypes.memset`` writes the bytes where they are (no copy of the fill is built) and
    releases the GIL meanwhile, so a large fill on a scheduler thread holds up no Python
    thread.
    """
    count = target.nbytes
    if count:
        ctypes.memset((ctypes.c_char * count).from_buffer(target), value & 0xFF, count)


def allocate_device_memory(core: Core, size: int) -> tuple[int, int]:
    """Allocate *size* bytes on the current context's device: ``(dev_ptr, ret)``; a size
    of 0 is 100000 before the context is looked at (``aclMallocMemInner``)."""
    if size <= 0:
        return 0, RC.INVALID_PARAM
    ctx = core.context
    if ctx is None:
        return 0, RC.CONTEXT_NULL
    with core.lock:
        address = ctx.device.memory.allocate(size)
    if address is None:
        return 0, RC.MEMORY_ALLOCATION
    return address, RC.OK


def free_device_memory(core: Core, dev_ptr: int) -> int:
    """Free the device block starting at *dev_ptr*, on whichever device holds it."""
    if dev_ptr == 0:
        return RC.INVALID_PARAM
    with core.lock:
        for device in core.devices:
            if device.memory.contains(dev_ptr):
                return RC.OK if device.memory.release(dev_ptr) else RC.MEMORY_FREE
    return RC.MEMORY_FREE
