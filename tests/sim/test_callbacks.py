"""Host callbacks: subscribe_report, launch_callback, process_report and util threads."""

from __future__ import annotations

import errno
import threading
import time

import pytest

from aclasync._pyacl.codes import ErrorCode
from aclasync._pyacl.constants import CallbackBlockType, StreamStatus
from aclasync.sim import Kernel

MS = 1000
NO_BLOCK, BLOCK = CallbackBlockType.NO_BLOCK, CallbackBlockType.BLOCK


@pytest.fixture
def stream(dev0, check):
    return check(dev0.rt.create_stream())


@pytest.fixture
def loop(dev0, check, spawn):
    """A worker thread to serve reports, with device 0's context set on it."""
    worker = spawn()
    check(worker.call(dev0.rt.set_device, 0))
    return worker


def record_call(log):
    def callback(user_data):
        log.append((user_data, threading.get_ident()))

    return callback


def test_no_block_callback_runs_on_the_subscribed_thread(dev0, check, stream, loop):
    log = []
    check(dev0.rt.subscribe_report(loop.ident, stream))
    data = {"payload": [1, 2, 3]}
    check(dev0.rt.launch_callback(record_call(log), data, NO_BLOCK, stream))
    check(dev0.rt.synchronize_stream(stream), what="a no-block callback does not hold the stream")
    assert log == [], "callbacks run only inside process_report"
    check(loop.call(dev0.rt.process_report, 2000))
    assert log == [(data, loop.ident)]
    assert log[0][0] is data, "user data is passed as is"


def test_process_report_runs_every_report_so_far(dev0, check, stream, loop):
    log = []
    check(dev0.rt.subscribe_report(loop.ident, stream))
    for i in range(3):
        check(dev0.rt.launch_callback(record_call(log), i, NO_BLOCK, stream))
    check(dev0.rt.synchronize_stream(stream))
    check(loop.call(dev0.rt.process_report, 2000))
    assert [data for data, _ in log] == [0, 1, 2]


def test_blocking_callback_holds_the_stream(dev0, check, stream, loop):
    log = []
    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(dev0.rt.launch_callback(lambda data: log.append(data), "cb", BLOCK, stream))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: log.append("after")), stream))
    check(
        dev0.rt.synchronize_stream_with_timeout(stream, 100),
        ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
        "the stream waits for the callback",
    )
    assert check(dev0.rt.stream_query(stream)) == StreamStatus.NOT_READY
    assert log == []
    check(loop.call(dev0.rt.process_report, 2000))
    check(dev0.rt.synchronize_stream(stream))
    assert log == ["cb", "after"]


def test_slow_blocking_callback_delays_later_work(dev0, check, stream, loop):
    log = []

    def slow(data):
        time.sleep(0.15)  # the callback's own work, not synchronisation
        log.append(data)

    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(dev0.rt.launch_callback(slow, "slow", BLOCK, stream))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: log.append("after")), stream))
    pending = loop.submit(dev0.rt.process_report, 2000)
    start = time.perf_counter()
    check(dev0.rt.synchronize_stream(stream))
    assert time.perf_counter() - start >= 0.12
    check(pending.result(5))
    assert log == ["slow", "after"]


LEFT_SET = r"^<built-in function process_report> returned a result with an exception set$"


def test_callback_exception_comes_out_of_process_report_as_a_system_error(
    dev0, check, stream, loop
):
    """pyACL returns from process_report with the callback's exception still set, so
    CPython raises SystemError, caused by it; the rest of the batch has run."""
    log = []
    error = ValueError("callback bug")

    def bad(data):
        raise error

    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(dev0.rt.launch_callback(bad, None, NO_BLOCK, stream))
    check(dev0.rt.launch_callback(record_call(log), "next", NO_BLOCK, stream))
    check(dev0.rt.synchronize_stream(stream))
    with pytest.raises(SystemError, match=LEFT_SET) as raised:
        loop.call(dev0.rt.process_report, 2000)
    assert raised.value.__cause__ is error
    assert [data for data, _ in log] == ["next"]
    check(loop.call(dev0.rt.process_report, 60), ErrorCode.ACL_ERROR_RT_REPORT_TIMEOUT)


def test_a_raising_blocking_callback_still_lets_its_stream_go(dev0, check, stream, loop):
    after = []

    def bad(data):
        raise RuntimeError("blocking callback bug")

    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(dev0.rt.launch_callback(bad, None, BLOCK, stream))
    check(dev0.sim.launch_kernel(Kernel(fn=lambda: after.append("kernel")), stream))
    with pytest.raises(SystemError, match=LEFT_SET) as raised:
        loop.call(dev0.rt.process_report, 2000)
    assert isinstance(raised.value.__cause__, RuntimeError)
    check(dev0.rt.synchronize_stream_with_timeout(stream, 2000), what="the stream goes on")
    assert after == ["kernel"]


