"""The acl.rt families beyond the basics: each gets a success and a documented error code."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

from aclasync._pyacl.codes import ErrorCode
from aclasync._pyacl.constants import MemcpyKind, StreamStatus
from aclasync.sim import Kernel

INVALID = ErrorCode.ACL_ERROR_INVALID_PARAM
RT_INVALID = ErrorCode.ACL_ERROR_RT_PARAM_INVALID
BAD_DEVICE = ErrorCode.ACL_ERROR_RT_INVALID_DEVICEID
NO_CONTEXT = ErrorCode.ACL_ERROR_RT_CONTEXT_NULL
UNSUPPORTED = ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT
H2D, D2H, D2D = MemcpyKind.HOST_TO_DEVICE, MemcpyKind.DEVICE_TO_HOST, MemcpyKind.DEVICE_TO_DEVICE


def gate_kernel(started=None):
    """A kernel that runs until the returned event is set (never raced against time)."""
    release = threading.Event()

    def body():
        if started is not None:
            started.set()
        release.wait(10)

    return Kernel(fn=body), release


# -- device information -----------------------------------------------------------------


def test_device_info_attributes(dev0, check):
    assert check(dev0.rt.get_device_info(0, 101)) == 20  # AI cores of the 910B3 profile
    assert check(dev0.rt.get_device_info(1, 201)) == 40
    check(dev0.rt.get_device_info(0, 9999), RT_INVALID)
    check(dev0.rt.get_device_info(7, 101), BAD_DEVICE)


@pytest.mark.parametrize(
    ("memory", "seen"),
    [(64 << 30, 0), (3 << 30, -(1 << 30)), ((1 << 32) + 12345, 12345), (1 << 30, 1 << 30)],
)
def test_device_info_is_read_as_a_c_int(make_rt, check, memory, seen):
    """pyACL's WrapAclRtGetDeviceInfo builds ``Py_BuildValue("ii", value, ret)`` from an
    int64_t: the caller gets the value's low 32 bits, signed (and ret intact)."""
    rt = make_rt(memory_bytes=memory)
    assert check(rt.rt.get_device_info(0, 301)) == seen


def test_status_utilization_and_uuid(dev0, check):
    assert check(dev0.rt.query_device_status(0)) == 0
    check(dev0.rt.query_device_status(5), BAD_DEVICE)
    started = threading.Event()
    kernel, release = gate_kernel(started)
    check(dev0.sim.launch_kernel(kernel, 0))
    assert started.wait(10)
    try:
        info = check(dev0.rt.get_device_utilization_rate(0))
        assert info["cube_utilization"] == 100, "a kernel is running"
    finally:
        release.set()
    check(dev0.rt.synchronize_stream(0))
    assert check(dev0.rt.get_device_utilization_rate(0)) == {
        "cube_utilization": 0,
        "vector_utilization": 0,
        "aicpu_utilization": 0,
        "memory_utilization": -1,  # aclrtGetDeviceUtilizationRateImpl: not supported
        "utilization_extend": 0,
    }
    failed = {"cube_utilization": -1, "vector_utilization": -1, "aicpu_utilization": -1}
    unknown = check(dev0.rt.get_device_utilization_rate(7), what="failed queries: -1, ret 0")
    assert unknown == {**failed, "memory_utilization": -1, "utilization_extend": 0}
    first = check(dev0.rt.device_get_uuid(0))["bytes"]
    assert len(first) == 16
    assert first != check(dev0.rt.device_get_uuid(1))["bytes"]
    check(dev0.rt.device_get_uuid(-1), BAD_DEVICE)


def test_priority_range_capability_topology_and_ts(rt, check):
    check(rt.rt.device_get_stream_priority_range(), NO_CONTEXT)
    check(rt.rt.set_device(0))
    assert check(rt.rt.device_get_stream_priority_range()) == (7, 0)
    assert check(rt.rt.get_device_capability(0, 1)) == 0
    check(rt.rt.get_device_capability(0, 12345), RT_INVALID)
    assert check(rt.rt.get_devices_topo(0, 1)) == 0x01
    check(rt.rt.get_devices_topo(0, 9), BAD_DEVICE)
    check(rt.rt.set_ts_device(1))
    check(rt.rt.set_ts_device(2), INVALID)
    assert check(rt.rt.get_primary_ctx_state(0)) == (1, 0)
    assert check(rt.rt.get_primary_ctx_state(1)) == (0, 0)


