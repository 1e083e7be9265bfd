"""The conformance checks ``aclasync doctor`` runs, run here as tests (one copy of them).

Every check passes on the simulator, strict (pyACL's surface alone) and not, and on
CANN's ``acl`` where this machine has it. Then, for each check, a pyACL-shaped backend
with one fault (the simulator with one call replaced) makes it report ``FAIL``, and the
message names the difference: that is what a user attaching the doctor's report to a
bug report shows us.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import Faulty

import aclasync.sim
from aclasync._conformance import CHECKS, FAIL, PASS, SKIP, _support, run_check, run_checks

pytestmark = pytest.mark.slow


def _runtimes() -> list[str]:
    names = ["strict", "sim"]
    try:
        importlib.import_module("acl")
    except ImportError:
        pass
    else:
        names.append("native")
    return names


@pytest.fixture(params=_runtimes())
def runtime(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "native":
        yield importlib.import_module("acl")
        return
    acl = aclasync.sim.create(device_count=2, strict=request.param == "strict")
    yield acl
    if request.param == "sim":
        acl.sim.close()


@pytest.fixture
def strict() -> Any:
    return aclasync.sim.create(device_count=2, strict=True)


@pytest.fixture
def impatient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checks that wait for what never comes give up after 0.5 s instead of 5."""
    monkeypatch.setattr(_support, "PATIENCE_S", 0.5)


def _result(acl: Any, name: str) -> Any:
    (check,) = [c for c in CHECKS if c.name == name]
    return run_check(check, acl, 0)


def _fails(acl: Any, name: str, *fragments: str) -> None:
    result = _result(acl, name)
    assert result.verdict == FAIL, result
    for fragment in fragments:
        assert fragment in result.message, result.message


# -- on runtimes that behave -----------------------------------------------------------


def test_every_check_passes_on_a_runtime_that_behaves(runtime: Any) -> None:
    results = run_checks(runtime, 0)
    assert [r.name for r in results] == [c.name for c in CHECKS]
    failed = [(r.name, r.message) for r in results if r.verdict != PASS]
    assert failed == []
    assert all(r.seconds < 10 for r in results)
    (timing,) = [r for r in results if r.name == "event-timing"]
    assert timing.details["elapsed_ms"] >= timing.details["held_ms"] * 0.5


def test_the_checks_leave_no_device_set(strict: Any) -> None:
    run_checks(strict, 0)
    assert strict.rt.reset_device(0) != 0, "every set_device of the checks was reset"


def test_unknown_check_names_are_refused(strict: Any) -> None:
    with pytest.raises(ValueError, match="unknown check"):
        run_checks(strict, 0, ["return-shapes", "telepathy"])
    assert [r.name for r in run_checks(strict, 0, ["error-codes"])] == ["error-codes"]


def test_a_backend_that_raises_fails_the_check_naming_the_exception(strict: Any) -> None:
    def broken() -> Any:
        raise RuntimeError("driver went away")

    _fails(Faulty(strict, get_version=broken), "return-shapes", "RuntimeError: driver went away")


# -- one fault per check ---------------------------------------------------------------


def test_return_shapes_fails_on_a_bare_ret_where_pyacl_returns_a_tuple(strict: Any) -> None:
    acl = Faulty(strict, rt_create_stream=lambda: strict.rt.create_stream()[-1])
    _fails(acl, "return-shapes", "acl.rt.create_stream() returned 0", "(stream, ret)")


def test_device_refcount_fails_when_the_first_reset_releases(strict: Any) -> None:
    acl = Faulty(strict, rt_reset_device=strict.rt.reset_device_force)
    _fails(acl, "device-refcount", "the first reset released the device")


def test_device_refcount_fails_when_a_reset_at_zero_succeeds(strict: Any) -> None:
    resets = []

    def lenient(device: int) -> int:
        resets.append(device)
        ret = strict.rt.reset_device(device)
        return 0 if len(resets) == 3 else ret

    _fails(Faulty(strict, rt_reset_device=lenient), "device-refcount", "third reset_device")


def test_contexts_fail_when_a_context_is_shared_by_every_thread(strict: Any) -> None:
    seen: list[int] = []

    def get_context() -> tuple[int, int]:
        context, ret = strict.rt.get_context()
        if ret == 0:
            seen.append(context)
            return context, 0
        return (seen[-1], 0) if seen else (context, ret)

    acl = Faulty(strict, rt_get_context=get_context)
    _fails(acl, "contexts-per-thread", "get_context gave 0 (ACL_SUCCESS)", "has no current context")


def test_callbacks_fail_when_they_run_without_a_subscription(strict: Any) -> None:
    def run_at_once(fn: Any, data: Any, block: int, stream: int) -> int:
        fn(data)
        return 0

    acl = Faulty(strict, rt_launch_callback=run_at_once)
    _fails(acl, "callbacks", "launch_callback on a stream with no subscription gave 0", "107015")


def test_callbacks_fail_when_one_runs_on_the_wrong_thread(strict: Any) -> None:
    def inline_when_subscribed(fn: Any, data: Any, block: int, stream: int) -> int:
        ret: int = strict.rt.launch_callback(lambda _: None, None, block, stream)
        if ret == 0:
            fn(data)  # on the launching thread, not the subscribed one
        return ret

    acl = Faulty(strict, rt_launch_callback=inline_when_subscribed)
    _fails(acl, "callbacks", "on the subscribed thread")


