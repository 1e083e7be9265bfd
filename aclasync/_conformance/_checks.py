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

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._pyacl.codes import ErrorCode, code_name
from .._pyacl.constants import (
    EventRecordedStatus,
    MemAttr,
    MemcpyKind,
    StreamFlag,
    StreamStatus,
)
from ._reports import Gate, ReportThread

__all__ = ["CHECKS", "FAIL", "PASS", "SKIP", "Check", "CheckResult", "run_check", "run_checks"]

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

#: How long a check waits for something that should happen at once (a thread's call
#: returning, a stream reaching its gate) before it calls it a failure.
PATIENCE_S = 5.0
#: How long a check watches a call that should stay blocked.
BLOCKED_S = 0.1
#: The short timeout the timeout check uses (ms).
SHORT_MS = 20
#: How long the event-timing check holds its stream (s).
HOLD_S = 0.05


class CheckFailed(Exception):
    """The runtime differs from what aclasync relies on; the message says how."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class CheckSkipped(Exception):
    """The check does not apply to this runtime; the message says why."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check's verdict (``PASS``, ``FAIL`` or ``SKIP``), message and measurements."""

    name: str
    verdict: str
    message: str
    details: dict[str, Any]
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Check:
    """A named check: ``run(acl, device)`` returns its measurements or raises."""

    name: str
    summary: str
    run: Callable[[Any, int], dict[str, Any]]


def run_check(check: Check, acl: Any, device: int = 0) -> CheckResult:
    """Run one check on *device* of *acl*; blocks for as long as it takes (under a second
    on a runtime that behaves; a few times ``PATIENCE_S`` at most on one that hangs)."""
    began = time.perf_counter()
    try:
        details = check.run(acl, device)
    except CheckFailed as failed:
        verdict, message, details = FAIL, str(failed), failed.details
    except CheckSkipped as skipped:
        verdict, message, details = SKIP, str(skipped), {}
    except Exception as exc:  # a runtime that raises where pyACL returns a code differs too
        verdict, message, details = FAIL, f"raised {type(exc).__name__}: {exc}", {}
    else:
        verdict, message = PASS, check.summary
    return CheckResult(check.name, verdict, message, details, time.perf_counter() - began)


def run_checks(acl: Any, device: int = 0, names: Sequence[str] | None = None) -> list[CheckResult]:
    """Run the checks named (default: all, in ``CHECKS`` order) and return their results."""
    known = {check.name: check for check in CHECKS}
    unknown = [name for name in names or () if name not in known]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; expected some of {list(known)}")
    chosen = [known[name] for name in names] if names else list(CHECKS)
    return [run_check(check, acl, device) for check in chosen]


# -- helpers ---------------------------------------------------------------------------


def _code(ret: object) -> str:
    """``507046 (ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)``, for messages."""
    if isinstance(ret, int) and not isinstance(ret, bool):
        return f"{int(ret)} ({code_name(ret)})"
    if isinstance(ret, tuple):
        return repr(tuple(int(v) if isinstance(v, int) else v for v in ret))
    return repr(ret)


def _status(result: object, call: str) -> int:
    """The ``ret`` of a call pyACL answers with a bare status."""
    if isinstance(result, bool) or not isinstance(result, int):
        raise CheckFailed(
            f"{call} returned {result!r} ({type(result).__name__}); pyACL returns a bare "
            "status (an int)",
            call=call,
        )
    return result


def _values(result: object, call: str, shape: str) -> tuple[Any, ...]:
    """The values of a call pyACL answers with ``(value, ..., ret)``; checks the shape."""
    size = shape.count(",") + 1
    if not isinstance(result, tuple) or len(result) != size:
        raise CheckFailed(
            f"{call} returned {result!r}; pyACL returns {shape}, values first and the status last",
            call=call,
        )
    ret = result[-1]
    if isinstance(ret, bool) or not isinstance(ret, int):
        raise CheckFailed(f"{call} returned {result!r}: its last item is no status", call=call)
    return result


