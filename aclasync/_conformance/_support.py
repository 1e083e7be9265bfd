"""What the conformance checks are made of: verdicts, and the pyACL moves they repeat.

A check is a function ``(acl, device) -> measurements`` that raises ``CheckFailed``
(with a message naming the difference) or ``CheckSkipped`` (with the reason);
``run_check`` turns that into a ``CheckResult``. The helpers check result shapes and
codes as they go, set a device for a block and reset it after, and hold a stream with a
gate (``_reports``). Every wait is bounded by ``PATIENCE_S``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .._pyacl.codes import code_name
from ._reports import Gate, ReportThread

__all__ = [
    "BLOCKED_S",
    "FAIL",
    "HOLD_S",
    "PASS",
    "PATIENCE_S",
    "SHORT_MS",
    "SKIP",
    "Check",
    "CheckFailed",
    "CheckResult",
    "CheckSkipped",
    "bare_status",
    "code_text",
    "device_set",
    "expect",
    "held_by_gate",
    "in_new_thread",
    "last_item",
    "new_stream",
    "ok",
    "run_check",
    "settle",
    "values",
]

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


def code_text(ret: object) -> str:
    """``507046 (ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)``, for messages."""
    if isinstance(ret, int) and not isinstance(ret, bool):
        return f"{int(ret)} ({code_name(ret)})"
    if isinstance(ret, tuple):
        return repr(tuple(int(v) if isinstance(v, int) else v for v in ret))
    return repr(ret)


def bare_status(result: object, call: str) -> int:
    """The ``ret`` of a call pyACL answers with a bare status."""
    if isinstance(result, bool) or not isinstance(result, int):
        raise CheckFailed(
            f"{call} returned {result!r} ({type(result).__name__}); pyACL returns a bare "
            "status (an int)",
            call=call,
        )
    return result


def values(result: object, call: str, shape: str) -> tuple[Any, ...]:
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


def ok(ret: object, call: str) -> None:
    if ret != 0:
        raise CheckFailed(f"{call} gave {code_text(ret)}, expected 0", call=call, ret=ret)


def expect(ret: object, expected: object, call: str, why: str) -> None:
    if ret != expected:
        raise CheckFailed(
            f"{call} gave {code_text(ret)}; pyACL gives {code_text(expected)} ({why})",
            call=call,
            ret=ret,
            expected=expected,
        )


def in_new_thread(fn: Callable[[], Any], what: str) -> Any:
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


def last_item(result: Any) -> Any:
    """The status of a ``(value, ..., ret)`` result (or the result, if it is none)."""
    return result[-1] if isinstance(result, tuple) and result else result


@contextlib.contextmanager
def device_set(acl: Any, device: int) -> Iterator[int]:
    """``set_device`` for the body, ``reset_device`` after; yields the device's context."""
    ok(bare_status(acl.rt.set_device(device), f"acl.rt.set_device({device})"), "acl.rt.set_device")
    try:
        context, ret = values(acl.rt.get_context(), "acl.rt.get_context()", "(context, ret)")
        ok(ret, "acl.rt.get_context()")
        yield int(context)
    finally:
        acl.rt.reset_device(device)


@contextlib.contextmanager
def new_stream(acl: Any, flags: int = 0) -> Iterator[int]:
    stream, ret = values(
        acl.rt.create_stream_with_config(0, flags),
        f"acl.rt.create_stream_with_config(0, {flags})",
        "(stream, ret)",
    )
    ok(ret, f"acl.rt.create_stream_with_config(0, {flags})")
    try:
        yield int(stream)
    except BaseException:
        # The check failed: work it queued may never end (a callback never delivered),
        # and destroy_stream would wait for it.
        acl.rt.destroy_stream_force(stream)
        raise
    acl.rt.destroy_stream(stream)


@contextlib.contextmanager
def held_by_gate(acl: Any, context: int, stream: int) -> Iterator[Gate]:
    """Hold *stream* with a gate (a blocking callback on a report thread) until the body
    opens it or ends; waits for the stream to reach the gate first."""
    gate = Gate(timeout=4 * PATIENCE_S)
    with ReportThread(acl, context) as reporter:
        ok(acl.rt.subscribe_report(reporter.ident, stream), "acl.rt.subscribe_report")
        try:
            ok(gate.launch(acl, stream), "acl.rt.launch_callback(gate, None, 1, stream)")
            if not gate.reached.wait(PATIENCE_S):
                raise CheckFailed(
                    f"the stream did not reach its gate (a blocking launch_callback) within "
                    f"{PATIENCE_S:g} s: host callbacks are not delivered (see 'callbacks')"
                )
            yield gate
        finally:
            gate.open()
            settle(acl, stream)
            acl.rt.unsubscribe_report(reporter.ident, stream)


def settle(acl: Any, stream: int) -> None:
    """Wait, a bounded time, until *stream* has nothing left to do (its callbacks ran)."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        result = acl.rt.stream_query(stream)
        if not isinstance(result, tuple) or result[-1] != 0 or result[0] == 0:
            return
        time.sleep(0.001)