def test_device_res_limits(dev0, check):
    assert check(dev0.rt.get_device_res_limit(0, 0)) == 20
    check(dev0.rt.set_device_res_limit(0, 0, 8))
    assert check(dev0.rt.get_device_res_limit(0, 0)) == 8
    check(dev0.rt.set_device_res_limit(0, 0, 21), RT_INVALID, "more cores than the chip has")
    check(dev0.rt.set_device_res_limit(0, 2, 1), RT_INVALID, "unknown kind")
    stream = check(dev0.rt.create_stream())
    assert check(dev0.rt.get_stream_res_limit(stream, 0)) == 8
    check(dev0.rt.set_stream_res_limit(stream, 0, 4))
    check(dev0.rt.set_stream_res_limit(stream, 0, 9), RT_INVALID, "above the device's")
    assert check(dev0.rt.get_res_in_current_thread(0)) == 8
    check(dev0.rt.use_stream_res_in_current_thread(stream))
    assert check(dev0.rt.get_res_in_current_thread(0)) == 4
    check(dev0.rt.unuse_stream_res_in_current_thread(stream))
    check(dev0.rt.unuse_stream_res_in_current_thread(stream), RT_INVALID)
    check(dev0.rt.reset_stream_res_limit(stream))
    check(dev0.rt.reset_device_res_limit(0))
    assert check(dev0.rt.get_stream_res_limit(stream, 0)) == 20


# -- peer access ------------------------------------------------------------------------


def test_cross_device_copies_need_peer_access(rt, check):
    check(rt.rt.set_device(1))
    on1 = check(rt.rt.malloc(64, 0))
    check(rt.rt.set_device(0))
    on0 = check(rt.rt.malloc(64, 0))
    data = bytes(range(64))
    check(rt.rt.memcpy(on0, 64, rt.util.bytes_to_ptr(data), 64, H2D))
    assert check(rt.rt.device_can_access_peer(0, 1)) == 1
    assert rt.rt.device_can_access_peer(0, 0) == (0, INVALID), "one device is no peer"
    assert rt.rt.device_can_access_peer(5, 5) == (0, INVALID), "checked before the ids"
    check(rt.rt.device_can_access_peer(0, 2), BAD_DEVICE)
    check(rt.rt.memcpy(on1, 64, on0, 64, D2D), RT_INVALID, "no peer access yet")
    assert check(rt.rt.device_peer_access_status(0, 1)) == 0
    check(rt.rt.device_enable_peer_access(1, 0))
    assert check(rt.rt.device_peer_access_status(0, 1)) == 1
    check(rt.rt.memcpy(on1, 64, on0, 64, D2D))
    back = bytes(64)
    check(rt.rt.memcpy(rt.util.bytes_to_ptr(back), 64, on1, 64, D2H))
    assert back == data
    check(rt.rt.device_enable_peer_access(0, 0), INVALID, "a device is not its own peer")
    check(rt.rt.device_disable_peer_access(0), INVALID, "a device is not its own peer")
    unsupported = ErrorCode.ACL_ERROR_FEATURE_UNSUPPORTED
    check(rt.rt.device_enable_peer_access(1, 1), unsupported, "flags are reserved")
    check(rt.rt.device_disable_peer_access(1))
    check(rt.rt.device_disable_peer_access(1), RT_INVALID, "not enabled any more")
    check(rt.rt.memcpy(on1, 64, on0, 64, D2D), RT_INVALID)


def test_peer_access_flags_are_checked_before_the_context(rt, check):
    """aclrtDeviceEnablePeerAccessImpl checks the reserved flags (200006) first."""
    unsupported = ErrorCode.ACL_ERROR_FEATURE_UNSUPPORTED
    check(rt.rt.device_enable_peer_access(1, 1), unsupported)
    check(rt.rt.device_enable_peer_access(1, 0), NO_CONTEXT)


# -- memory -----------------------------------------------------------------------------


def test_allocation_variants(dev0, check):
    cached = check(dev0.rt.malloc_cached(100, 0))
    check(dev0.rt.mem_flush(cached, 100))
    check(dev0.rt.mem_invalidate(cached, 100))
    check(dev0.rt.mem_flush(cached, 1 << 20), RT_INVALID, "past the allocation")
    check(dev0.rt.mem_flush(0, 4), INVALID)
    aligned = check(dev0.rt.malloc_align32(100, 0))
    free, _total = check(dev0.rt.get_mem_info(1))
    with_cfg = check(dev0.rt.malloc_with_cfg(64, 0, {}))
    assert check(dev0.rt.get_mem_info(1))[0] < free
    with pytest.raises(TypeError, match="pyCfg is not dict!"):
        dev0.rt.malloc_with_cfg(64, 0, [])
    host = check(dev0.rt.malloc_host_with_cfg(64, {}))
    check(dev0.rt.malloc_align32(0, 0), INVALID)
    for ptr in (cached, aligned, with_cfg):
        check(dev0.rt.free(ptr))
    check(dev0.rt.free_host(host))