def _ok(ret: object, call: str) -> None:
    if ret != 0:
        raise CheckFailed(f"{call} gave {_code(ret)}, expected 0", call=call, ret=ret)


def _expect(ret: object, expected: object, call: str, why: str) -> None:
    if ret != expected:
        raise CheckFailed(
            f"{call} gave {_code(ret)}; pyACL gives {_code(expected)} ({why})",
            call=call,
            ret=ret,
            expected=expected,
        )


def _in_thread(fn: Callable[[], Any], what: str) -> Any:
    """Run *fn* on a new OS thread (which has no ACL context) and return its result.

    Raises ``CheckFailed`` if it has not returned within ``PATIENCE_S``.
    """
    box: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="aclasync-check", daemon=True)
    thread.start()
    thread.join(PATIENCE_S)
    if errors:
        raise errors[0]
    if not box:
        raise CheckFailed(f"{what} on a new thread had not returned after {PATIENCE_S:g} s")
    return box[0]


def _last(result: Any) -> Any:
    """The status of a ``(value, ..., ret)`` result (or the result, if it is none)."""
    return result[-1] if isinstance(result, tuple) and result else result


@contextlib.contextmanager
def _device(acl: Any, device: int) -> Iterator[int]:
    """``set_device`` for the body, ``reset_device`` after; yields the device's context."""
    _ok(_status(acl.rt.set_device(device), f"acl.rt.set_device({device})"), "acl.rt.set_device")
    try:
        context, ret = _values(acl.rt.get_context(), "acl.rt.get_context()", "(context, ret)")
        _ok(ret, "acl.rt.get_context()")
        yield int(context)
    finally:
        acl.rt.reset_device(device)


@contextlib.contextmanager
def _stream(acl: Any, flags: int = 0) -> Iterator[int]:
    stream, ret = _values(
        acl.rt.create_stream_with_config(0, flags),
        f"acl.rt.create_stream_with_config(0, {flags})",
        "(stream, ret)",
    )
    _ok(ret, f"acl.rt.create_stream_with_config(0, {flags})")
    try:
        yield int(stream)
    finally:
        acl.rt.destroy_stream(stream)


@contextlib.contextmanager
def _held(acl: Any, context: int, stream: int) -> Iterator[Gate]:
    """Hold *stream* with a gate (a blocking callback on a report thread) until the body
    opens it or ends; waits for the stream to reach the gate first."""
    gate = Gate(timeout=4 * PATIENCE_S)
    with ReportThread(acl, context) as reporter:
        _ok(acl.rt.subscribe_report(reporter.ident, stream), "acl.rt.subscribe_report")
        try:
            _ok(gate.launch(acl, stream), "acl.rt.launch_callback(gate, None, 1, stream)")
            if not gate.reached.wait(PATIENCE_S):
                raise CheckFailed(
                    f"the stream did not reach its gate (a blocking launch_callback) within "
                    f"{PATIENCE_S:g} s: host callbacks are not delivered (see 'callbacks')"
                )
            yield gate
        finally:
            gate.open()
            _settle(acl, stream)
            acl.rt.unsubscribe_report(reporter.ident, stream)


