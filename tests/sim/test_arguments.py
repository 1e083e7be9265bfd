"""Argument handling: parse failures raise TypeError, everything else is a return code."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aclasync.sim import Kernel

# (call path, arguments) pairs that pyACL's argument parser would refuse.
BAD_CALLS = [
    ("rt.set_device", ()),
    ("rt.set_device", (0, 1)),
    ("rt.set_device", ("0",)),
    ("rt.set_device", (None,)),
    ("rt.set_device", (1.5,)),
    ("rt.reset_device", ()),
    ("rt.create_stream_with_config", (0,)),
    ("rt.create_stream_with_config", ("0", 0)),
    ("rt.destroy_stream", (None,)),
    ("rt.synchronize_stream", (None,)),
    ("rt.synchronize_stream", ()),
    ("rt.synchronize_stream_with_timeout", (0,)),
    ("rt.stream_query", (None,)),
    ("rt.stream_wait_event", (0, None)),
    ("rt.create_event_with_flag", (None,)),
    ("rt.record_event", (1,)),
    ("rt.record_event", (None, 0)),
    ("rt.synchronize_event", (None,)),
    ("rt.event_elapsed_time", (1,)),
    ("rt.destroy_event", (b"1",)),
    ("rt.malloc", (64,)),
    ("rt.malloc", (64.0, 0)),
    ("rt.free", (None,)),
    ("rt.memcpy", (1, 2, 3, 4)),
    ("rt.memcpy_async", (1, 2, 3, 4, 5)),
    ("rt.memset", (1, 2, 3)),
    ("rt.get_mem_info", ()),
    ("rt.set_context", (None,)),
    ("rt.create_context", ()),
    ("rt.process_report", ()),
    ("rt.process_report", ("1000",)),
    ("rt.subscribe_report", (1,)),
    ("rt.launch_callback", (print, None, 0)),
    ("rt.set_stream_failure_mode", (0,)),
    ("rt.get_overflow_status", (1, 64)),
    ("sim.launch_kernel", (Kernel(),)),
    ("sim.launch_kernel", (Kernel(), None)),
]


def resolve(runtime, path):
    namespace, name = path.split(".")
    return getattr(getattr(runtime, namespace), name)


@pytest.mark.parametrize(
    ("path", "args"), BAD_CALLS, ids=[f"{p}{len(a)}-{i}" for i, (p, a) in enumerate(BAD_CALLS)]
)
def test_parse_failures_raise_type_error(dev0, path, args):
    with pytest.raises(TypeError):
        resolve(dev0, path)(*args)


def test_kernel_must_be_a_kernel(dev0):
    with pytest.raises(TypeError):
        dev0.sim.launch_kernel(object(), 0)


def test_int_codes_refuse_values_wider_than_32_bits(dev0):
    with pytest.raises(TypeError, match=r"acl\.rt\.set_device args parse failed"):
        dev0.rt.set_device(2**31)
    with pytest.raises(TypeError, match=r"set_device\(\) takes no keyword arguments"):
        dev0.rt.set_device(device_id=0)


def test_handle_codes_take_exact_ints_only(dev0):
    import numpy as np

    with pytest.raises(TypeError, match=r"acl\.rt\.synchronize_stream args parse failed"):
        dev0.rt.synchronize_stream(np.int64(0))
    assert dev0.rt.set_device(np.int32(0)) == 0  # "i" takes anything with __index__


# Calls whose every argument is an int, by arity. Calls that would wait on real work
# are safe here: nothing is ever launched, so every wait ends at once.
INT_CALLS = {
    "rt.set_device": 1,
    "rt.reset_device": 1,
    "rt.reset_device_force": 1,
    "rt.get_device": 0,
    "rt.get_device_count": 0,
    "rt.get_context": 0,
    "rt.set_context": 1,
    "rt.create_context": 1,
    "rt.destroy_context": 1,
    "rt.create_stream": 0,
    "rt.create_stream_with_config": 2,
    "rt.destroy_stream": 1,
    "rt.destroy_stream_force": 1,
    "rt.synchronize_stream": 1,
    "rt.synchronize_stream_with_timeout": 2,
    "rt.stream_query": 1,
    "rt.stream_wait_event": 2,
    "rt.synchronize_device": 0,
    "rt.synchronize_device_with_timeout": 1,
    "rt.set_stream_failure_mode": 2,
    "rt.set_stream_overflow_switch": 2,
    "rt.get_stream_overflow_switch": 1,
    "rt.get_overflow_status": 3,
    "rt.reset_overflow_status": 1,
    "rt.create_event": 0,
    "rt.create_event_with_flag": 1,
    "rt.create_event_ex_with_flag": 1,
    "rt.record_event": 2,
    "rt.reset_event": 2,
    "rt.query_event": 1,
    "rt.query_event_status": 1,
    "rt.synchronize_event": 1,
    "rt.synchronize_event_with_timeout": 2,
    "rt.event_elapsed_time": 2,
    "rt.destroy_event": 1,
    "rt.malloc": 2,
    "rt.free": 1,
    "rt.free_host": 1,
    "rt.memcpy": 5,
    "rt.memcpy_async": 6,
    "rt.memset": 4,
    "rt.memset_async": 5,
    "rt.get_mem_info": 1,
    "rt.set_device_sat_mode": 1,
    "rt.get_device_sat_mode": 0,
    "rt.get_run_mode": 0,
    "rt.subscribe_report": 2,
    "rt.unsubscribe_report": 2,
    "rt.process_report": 1,
    "util.stop_thread": 1,
}

INT32 = st.integers(-(2**31), 2**31 - 1)
INTERESTING = st.sampled_from([0, 1, -1, -2, 2, 7, 8, 63, 64, 65, 100000, 2**31 - 1, -(2**31)])


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_ints_never_raise(make_rt, data):
    rt = make_rt(memory_bytes=1 << 20)
    assert rt.rt.set_device(0) == 0
    stream, _ = rt.rt.create_stream()
    event, _ = rt.rt.create_event()
    ptr, _ = rt.rt.malloc(256, 0)
    host, _ = rt.rt.malloc_host(256)
    context, _ = rt.rt.get_context()
    handles = st.sampled_from([stream, event, ptr, host, context, ptr + 64])
    value = st.one_of(INTERESTING, INT32, handles)
    int32 = st.one_of(INTERESTING, INT32)  # pyACL's "i" code refuses wider values
    try:
        for path in data.draw(st.lists(st.sampled_from(sorted(INT_CALLS)), max_size=25)):
            fn = resolve(rt, path)
            codes = fn.__pyacl_fmt__ or ""  # None: the wrapper parses nothing
            assert len(codes) == INT_CALLS[path]
            strategies = [int32 if code == "i" else value for code in codes]
            args = data.draw(st.tuples(*strategies), label=path)
            start = time.perf_counter()
            result = fn(*args)
            took = time.perf_counter() - start
            if isinstance(result, tuple):
                assert result, f"{path}{args} returned an empty tuple"
                ret = result[-1]
            else:
                ret = result
            assert isinstance(ret, int), f"{path}{args}: {result!r}"
            assert not isinstance(ret, bool), f"{path}{args}: {result!r}"
            assert took < 2.0, f"{path}{args} took {took:.1f} s"
    finally:
        rt.sim.close()
