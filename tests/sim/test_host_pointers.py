"""Host memory as pyACL has it: any mapped address, and ``acl.util`` with pyACL's semantics."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from aclasync._pyacl.codes import ErrorCode
from aclasync._pyacl.constants import MemcpyKind

H2D, D2H, H2H = MemcpyKind.HOST_TO_DEVICE, MemcpyKind.DEVICE_TO_HOST, MemcpyKind.HOST_TO_HOST
RT_INVALID = ErrorCode.ACL_ERROR_RT_PARAM_INVALID
#: Linux's mmap flag: map exactly there, or fail rather than replace a mapping.
_MAP_FIXED_NOREPLACE = 0x100000


def test_numpy_ctypes_data_round_trips_through_the_device(dev0, check):
    source = np.arange(256, dtype=np.float32)
    result = np.zeros_like(source)
    dev = check(dev0.rt.malloc(source.nbytes, 0))
    check(dev0.rt.memcpy(dev, source.nbytes, source.ctypes.data, source.nbytes, H2D))
    check(dev0.rt.memcpy(result.ctypes.data, result.nbytes, dev, source.nbytes, D2H))
    np.testing.assert_array_equal(result, source)


def test_device_data_lands_in_a_bytes_object(dev0, check):
    """Ascend's memory sample: copy device data into ``bytes_to_ptr``'s buffer, read it."""
    payload = bytes(range(200))
    dev = check(dev0.rt.malloc(len(payload), 0))
    check(dev0.rt.memcpy(dev, len(payload), dev0.util.bytes_to_ptr(payload), len(payload), H2D))
    target = bytes(len(payload))
    check(dev0.rt.memcpy(dev0.util.bytes_to_ptr(target), len(target), dev, len(payload), D2H))
    assert target == payload


def test_ctypes_buffers_and_memset_on_host_memory(dev0, check):
    buffer = ctypes.create_string_buffer(64)
    address = ctypes.addressof(buffer)
    check(dev0.rt.memset(address, 64, 0x5A, 64))
    assert buffer.raw == b"\x5a" * 64
    other = (ctypes.c_ubyte * 64)()
    check(dev0.rt.memcpy(ctypes.addressof(other), 64, address, 64, H2H))
    assert bytes(other) == b"\x5a" * 64


def test_async_copies_of_pageable_memory_complete_before_returning(dev0, check):
    stream = check(dev0.rt.create_stream())
    source = np.full(1024, 7, dtype=np.uint8)
    dev = check(dev0.rt.malloc(1024, 0))
    check(dev0.rt.memcpy_async(dev, 1024, source.ctypes.data, 1024, H2D, stream))
    source[:] = 0  # the copy already happened: pageable memory is copied synchronously
    back = np.zeros(1024, dtype=np.uint8)
    check(dev0.rt.memcpy(back.ctypes.data, 1024, dev, 1024, D2H))
    assert (back == 7).all()


def test_unmapped_and_read_only_addresses_get_107000(dev0, check):
    dev = check(dev0.rt.malloc(4096, 0))
    with mmap.mmap(-1, 4096, prot=mmap.PROT_READ) as page:
        address = np.frombuffer(page, dtype=np.uint8).ctypes.data
        check(dev0.rt.memcpy(dev, 4096, address, 4096, H2D), what="reading is fine")
        check(dev0.rt.memcpy(address, 4096, dev, 4096, D2H), RT_INVALID, "not writable")
        check(dev0.rt.memset(address, 16, 0, 16), RT_INVALID, "memset needs write access")
    check(dev0.rt.memcpy(dev, 64, 0x10, 64, H2D), RT_INVALID, "page zero is never mapped")
    check(dev0.rt.memcpy(0x10, 64, dev, 64, D2H), RT_INVALID)


def test_a_range_running_off_the_mapping_is_refused(dev0, check):
    dev = check(dev0.rt.malloc(8192, 0))
    with mmap.mmap(-1, 4096) as page:
        start = np.frombuffer(page, dtype=np.uint8).ctypes.data
        check(dev0.rt.memcpy(dev, 8192, start, 4096, H2D))
        # The page after an anonymous mapping may or may not be mapped; the end of the
        # address space never is.
        check(dev0.rt.memcpy(dev, 8192, 2**47 - 4096, 8192, H2D), RT_INVALID)


@pytest.mark.parametrize("blocks", ["device", "host"])
def test_a_read_only_mapping_where_a_freed_block_was_is_not_written(dev0, check, blocks):
    """A large block is a mapping of its own; once freed, its addresses may be mapped
    again read-only, and the host-pointer check must not trust what it saw before."""
    size = 64 << 20  # above glibc's largest mmap threshold (32 MiB): always a mapping
    if blocks == "device":
        block = check(dev0.rt.malloc(size, 0))
        backing = dev0.sim.device_array(block, size, np.uint8).ctypes.data
    else:
        block = backing = check(dev0.rt.malloc_host(size))
    source = check(dev0.rt.malloc(64, 0))
    scratch = np.zeros(64, dtype=np.uint8)
    check(dev0.rt.memcpy(scratch.ctypes.data, 64, source, 64, D2H))  # reads the maps
    check(dev0.rt.free(block) if blocks == "device" else dev0.rt.free_host(block))
    with _read_only_pages_at(backing - backing % mmap.PAGESIZE, 4):
        check(dev0.rt.memcpy(backing, 64, source, 64, D2H), RT_INVALID, "not writable now")


@contextlib.contextmanager
def _read_only_pages_at(address: int, pages: int) -> Iterator[None]:
    """Map *pages* read-only pages at exactly *address* (which must be free: the block
    freed there was unmapped), unmapped at exit."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, *[ctypes.c_int] * 3, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = pages * mmap.PAGESIZE
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED_NOREPLACE
    got = libc.mmap(address, size, mmap.PROT_READ, flags, -1, 0)
    assert got == address, f"could not map at {address:#x} (errno {ctypes.get_errno()})"
    try:
        yield
    finally:
        libc.munmap(address, size)