@pytest.mark.parametrize(
    "call", ["malloc_with_cfg", "malloc_for_task_scheduler", "malloc_host_with_cfg"]
)
def test_a_malloc_config_without_attrs_is_refused(dev0, check, call):
    """A non-empty config must hold "attrs"; an empty one means no config."""
    allocate = {
        "malloc_with_cfg": lambda cfg: dev0.rt.malloc_with_cfg(64, 0, cfg),
        "malloc_for_task_scheduler": lambda cfg: dev0.rt.malloc_for_task_scheduler(64, 0, cfg),
        "malloc_host_with_cfg": lambda cfg: dev0.rt.malloc_host_with_cfg(64, cfg),
    }[call]
    free = dev0.rt.free_host if call == "malloc_host_with_cfg" else dev0.rt.free
    with pytest.raises(TypeError, match=r"^the aclrtMallocAttrValue argument is not dict$"):
        allocate({"numAttrs": 1})
    with pytest.raises(TypeError, match=r"^pyCfg is not dict!$"):
        allocate(None)
    check(free(check(allocate({}))))


def test_memcpy2d_copies_pitched_rows(dev0, check):
    width, height, spitch, dpitch = 4, 3, 8, 16
    source = np.arange(spitch * height, dtype=np.uint8)
    dev = check(dev0.rt.malloc(dpitch * height, 0))
    check(dev0.rt.memset(dev, dpitch * height, 0xFF, dpitch * height))
    check(dev0.rt.memcpy2d(dev, dpitch, source.ctypes.data, spitch, width, height, H2D))
    back = np.zeros(dpitch * height, dtype=np.uint8)
    stream = check(dev0.rt.create_stream())
    args = (back.ctypes.data, dpitch, dev, dpitch, dpitch, height, D2H, stream)
    check(dev0.rt.memcpy2d_async(*args))
    check(dev0.rt.synchronize_stream(stream))
    for row in range(height):
        got = back[row * dpitch : row * dpitch + width]
        np.testing.assert_array_equal(got, source[row * spitch : row * spitch + width])
        assert (back[row * dpitch + width : (row + 1) * dpitch] == 0xFF).all()
    check(dev0.rt.memcpy2d(dev, 2, source.ctypes.data, spitch, width, height, H2D), INVALID)
    check(dev0.rt.memcpy2d(dev, dpitch, source.ctypes.data, spitch, width, 99, H2D), RT_INVALID)


def test_memcpy2d_zero_sizes_succeed_first(rt, check):
    """rtMemcpy2d(Async) and CheckMemcpy2dParam return success for a zero width or
    height before anything else (no context, null pointers, a bad kind or stream)."""
    for width, height in ((0, 4), (8, 0)):
        check(rt.rt.memcpy2d(0, 16, 0, 16, width, height, 99), what=f"{width}x{height}")
        check(rt.rt.memcpy2d_async(0, 16, 0, 16, width, height, 99, 0xBAD), what="async")


def test_memcpy2d_kinds(dev0, check):
    """CheckMemcpy2dParam accepts H2D, D2H, D2D, DEFAULT (100000 otherwise); the runtime
    then refuses a synchronous D2D (207000) and fits the kind to where the pointers lie
    (MemcpyKindAutoCorrect): the synchronous copy needs H2D or D2H (107000), the
    asynchronous one H2D, D2H or D2D."""
    default = MemcpyKind.DEFAULT
    dev, other = check(dev0.rt.malloc(256, 0)), check(dev0.rt.malloc(256, 0))
    pinned, pinned2 = check(dev0.rt.malloc_host(256)), check(dev0.rt.malloc_host(256))
    pageable, pageable2 = np.zeros(256, np.uint8), np.zeros(256, np.uint8)
    page, page2 = pageable.ctypes.data, pageable2.ctypes.data
    stream = check(dev0.rt.create_stream())
    for kind in (0, 5, 6, 7, 8):
        check(dev0.rt.memcpy2d(dev, 16, page, 16, 8, 4, kind), INVALID, f"kind {kind}")
        check(dev0.rt.memcpy2d_async(dev, 16, page, 16, 8, 4, kind, 0xBAD), INVALID, "async")
    synchronous = [
        ("D2D", dev, other, D2D, UNSUPPORTED),
        ("D2D as DEFAULT", dev, other, default, RT_INVALID),
        ("D2D as H2D", dev, other, H2D, RT_INVALID),
        ("pinned H2H as DEFAULT", pinned, pinned2, default, RT_INVALID),
        ("pageable H2H as DEFAULT", page, page2, default, RT_INVALID),
        ("pageable to device as D2H", dev, page, D2H, RT_INVALID),
        ("pageable to device as DEFAULT", dev, page, default, 0),
        ("pinned to device as D2H (fitted to H2D)", dev, pinned, D2H, 0),
        ("device to pageable as DEFAULT", page, dev, default, 0),
        ("device to pinned", pinned, dev, D2H, 0),
    ]
    for what, dst, src, kind, expected in synchronous:
        check(dev0.rt.memcpy2d(dst, 16, src, 16, 8, 4, kind), expected, what)
    asynchronous = [
        ("D2D", dev, other, D2D, 0),
        ("D2D as DEFAULT", dev, other, default, 0),
        ("pinned H2H as DEFAULT", pinned, pinned2, default, RT_INVALID),
        ("pageable H2H as DEFAULT", page, page2, default, RT_INVALID),
        ("pageable to device as D2H", dev, page, D2H, RT_INVALID),
        ("pageable to device as DEFAULT", dev, page, default, 0),
    ]
    for what, dst, src, kind, expected in asynchronous:
        check(dev0.rt.memcpy2d_async(dst, 16, src, 16, 8, 4, kind, stream), expected, what)
    check(dev0.rt.memcpy2d_async(dev, 16, page, 16, 8, 4, D2D, 0xBAD), RT_INVALID, "stream")
    check(dev0.rt.synchronize_stream(stream))


