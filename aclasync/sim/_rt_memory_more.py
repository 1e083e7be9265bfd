"""``acl.rt`` memory calls beyond the basics: allocation variants, 2-D copies, cache
maintenance, pointer attributes and registered host memory."""

from __future__ import annotations

from typing import Any

from ._args import parsed
from ._calls import CallGroup
from ._core import wait_for_tasks
from ._host import page_size
from ._objects import Task
from ._rc import RC

__all__ = ["MoreMemoryCalls"]

# aclrtMemcpyKind values CheckMemcpy2dParam accepts.
_H2H, _H2D, _D2H, _D2D, _DEFAULT = 0, 1, 2, 3, 4
_KINDS_2D = (_H2D, _D2H, _D2D, _DEFAULT)
# Where a pointer lies, as the runtime's GetLocationType reports it.
_HOST, _DEVICE, _UNREGISTERED = "host", "device", "unregistered"
# ApiErrorDecorator::MemcpyKindAutoCorrect: (src, dst) -> (forced kind or None, kinds
# allowed as given, the kind DEFAULT becomes).
_KIND_RULES: dict[tuple[str, str], tuple[int | None, tuple[int, ...], int]] = {
    (_HOST, _DEVICE): (_H2D, (), _H2D),
    (_DEVICE, _HOST): (_D2H, (), _D2H),
    (_HOST, _HOST): (_H2H, (), _H2H),
    (_DEVICE, _DEVICE): (_D2D, (), _D2D),
    (_UNREGISTERED, _DEVICE): (None, (_H2D, _D2D), _H2D),
    (_DEVICE, _UNREGISTERED): (None, (_D2H, _D2D), _D2H),
    (_HOST, _UNREGISTERED): (None, (_H2H, _H2D), _H2H),
    (_UNREGISTERED, _HOST): (None, (_H2H, _D2H), _H2H),
    (_UNREGISTERED, _UNREGISTERED): (None, (_H2H, _H2D, _D2H, _D2D), _H2H),
}
_CMO_TYPES = range(4)  # PREFETCH, WRITEBACK, INVALID, FLUSH
_REGISTER_TYPES = (0x0, 0x4, 0x8)  # MAPPED, IOMEMORY, READONLY
_LOCATION_HOST, _LOCATION_DEVICE, _LOCATION_UNREGISTERED = 0, 1, 2
_HUGE_PAGE = 2 << 20
_REGISTERED = 507910  # ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED
_NOT_REGISTERED = 507911  # ACL_ERROR_HOST_MEMORY_NOT_REGISTERED