def test_malloc_host_blocks_stay_bounds_checked(dev0, check):
    host = check(dev0.rt.malloc_host(64))
    dev = check(dev0.rt.malloc(256, 0))
    check(dev0.rt.memcpy(host, 128, dev, 128, D2H), RT_INVALID, "past the 64-byte block")
    check(dev0.rt.free_host(host))


def test_malloc_host_beyond_the_host_gives_207001(dev0, check):
    check(dev0.rt.malloc_host(2**50), ErrorCode.ACL_ERROR_RT_MEMORY_ALLOCATION)


# -- acl.util -----------------------------------------------------------------------------


def test_bytes_to_ptr_is_the_raw_buffer_and_refuses_bytearray(dev0):
    data = b"pyacl"
    assert ctypes.string_at(dev0.util.bytes_to_ptr(data), len(data)) == data
    with pytest.raises(ValueError, match="needs an byte as argument"):
        dev0.util.bytes_to_ptr(bytearray(b"x"))
    with pytest.raises(TypeError, match=r"acl\.util\.bytes_to_ptr args parse failed"):
        dev0.util.bytes_to_ptr()


def test_ptr_to_bytes_reads_any_mapped_memory(dev0):
    array = np.arange(16, dtype=np.uint8)
    assert dev0.util.ptr_to_bytes(array.ctypes.data, 16) == array.tobytes()
    with pytest.raises(ValueError, match="convert c pointer to bytes failed"):
        dev0.util.ptr_to_bytes(0x10, 8)


def test_numpy_to_ptr_and_contiguous_variant(dev0):
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert dev0.util.numpy_to_ptr(array) == array.ctypes.data
    with pytest.raises(ValueError, match="needs an ndarray as argument"):
        dev0.util.numpy_to_ptr([1, 2])
    column = array[:, 1]
    ptr, contiguous = dev0.util.numpy_contiguous_to_ptr(column)
    assert contiguous.flags.c_contiguous
    assert ptr == contiguous.ctypes.data
    assert ctypes.string_at(ptr, contiguous.nbytes) == np.array([1, 5, 9], np.int32).tobytes()
    same_ptr, same = dev0.util.numpy_contiguous_to_ptr(array)
    assert same is array
    assert same_ptr == array.ctypes.data