def test_memcpy2d_checks_come_before_the_context(rt, check):
    """The runtime's 2-D checks run before ApiImpl::MemCopy2DSync looks at the context."""
    buffers = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
    dst, src = (buffer.ctypes.data for buffer in buffers)
    check(rt.rt.memcpy2d(dst, 16, src, 16, 8, 2, 0), INVALID, "host to host kind")
    check(rt.rt.memcpy2d(dst, 16, src, 16, 8, 2, D2D), UNSUPPORTED, "D2D")
    check(rt.rt.memcpy2d(dst, 16, src, 16, 8, 2, MemcpyKind.DEFAULT), RT_INVALID, "to H2H")
    check(rt.rt.memcpy2d(dst, 16, src, 16, 8, 2, H2D), NO_CONTEXT, "then the context")
    check(rt.rt.memcpy2d_async(dst, 16, src, 16, 8, 2, H2D, 0), NO_CONTEXT, "async")


def test_memcpy2d_async_from_pageable_memory_is_done_when_it_returns(dev0, check):
    # aclrtMemcpy2dAsync: with memory that is not page-locked the call returns only once
    # the copy is done. Queued behind held work it copied later, so reusing the buffer
    # changed what arrived, and freeing it crashed the interpreter.
    kernel, release = gate_kernel()
    stream = check(dev0.rt.create_stream())
    check(dev0.sim.launch_kernel(kernel, stream))
    dev = check(dev0.rt.malloc(64, 0))
    source = np.full(64, 1, np.uint8)
    done = threading.Event()

    context = check(dev0.rt.get_context())

    def copy():
        check(dev0.rt.set_context(context))
        check(dev0.rt.memcpy2d_async(dev, 16, source.ctypes.data, 16, 16, 4, H2D, stream))
        done.set()

    copier = threading.Thread(target=copy)
    copier.start()
    assert not done.wait(0.2)  # it waits for the held work before it
    release.set()
    copier.join(10)
    assert done.is_set()
    source[:] = 2  # the caller may reuse its buffer once the call returned
    check(dev0.rt.synchronize_stream(stream))
    back = np.zeros(64, np.uint8)
    check(dev0.rt.memcpy(back.ctypes.data, 64, dev, 64, D2H))
    assert (back == 1).all()


def test_memset_async_on_pageable_memory_is_done_when_it_returns(dev0, check):
    kernel, release = gate_kernel()
    stream = check(dev0.rt.create_stream())
    check(dev0.sim.launch_kernel(kernel, stream))
    target = np.zeros(64, np.uint8)
    done = threading.Event()

    context = check(dev0.rt.get_context())

    def fill():
        check(dev0.rt.set_context(context))
        check(dev0.rt.memset_async(target.ctypes.data, 64, 7, 64, stream))
        done.set()

    filler = threading.Thread(target=fill)
    filler.start()
    assert not done.wait(0.2)
    release.set()
    filler.join(10)
    assert (target == 7).all()  # done when the call returned, not at a later sync


