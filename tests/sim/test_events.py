"""Events: status enums, synchronisation, timing, flags, limits and argument rules."""

from __future__ import annotations

import time

import pytest

from aclasync._pyacl.codes import ErrorCode
from aclasync._pyacl.constants import EventFlag, EventRecordedStatus, EventStatus
from aclasync.sim import Kernel

MS = 1000


def elapsed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


@pytest.fixture
def stream(dev0, check):
    return check(dev0.rt.create_stream())


# -- status enums ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["plain", "with_flag"])
def test_never_recorded_event_statuses(dev0, check, kind):
    if kind == "plain":
        event = check(dev0.rt.create_event())
    else:
        event = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    assert check(dev0.rt.query_event(event)) == EventStatus.COMPLETE
    assert check(dev0.rt.query_event_status(event)) == EventRecordedStatus.NOT_READY


def test_never_recorded_ex_event_reports_complete(dev0, check):
    event = check(dev0.rt.create_event_ex_with_flag(EventFlag.TIME_LINE))
    assert check(dev0.rt.query_event_status(event)) == EventRecordedStatus.COMPLETE


def test_status_enums_have_opposite_values(dev0, check, stream, gate):
    event = check(dev0.rt.create_event())
    work = gate()
    check(dev0.sim.launch_kernel(work.kernel(), stream))
    check(dev0.rt.record_event(event, stream))
    pending_old = check(dev0.rt.query_event(event))
    pending_new = check(dev0.rt.query_event_status(event))
    work.open()
    assert (pending_old, pending_new) == (1, 0)
    assert pending_old == EventStatus.NOT_READY
    assert pending_new == EventRecordedStatus.NOT_READY
    check(dev0.rt.synchronize_stream(stream))
    done_old = check(dev0.rt.query_event(event))
    done_new = check(dev0.rt.query_event_status(event))
    assert (done_old, done_new) == (0, 1)


# -- synchronize -----------------------------------------------------------------------


def test_synchronize_event_waits_for_captured_work_only(dev0, check, stream, gate):
    later = gate()
    event = check(dev0.rt.create_event())
    check(dev0.sim.launch_kernel(Kernel(duration_us=150 * MS), stream))
    check(dev0.rt.record_event(event, stream))
    check(dev0.sim.launch_kernel(later.kernel(), stream))
    ret, took = elapsed(dev0.rt.synchronize_event, event)
    check(ret)
    assert took >= 0.13, "it waited for the captured kernel"
    assert not later.finished.is_set(), "it did not wait for the later work"
    assert check(dev0.rt.query_event_status(event)) == EventRecordedStatus.COMPLETE
    later.open()


def test_synchronize_never_recorded_event_returns_at_once(dev0, check):
    event = check(dev0.rt.create_event())
    ret, took = elapsed(dev0.rt.synchronize_event, event)
    check(ret)
    assert took < 5.0  # wide: only a wait that never ends fails


def test_rerecord_replaces_what_the_event_captures(dev0, check, stream, gate):
    event = check(dev0.rt.create_event())
    check(dev0.rt.record_event(event, stream))
    check(dev0.rt.synchronize_event(event))
    work = gate()
    check(dev0.sim.launch_kernel(work.kernel(), stream))
    check(dev0.rt.record_event(event, stream))
    assert check(dev0.rt.query_event_status(event)) == EventRecordedStatus.NOT_READY
    timeout = ErrorCode.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
    check(dev0.rt.synchronize_event_with_timeout(event, 20), timeout, "the new record")
    work.open()
    check(dev0.rt.synchronize_event(event))
    assert check(dev0.rt.query_event_status(event)) == EventRecordedStatus.COMPLETE