class MoreMemoryCalls(CallGroup):
    """Allocation variants, 2-D copies, cache operations, attributes, host registration."""

    # -- allocation variants ------------------------------------------------------------

    def _malloc(self, size: int, *, pad: bool = True) -> tuple[int, int]:
        if size <= 0:  # before the context, as allocate_device_memory
            return 0, RC.INVALID_PARAM
        ctx = self._core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        with self._core.lock:
            address = ctx.device.memory.allocate(size, pad=pad)
        return (0, RC.MEMORY_ALLOCATION) if address is None else (address, RC.OK)

    @parsed("acl.rt.malloc_cached")
    def malloc_cached(self, size: int, policy: int, /) -> tuple[int, int]:
        """Device memory with a host-side cache: the same as ``malloc`` here."""
        return self._malloc(size)

    @parsed("acl.rt.malloc_align32")
    def malloc_align32(self, size: int, policy: int, /) -> tuple[int, int]:
        """Device memory rounded up to 32 bytes, without ``malloc``'s extra 32."""
        return self._malloc(size, pad=False)

    @parsed("acl.rt.malloc_with_cfg")
    def malloc_with_cfg(self, size: int, policy: int, cfg: dict[str, Any], /) -> tuple[int, int]:
        """``malloc`` with a configuration dict (its attributes are accepted, not modelled)."""
        _check_config(cfg)
        return self._malloc(size)

    @parsed("acl.rt.malloc_for_task_scheduler")
    def malloc_for_task_scheduler(
        self, size: int, policy: int, cfg: dict[str, Any], /
    ) -> tuple[int, int]:
        _check_config(cfg)
        return self._malloc(size)

    @parsed("acl.rt.malloc_host_with_cfg")
    def malloc_host_with_cfg(self, size: int, cfg: dict[str, Any], /) -> tuple[int, int]:
        """``malloc_host`` with a configuration dict (accepted, not modelled)."""
        _check_config(cfg)
        if size <= 0:
            return 0, RC.INVALID_PARAM
        with self._core.lock:
            address = self._core.host.allocate(size)
        return (0, RC.MEMORY_ALLOCATION) if address is None else (address, RC.OK)

    # -- cache maintenance ------------------------------------------------------------

    def _device_range(self, address: int, size: int) -> int:
        if address == 0:
            return RC.INVALID_PARAM
        view, device_id, _ = self._core.resolve(address, size, write=False)
        return RC.OK if view is not None and device_id is not None else RC.PARAM_INVALID

    @parsed("acl.rt.mem_flush")
    def mem_flush(self, dev_ptr: int, size: int, /) -> int:
        """Write back the cache of a ``malloc_cached`` range (nothing to do; range checked).

        A null pointer or a zero size is 100000 (``aclrtMemFlushImpl``), before the
        context is looked at."""
        if dev_ptr == 0 or size <= 0:
            return RC.INVALID_PARAM
        if self._core.context is None:
            return RC.CONTEXT_NULL
        return self._device_range(dev_ptr, size)

    @parsed("acl.rt.mem_invalidate")
    def mem_invalidate(self, dev_ptr: int, size: int, /) -> int:
        """As ``mem_flush`` (``aclrtMemInvalidateImpl``'s checks are the same)."""
        if dev_ptr == 0 or size <= 0:
            return RC.INVALID_PARAM
        if self._core.context is None:
            return RC.CONTEXT_NULL
        return self._device_range(dev_ptr, size)

    @parsed("acl.rt.cmo_async")
    def cmo_async(self, src: int, size: int, cmo_type: int, stream: int, /) -> int:
        """Queue a cache operation on device memory (a no-op task, in stream order).

        A null *src* or a zero *size* gives 100000 (``aclrtCmoAsyncImpl``), a type other
        than PREFETCH, WRITEBACK, INVALID, FLUSH 207000 (``rtCmoAsync``), both before the
        stream is looked at.
        """
        if src == 0 or size == 0:
            return RC.INVALID_PARAM
        if cmo_type not in _CMO_TYPES:
            return RC.FEATURE_NOT_SUPPORT
        found, ret = self._own_stream(stream)
        if found is None:
            return ret
        ret = self._device_range(src, size)
        if ret:
            return ret
        return self._submit(found, Task(found, "cmo"))

    # -- copies -----------------------------------------------------------------------

    @parsed("acl.rt.memcpy_async_with_condition")
    def memcpy_async_with_condition(
        self, dst: int, dst_max: int, src: int, count: int, kind: int, stream: int, /
    ) -> int:
        """``memcpy_async`` (the runtime's extra conditions do not arise in the simulator)."""
        return self.memcpy_async(dst, dst_max, src, count, kind, stream)  # type: ignore[attr-defined,no-any-return]

    def _location(self, address: int) -> str:
        """Where *address* lies: device memory, ``malloc_host`` memory, or neither."""
        core = self._core
        if any(device.memory.contains(address) for device in core.devices):
            return _DEVICE
        return _HOST if core.host.find(address) is not None else _UNREGISTERED

    def _kind_2d(self, dst: int, src: int, kind: int, *, synchronous: bool) -> int:
        """The runtime's kind checks of a 2-D copy, from the pointers' locations.

        ``ApiErrorDecorator::MemCopy2DSync`` refuses D2D outright (207000) and, once
        ``MemcpyKindAutoCorrect`` has fitted the kind to where the pointers lie, anything
        but H2D or D2H (107000); ``MemCopy2DAsync`` allows H2D, D2H and D2D.
        """
        if synchronous and kind == _D2D:
            return RC.FEATURE_NOT_SUPPORT
        forced, allowed, default = _KIND_RULES[(self._location(src), self._location(dst))]
        if forced is not None:
            kind = forced
        elif kind == _DEFAULT:
            kind = default
        elif kind not in allowed:
            return RC.PARAM_INVALID
        accepted = (_H2D, _D2H) if synchronous else (_H2D, _D2H, _D2D)
        return RC.OK if kind in accepted else RC.PARAM_INVALID

    def _plan_2d(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int
    ) -> tuple[list[tuple[memoryview, memoryview]] | None, int, bool]:
        """The row pairs of a 2-D copy, or None and a code; and whether both sides are
        pinned (device or ``malloc_host`` memory)."""
        dst_span = (height - 1) * dpitch + width
        src_span = (height - 1) * spitch + width
        target, dst_dev, dst_pinned = self._core.resolve(dst, dst_span, write=True)
        source, src_dev, src_pinned = self._core.resolve(src, src_span, write=False)
        if target is None or source is None:
            return None, RC.PARAM_INVALID, False
        cross = dst_dev is not None and src_dev is not None and dst_dev != src_dev
        if cross and not self._core.peer_linked(dst_dev, src_dev):  # type: ignore[arg-type]
            return None, RC.PARAM_INVALID, False
        rows = [
            (target[r * dpitch : r * dpitch + width], source[r * spitch : r * spitch + width])
            for r in range(height)
        ]
        return rows, RC.OK, dst_pinned and src_pinned

    @parsed("acl.rt.memcpy2d")
    def memcpy2d(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int, /
    ) -> int:
        """Copy *height* rows of *width* bytes between pitched buffers; blocks until done.

        A zero *width* or *height* succeeds at once; a null pointer, *width* above either
        pitch or a kind other than H2D, D2H, D2D, DEFAULT gives 100000 (the checks of
        ``aclrtMemcpy2d``); D2D gives 207000 and a kind that, fitted to where the
        pointers lie, is not H2D or D2H 107000 (the runtime's); then a range outside
        memory the runtime or the process has gives 107000.
        """
        ret = _arguments_2d(dst, dpitch, src, spitch, width, height, kind)
        if ret is not None:
            return ret
        ret = self._kind_2d(dst, src, kind, synchronous=True)
        if ret:
            return ret
        if self._core.context is None:
            return RC.CONTEXT_NULL
        rows, ret, _ = self._plan_2d(dst, dpitch, src, spitch, width, height)
        if rows is None:
            return ret
        for target, source in rows:
            target[:] = source
        return RC.OK

    @parsed("acl.rt.memcpy2d_async")
    def memcpy2d_async(
        self,
        dst: int,
        dpitch: int,
        src: int,
        spitch: int,
        width: int,
        height: int,
        kind: int,
        stream: int,
        /,
    ) -> int:
        """Queue a 2-D copy on *stream*; the rows are copied when the task runs (with a
        side in pageable host memory, before the call returns, as CANN documents).

        The arguments are checked as ``memcpy2d``'s, before the stream; the kind, fitted
        to the pointers, may also be D2D.
        """
        ret = _arguments_2d(dst, dpitch, src, spitch, width, height, kind)
        if ret is not None:
            return ret
        ctx, found, ret = self._resolve_stream(stream)
        if found is None:
            return ret
        ret = self._kind_2d(dst, src, kind, synchronous=False)
        if ret:
            return ret
        if found.context is not ctx:
            return RC.STREAM_CONTEXT
        rows, ret, pinned = self._plan_2d(dst, dpitch, src, spitch, width, height)
        if rows is None:
            return ret
        pending = [rows]  # emptied when it runs: a finished task keeps no memory alive

        def copy(_: Task) -> None:
            for target, source in pending.pop():
                target[:] = source

        # With pageable memory, done before the call returns, as aclrtMemcpy2dAsync says.
        return self._queue(found, Task(found, "memcpy2d", action=copy), wait=not pinned)

    # -- attributes -------------------------------------------------------------------

    @parsed("acl.rt.pointer_get_attributes")
    def pointer_get_attributes(self, ptr: int, /) -> tuple[dict[str, Any], int]:
        """Return ``({"location": {"id", "type"}, "page_size", "rsv"}, ret)`` for *ptr*.

        Device memory: type 1 (DEVICE) and the device id; ``malloc_host`` memory: type 0
        (HOST); any other address: type 2 (UNREGISTERED). ``0`` gives 100000.
        """
        info: dict[str, Any] = {
            "location": {"id": 0, "type": _LOCATION_UNREGISTERED},
            "page_size": page_size(),
            "rsv": [0, 0, 0, 0],
        }
        if ptr == 0:
            return info, RC.INVALID_PARAM
        core = self._core
        for device in core.devices:
            if device.memory.contains(ptr):
                region = device.memory.find(ptr)
                if region is None:
                    return info, RC.PARAM_INVALID
                info["location"] = {"id": device.id, "type": _LOCATION_DEVICE}
                if region.size >= _HUGE_PAGE:
                    info["page_size"] = _HUGE_PAGE
                return info, RC.OK
        if core.host.find(ptr) is not None:
            info["location"] = {"id": 0, "type": _LOCATION_HOST}
        return info, RC.OK

    # -- registered host memory -------------------------------------------------------

    def _register(self, ptr: int, size: int, writable: bool) -> tuple[int, int]:
        core = self._core
        ctx = core.context
        if ctx is None:
            return 0, RC.CONTEXT_NULL
        if ptr == 0 or size == 0:
            return 0, RC.INVALID_PARAM
        view, device_id, _ = core.resolve(ptr, size, write=writable)
        if view is None or device_id is not None:
            return 0, RC.PARAM_INVALID
        with core.lock:
            if ptr in core.host_registrations:
                return 0, _REGISTERED
            address = ctx.device.memory.map_host(view)
            core.host_registrations[ptr] = (ctx.device.id, address)
        return address, RC.OK

    @parsed("acl.rt.host_register")
    def host_register(self, ptr: int, size: int, register_type: int, /) -> tuple[int, int]:
        """Map ``[ptr, ptr + size)`` of host memory into the current device.

        Returns ``(dev_ptr, ret)``: device copies through *dev_ptr* read and write the
        host bytes. The range must be mapped by the process (107000); registering the
        same address twice gives 507910.
        """
        if register_type not in _REGISTER_TYPES:
            return 0, RC.PARAM_INVALID
        return self._register(ptr, size, writable=register_type != 0x8)

    @parsed("acl.rt.host_register_v2")
    def host_register_v2(self, ptr: int, size: int, flag: int, /) -> int:
        """``host_register`` without the device pointer (``host_get_device_pointer`` has it)."""
        return self._register(ptr, size, writable=True)[1]

    @parsed("acl.rt.host_get_device_pointer")
    def host_get_device_pointer(self, ptr: int, flag: int, /) -> tuple[int, int]:
        """Return ``(dev_ptr, ret)`` of registered host memory; 507911 if not registered."""
        entry = self._core.host_registrations.get(ptr)
        return (entry[1], RC.OK) if entry is not None else (0, _NOT_REGISTERED)

    @parsed("acl.rt.host_unregister")
    def host_unregister(self, ptr: int, /) -> int:
        """Undo ``host_register`` after waiting for queued work; 507911 if not registered."""
        core = self._core
        if ptr == 0:
            return RC.INVALID_PARAM
        with core.lock:
            entry = core.host_registrations.get(ptr)
            if entry is None:
                return _NOT_REGISTERED
            device = core.devices[entry[0]]
            tails = device.pending_tails()
        wait_for_tasks(core, tails, None)
        with core.lock:
            if core.host_registrations.pop(ptr, None) is not None and device.active:
                device.memory.unmap_host(entry[1])
        return RC.OK