def test_memcpy2d_size_limits_and_flush_sizes(dev0, check):
    """The runtime's bounds of a 2-D copy (RT_MAX_MEMCPY2D_HEIGHT 5 Mi rows, _WIDTH
    5,000,000 bytes) are 107000; aclrtMemFlush/Invalidate refuse a zero size (100000)."""
    dev = check(dev0.rt.malloc(64, 0))
    page = np.zeros(64, np.uint8).ctypes.data
    check(dev0.rt.memcpy2d(dev, 16, page, 16, 8, 5 * 1024 * 1024 + 1, H2D), RT_INVALID)
    check(dev0.rt.memcpy2d(dev, 6_000_000, page, 6_000_000, 5_000_001, 1, H2D), RT_INVALID)
    check(dev0.rt.memcpy2d_async(dev, 16, page, 16, 8, 5 * 1024 * 1024 + 1, H2D, 0), RT_INVALID)
    for call in (dev0.rt.mem_flush, dev0.rt.mem_invalidate):
        check(call(dev, 0), INVALID, call.__name__)
        check(call(0, 64), INVALID, call.__name__)
        check(call(dev, 64), what=call.__name__)


def test_memset_async_and_cmo(dev0, check):
    stream = check(dev0.rt.create_stream())
    dev = check(dev0.rt.malloc(32, 0))
    check(dev0.rt.memset_async(dev, 32, 0xAB, 32, stream))
    check(dev0.rt.cmo_async(dev, 32, 0, stream))
    check(dev0.rt.cmo_async(dev, 32, 9, stream), UNSUPPORTED, "unknown operation")
    check(dev0.rt.synchronize_stream(stream))
    back = bytes(32)
    check(dev0.rt.memcpy(dev0.util.bytes_to_ptr(back), 32, dev, 32, D2H))
    assert back == b"\xab" * 32


def test_cmo_async_checks_its_arguments_before_the_stream(dev0, check):
    """aclrtCmoAsyncImpl: null source or size 0 give 100000; rtCmoAsync: a type other
    than PREFETCH, WRITEBACK, INVALID, FLUSH 207000; both before the stream."""
    dev = check(dev0.rt.malloc(64, 0))
    unknown = 0xDEAD
    check(dev0.rt.cmo_async(0, 64, 0, unknown), INVALID, "null source")
    check(dev0.rt.cmo_async(dev, 0, 0, unknown), INVALID, "size 0")
    check(dev0.rt.cmo_async(dev, 64, 4, unknown), UNSUPPORTED, "type 4")
    check(dev0.rt.cmo_async(dev, 64, -1, unknown), UNSUPPORTED, "type -1")
    check(dev0.rt.cmo_async(dev, 64, 3, unknown), RT_INVALID, "then the stream")
    for cmo_type in range(4):
        check(dev0.rt.cmo_async(dev, 64, cmo_type, 0), what=f"type {cmo_type}")
    check(dev0.rt.synchronize_stream(0))


def test_pointer_attributes(dev0, check):
    dev = check(dev0.rt.malloc(64, 0))
    host = check(dev0.rt.malloc_host(64))
    array = np.zeros(8)
    assert check(dev0.rt.pointer_get_attributes(dev))["location"] == {"id": 0, "type": 1}
    assert check(dev0.rt.pointer_get_attributes(host))["location"]["type"] == 0
    assert check(dev0.rt.pointer_get_attributes(array.ctypes.data))["location"]["type"] == 2
    check(dev0.rt.pointer_get_attributes(0), INVALID)


def test_host_register_maps_host_bytes_into_the_device(dev0, check):
    host = np.zeros(64, dtype=np.uint8)
    dev_view = check(dev0.rt.host_register(host.ctypes.data, 64, 0))
    assert dev0.sim.live_objects()["host_registrations"] == 1
    dev = check(dev0.rt.malloc(64, 0))
    check(dev0.rt.memset(dev, 64, 9, 64))
    check(dev0.rt.memcpy(dev_view, 64, dev, 64, D2D))
    assert (host == 9).all(), "the device wrote straight into the registered host bytes"
    assert check(dev0.rt.host_get_device_pointer(host.ctypes.data, 0)) == dev_view
    check(dev0.rt.host_register(host.ctypes.data, 64, 0), 507910, "registered twice")
    check(dev0.rt.host_register(host.ctypes.data, 64, 3), RT_INVALID, "unknown type")
    check(dev0.rt.host_unregister(host.ctypes.data))
    check(dev0.rt.host_unregister(host.ctypes.data), 507911)
    check(dev0.rt.host_get_device_pointer(host.ctypes.data, 0), 507911)
    check(dev0.rt.host_register_v2(host.ctypes.data, 64, 0))
    check(dev0.rt.host_unregister(host.ctypes.data))
    assert dev0.sim.live_objects()["host_registrations"] == 0


# -- streams and events ---------------------------------------------------------------


