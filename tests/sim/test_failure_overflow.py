"""Kernel failures, failure modes, the overflow switch and the 64-byte status protocol."""

from __future__ import annotations

import pytest

from aclasync._pyacl.codes import ErrorCode
from aclasync._pyacl.constants import FailureMode, MemcpyKind, OverflowMode
from aclasync.sim import Kernel

MS = 1000
AICORE = ErrorCode.ACL_ERROR_RT_AICORE_EXCEPTION
ABORT = ErrorCode.ACL_ERROR_RT_STREAM_ABORT


@pytest.fixture
def stream(dev0, check):
    return check(dev0.rt.create_stream())


def read_overflow_status(rt, check, stream):
    """Run the documented protocol and return the status word (0 = no overflow)."""
    dev = check(rt.rt.malloc(64, 0))
    host = check(rt.rt.malloc_host(64))
    check(rt.rt.memset(dev, 64, 0xAB, 64))
    check(rt.rt.get_overflow_status(dev, 64, stream))
    check(rt.rt.synchronize_stream(stream))
    check(rt.rt.memcpy(host, 64, dev, 64, MemcpyKind.DEVICE_TO_HOST))
    data = rt.util.ptr_to_bytes(host, 64)
    check(rt.rt.free(dev))
    check(rt.rt.free_host(host))
    assert len(data) == 64
    assert data[8:] == bytes(56), "the status word is followed by zeros"
    return int.from_bytes(data[:8], "little")


# -- kernel failures -------------------------------------------------------------------


@pytest.mark.parametrize("code", [AICORE, ErrorCode.ACL_ERROR_RT_AICORE_TIMEOUT])
def test_kernel_error_surfaces_once_on_next_sync(dev0, check, stream, code):
    ran = []
    check(dev0.sim.launch_kernel(Kernel(error=code), stream))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: ran.append("after")), stream))
    check(dev0.rt.synchronize_stream(stream), code, "first sync")
    assert ran == ["after"], "CONTINUE_ON_FAILURE (default) runs later tasks"
    check(dev0.rt.synchronize_stream(stream), what="second sync")
    check(dev0.sim.launch_kernel(Kernel(duration_us=1 * MS), stream))
    check(dev0.rt.synchronize_stream(stream), what="stream still usable")


def test_raising_kernel_fn_is_an_aicore_exception(dev0, check, stream):
    def boom():
        raise RuntimeError("simulated kernel bug")

    check(dev0.sim.launch_kernel(Kernel(fn=boom), stream))
    check(dev0.rt.synchronize_stream(stream), AICORE)
    check(dev0.rt.synchronize_stream(stream))


def test_kernel_error_surfaces_through_synchronize_device_once(dev0, check, stream):
    check(dev0.sim.launch_kernel(Kernel(error=AICORE), stream))
    check(dev0.rt.synchronize_device(), AICORE)
    check(dev0.rt.synchronize_stream(stream), what="already reported")
    check(dev0.rt.synchronize_device())


def test_kernel_error_does_not_leak_to_other_streams(dev0, check, stream):
    other = check(dev0.rt.create_stream())
    check(dev0.sim.launch_kernel(Kernel(error=AICORE), stream))
    check(dev0.sim.launch_kernel(Kernel(duration_us=1 * MS), other))
    check(dev0.rt.synchronize_stream(other))
    check(dev0.rt.synchronize_stream(stream), AICORE)


def test_continue_on_failure_runs_later_tasks(dev0, check, stream):
    ran = []
    check(dev0.rt.set_stream_failure_mode(stream, FailureMode.CONTINUE))
    check(dev0.sim.launch_kernel(Kernel(duration_us=50 * MS, error=AICORE), stream))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: ran.append(1)), stream))
    check(dev0.rt.synchronize_stream(stream), AICORE)
    assert ran == [1]
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: ran.append(2)), stream))
    check(dev0.rt.synchronize_stream(stream))
    assert ran == [1, 2]


def test_stop_on_failure_drops_later_tasks_and_aborts(dev0, check, stream):
    ran = []
    other = check(dev0.rt.create_stream())
    check(dev0.rt.set_stream_failure_mode(stream, FailureMode.STOP))
    check(dev0.sim.launch_kernel(Kernel(duration_us=100 * MS, error=AICORE), stream))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: ran.append("dropped")), stream))
    check(dev0.rt.synchronize_stream(stream), AICORE, "first sync reports the failure")
    check(dev0.rt.synchronize_stream(stream), ABORT, "then the stream is aborted")
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: ran.append("late")), stream), ABORT)
    check(dev0.rt.synchronize_stream(stream), ABORT)
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: ran.append("other")), other))
    check(dev0.rt.synchronize_stream(other), what="other streams are independent")
    assert ran == ["other"]


