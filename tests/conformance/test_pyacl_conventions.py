"""pyACL's conventions, checked on every backend present: return shapes, codes, rules.

These use only the documented pyACL surface (no simulator extensions), so the same
assertions hold against CANN's ``acl`` module.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from aclasync._pyacl.codes import ErrorCode
from aclasync._pyacl.constants import EventRecordedStatus, EventStatus, MemcpyKind, StreamFlag

INVALID_PARAM = ErrorCode.ACL_ERROR_INVALID_PARAM
RT_PARAM_INVALID = ErrorCode.ACL_ERROR_RT_PARAM_INVALID


def in_new_thread(fn: Any) -> Any:
    """Run ``fn()`` on a fresh OS thread (which has no ACL context) and return its result."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join(10)
    assert result, "the call did not return"
    return result[0]


def test_value_calls_return_value_then_ret(acl: Any) -> None:
    count, ret = acl.rt.get_device_count()
    assert (type(count), ret) == (int, 0)
    assert count >= 1
    assert acl.rt.get_device() == (0, 0)
    mode, ret = acl.rt.get_run_mode()
    assert ret == 0
    assert mode in (0, 1)
    free, total, ret = acl.rt.get_mem_info(1)
    assert ret == 0
    assert 0 < free <= total


def test_a_fresh_thread_has_no_context(acl: Any) -> None:
    _, ret = in_new_thread(acl.rt.get_context)
    assert ret == ErrorCode.ACL_ERROR_RT_CONTEXT_NULL
    _, ret = in_new_thread(acl.rt.create_stream)
    assert ret == ErrorCode.ACL_ERROR_RT_CONTEXT_NULL


def test_stream_life_cycle(acl: Any) -> None:
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert stream != 0
    assert acl.rt.stream_query(stream) == (0, 0)  # COMPLETE
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.synchronize_stream_with_timeout(stream, 100) == 0
    assert acl.rt.synchronize_stream_with_timeout(stream, -2) == RT_PARAM_INVALID
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.destroy_stream(0) == INVALID_PARAM


def test_fast_sync_streams_are_created_with_config(acl: Any) -> None:
    flags = int(StreamFlag.FAST_LAUNCH | StreamFlag.FAST_SYNC)
    stream, ret = acl.rt.create_stream_with_config(0, flags)
    assert ret == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.destroy_stream(stream) == 0


def test_event_statuses_have_opposite_numbers(acl: Any) -> None:
    event, ret = acl.rt.create_event()
    assert ret == 0
    assert acl.rt.query_event_status(event) == (EventRecordedStatus.NOT_READY, 0)
    assert acl.rt.query_event(event) == (EventStatus.COMPLETE, 0)
    assert acl.rt.record_event(event, 0) == 0
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.query_event_status(event) == (EventRecordedStatus.COMPLETE, 0)
    assert acl.rt.query_event(event) == (EventStatus.COMPLETE, 0)
    assert acl.rt.synchronize_event_with_timeout(event, -2) == RT_PARAM_INVALID
    assert acl.rt.destroy_event(event) == 0
    assert acl.rt.destroy_event(0) == INVALID_PARAM


def test_memory_round_trip_through_the_device(acl: Any) -> None:
    data = np.arange(256, dtype=np.uint8)
    back = np.zeros_like(data)
    dev_ptr, ret = acl.rt.malloc(data.nbytes, 0)
    assert ret == 0
    src = acl.util.numpy_to_ptr(data)
    dst = acl.util.numpy_to_ptr(back)
    assert acl.rt.memcpy(dev_ptr, data.nbytes, src, data.nbytes, MemcpyKind.HOST_TO_DEVICE) == 0
    assert acl.rt.memcpy(dst, back.nbytes, dev_ptr, back.nbytes, MemcpyKind.DEVICE_TO_HOST) == 0
    assert np.array_equal(back, data)
    assert acl.rt.memset(dev_ptr, data.nbytes, 7, data.nbytes) == 0
    assert acl.rt.memcpy(dst, back.nbytes, dev_ptr, back.nbytes, MemcpyKind.DEVICE_TO_HOST) == 0
    assert (back == 7).all()
    assert acl.rt.free(dev_ptr) == 0
    assert acl.rt.free(0) == INVALID_PARAM
    assert acl.rt.malloc(0, 0)[1] == INVALID_PARAM