def test_ptr_to_numpy_is_a_writable_view(dev0, check):
    host = check(dev0.rt.malloc_host(64))
    view = dev0.util.ptr_to_numpy(host, (4, 4), np.dtype(np.float32).num)
    assert view.shape == (4, 4)
    view[:] = 3.0
    again = dev0.util.ptr_to_numpy(host, (16,), np.dtype(np.float32).num)
    assert (again == 3.0).all()
    with pytest.raises(ValueError, match="shape is empty"):  # a list, not a tuple
        dev0.util.ptr_to_numpy(host, [16], np.dtype(np.float32).num)
    with pytest.raises(TypeError, match="not list of int"):
        dev0.util.ptr_to_numpy(host, ("16",), np.dtype(np.float32).num)
    check(dev0.rt.free_host(host))


def test_start_thread_argument_errors_match_pyacl(dev0):
    with pytest.raises(TypeError, match=r"^function takes exactly 2 arguments \(0 given\)$"):
        dev0.util.start_thread()
    with pytest.raises(TypeError, match=r"^parameter must be callable$"):
        dev0.util.start_thread(42, None)


def test_start_thread_passes_the_argument_and_stop_thread_reports_exceptions(dev0):
    seen = []
    done = threading.Event()

    def worker(args):
        seen.append(args)
        done.set()

    tid, err = dev0.util.start_thread(worker, [1, 2])
    assert err == 0
    assert dev0.sim.live_objects()["util_threads"] == 1
    assert dev0.util.stop_thread(tid) == 0
    assert seen == [[1, 2]]
    assert dev0.sim.live_objects()["util_threads"] == 0

    def broken(args):
        raise KeyError(args)

    tid, _ = dev0.util.start_thread(broken, "x")
    with pytest.raises(RuntimeError, match="exception=KeyError,msg=thread call failed"):
        dev0.util.stop_thread(tid)


def test_memory_unmapped_after_a_copy_is_refused(dev0, check):
    """The maps are cached, but every page of a short range is probed again."""
    dev = check(dev0.rt.malloc(4096, 0))
    page = mmap.mmap(-1, 4096)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    check(dev0.rt.memcpy(dev, 4096, address, 4096, H2D))
    check(dev0.rt.memcpy(address, 4096, dev, 4096, D2H))
    page.close()  # munmap: the address is gone
    check(dev0.rt.memcpy(dev, 4096, address, 4096, H2D), RT_INVALID)
    check(dev0.rt.memcpy(address, 4096, dev, 4096, D2H), RT_INVALID)


def test_dvpp_memory_is_device_memory(dev0, check):
    """``acl.media.dvpp_malloc`` / ``dvpp_free``, which Ascend's memory sample uses."""
    dvpp = check(dev0.media.dvpp_malloc(256))
    payload = bytes(range(256))
    check(dev0.rt.memcpy(dvpp, 256, dev0.util.bytes_to_ptr(payload), 256, H2D))
    back = bytes(256)
    check(dev0.rt.memcpy(dev0.util.bytes_to_ptr(back), 256, dvpp, 256, D2H))
    assert back == payload
    check(dev0.media.dvpp_free(dvpp))
    check(dev0.media.dvpp_free(dvpp), ErrorCode.ACL_ERROR_RT_MEMORY_FREE)
    check(dev0.media.dvpp_malloc(0), ErrorCode.ACL_ERROR_INVALID_PARAM)


def test_pointer_conversions_leave_no_last_error(dev0):
    # The acl.util conversions return addresses, not ret codes: a client that checks
    # acl.rt.get_last_error after them must see none (they are not ACL calls).
    rt = dev0.rt
    assert rt.get_last_error(0) == 0
    keep = b"\x01" * 64
    assert dev0.util.bytes_to_ptr(keep) != 0
    assert dev0.util.numpy_to_ptr(np.zeros(8)) != 0
    dev0.util.numpy_contiguous_to_ptr(np.zeros((4, 4))[:, 1])
    assert rt.peek_at_last_error(0) == 0
    assert dev0.get_recent_err_msg() is None


def test_numpy_to_ptr_warns_of_a_discontiguous_array(dev0):
    # pyACL warns (numpy_convert.cpp): a copy from that address would not read the
    # array's elements.
    array = np.arange(16, dtype=np.uint8)[::2]
    with pytest.warns(Warning, match="discontiguous"):
        assert dev0.util.numpy_to_ptr(array) == array.ctypes.data