def test_stream_ids_attributes_and_task_ids(dev0, check):
    stream = check(dev0.rt.create_stream())
    assert check(dev0.rt.stream_get_id(0)) == 0
    assert check(dev0.rt.stream_get_id(stream)) > 0
    check(dev0.rt.stream_get_id(0x1234), RT_INVALID)
    check(dev0.rt.set_stream_attribute(stream, 1, {"failureMode": 1}))
    assert check(dev0.rt.get_stream_attribute(stream, 1)) == {"failureMode": 1}
    check(dev0.rt.set_stream_attribute(stream, 3, {"userCustomTag": 42}))
    assert check(dev0.rt.get_stream_attribute(stream, 3)) == {"userCustomTag": 42}
    check(dev0.rt.set_stream_attribute(stream, 99, {}), RT_INVALID)
    check(dev0.sim.launch_kernel(Kernel(), stream))
    first = check(dev0.rt.get_thread_last_task_id())
    check(dev0.sim.launch_kernel(Kernel(), stream))
    assert check(dev0.rt.get_thread_last_task_id()) > first


def test_stream_abort_drops_queued_work(dev0, check):
    stream = check(dev0.rt.create_stream())
    kernel, release = gate_kernel()
    ran = []
    check(dev0.sim.launch_kernel(kernel, stream))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: ran.append(1)), stream))
    check(dev0.rt.stream_abort(stream))
    release.set()
    check(dev0.rt.synchronize_stream(stream), ErrorCode.ACL_ERROR_RT_STREAM_ABORT)
    assert ran == [], "the queued kernel was dropped"
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: ran.append(2)), stream))
    check(dev0.rt.synchronize_stream(stream), what="the stream stays usable")
    assert ran == [2]
    check(dev0.rt.stream_abort(0xBAD0), RT_INVALID)


def test_device_task_abort(dev0, check):
    stream = check(dev0.rt.create_stream())
    kernel, release = gate_kernel()
    check(dev0.sim.launch_kernel(kernel, stream))
    check(dev0.sim.launch_kernel(Kernel(), stream))
    check(dev0.rt.device_task_abort(0, 0))
    release.set()
    check(dev0.rt.synchronize_stream(stream), ErrorCode.ACL_ERROR_RT_DEVICE_TASK_ABORT)
    check(dev0.rt.device_task_abort(9, 0), BAD_DEVICE)


def test_event_wait_status_timestamp_and_ids(dev0, check):
    producer = check(dev0.rt.create_stream())
    consumer = check(dev0.rt.create_stream())
    event = check(dev0.rt.create_event())
    kernel, release = gate_kernel()
    check(dev0.rt.event_get_timestamp(event), ErrorCode.ACL_ERROR_RT_INTERNAL_ERROR)
    check(dev0.sim.launch_kernel(kernel, producer))
    check(dev0.rt.record_event(event, producer))
    check(dev0.rt.stream_wait_event(consumer, event))
    assert check(dev0.rt.query_event_wait_status(event)) == 1
    check(dev0.rt.event_get_timestamp(event), ErrorCode.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID)
    release.set()
    check(dev0.rt.synchronize_stream(consumer))
    assert check(dev0.rt.query_event_wait_status(event)) == 0
    assert check(dev0.rt.event_get_timestamp(event)) > 0
    other = check(dev0.rt.create_event())
    assert check(dev0.rt.get_event_id(event)) != check(dev0.rt.get_event_id(other))
    ex = check(dev0.rt.create_event_ex_with_flag(0x1))
    check(dev0.rt.query_event_wait_status(ex), RT_INVALID)
    before = check(dev0.rt.get_event_avail_num())
    check(dev0.rt.destroy_event(other))
    assert check(dev0.rt.get_event_avail_num()) == before + 1


def test_stream_available_num_counts_down_to_207005(make_rt, check):
    rt = make_rt(stream_limit=6)
    check(rt.rt.get_stream_available_num(), NO_CONTEXT)
    check(rt.rt.set_device(0))
    assert check(rt.rt.get_stream_available_num()) == 4  # default + internal sync stream
    streams = []
    for left in (3, 2, 1, 0):
        streams.append(check(rt.rt.create_stream()))
        assert check(rt.rt.get_stream_available_num()) == left
    check(rt.rt.create_stream(), ErrorCode.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL)
    check(rt.rt.destroy_stream(streams.pop()))
    assert check(rt.rt.get_stream_available_num()) == 1


def test_default_stream_handle(dev0, check):
    handle = check(dev0.rt.ctx_get_current_default_stream())
    assert handle != 0
    check(dev0.sim.launch_kernel(Kernel(), handle))
    assert check(dev0.rt.stream_query(handle)) in (StreamStatus.COMPLETE, StreamStatus.NOT_READY)
    check(dev0.rt.synchronize_stream(handle))
    check(dev0.rt.destroy_stream(handle), RT_INVALID, "the default stream cannot be destroyed")


def test_default_stream_handle_needs_a_context(rt, check):
    check(rt.rt.ctx_get_current_default_stream(), NO_CONTEXT)


