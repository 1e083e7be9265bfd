"""The conformance checks: what aclasync relies on, asked of a pyACL runtime directly.

Each check drives the runtime as a plain pyACL program does (on the calling thread, and
on threads of its own where a rule is about threads), holds device work with gates
(blocking host callbacks, ``_reports``) rather than durations, and leaves the device as
it found it (every ``set_device`` it makes is reset). It ends in one of three verdicts:

- ``PASS``, with what it measured;
- ``FAIL``, with a message naming the difference: the call, what it gave, and what
  pyACL's documented behaviour (and so aclasync) expects;
- ``SKIP``, with the reason (a feature this SoC lacks, say).

``run_checks(acl, device)`` runs them all (or those named); ``CHECKS`` lists them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._pyacl.codes import ErrorCode, code_name
from .._pyacl.constants import (
    EventRecordedStatus,
    MemAttr,
    MemcpyKind,
    StreamFlag,
    StreamStatus,
)
from . import _support as support
from ._reports import ReportThread
from ._support import (
    FAIL,
    PASS,
    SKIP,
    Check,
    CheckFailed,
    CheckResult,
    CheckSkipped,
    bare_status,
    code_text,
    device_set,
    expect,
    held_by_gate,
    in_new_thread,
    last_item,
    new_stream,
    ok,
    run_check,
    values,
)

__all__ = ["CHECKS", "FAIL", "PASS", "SKIP", "Check", "CheckResult", "run_check", "run_checks"]


def run_checks(acl: Any, device: int = 0, names: Sequence[str] | None = None) -> list[CheckResult]:
    """Run the checks named (default: all, in ``CHECKS`` order) and return their results."""
    known = {check.name: check for check in CHECKS}
    unknown = [name for name in names or () if name not in known]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; expected some of {list(known)}")
    chosen = [known[name] for name in names] if names else list(CHECKS)
    return [run_check(check, acl, device) for check in chosen]


# -- the checks ------------------------------------------------------------------------


def check_return_shapes(acl: Any, device: int) -> dict[str, Any]:
    """Calls that act return ``ret``; calls that produce values return ``(values, ret)``."""
    count, ret = values(acl.rt.get_device_count(), "acl.rt.get_device_count()", "(count, ret)")
    ok(ret, "acl.rt.get_device_count()")
    if not isinstance(count, int) or count < 1:
        raise CheckFailed(f"acl.rt.get_device_count() gave {count!r} devices")
    version = values(acl.get_version(), "acl.get_version()", "(major, minor, patch, ret)")
    ok(version[-1], "acl.get_version()")
    with device_set(acl, device):
        mode, ret = values(acl.rt.get_run_mode(), "acl.rt.get_run_mode()", "(run_mode, ret)")
        ok(ret, "acl.rt.get_run_mode()")
        current, ret = values(acl.rt.get_device(), "acl.rt.get_device()", "(device_id, ret)")
        ok(ret, "acl.rt.get_device()")
        if current != device:
            raise CheckFailed(f"acl.rt.get_device() gave {current} after set_device({device})")
        free, total, ret = values(
            acl.rt.get_mem_info(int(MemAttr.HBM_MEM)),
            "acl.rt.get_mem_info(ACL_HBM_MEM)",
            "(free, total, ret)",
        )
        ok(ret, "acl.rt.get_mem_info(ACL_HBM_MEM)")
        if not (isinstance(free, int) and isinstance(total, int) and 0 < free <= total):
            raise CheckFailed(f"acl.rt.get_mem_info gave free={free}, total={total}")
        stream, ret = values(acl.rt.create_stream(), "acl.rt.create_stream()", "(stream, ret)")
        ok(ret, "acl.rt.create_stream()")
        status, ret = values(acl.rt.stream_query(stream), "acl.rt.stream_query(s)", "(status, ret)")
        ok(ret, "acl.rt.stream_query(s)")
        expect(status, int(StreamStatus.COMPLETE), "acl.rt.stream_query(new stream)", "idle: 0")
        ok(bare_status(acl.rt.destroy_stream(stream), "acl.rt.destroy_stream(s)"), "destroy_stream")
    return {
        "device_count": count,
        "version": ".".join(str(n) for n in version[:-1]),
        "run_mode": mode,
        "memory_free": free,
        "memory_total": total,
    }


def check_device_refcount(acl: Any, device: int) -> dict[str, Any]:
    """``reset_device`` undoes one ``set_device``; the device goes at 0; a reset at 0 fails."""
    for _ in range(2):
        ok(bare_status(acl.rt.set_device(device), "acl.rt.set_device"), "acl.rt.set_device")
    ok(acl.rt.reset_device(device), "acl.rt.reset_device (first of two)")
    try:
        stream, ret = acl.rt.create_stream()
    except BaseException:  # missing, raising, another shape: the count is still one
        acl.rt.reset_device(device)
        raise
    if ret != 0:
        acl.rt.reset_device(device)
        raise CheckFailed(
            f"after set_device twice and reset_device once, create_stream gave {code_text(ret)}: "
            "the first reset released the device; reset_device must count set_device "
            "calls and release only at zero",
            ret=ret,
        )
    ok(acl.rt.destroy_stream(stream), "acl.rt.destroy_stream")
    ok(acl.rt.reset_device(device), "acl.rt.reset_device (second of two)")
    third = acl.rt.reset_device(device)
    if third == 0:
        raise CheckFailed(
            "a third reset_device after two set_device calls gave 0: the count was already "
            "zero, so the runtime must refuse it (it released the device late, or never)"
        )
    return {"reset_at_zero": third, "reset_at_zero_name": code_name(third)}


def check_contexts_per_thread(acl: Any, device: int) -> dict[str, Any]:
    """The current context belongs to one OS thread; a new thread has none."""
    no_context = int(ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    with device_set(acl, device) as context:
        result = in_new_thread(acl.rt.get_context, "acl.rt.get_context()")
        ret = values(result, "acl.rt.get_context() on a new thread", "(context, ret)")[-1]
        if ret != no_context:
            raise CheckFailed(
                f"on a new thread, after set_device on another, get_context gave {code_text(ret)}; "
                f"a new thread has no current context ({code_text(no_context)})",
                ret=ret,
            )

        def adopt() -> tuple[Any, Any]:
            return acl.rt.set_context(context), acl.rt.get_context()

        ret, got = in_new_thread(adopt, "acl.rt.set_context(ctx)")
        ok(ret, "acl.rt.set_context(ctx) on another thread")
        if tuple(got) != (context, 0):
            raise CheckFailed(f"after set_context(ctx) on a thread, get_context gave {got!r}")

        def own() -> tuple[Any, Any, Any]:
            made, ret = acl.rt.create_context(device)
            current = acl.rt.get_context()
            return made, ret, (current, acl.rt.destroy_context(made) if ret == 0 else None)

        made, ret, (current, destroyed) = in_new_thread(own, "acl.rt.create_context")
        ok(ret, "acl.rt.create_context on a new thread")
        if tuple(current) != (made, 0):
            raise CheckFailed(
                f"create_context did not become current: get_context gave {current!r}"
            )
        ok(destroyed, "acl.rt.destroy_context")
        here = acl.rt.get_context()
        if tuple(here) != (context, 0):
            raise CheckFailed(
                f"a context created on another thread changed this thread's: get_context "
                f"gave {here!r}, expected ({context}, 0)"
            )
    return {"no_context_code": no_context}


def _check_sync(acl: Any, device: int, flags: int, label: str) -> dict[str, Any]:
    with device_set(acl, device) as context:
        stream, ret = acl.rt.create_stream_with_config(0, flags)
        if ret == ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT and flags:
            raise CheckSkipped(
                f"{label} streams are not supported here: create_stream_with_config(0, "
                f"{flags}) gave {code_text(ret)}"
            )
        ok(ret, f"acl.rt.create_stream_with_config(0, {flags})")
        try:
            done = threading.Event()
            box: list[tuple[Any, float]] = []
            raised: list[BaseException] = []

            def wait() -> None:
                try:
                    acl.rt.set_context(context)
                    ret = acl.rt.synchronize_stream(stream)
                    box.append((ret, time.perf_counter()))
                except BaseException as exc:  # reported by the check, not by the thread
                    raised.append(exc)
                finally:
                    done.set()

            def returned_or_raised() -> None:
                if raised:
                    raise CheckFailed(
                        f"acl.rt.synchronize_stream({label} stream) raised "
                        f"{type(raised[0]).__name__}: {raised[0]}; pyACL returns a status"
                    )

            with held_by_gate(acl, context, stream) as gate:
                threading.Thread(target=wait, name="aclasync-check-sync", daemon=True).start()
                if done.wait(support.BLOCKED_S):
                    returned_or_raised()
                    raise CheckFailed(
                        f"synchronize_stream on a {label} stream returned {code_text(box[0][0])} "
                        "while the stream was held by a blocking callback: it must wait for "
                        "the work queued"
                    )
                opened = time.perf_counter()
                gate.open()
                if not done.wait(support.PATIENCE_S):
                    raise CheckFailed(
                        f"synchronize_stream on a {label} stream had not returned "
                        f"{support.PATIENCE_S:g} s after its work finished"
                    )
                returned_or_raised()
            ret, returned = box[0]
            ok(ret, f"acl.rt.synchronize_stream({label} stream)")
        finally:
            acl.rt.destroy_stream(stream)
    return {"return_after_release_us": (returned - opened) * 1e6}


def check_default_sync(acl: Any, device: int) -> dict[str, Any]:
    """``synchronize_stream`` on a default-mode stream waits for the work, then returns 0."""
    return _check_sync(acl, device, 0, "default-mode")


def check_fast_sync(acl: Any, device: int) -> dict[str, Any]:
    """The same on a FAST_SYNC stream (polling wait): it must still wait, and return."""
    return _check_sync(acl, device, int(StreamFlag.FAST_SYNC), "FAST_SYNC")


def check_callbacks(acl: Any, device: int) -> dict[str, Any]:
    """Callbacks need a subscription (107015 without) and run on the subscribed thread."""
    with device_set(acl, device) as context, new_stream(acl) as stream:
        ret = acl.rt.launch_callback(lambda _: None, None, 0, stream)
        expect(
            ret,
            ErrorCode.ACL_ERROR_RT_STREAM_NO_CB_REG,
            "acl.rt.launch_callback on a stream with no subscription",
            "no thread to run it",
        )
        ran: list[tuple[int, object]] = []
        with ReportThread(acl, context) as reporter:
            ok(acl.rt.subscribe_report(reporter.ident, stream), "acl.rt.subscribe_report")
            ret = acl.rt.launch_callback(
                lambda data: ran.append((threading.get_ident(), data)), "tag", 1, stream
            )
            ok(ret, "acl.rt.launch_callback (subscribed)")
            ok(
                acl.rt.synchronize_stream_with_timeout(stream, int(support.PATIENCE_S * 1e3)),
                "acl.rt.synchronize_stream_with_timeout after a blocking callback",
            )
            ok(acl.rt.unsubscribe_report(reporter.ident, stream), "acl.rt.unsubscribe_report")
            if ran != [(reporter.ident, "tag")]:
                raise CheckFailed(
                    f"the callback ran as {ran!r}; expected once, on the subscribed thread "
                    f"({reporter.ident}), with its user data ('tag')"
                )
            if reporter.errors:
                raise CheckFailed(f"process_report gave {[code_text(e) for e in reporter.errors]}")
            if reporter.exceptions:
                raise CheckFailed(f"process_report raised {reporter.exceptions!r}")
    return {}


def check_event_timing(acl: Any, device: int) -> dict[str, Any]:
    """Timing events measure device time in milliseconds; statuses read NOT_READY then COMPLETE."""
    with device_set(acl, device) as context, new_stream(acl) as stream:
        start, ret = values(acl.rt.create_event(), "acl.rt.create_event()", "(event, ret)")
        ok(ret, "acl.rt.create_event()")
        end, ret = acl.rt.create_event()
        ok(ret, "acl.rt.create_event()")
        try:
            status = values(acl.rt.query_event_status(end), "query_event_status", "(status, ret)")
            expect(
                tuple(status),
                (int(EventRecordedStatus.NOT_READY), 0),
                "acl.rt.query_event_status(never recorded)",
                "NOT_READY is 0, the opposite of query_event",
            )
            ok(acl.rt.record_event(start, stream), "acl.rt.record_event(start)")
            with held_by_gate(acl, context, stream) as gate:
                ok(acl.rt.record_event(end, stream), "acl.rt.record_event(end)")
                reached = time.perf_counter()
                time.sleep(support.HOLD_S)
                held_ms = (time.perf_counter() - reached) * 1e3
                gate.open()
                ok(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
            elapsed, ret = values(
                acl.rt.event_elapsed_time(start, end), "acl.rt.event_elapsed_time", "(ms, ret)"
            )
            ok(ret, "acl.rt.event_elapsed_time")
            if not isinstance(elapsed, float):
                raise CheckFailed(f"event_elapsed_time gave {elapsed!r}, not a float")
            if not 0.5 * held_ms <= elapsed <= 2 * held_ms + 100:
                raise CheckFailed(
                    f"event_elapsed_time gave {elapsed:g} for work held {held_ms:.0f} ms: "
                    "pyACL gives milliseconds",
                    elapsed=elapsed,
                    held_ms=held_ms,
                )
            status = acl.rt.query_event_status(end)
            expect(
                tuple(status),
                (int(EventRecordedStatus.COMPLETE), 0),
                "acl.rt.query_event_status(completed)",
                "COMPLETE is 1",
            )
        finally:
            acl.rt.destroy_event(start)
            acl.rt.destroy_event(end)
    return {"elapsed_ms": elapsed, "held_ms": held_ms}


def check_overflow_status(acl: Any, device: int) -> dict[str, Any]:
    """The overflow status takes exactly 64 bytes of device memory, written by a stream task."""
    with device_set(acl, device), new_stream(acl) as stream:
        buffer, ret = acl.rt.malloc(64, 0)
        ok(ret, "acl.rt.malloc(64)")
        host, ret = acl.rt.malloc_host(64)
        ok(ret, "acl.rt.malloc_host(64)")
        try:
            expect(
                acl.rt.get_overflow_status(buffer, 63, stream),
                ErrorCode.ACL_ERROR_RT_PARAM_INVALID,
                "acl.rt.get_overflow_status(buffer, 63, stream)",
                "the buffer must be exactly 64 bytes",
            )
            ok(acl.rt.get_overflow_status(buffer, 64, stream), "acl.rt.get_overflow_status")
            ok(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
            kind = int(MemcpyKind.DEVICE_TO_HOST)
            ok(acl.rt.memcpy(host, 64, buffer, 64, kind), "acl.rt.memcpy (device to host)")
            data = acl.util.ptr_to_bytes(host, 64)
            status = int.from_bytes(bytes(data[:8]), "little")
            ok(acl.rt.reset_overflow_status(stream), "acl.rt.reset_overflow_status")
            ok(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
        finally:
            acl.rt.free(buffer)
            acl.rt.free_host(host)
    return {"status": status}


def check_timeouts(acl: Any, device: int) -> dict[str, Any]:
    """Timed waits: -2 is invalid, 0 polls, expiry gives 507046 (stream) and 507047 (event)."""
    with device_set(acl, device) as context, new_stream(acl) as stream:
        expect(
            acl.rt.synchronize_stream_with_timeout(stream, -2),
            ErrorCode.ACL_ERROR_RT_PARAM_INVALID,
            "acl.rt.synchronize_stream_with_timeout(stream, -2)",
            "a timeout below -1 is invalid",
        )
        event, ret = acl.rt.create_event()
        ok(ret, "acl.rt.create_event()")
        try:
            with held_by_gate(acl, context, stream):
                expect(
                    tuple(acl.rt.stream_query(stream)),
                    (int(StreamStatus.NOT_READY), 0),
                    "acl.rt.stream_query(held stream)",
                    "NOT_READY is 1, ret 0",
                )
                ok(acl.rt.record_event(event, stream), "acl.rt.record_event")
                began = time.perf_counter()
                stream_ret = acl.rt.synchronize_stream_with_timeout(stream, support.SHORT_MS)
                waited_ms = (time.perf_counter() - began) * 1e3
                expect(
                    stream_ret,
                    ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                    f"acl.rt.synchronize_stream_with_timeout(held stream, {support.SHORT_MS})",
                    "the wait expired",
                )
                if waited_ms > support.PATIENCE_S * 1e3:
                    raise CheckFailed(
                        f"synchronize_stream_with_timeout(held stream, {support.SHORT_MS}) took "
                        f"{waited_ms:.0f} ms to expire"
                    )
                expect(
                    acl.rt.synchronize_event_with_timeout(event, support.SHORT_MS),
                    ErrorCode.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                    f"acl.rt.synchronize_event_with_timeout(event behind it, {support.SHORT_MS})",
                    "the wait expired",
                )
                expect(
                    acl.rt.synchronize_stream_with_timeout(stream, 0),
                    ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                    "acl.rt.synchronize_stream_with_timeout(held stream, 0)",
                    "0 polls once",
                )
            ok(
                acl.rt.synchronize_stream_with_timeout(stream, int(support.PATIENCE_S * 1e3)),
                "acl.rt.synchronize_stream_with_timeout once the gate opened",
            )
        finally:
            acl.rt.destroy_event(event)
    return {"expired_after_ms": waited_ms}


def check_failing_call_codes(acl: Any, device: int) -> dict[str, Any]:
    """A failing call answers with pyACL's documented code, not an exception or another code."""
    invalid = int(ErrorCode.ACL_ERROR_INVALID_PARAM)
    rt_invalid = int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
    seen: dict[str, int] = {}
    wrong: list[str] = []
    with device_set(acl, device), new_stream(acl) as stream:
        calls: list[tuple[str, Callable[[], Any], int]] = [
            ("acl.rt.destroy_stream(0)", lambda: acl.rt.destroy_stream(0), invalid),
            ("acl.rt.destroy_event(0)", lambda: acl.rt.destroy_event(0), invalid),
            ("acl.rt.free(0)", lambda: acl.rt.free(0), invalid),
            ("acl.rt.record_event(0, stream)", lambda: acl.rt.record_event(0, stream), invalid),
            (
                "acl.rt.synchronize_stream_with_timeout(stream, -2)",
                lambda: acl.rt.synchronize_stream_with_timeout(stream, -2),
                rt_invalid,
            ),
            ("acl.rt.process_report(0)", lambda: acl.rt.process_report(0), invalid),
            (
                "acl.rt.create_stream() on a thread with no context",
                lambda: last_item(in_new_thread(acl.rt.create_stream, "acl.rt.create_stream()")),
                int(ErrorCode.ACL_ERROR_RT_CONTEXT_NULL),
            ),
        ]
        for call, fn, expected in calls:
            got = fn()
            seen[call] = got
            if got != expected:
                wrong.append(f"{call} gave {code_text(got)}, pyACL gives {code_text(expected)}")
    if wrong:
        raise CheckFailed("; ".join(wrong), codes=seen)
    return {"codes": seen}


CHECKS: tuple[Check, ...] = (
    Check("return-shapes", "values first, ret last; bare ret for actions", check_return_shapes),
    Check("device-refcount", "reset_device counts set_device calls", check_device_refcount),
    Check("contexts-per-thread", "a context is current per OS thread", check_contexts_per_thread),
    Check("callbacks", "callbacks run on the subscribed thread", check_callbacks),
    Check("default-sync", "default-mode sync waits, then returns 0", check_default_sync),
    Check("fast-sync", "FAST_SYNC sync waits, then returns 0", check_fast_sync),
    Check("event-timing", "timing events measure milliseconds", check_event_timing),
    Check("overflow-status", "overflow status: 64 bytes, a stream task", check_overflow_status),
    Check("timeouts", "timed waits expire with 507046 / 507047", check_timeouts),
    Check("error-codes", "failing calls give the documented codes", check_failing_call_codes),
)