def test_set_stream_failure_mode_rules(dev0, check):
    """ApiImpl::StreamSetMode: only mode & 1 counts, the stream's own mode again is 0,
    STOP back to CONTINUE is not supported (207000), CONTINUE to STOP is."""
    invalid = ErrorCode.ACL_ERROR_RT_PARAM_INVALID
    unsupported = ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    check(dev0.rt.set_stream_failure_mode(0, FailureMode.STOP), invalid, "default stream")
    stream = check(dev0.rt.create_stream())
    check(dev0.rt.set_stream_failure_mode(stream, FailureMode.STOP))
    check(dev0.rt.set_stream_failure_mode(stream, FailureMode.STOP), what="the same mode again")
    check(dev0.rt.set_stream_failure_mode(stream, FailureMode.CONTINUE), unsupported, "STOP->CONT")
    check(dev0.rt.set_stream_failure_mode(stream, 3), what="3 & 1 is STOP, the mode it has")
    fresh = check(dev0.rt.create_stream())
    check(dev0.rt.set_stream_failure_mode(fresh, FailureMode.CONTINUE), what="CONTINUE already")
    check(dev0.rt.set_stream_failure_mode(fresh, 2), what="2 & 1 is CONTINUE")
    check(dev0.rt.set_stream_failure_mode(fresh, FailureMode.STOP), what="then STOP")
    assert check(dev0.rt.get_stream_attribute(fresh, 1)) == {"failureMode": 1}


def test_a_stopped_stream_keeps_its_failure_mode(dev0, check, stream):
    """After a failure a STOP stream is in the runtime's ABORT_ON_FAILURE state: any
    further StreamSetMode is not supported."""
    unsupported = ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    check(dev0.rt.set_stream_failure_mode(stream, FailureMode.STOP))
    check(dev0.sim.launch_kernel(Kernel(error=AICORE), stream))
    check(dev0.rt.synchronize_stream(stream), AICORE)
    check(dev0.rt.set_stream_failure_mode(stream, FailureMode.STOP), unsupported)
    check(dev0.rt.set_stream_failure_mode(stream, FailureMode.CONTINUE), unsupported)


# -- overflow switch -------------------------------------------------------------------


def test_overflow_switch_defaults_off_and_is_per_stream(dev0, check, stream):
    other = check(dev0.rt.create_stream())
    assert check(dev0.rt.get_stream_overflow_switch(stream)) == 0
    assert check(dev0.rt.get_stream_overflow_switch(0)) == 0
    check(dev0.rt.set_stream_overflow_switch(stream, 1))
    assert check(dev0.rt.get_stream_overflow_switch(stream)) == 1
    assert check(dev0.rt.get_stream_overflow_switch(other)) == 0
    check(dev0.rt.set_stream_overflow_switch(0, 1))
    assert check(dev0.rt.get_stream_overflow_switch(0)) == 1
    check(dev0.rt.set_stream_overflow_switch(stream, 0))
    assert check(dev0.rt.get_stream_overflow_switch(stream)) == 0
    check(dev0.rt.set_stream_overflow_switch(stream, 2), ErrorCode.ACL_ERROR_INVALID_PARAM)


def test_overflow_switch_flag_is_checked_before_the_stream(rt, check):
    invalid = ErrorCode.ACL_ERROR_INVALID_PARAM
    check(rt.rt.set_stream_overflow_switch(0, 5), invalid, "no current context")
    check(rt.rt.set_device(0))
    check(rt.rt.set_stream_overflow_switch(0x1234, 5), invalid, "unknown stream")
    check(rt.rt.set_stream_overflow_switch(0x1234, 1), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)


def test_no_overflow_status_initially(dev0, check, stream):
    assert read_overflow_status(dev0, check, stream) == 0


def test_overflow_kernel_sets_status_when_switch_on(dev0, check, stream):
    check(dev0.rt.set_stream_overflow_switch(stream, 1))
    check(dev0.sim.launch_kernel(Kernel(overflow=True), stream))
    assert read_overflow_status(dev0, check, stream) != 0


def test_overflow_kernel_with_switch_off_sets_nothing(dev0, check, stream):
    check(dev0.sim.launch_kernel(Kernel(overflow=True), stream))
    check(dev0.rt.synchronize_stream(stream))
    assert read_overflow_status(dev0, check, stream) == 0