def _settle(acl: Any, stream: int) -> None:
    """Wait, a bounded time, until *stream* has nothing left to do (its callbacks ran)."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        result = acl.rt.stream_query(stream)
        if not isinstance(result, tuple) or result[-1] != 0 or result[0] == 0:
            return
        time.sleep(0.001)


# -- the checks ------------------------------------------------------------------------


def check_return_shapes(acl: Any, device: int) -> dict[str, Any]:
    """Calls that act return ``ret``; calls that produce values return ``(values, ret)``."""
    count, ret = _values(acl.rt.get_device_count(), "acl.rt.get_device_count()", "(count, ret)")
    _ok(ret, "acl.rt.get_device_count()")
    if not isinstance(count, int) or count < 1:
        raise CheckFailed(f"acl.rt.get_device_count() gave {count!r} devices")
    version = _values(acl.get_version(), "acl.get_version()", "(major, minor, patch, ret)")
    _ok(version[-1], "acl.get_version()")
    with _device(acl, device):
        mode, ret = _values(acl.rt.get_run_mode(), "acl.rt.get_run_mode()", "(run_mode, ret)")
        _ok(ret, "acl.rt.get_run_mode()")
        current, ret = _values(acl.rt.get_device(), "acl.rt.get_device()", "(device_id, ret)")
        _ok(ret, "acl.rt.get_device()")
        if current != device:
            raise CheckFailed(f"acl.rt.get_device() gave {current} after set_device({device})")
        free, total, ret = _values(
            acl.rt.get_mem_info(int(MemAttr.HBM_MEM)),
            "acl.rt.get_mem_info(ACL_HBM_MEM)",
            "(free, total, ret)",
        )
        _ok(ret, "acl.rt.get_mem_info(ACL_HBM_MEM)")
        if not 0 < free <= total:
            raise CheckFailed(f"acl.rt.get_mem_info gave free={free}, total={total}")
        stream, ret = _values(acl.rt.create_stream(), "acl.rt.create_stream()", "(stream, ret)")
        _ok(ret, "acl.rt.create_stream()")
        status, ret = _values(
            acl.rt.stream_query(stream), "acl.rt.stream_query(s)", "(status, ret)"
        )
        _ok(ret, "acl.rt.stream_query(s)")
        _expect(status, int(StreamStatus.COMPLETE), "acl.rt.stream_query(new stream)", "idle: 0")
        _ok(_status(acl.rt.destroy_stream(stream), "acl.rt.destroy_stream(s)"), "destroy_stream")
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
        _ok(_status(acl.rt.set_device(device), "acl.rt.set_device"), "acl.rt.set_device")
    _ok(acl.rt.reset_device(device), "acl.rt.reset_device (first of two)")
    stream, ret = acl.rt.create_stream()
    if ret != 0:
        acl.rt.reset_device(device)
        raise CheckFailed(
            f"after set_device twice and reset_device once, create_stream gave {_code(ret)}: "
            "the first reset released the device; reset_device must count set_device "
            "calls and release only at zero",
            ret=ret,
        )
    _ok(acl.rt.destroy_stream(stream), "acl.rt.destroy_stream")
    _ok(acl.rt.reset_device(device), "acl.rt.reset_device (second of two)")
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
    with _device(acl, device) as context:
        result = _in_thread(acl.rt.get_context, "acl.rt.get_context()")
        ret = _values(result, "acl.rt.get_context() on a new thread", "(context, ret)")[-1]
        if ret != no_context:
            raise CheckFailed(
                f"on a new thread, after set_device on another, get_context gave {_code(ret)}; "
                f"a new thread has no current context ({_code(no_context)})",
                ret=ret,
            )

        def adopt() -> tuple[Any, Any]:
            return acl.rt.set_context(context), acl.rt.get_context()

        ret, got = _in_thread(adopt, "acl.rt.set_context(ctx)")
        _ok(ret, "acl.rt.set_context(ctx) on another thread")
        if tuple(got) != (context, 0):
            raise CheckFailed(f"after set_context(ctx) on a thread, get_context gave {got!r}")

        def own() -> tuple[Any, Any, Any]:
            made, ret = acl.rt.create_context(device)
            current = acl.rt.get_context()
            return made, ret, (current, acl.rt.destroy_context(made) if ret == 0 else None)

        made, ret, (current, destroyed) = _in_thread(own, "acl.rt.create_context")
        _ok(ret, "acl.rt.create_context on a new thread")
        if tuple(current) != (made, 0):
            raise CheckFailed(
                f"create_context did not become current: get_context gave {current!r}"
            )
        _ok(destroyed, "acl.rt.destroy_context")
        here = acl.rt.get_context()
        if tuple(here) != (context, 0):
            raise CheckFailed(
                f"a context created on another thread changed this thread's: get_context "
                f"gave {here!r}, expected ({context}, 0)"
            )
    return {"no_context_code": no_context}


def _check_sync(acl: Any, device: int, flags: int, label: str) -> dict[str, Any]:
    with _device(acl, device) as context:
        stream, ret = acl.rt.create_stream_with_config(0, flags)
        if ret == ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT and flags:
            raise CheckSkipped(
                f"{label} streams are not supported here: create_stream_with_config(0, "
                f"{flags}) gave {_code(ret)}"
            )
        _ok(ret, f"acl.rt.create_stream_with_config(0, {flags})")
        try:
            done = threading.Event()
            box: list[tuple[Any, float]] = []

            def wait() -> None:
                acl.rt.set_context(context)
                ret = acl.rt.synchronize_stream(stream)
                box.append((ret, time.perf_counter()))
                done.set()

            with _held(acl, context, stream) as gate:
                threading.Thread(target=wait, name="aclasync-check-sync", daemon=True).start()
                if done.wait(BLOCKED_S):
                    raise CheckFailed(
                        f"synchronize_stream on a {label} stream returned {_code(box[0][0])} "
                        "while the stream was held by a blocking callback: it must wait for "
                        "the work queued"
                    )
                opened = time.perf_counter()
                gate.open()
                if not done.wait(PATIENCE_S):
                    raise CheckFailed(
                        f"synchronize_stream on a {label} stream had not returned "
                        f"{PATIENCE_S:g} s after its work finished"
                    )
            ret, returned = box[0]
            _ok(ret, f"acl.rt.synchronize_stream({label} stream)")
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
    with _device(acl, device) as context, _stream(acl) as stream:
        ret = acl.rt.launch_callback(lambda _: None, None, 0, stream)
        _expect(
            ret,
            ErrorCode.ACL_ERROR_RT_STREAM_NO_CB_REG,
            "acl.rt.launch_callback on a stream with no subscription",
            "no thread to run it",
        )
        ran: list[tuple[int, object]] = []
        with ReportThread(acl, context) as reporter:
            _ok(acl.rt.subscribe_report(reporter.ident, stream), "acl.rt.subscribe_report")
            ret = acl.rt.launch_callback(
                lambda data: ran.append((threading.get_ident(), data)), "tag", 1, stream
            )
            _ok(ret, "acl.rt.launch_callback (subscribed)")
            _ok(
                acl.rt.synchronize_stream_with_timeout(stream, int(PATIENCE_S * 1e3)),
                "acl.rt.synchronize_stream_with_timeout after a blocking callback",
            )
            _ok(acl.rt.unsubscribe_report(reporter.ident, stream), "acl.rt.unsubscribe_report")
            if ran != [(reporter.ident, "tag")]:
                raise CheckFailed(
                    f"the callback ran as {ran!r}; expected once, on the subscribed thread "
                    f"({reporter.ident}), with its user data ('tag')"
                )
            if reporter.errors:
                raise CheckFailed(f"process_report gave {[_code(e) for e in reporter.errors]}")
    return {}


def check_event_timing(acl: Any, device: int) -> dict[str, Any]:
    """Timing events measure device time in milliseconds; statuses read NOT_READY then COMPLETE."""
    with _device(acl, device) as context, _stream(acl) as stream:
        start, ret = _values(acl.rt.create_event(), "acl.rt.create_event()", "(event, ret)")
        _ok(ret, "acl.rt.create_event()")
        end, ret = acl.rt.create_event()
        _ok(ret, "acl.rt.create_event()")
        try:
            status = _values(acl.rt.query_event_status(end), "query_event_status", "(status, ret)")
            _expect(
                tuple(status),
                (int(EventRecordedStatus.NOT_READY), 0),
                "acl.rt.query_event_status(never recorded)",
                "NOT_READY is 0, the opposite of query_event",
            )
            _ok(acl.rt.record_event(start, stream), "acl.rt.record_event(start)")
            with _held(acl, context, stream) as gate:
                _ok(acl.rt.record_event(end, stream), "acl.rt.record_event(end)")
                reached = time.perf_counter()
                time.sleep(HOLD_S)
                held_ms = (time.perf_counter() - reached) * 1e3
                gate.open()
                _ok(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
            elapsed, ret = _values(
                acl.rt.event_elapsed_time(start, end), "acl.rt.event_elapsed_time", "(ms, ret)"
            )
            _ok(ret, "acl.rt.event_elapsed_time")
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
            _expect(
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
    with _device(acl, device), _stream(acl) as stream:
        buffer, ret = acl.rt.malloc(64, 0)
        _ok(ret, "acl.rt.malloc(64)")
        host, ret = acl.rt.malloc_host(64)
        _ok(ret, "acl.rt.malloc_host(64)")
        try:
            _expect(
                acl.rt.get_overflow_status(buffer, 63, stream),
                ErrorCode.ACL_ERROR_RT_PARAM_INVALID,
                "acl.rt.get_overflow_status(buffer, 63, stream)",
                "the buffer must be exactly 64 bytes",
            )
            _ok(acl.rt.get_overflow_status(buffer, 64, stream), "acl.rt.get_overflow_status")
            _ok(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
            kind = int(MemcpyKind.DEVICE_TO_HOST)
            _ok(acl.rt.memcpy(host, 64, buffer, 64, kind), "acl.rt.memcpy (device to host)")
            data = acl.util.ptr_to_bytes(host, 64)
            status = int.from_bytes(bytes(data[:8]), "little")
            _ok(acl.rt.reset_overflow_status(stream), "acl.rt.reset_overflow_status")
            _ok(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
        finally:
            acl.rt.free(buffer)
            acl.rt.free_host(host)
    return {"status": status}


def check_timeouts(acl: Any, device: int) -> dict[str, Any]:
    """Timed waits: -2 is invalid, 0 polls, expiry gives 507046 (stream) and 507047 (event)."""
    with _device(acl, device) as context, _stream(acl) as stream:
        _expect(
            acl.rt.synchronize_stream_with_timeout(stream, -2),
            ErrorCode.ACL_ERROR_RT_PARAM_INVALID,
            "acl.rt.synchronize_stream_with_timeout(stream, -2)",
            "a timeout below -1 is invalid",
        )
        event, ret = acl.rt.create_event()
        _ok(ret, "acl.rt.create_event()")
        try:
            with _held(acl, context, stream):
                _expect(
                    tuple(acl.rt.stream_query(stream)),
                    (int(StreamStatus.NOT_READY), 0),
                    "acl.rt.stream_query(held stream)",
                    "NOT_READY is 1, ret 0",
                )
                _ok(acl.rt.record_event(event, stream), "acl.rt.record_event")
                began = time.perf_counter()
                stream_ret = acl.rt.synchronize_stream_with_timeout(stream, SHORT_MS)
                waited_ms = (time.perf_counter() - began) * 1e3
                _expect(
                    stream_ret,
                    ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                    f"acl.rt.synchronize_stream_with_timeout(held stream, {SHORT_MS})",
                    "the wait expired",
                )
                if waited_ms > PATIENCE_S * 1e3:
                    raise CheckFailed(
                        f"synchronize_stream_with_timeout(held stream, {SHORT_MS}) took "
                        f"{waited_ms:.0f} ms to expire"
                    )
                _expect(
                    acl.rt.synchronize_event_with_timeout(event, SHORT_MS),
                    ErrorCode.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                    f"acl.rt.synchronize_event_with_timeout(event behind it, {SHORT_MS})",
                    "the wait expired",
                )
                _expect(
                    acl.rt.synchronize_stream_with_timeout(stream, 0),
                    ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                    "acl.rt.synchronize_stream_with_timeout(held stream, 0)",
                    "0 polls once",
                )
            _ok(
                acl.rt.synchronize_stream_with_timeout(stream, int(PATIENCE_S * 1e3)),
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
    with _device(acl, device), _stream(acl) as stream:
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
                lambda: _last(_in_thread(acl.rt.create_stream, "acl.rt.create_stream()")),
                int(ErrorCode.ACL_ERROR_RT_CONTEXT_NULL),
            ),
        ]
        for call, fn, expected in calls:
            got = fn()
            seen[call] = got
            if got != expected:
                wrong.append(f"{call} gave {_code(got)}, pyACL gives {_code(expected)}")
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
