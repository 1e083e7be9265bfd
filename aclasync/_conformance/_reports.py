"""Host callbacks with pyACL alone: a report thread, and gates that hold a stream.

pyACL runs the callbacks of ``acl.rt.launch_callback`` on the thread a stream is
subscribed to (``acl.rt.subscribe_report(thread_id, stream)``), from inside that
thread's ``acl.rt.process_report(timeout)`` loop. ``ReportThread`` is that loop. A
``Gate`` is a *blocking* callback (``block_type=1``) that waits for ``open()``: the
stream stops at it, so whatever is queued behind it waits too, for as long as the
caller wants and without any timed work. This is how the conformance checks and the
native-path tests hold device work, on CANN's ``acl`` and on the strict simulator
alike.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from .._pyacl.codes import ErrorCode

__all__ = ["Gate", "ReportThread"]

#: How long ``process_report`` blocks per call; also the longest ``stop`` waits for it.
_SLICE_MS = 50
#: Pause after ``process_report`` says the thread has no subscription (107012), which
#: it says at once: without it the loop would spin (before the first subscription).
_IDLE_S = 0.01
_JOIN_S = 5.0
#: How long a gate holds its stream at most, so that a forgotten gate cannot hang a run.
GATE_TIMEOUT_S = 120.0


class ReportThread:
    """A thread that runs pyACL callbacks: ``acl.rt.process_report`` in a loop.

    Use it as a context manager (or ``start()`` / ``stop()``). ``ident`` is the thread
    id to pass to ``acl.rt.subscribe_report``; pyACL compares it with the OS thread
    that calls ``process_report``, which a ``threading.Thread``'s ``ident`` is. pyACL
    lets one thread serve the streams of one device only, so make one per device.

    Parameters
    ----------
    acl:
        The pyACL module (or any object with its surface).
    context:
        A context the thread makes current first (``acl.rt.set_context``), as pyACL's
        samples do; ``None`` sets none.
    """

    def __init__(self, acl: Any, context: int | None = None) -> None:
        self._acl = acl
        self._context = context
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="aclasync-report", daemon=True)
        #: Codes ``process_report`` returned other than 0, 507012 and 107012, in order.
        self.errors: list[int] = []
        #: What ``process_report`` raised (a callback that raised comes out as pyACL's
        #: ``SystemError``); the loop goes on after each.
        self.exceptions: list[Exception] = []

    def __enter__(self) -> ReportThread:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def ident(self) -> int:
        """The id to subscribe streams to; the thread must have been started."""
        ident = self._thread.ident
        if ident is None:
            raise RuntimeError("the report thread has not been started")
        return ident

    def start(self) -> int:
        """Start the thread; return its id. Blocks only for the thread's start."""
        self._thread.start()
        return self.ident

    def stop(self) -> None:
        """Stop the loop and join the thread: blocks up to one ``process_report`` slice.

        Unsubscribe the thread's streams first (after they have finished), as pyACL
        asks: callbacks still queued on a subscribed stream would never run.
        """
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(_JOIN_S)

    def _loop(self) -> None:
        rt = self._acl.rt
        if self._context is not None:
            ret = rt.set_context(self._context)
            if ret:
                self.errors.append(int(ret))
        process, stop = rt.process_report, self._stop
        while not stop.is_set():
            try:
                ret = process(_SLICE_MS)
            except Exception as exc:  # a callback raised: keep serving the others
                self.exceptions.append(exc)
                continue
            if ret == 0 or ret == ErrorCode.ACL_ERROR_RT_REPORT_TIMEOUT:
                continue
            if ret != ErrorCode.ACL_ERROR_RT_THREAD_SUBSCRIBE:  # 107012: no stream yet
                self.errors.append(int(ret))
            stop.wait(_IDLE_S)


class Gate:
    """A blocking host callback that holds its stream until ``open()``.

    Queue it with ``acl.rt.launch_callback(gate.callback, None, 1, stream)`` on a
    stream subscribed to a running ``ReportThread`` (``gate.launch(acl, stream)`` does
    that). Work queued behind it on the stream waits until the gate opens; ``reached``
    is set once the stream has got to the gate (the callback is running).

    A gate opens by itself after *timeout* seconds, so that a test that fails before
    opening it cannot hang its process.
    """

    def __init__(self, timeout: float = GATE_TIMEOUT_S) -> None:
        self._open = threading.Event()
        self._timeout = timeout
        #: Set when the stream reached the gate.
        self.reached = threading.Event()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def open(self) -> None:
        """Let the stream go on. Idempotent; never blocks."""
        self._open.set()

    def callback(self, _user_data: object) -> None:
        """The callback pyACL runs on the report thread: wait for ``open()``.

        Never raises (pyACL does not clear an exception a callback raises).
        """
        try:
            self.reached.set()
            self._open.wait(self._timeout)
        except BaseException:  # nothing may escape into pyACL
            return

    def launch(self, acl: Any, stream: int) -> int:
        """Queue the gate on *stream* (``launch_callback``, blocking); return its ``ret``.

        Call it on a thread whose current context holds *stream*.
        """
        ret: int = acl.rt.launch_callback(self.callback, None, 1, stream)
        return ret