def test_launch_callback_needs_a_subscription(dev0, check, stream):
    no_cb = ErrorCode.ACL_ERROR_RT_STREAM_NO_CB_REG
    check(dev0.rt.launch_callback(print, None, NO_BLOCK, stream), no_cb)
    check(dev0.rt.launch_callback(print, None, BLOCK, 0), no_cb)


def test_launch_callback_argument_rules(dev0, check, stream, loop):
    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(dev0.rt.launch_callback(print, None, 2, stream), ErrorCode.ACL_ERROR_INVALID_PARAM)
    with pytest.raises(TypeError):
        dev0.rt.launch_callback("not callable", None, NO_BLOCK, stream)
    with pytest.raises(TypeError):
        dev0.rt.launch_callback(print, None, stream)


def test_launch_callback_checks_the_block_type_before_the_stream(rt, check):
    invalid = ErrorCode.ACL_ERROR_INVALID_PARAM
    check(rt.rt.launch_callback(print, None, 2, 0), invalid, "no current context")
    check(rt.rt.set_device(0))
    check(rt.rt.launch_callback(print, None, 2, 0x1234), invalid, "unknown stream")
    check(rt.rt.launch_callback(print, None, 0, 0x1234), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)


def test_launch_callback_on_a_stream_of_another_context(dev0, check, stream, loop):
    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(dev0.rt.create_context(0))
    check(
        dev0.rt.launch_callback(print, None, NO_BLOCK, stream),
        ErrorCode.ACL_ERROR_RT_STREAM_CONTEXT,
    )


def test_process_report_on_unsubscribed_thread_returns_at_once(dev0, check, loop):
    start = time.perf_counter()
    check(loop.call(dev0.rt.process_report, 3000), ErrorCode.ACL_ERROR_RT_THREAD_SUBSCRIBE)
    check(dev0.rt.process_report(-1), ErrorCode.ACL_ERROR_RT_THREAD_SUBSCRIBE)
    assert time.perf_counter() - start < 2.5, "well under the 3 s timeout: it did not wait"


@pytest.mark.parametrize("timeout", [0, -2, -1000])
def test_process_report_invalid_timeout(dev0, check, stream, loop, timeout):
    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(loop.call(dev0.rt.process_report, timeout), ErrorCode.ACL_ERROR_INVALID_PARAM)


def test_process_report_times_out(dev0, check, stream, loop):
    check(dev0.rt.subscribe_report(loop.ident, stream))
    start = time.perf_counter()
    check(loop.call(dev0.rt.process_report, 60), ErrorCode.ACL_ERROR_RT_REPORT_TIMEOUT)
    assert 0.055 <= time.perf_counter() - start < 5.0  # lower bound: the timeout


def test_process_report_waits_for_a_report(dev0, check, stream, loop):
    log = []
    check(dev0.rt.subscribe_report(loop.ident, stream))
    pending = loop.submit(dev0.rt.process_report, 3000)
    check(dev0.sim.launch_kernel(Kernel(duration_us=100 * MS), stream))
    check(dev0.rt.launch_callback(record_call(log), "late", NO_BLOCK, stream))
    check(pending.result(5))
    assert [data for data, _ in log] == ["late"]


def test_subscribe_twice(dev0, check, stream, loop, spawn):
    check(dev0.rt.subscribe_report(loop.ident, stream))
    again = ErrorCode.ACL_ERROR_RT_STREAM_SUBSCRIBE
    check(dev0.rt.subscribe_report(loop.ident, stream), again, "same thread")
    check(dev0.rt.subscribe_report(spawn().ident, stream), again, "another thread")


def test_one_thread_serves_many_streams_of_one_device(dev0, check, stream, loop):
    log = []
    other = check(dev0.rt.create_stream())
    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(dev0.rt.subscribe_report(loop.ident, other))
    check(dev0.rt.launch_callback(record_call(log), "a", NO_BLOCK, stream))
    check(dev0.rt.launch_callback(record_call(log), "b", NO_BLOCK, other))
    check(dev0.rt.synchronize_device())
    check(loop.call(dev0.rt.process_report, 2000))
    assert sorted(data for data, _ in log) == ["a", "b"]


def test_one_thread_cannot_serve_two_devices(dev0, check, stream, loop):
    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(dev0.rt.set_device(1))
    on_dev1 = check(dev0.rt.create_stream())
    check(
        dev0.rt.subscribe_report(loop.ident, on_dev1),
        ErrorCode.ACL_ERROR_RT_THREAD_SUBSCRIBE,
    )