def test_synchronize_event_with_timeout(dev0, check, stream, gate):
    work = gate()
    event = check(dev0.rt.create_event())
    check(dev0.sim.launch_kernel(work.kernel(), stream))
    check(dev0.rt.record_event(event, stream))
    timeout = ErrorCode.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
    ret, took = elapsed(dev0.rt.synchronize_event_with_timeout, event, 40)
    check(ret, timeout, "40 ms on work that has not finished")
    assert 0.035 <= took < 5.0  # the lower bound is the timeout; the upper one is wide
    ret, took = elapsed(dev0.rt.synchronize_event_with_timeout, event, 0)
    check(ret, timeout, "0 polls once")
    assert took < 5.0
    work.open()
    invalid = ErrorCode.ACL_ERROR_RT_PARAM_INVALID
    check(dev0.rt.synchronize_event_with_timeout(event, -2), invalid)
    check(dev0.rt.synchronize_event_with_timeout(event, -1))
    check(dev0.rt.synchronize_event_with_timeout(event, 0), what="complete: poll succeeds")


def test_synchronize_unknown_event(dev0, check):
    event = check(dev0.rt.create_event())
    check(dev0.rt.destroy_event(event))
    check(dev0.rt.synchronize_event(event), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
    check(dev0.rt.synchronize_event(0), ErrorCode.ACL_ERROR_INVALID_PARAM)


# -- elapsed time ----------------------------------------------------------------------


def test_elapsed_time_measures_the_kernel(dev0, check, stream):
    start = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    end = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    check(dev0.rt.record_event(start, stream))
    check(dev0.sim.launch_kernel(Kernel(duration_us=100 * MS), stream))
    check(dev0.rt.record_event(end, stream))
    check(dev0.rt.synchronize_event(end))
    ms = check(dev0.rt.event_elapsed_time(start, end))
    assert isinstance(ms, float)
    assert 90.0 <= ms < 250.0


def test_elapsed_time_of_back_to_back_records_is_small(dev0, check, stream):
    start = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    end = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    check(dev0.rt.record_event(start, stream))
    check(dev0.rt.record_event(end, stream))
    check(dev0.rt.synchronize_stream(stream))
    ms = check(dev0.rt.event_elapsed_time(start, end))
    assert 0.0 <= ms < 20.0


def test_elapsed_time_with_a_never_recorded_event(dev0, check, stream):
    recorded = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    never = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    check(dev0.rt.record_event(recorded, stream))
    check(dev0.rt.synchronize_stream(stream))
    internal = ErrorCode.ACL_ERROR_RT_INTERNAL_ERROR
    check(dev0.rt.event_elapsed_time(recorded, never), internal)
    check(dev0.rt.event_elapsed_time(never, recorded), internal)


# -- flags and limits ------------------------------------------------------------------


def test_create_event_with_flag_accepts_only_time_line(dev0, check):
    event = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    assert event != 0
    for flag in (0, EventFlag.SYNC, EventFlag.SYNC | EventFlag.TIME_LINE, 0x2, 0x10, 0x20):
        event, ret = dev0.rt.create_event_with_flag(flag)
        check((event, ret), ErrorCode.ACL_ERROR_RT_PARAM_INVALID, f"flag {flag:#x}")


def test_event_limit(make_rt, check):
    rt = make_rt(event_limit=50)
    check(rt.rt.set_device(0))
    events = [check(rt.rt.create_event(), what=f"event {i}") for i in range(50)]
    assert len(set(events)) == 50
    check(rt.rt.create_event(), ErrorCode.ACL_ERROR_RT_NO_EVENT_RESOURCE, "51st")
    check(rt.rt.destroy_event(events.pop()))
    check(rt.rt.create_event(), what="a freed event slot can be reused")
    check(rt.rt.set_device(1))
    check(rt.rt.create_event(), what="device 1 has its own events")


def test_an_event_is_refused_on_another_devices_stream(make_rt, check):
    # It was accepted: the waiting stream then ran on the event's device's scheduler,
    # and releasing that device stranded its work (reset and close hung); a reset
    # changed the other device's event, and elapsed times compared two devices' clocks.
    rt = make_rt(event_with_flag_mask=EventFlag.SYNC | EventFlag.TIME_LINE)
    check(rt.rt.set_device(0))
    event = check(rt.rt.create_event())
    resettable = check(rt.rt.create_event_with_flag(EventFlag.SYNC))
    own = check(rt.rt.create_stream())
    check(rt.rt.record_event(event, own))
    check(rt.rt.stream_wait_event(own, event))
    check(rt.rt.reset_event(resettable, own))
    check(rt.rt.synchronize_stream(own))
    check(rt.rt.set_device(1))
    other = check(rt.rt.create_stream())
    theirs = check(rt.rt.create_event())
    check(rt.rt.record_event(theirs, other))
    check(rt.rt.synchronize_stream(other))
    refused = ErrorCode.ACL_ERROR_RT_PARAM_INVALID
    check(rt.rt.record_event(event, other), refused, "record on device 1")
    check(rt.rt.stream_wait_event(other, event), refused, "wait on device 1")
    check(rt.rt.reset_event(resettable, other), refused, "reset on device 1")
    check(rt.rt.event_elapsed_time(event, theirs), refused, "elapsed across devices")
    check(rt.rt.synchronize_stream(other))
    check(rt.rt.destroy_stream(other))
    check(rt.rt.reset_device(1))


def test_time_line_events_are_not_hardware_limited(make_rt, check):
    rt = make_rt(event_limit=5)
    check(rt.rt.set_device(0))
    for _ in range(5):
        check(rt.rt.create_event())
    check(rt.rt.create_event(), ErrorCode.ACL_ERROR_RT_NO_EVENT_RESOURCE)
    for i in range(10):
        check(rt.rt.create_event_with_flag(EventFlag.TIME_LINE), what=f"TIME_LINE event {i}")


# -- destroy / reset / record argument rules --------------------------------------------


def test_destroy_event(dev0, check):
    check(dev0.rt.destroy_event(0), ErrorCode.ACL_ERROR_INVALID_PARAM)
    event = check(dev0.rt.create_event())
    check(dev0.rt.destroy_event(event))
    check(dev0.rt.destroy_event(event), ErrorCode.ACL_ERROR_RT_PARAM_INVALID, "twice")


def test_destroy_event_before_it_completes(dev0, check, stream, gate):
    work = gate()
    event = check(dev0.rt.create_event())
    check(dev0.sim.launch_kernel(work.kernel(), stream))
    check(dev0.rt.record_event(event, stream))
    check(dev0.rt.destroy_event(event))
    assert not work.finished.is_set(), "destroy_event does not wait"
    work.open()
    check(dev0.rt.synchronize_stream(stream))


def test_reset_event_refused_without_sync_flag(dev0, check, stream):
    plain = check(dev0.rt.create_event())
    timeline = check(dev0.rt.create_event_with_flag(EventFlag.TIME_LINE))
    check(dev0.rt.reset_event(plain, stream), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
    check(dev0.rt.reset_event(timeline, stream), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
    check(dev0.rt.reset_event(0, stream), ErrorCode.ACL_ERROR_INVALID_PARAM)


def test_record_event_takes_event_then_stream(dev0, check, stream):
    event = check(dev0.rt.create_event())
    check(dev0.rt.record_event(stream, event), ErrorCode.ACL_ERROR_RT_PARAM_INVALID, "swapped")
    check(dev0.rt.record_event(event, stream))
    check(dev0.rt.record_event(event, 0), what="0 is the default stream")
    check(dev0.rt.record_event(0, stream), ErrorCode.ACL_ERROR_INVALID_PARAM, "null event")
    check(dev0.rt.synchronize_event(event))


def test_record_event_on_a_stream_of_another_context(dev0, check, stream):
    event = check(dev0.rt.create_event())
    check(dev0.rt.create_context(0))
    check(dev0.rt.record_event(event, stream), ErrorCode.ACL_ERROR_RT_STREAM_CONTEXT)


def test_record_event_on_destroyed_stream(dev0, check, stream):
    event = check(dev0.rt.create_event())
    check(dev0.rt.destroy_stream(stream))
    check(dev0.rt.record_event(event, stream), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)


def test_stream_wait_event_null_and_unknown(dev0, check, stream):
    check(dev0.rt.stream_wait_event(stream, 0), ErrorCode.ACL_ERROR_INVALID_PARAM)
    event = check(dev0.rt.create_event())
    check(dev0.rt.destroy_event(event))
    check(dev0.rt.stream_wait_event(stream, event), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