@pytest.mark.usefixtures("impatient")
def test_callbacks_fail_and_end_when_they_are_never_delivered(strict: Any) -> None:
    """The blocking callback holds the stream for ever: its cleanup must not wait."""

    def nothing_reported(timeout: int) -> int:
        time.sleep(min(timeout, 100) / 1000)
        return 507012  # ACL_ERROR_RT_REPORT_TIMEOUT

    acl = Faulty(strict, rt_process_report=nothing_reported)
    _fails(acl, "callbacks", "after a blocking callback", "507046")
    assert strict.rt.get_device_count() == (2, 0)  # and the runtime is still usable


def test_default_sync_fails_when_synchronize_does_not_wait(strict: Any) -> None:
    acl = Faulty(strict, rt_synchronize_stream=lambda stream: 0)
    _fails(acl, "default-sync", "returned 0 (ACL_SUCCESS) while the stream was held")


@pytest.mark.usefixtures("impatient")
def test_a_sync_that_raises_fails_the_check_at_once_naming_the_exception(
    strict: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It raised on the check's waiting thread: that thread died with a traceback on
    # stderr and the check waited out its patience for a return that never came.
    def raising(stream: int) -> int:
        raise RuntimeError("EE1001: internal error")

    thread_errors: list[object] = []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    acl = Faulty(strict, rt_synchronize_stream=raising)
    _fails(
        acl,
        "default-sync",
        "acl.rt.synchronize_stream(default-mode stream) raised RuntimeError: EE1001",
    )
    assert thread_errors == []


@pytest.mark.usefixtures("impatient")
def test_fast_sync_fails_when_a_fast_sync_wait_never_returns(strict: Any) -> None:
    fast: set[int] = set()
    stuck = threading.Event()

    def create(priority: int, flags: int) -> tuple[int, int]:
        stream, ret = strict.rt.create_stream_with_config(priority, flags)
        if flags & 2:
            fast.add(stream)
        return stream, ret

    def synchronize(stream: int) -> int:
        if stream in fast:
            stuck.wait(30)  # a FAST_SYNC poll that never sees the completion
        ret: int = strict.rt.synchronize_stream(stream)
        return ret

    acl = Faulty(strict, rt_create_stream_with_config=create, rt_synchronize_stream=synchronize)
    try:
        _fails(acl, "fast-sync", "on a FAST_SYNC stream had not returned 0.5 s after")
        assert _result(acl, "default-sync").verdict == PASS
    finally:
        stuck.set()


def test_fast_sync_is_skipped_where_the_soc_lacks_it(strict: Any) -> None:
    def create(priority: int, flags: int) -> tuple[int, int]:
        if flags & 2:
            return 0, 207000
        result: tuple[int, int] = strict.rt.create_stream_with_config(priority, flags)
        return result

    result = _result(Faulty(strict, rt_create_stream_with_config=create), "fast-sync")
    assert result.verdict == SKIP
    assert "FAST_SYNC streams are not supported here" in result.message
    assert "207000 (ACL_ERROR_RT_FEATURE_NOT_SUPPORT)" in result.message


def test_event_timing_fails_on_microseconds(strict: Any) -> None:
    def in_us(start: int, end: int) -> tuple[float, int]:
        ms, ret = strict.rt.event_elapsed_time(start, end)
        return ms * 1e3, ret

    acl = Faulty(strict, rt_event_elapsed_time=in_us)
    _fails(acl, "event-timing", "pyACL gives milliseconds")


def test_event_timing_fails_on_the_old_status_numbers(strict: Any) -> None:
    acl = Faulty(strict, rt_query_event_status=strict.rt.query_event)  # 0 means COMPLETE
    _fails(
        acl,
        "event-timing",
        "acl.rt.query_event_status(completed) gave (0, 0); pyACL gives (1, 0) (COMPLETE is 1)",
    )


def test_overflow_status_fails_when_any_size_is_accepted(strict: Any) -> None:
    def any_size(address: int, size: int, stream: int) -> int:
        ret: int = strict.rt.get_overflow_status(address, 64, stream)
        return ret

    acl = Faulty(strict, rt_get_overflow_status=any_size)
    _fails(acl, "overflow-status", "(buffer, 63, stream) gave 0", "exactly 64 bytes")


def test_timeouts_fail_on_another_expiry_code(strict: Any) -> None:
    def other_code(stream: int, timeout: int) -> int:
        ret: int = strict.rt.synchronize_stream_with_timeout(stream, timeout)
        return 107019 if ret == 507046 else ret

    acl = Faulty(strict, rt_synchronize_stream_with_timeout=other_code)
    _fails(acl, "timeouts", "gave 107019", "pyACL gives 507046 (ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)")


def test_error_codes_fail_on_a_wrong_code_and_name_each(strict: Any) -> None:
    def destroy(stream: int) -> int:
        ret: int = strict.rt.destroy_stream(stream)
        return 107000 if stream == 0 else ret

    acl = Faulty(strict, rt_destroy_stream=destroy)
    _fails(
        acl,
        "error-codes",
        "acl.rt.destroy_stream(0) gave 107000 (ACL_ERROR_RT_PARAM_INVALID), "
        "pyACL gives 100000 (ACL_ERROR_INVALID_PARAM)",
    )


def test_every_check_has_a_fault_test_here() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    untested = [c.name for c in CHECKS if f'"{c.name}"' not in source.split("# -- one fault")[1]]
    assert untested == []