def test_async_copy_is_ordered_by_its_stream(acl: Any) -> None:
    stream, _ = acl.rt.create_stream()
    host, ret = acl.rt.malloc_host(4096)
    assert ret == 0
    dev_ptr, _ = acl.rt.malloc(4096, 0)
    assert acl.rt.memset_async(dev_ptr, 4096, 0x5A, 4096, stream) == 0
    kind = MemcpyKind.DEVICE_TO_HOST
    assert acl.rt.memcpy_async(host, 4096, dev_ptr, 4096, kind, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.util.ptr_to_bytes(host, 4096) == b"\x5a" * 4096
    assert acl.rt.free(dev_ptr) == 0
    assert acl.rt.free_host(host) == 0
    assert acl.rt.destroy_stream(stream) == 0


def test_overflow_status_needs_exactly_64_bytes(acl: Any) -> None:
    buffer, _ = acl.rt.malloc(64, 0)
    assert acl.rt.get_overflow_status(buffer, 63, 0) == RT_PARAM_INVALID
    assert acl.rt.get_overflow_status(buffer, 64, 0) == 0
    assert acl.rt.synchronize_stream(0) == 0
    assert acl.rt.free(buffer) == 0


def test_callback_codes(acl: Any) -> None:
    stream, _ = acl.rt.create_stream()
    ret = acl.rt.launch_callback(lambda _: None, None, 0, stream)
    assert ret == ErrorCode.ACL_ERROR_RT_STREAM_NO_CB_REG
    assert acl.rt.process_report(0) == INVALID_PARAM
    started = time.monotonic()
    assert acl.rt.process_report(5000) == ErrorCode.ACL_ERROR_RT_THREAD_SUBSCRIBE
    assert time.monotonic() - started < 4.0, "an unsubscribed thread is told at once"
    assert acl.rt.destroy_stream(stream) == 0


def test_callbacks_run_on_the_subscribed_thread(acl: Any) -> None:
    stream, _ = acl.rt.create_stream()
    ran_on: list[int] = []
    subscribed = threading.Event()
    stop = threading.Event()

    def serve() -> None:
        # Not before the subscription: process_report would return 107012 at once and
        # this loop would spin (facts file, section 4.2).
        subscribed.wait(5)
        while not stop.is_set():
            acl.rt.process_report(50)

    server = threading.Thread(target=serve)
    server.start()
    assert server.ident is not None
    assert acl.rt.subscribe_report(server.ident, stream) == 0
    subscribed.set()
    assert (
        acl.rt.launch_callback(lambda tag: ran_on.append(threading.get_ident()), "x", 1, stream)
        == 0
    )
    assert acl.rt.synchronize_stream(stream) == 0
    stop.set()
    server.join(5)
    assert ran_on == [server.ident]
    assert acl.rt.unsubscribe_report(server.ident, stream) == 0
    assert acl.rt.destroy_stream(stream) == 0


def test_timing_events_measure_milliseconds(acl: Any) -> None:
    stream, _ = acl.rt.create_stream()
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    assert acl.rt.record_event(start, stream) == 0
    assert acl.rt.record_event(end, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    elapsed, ret = acl.rt.event_elapsed_time(start, end)
    assert ret == 0
    assert isinstance(elapsed, float)
    assert 0.0 <= elapsed < 1000.0
    for event in (start, end):
        assert acl.rt.destroy_event(event) == 0
    assert acl.rt.destroy_stream(stream) == 0