#: The runtime's bounds of a 2-D copy (``RT_MAX_MEMCPY2D_HEIGHT`` / ``_WIDTH``): 107000
#: beyond them.
_MAX_HEIGHT_2D = 5 * 1024 * 1024
_MAX_WIDTH_2D = 5_000_000


def _arguments_2d(
    dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int
) -> int | None:
    """``aclrtMemcpy2d(Async)Impl``'s checks, then the runtime's bounds
    (``MemCopy2DCheckParam``, 107000): 0 for a zero size (nothing to copy), a code for
    bad arguments, None to go on."""
    if width == 0 or height == 0:  # IsZeroSizeMemcpy2d, before everything else
        return RC.OK
    if dst == 0 or src == 0 or width > dpitch or width > spitch or kind not in _KINDS_2D:
        return RC.INVALID_PARAM
    if height > _MAX_HEIGHT_2D or width > _MAX_WIDTH_2D:
        return RC.PARAM_INVALID
    return None


def _check_config(cfg: object) -> None:
    """Raise the wrappers' TypeError for a malloc config they cannot read.

    It must be a dict, and a non-empty one must have an ``"attrs"`` entry; an empty
    dict stands for no config.
    """
    if not isinstance(cfg, dict):
        raise TypeError("pyCfg is not dict!")
    if cfg and "attrs" not in cfg:
        raise TypeError("the aclrtMallocAttrValue argument is not dict")