# -- errors, exception info, timeouts, parameters ---------------------------------------


def test_last_error_is_per_thread(dev0, check):
    assert dev0.rt.get_last_error(0) == 0
    check(dev0.rt.free(0), INVALID)
    assert dev0.rt.peek_at_last_error(0) == INVALID
    assert dev0.rt.peek_at_last_error(0) == INVALID, "peek keeps it"
    other = []
    worker = threading.Thread(target=lambda: other.append(dev0.rt.peek_at_last_error(0)))
    worker.start()
    worker.join(10)
    assert other == [0]
    assert dev0.rt.get_last_error(0) == INVALID
    assert dev0.rt.get_last_error(0) == 0, "get clears it"
    assert dev0.rt.get_last_error(1) == INVALID, "only the thread level exists"


def test_exception_info_callback_reports_failed_kernels(dev0, check):
    seen = []

    def on_exception(info):
        seen.append(
            (
                dev0.rt.get_error_code_from_exception_info(info),
                dev0.rt.get_device_id_from_exception_info(info),
                dev0.rt.get_stream_id_from_exception_info(info),
                dev0.rt.get_task_id_from_exception_info(info),
            )
        )

    check(dev0.rt.set_exception_info_callback(on_exception))
    stream = check(dev0.rt.create_stream())
    check(dev0.sim.launch_kernel(Kernel(error=507015), stream))
    task_id = check(dev0.rt.get_thread_last_task_id())
    check(dev0.rt.synchronize_stream(stream), 507015)
    assert seen == [(507015, 0, check(dev0.rt.stream_get_id(stream)), task_id)]
    assert dev0.rt.get_error_code_from_exception_info(12345) == 0xFFFF_FFFF
    check(dev0.rt.set_exception_info_callback(None))
    with pytest.raises(TypeError):
        dev0.rt.set_exception_info_callback(42)


def test_op_timeout_calls_need_a_context(rt, check):
    """ApiImpl::GetOpTimeOutInterval / SetOpExecuteTimeOutV2 check the context first."""
    assert rt.rt.get_op_timeout_interval() == (0, NO_CONTEXT)
    assert rt.rt.set_op_execute_timeout_v2(1000) == (0, NO_CONTEXT)
    assert rt.rt.set_op_execute_timeout_v2(2**64 - 1) == (0, NO_CONTEXT)
    check(rt.rt.set_device(0))
    assert check(rt.rt.get_op_timeout_interval()) == 1000


def test_op_execute_timeout_stops_long_kernels(dev0, check):
    assert check(dev0.rt.get_op_timeout_interval()) == 1000
    assert check(dev0.rt.set_op_execute_timeout_v2(1500)) == 2000, "rounded up to 1 ms"
    assert check(dev0.rt.get_op_execute_timeout()) == 2
    stream = check(dev0.rt.create_stream())
    check(dev0.sim.launch_kernel(Kernel(duration_us=10_000_000), stream))
    check(dev0.rt.synchronize_stream(stream), ErrorCode.ACL_ERROR_RT_AICORE_TIMEOUT)
    check(dev0.rt.set_op_execute_time_out(0))
    check(dev0.sim.launch_kernel(Kernel(duration_us=3000), stream))
    check(dev0.rt.synchronize_stream(stream), what="no limit any more")
    check(dev0.rt.set_op_execute_timeout_v2(2**64 - 1), RT_INVALID)
    check(dev0.rt.set_op_wait_timeout(30))


def test_sys_param_options(dev0, check):
    check(dev0.rt.get_sys_param_opt(0), ErrorCode.ACL_ERROR_RT_SYSPARAMOPT_NOT_SET)
    check(dev0.rt.set_sys_param_opt(0, 1))
    assert check(dev0.rt.get_sys_param_opt(0)) == 1
    check(dev0.rt.ctx_get_sys_param_opt(1), ErrorCode.ACL_ERROR_RT_SYSPARAMOPT_NOT_SET)
    check(dev0.rt.ctx_set_sys_param_opt(1, 1))
    assert check(dev0.rt.ctx_get_sys_param_opt(1)) == 1
    check(dev0.rt.set_sys_param_opt(77, 1), RT_INVALID)


# -- notifies ---------------------------------------------------------------------------