def test_unsubscribe_rules(dev0, check, stream, loop, spawn):
    not_subscribed = ErrorCode.ACL_ERROR_RT_STREAM_SUBSCRIBE
    check(dev0.rt.unsubscribe_report(loop.ident, stream), not_subscribed, "before subscribe")
    check(dev0.rt.subscribe_report(loop.ident, stream))
    check(
        dev0.rt.unsubscribe_report(spawn().ident, stream),
        ErrorCode.ACL_ERROR_RT_THREAD_SUBSCRIBE,
        "bound to another thread",
    )
    check(dev0.rt.unsubscribe_report(loop.ident, stream))
    check(dev0.rt.unsubscribe_report(loop.ident, stream), not_subscribed, "twice")
    check(
        dev0.rt.launch_callback(print, None, NO_BLOCK, stream),
        ErrorCode.ACL_ERROR_RT_STREAM_NO_CB_REG,
    )
    check(loop.call(dev0.rt.process_report, 1000), ErrorCode.ACL_ERROR_RT_THREAD_SUBSCRIBE)
    check(dev0.rt.subscribe_report(loop.ident, stream), what="can subscribe again")


def test_util_thread_serves_callbacks(dev0, check, stream):
    log, seen = [], {}
    subscribed, stop = threading.Event(), threading.Event()
    ctx = check(dev0.rt.get_context())

    def serve(args):
        seen["context_before"] = dev0.rt.get_context()[-1]
        seen["set_context"] = dev0.rt.set_context(ctx)
        seen["args"] = args
        subscribed.wait(10)  # process_report would return 107012 at once before that
        while not stop.is_set():
            dev0.rt.process_report(20)

    tid, err = dev0.util.start_thread(serve, ["arg"])
    assert err == 0
    assert isinstance(tid, int)
    assert tid != 0
    check(dev0.rt.subscribe_report(tid, stream))
    subscribed.set()
    check(dev0.rt.launch_callback(record_call(log), "via util", BLOCK, stream))
    check(dev0.rt.synchronize_stream(stream))
    assert log == [("via util", tid)]
    check(dev0.rt.unsubscribe_report(tid, stream))
    stop.set()
    assert dev0.util.stop_thread(tid) == 0
    assert seen == {
        "context_before": ErrorCode.ACL_ERROR_RT_CONTEXT_NULL,
        "set_context": 0,
        "args": ["arg"],
    }


def test_stop_thread_joins(dev0):
    finished = threading.Event()

    def work():  # pyACL calls fn() with no argument when args_list is None
        time.sleep(0.1)  # the thread's own work
        finished.set()

    tid, err = dev0.util.start_thread(work, None)
    assert err == 0
    assert dev0.util.stop_thread(tid) == 0
    assert finished.is_set(), "stop_thread returns only after the function returned"
    assert dev0.util.stop_thread(tid) == errno.ESRCH, "a joined thread cannot be joined again"


def test_a_util_thread_keeps_its_id_until_it_is_joined(rt):
    # pyACL's threads are joinable pthreads: an id is not given out again before its
    # thread is joined. Here a finished, unjoined thread's id went to the next thread,
    # and stop_thread of the first then joined the second (and waited for it).
    first_done = threading.Event()
    second_may_end = threading.Event()
    first, ret = rt.util.start_thread(lambda: first_done.set(), None)
    assert ret == 0
    assert first_done.wait(10)
    second, ret = rt.util.start_thread(lambda: second_may_end.wait(10), None)
    assert ret == 0
    assert first != second
    assert rt.sim.live_objects()["util_threads"] == 2
    assert rt.util.stop_thread(first) == 0  # at once: the second still runs
    assert not second_may_end.is_set()
    second_may_end.set()
    assert rt.util.stop_thread(second) == 0
    assert rt.util.stop_thread(second) == 3  # ESRCH: joined already


def test_a_util_thread_never_joined_ends_with_the_runtime():
    # A finished thread waits to be joined (its id is kept); the runtime's close lets it
    # end, and nothing of its caller's is kept.
    import gc
    import weakref

    from aclasync.sim import create

    rt = create(device_count=1)

    class Payload:
        pass

    payload = Payload()
    ran = threading.Event()
    _, ret = rt.util.start_thread(lambda args: ran.set(), payload)
    assert ret == 0
    assert ran.wait(10)
    ref = weakref.ref(payload)
    del payload
    rt.sim.close()
    assert not [t for t in threading.enumerate() if t.name == "aclasync-sim-util"]
    gc.collect()
    assert ref() is None