def test_switch_is_captured_at_launch_on(dev0, check, stream):
    check(dev0.rt.set_stream_overflow_switch(stream, 1))
    check(dev0.sim.launch_kernel(Kernel(duration_us=100 * MS, overflow=True), stream))
    check(dev0.rt.set_stream_overflow_switch(stream, 0))
    assert read_overflow_status(dev0, check, stream) != 0


def test_switch_is_captured_at_launch_off(dev0, check, stream):
    check(dev0.sim.launch_kernel(Kernel(duration_us=100 * MS, overflow=True), stream))
    check(dev0.rt.set_stream_overflow_switch(stream, 1))
    assert read_overflow_status(dev0, check, stream) == 0


def test_overflow_status_is_per_context(dev0, check, stream):
    check(dev0.rt.set_stream_overflow_switch(stream, 1))
    check(dev0.sim.launch_kernel(Kernel(overflow=True), stream))
    check(dev0.rt.synchronize_stream(stream))
    sibling = check(dev0.rt.create_stream())
    assert read_overflow_status(dev0, check, sibling) != 0, "any stream of the context"
    check(dev0.rt.create_context(0))
    elsewhere = check(dev0.rt.create_stream())
    assert read_overflow_status(dev0, check, elsewhere) == 0, "another context is clean"


def test_reset_overflow_status_clears_it(dev0, check, stream):
    check(dev0.rt.set_stream_overflow_switch(stream, 1))
    check(dev0.sim.launch_kernel(Kernel(overflow=True), stream))
    assert read_overflow_status(dev0, check, stream) != 0
    check(dev0.rt.reset_overflow_status(stream))
    check(dev0.rt.synchronize_stream(stream))
    assert read_overflow_status(dev0, check, stream) == 0


def test_reset_overflow_status_is_queued(dev0, check, stream):
    check(dev0.rt.set_stream_overflow_switch(stream, 1))
    check(dev0.sim.launch_kernel(Kernel(duration_us=100 * MS, overflow=True), stream))
    check(dev0.rt.reset_overflow_status(stream))
    assert read_overflow_status(dev0, check, stream) == 0, "reset ran after the kernel"


@pytest.mark.parametrize("size", [0, 8, 63, 65, 128])
def test_overflow_status_needs_exactly_64_bytes(dev0, check, stream, size):
    dev = check(dev0.rt.malloc(128, 0))
    check(dev0.rt.get_overflow_status(dev, size, stream), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)


def test_overflow_status_needs_device_memory(dev0, check, stream):
    host = check(dev0.rt.malloc_host(64))
    invalid = ErrorCode.ACL_ERROR_RT_PARAM_INVALID
    check(dev0.rt.get_overflow_status(host, 64, stream), invalid, "host memory")
    check(dev0.rt.get_overflow_status(0x1234_5678, 64, stream), invalid, "unknown pointer")
    check(dev0.rt.get_overflow_status(0, 64, stream), ErrorCode.ACL_ERROR_INVALID_PARAM, "null")


def test_overflow_switch_not_supported_on_310b4(make_rt, check):
    rt = make_rt(soc="Ascend310B4")
    check(rt.rt.set_device(0))
    stream = check(rt.rt.create_stream())
    unsupported = ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    check(rt.rt.set_stream_overflow_switch(stream, 1), unsupported)
    check(rt.rt.get_stream_overflow_switch(stream), unsupported)
    check(rt.rt.set_stream_overflow_switch(stream, 5), ErrorCode.ACL_ERROR_INVALID_PARAM)


# -- saturation mode -------------------------------------------------------------------


def test_infnan_mode_sets_no_overflow_status(dev0, check):
    check(dev0.rt.set_device_sat_mode(OverflowMode.INFNAN))
    stream = check(dev0.rt.create_stream())
    check(dev0.rt.set_stream_overflow_switch(stream, 1))
    check(dev0.sim.launch_kernel(Kernel(overflow=True), stream))
    assert read_overflow_status(dev0, check, stream) == 0


def test_sat_mode_is_captured_at_stream_creation(dev0, check):
    saturating = check(dev0.rt.create_stream())
    check(dev0.rt.set_device_sat_mode(OverflowMode.INFNAN))
    check(dev0.rt.set_stream_overflow_switch(saturating, 1))
    check(dev0.sim.launch_kernel(Kernel(overflow=True), saturating))
    assert read_overflow_status(dev0, check, saturating) != 0


def test_default_sat_mode_override_applies_to_default_stream(make_rt, check):
    rt = make_rt(default_sat_mode=OverflowMode.INFNAN)
    check(rt.rt.set_device(0))
    check(rt.rt.set_stream_overflow_switch(0, 1))
    check(rt.sim.launch_kernel(Kernel(overflow=True), 0))
    assert read_overflow_status(rt, check, 0) == 0