def test_notify_orders_two_streams(dev0, check):
    waiter = check(dev0.rt.create_stream())
    signaller = check(dev0.rt.create_stream())
    notify = check(dev0.rt.create_notify(0))
    assert dev0.sim.live_objects()["notifies"] == 1
    order = []
    check(dev0.rt.wait_and_reset_notify(notify, waiter, 0))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: order.append("after wait")), waiter))
    kernel, release = gate_kernel()
    check(dev0.sim.launch_kernel(kernel, signaller))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: order.append("before record")), signaller))
    check(dev0.rt.record_notify(notify, signaller))
    assert check(dev0.rt.stream_query(waiter)) == StreamStatus.NOT_READY
    release.set()
    check(dev0.rt.synchronize_stream(waiter))
    assert order == ["before record", "after wait"]
    assert check(dev0.rt.get_notify_id(notify)) == 0
    check(dev0.rt.notify_batch_reset([notify]))
    check(dev0.rt.destroy_notify(notify))
    check(dev0.rt.destroy_notify(notify), RT_INVALID)
    check(dev0.rt.destroy_notify(0), INVALID)
    check(dev0.rt.record_notify(notify, waiter), RT_INVALID)
    check(dev0.rt.create_notify(5), RT_INVALID)
    assert dev0.sim.live_objects()["notifies"] == 0


def test_one_record_releases_one_wait(dev0, check):
    # A producer records the notify after each item, a consumer waits for it before
    # each, both queued ahead: one record let every wait queued before it through (the
    # consumer ran item 1 while it was still being produced).
    producer = check(dev0.rt.create_stream())
    consumer = check(dev0.rt.create_stream())
    notify = check(dev0.rt.create_notify(0))
    consumed = []
    first_consumed = threading.Event()
    releases = []
    for item in range(2):
        kernel, release = gate_kernel()
        releases.append(release)
        check(dev0.sim.launch_kernel(kernel, producer))
        check(dev0.rt.record_notify(notify, producer))
        check(dev0.rt.wait_and_reset_notify(notify, consumer, 0))

        def consume(item=item):
            consumed.append(item)
            first_consumed.set()

        check(dev0.sim.launch_kernel(Kernel(fn=consume), consumer))
    releases[0].set()  # item 0 produced: one record runs; item 1 is held
    assert first_consumed.wait(10)
    # Held by the second wait until item 1's record (a wrong release runs item 1 now).
    check(
        dev0.rt.synchronize_stream_with_timeout(consumer, 200),
        ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
    )
    assert consumed == [0]
    releases[1].set()
    check(dev0.rt.synchronize_stream(consumer))
    assert consumed == [0, 1]
    check(dev0.rt.destroy_notify(notify))


def test_notify_recorded_first_passes_the_wait(dev0, check):
    notify = check(dev0.rt.create_notify(0))
    check(dev0.rt.record_notify(notify, 0))
    check(dev0.rt.synchronize_stream(0))
    check(dev0.rt.wait_and_reset_notify(notify, 0, 100))
    check(dev0.rt.synchronize_stream(0))
    with pytest.raises(TypeError, match="negative"):
        dev0.rt.wait_and_reset_notify(notify, 0, -1)
    with pytest.raises(ValueError, match="list"):
        dev0.rt.notify_batch_reset(notify)


def test_release_ends_waits_on_never_recorded_notifies(rt, check):
    check(rt.rt.set_device(0))
    notify = check(rt.rt.create_notify(0))
    check(rt.rt.wait_and_reset_notify(notify, 0, 0))
    check(rt.rt.reset_device(0), what="no hang")
    assert rt.sim.live_objects()["notifies"] == 0


def test_host_pointer_of_ctypes_array_for_launch_arguments(dev0, check):
    """A kernel launcher packs its arguments in a ctypes struct and copies it in."""

    class Args(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint64), ("y", ctypes.c_uint32)]

    args = Args(7, 9)
    dev = check(dev0.rt.malloc(ctypes.sizeof(args), 0))
    size = ctypes.sizeof(args)
    check(dev0.rt.memcpy(dev, size, ctypes.addressof(args), size, H2D))
    back = Args()
    check(dev0.rt.memcpy(ctypes.addressof(back), size, dev, size, D2H))
    assert (back.x, back.y) == (7, 9)


@pytest.mark.parametrize("drop", ["stream_abort", "destroy_stream_force"])
def test_a_record_passes_over_a_wait_dropped_with_its_stream(dev0, check, drop):
    # The dropped wait's place in the queue took the record: a live wait on another
    # stream was never released.
    dropped, waiting, recording = (check(dev0.rt.create_stream()) for _ in range(3))
    notify = check(dev0.rt.create_notify(0))
    check(dev0.rt.wait_and_reset_notify(notify, dropped, 0))
    check(getattr(dev0.rt, drop)(dropped))
    check(dev0.rt.wait_and_reset_notify(notify, waiting, 0))
    check(dev0.rt.record_notify(notify, recording))
    check(dev0.rt.synchronize_stream(recording))
    check(dev0.rt.synchronize_stream_with_timeout(waiting, 10_000))  # released (it hung)
    check(dev0.rt.destroy_notify(notify))
