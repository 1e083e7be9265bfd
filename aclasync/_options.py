"""Tuning options of a device worker."""

from __future__ import annotations

import dataclasses
import os
from typing import Literal

__all__ = ["WorkerOptions"]

#: The default of the removed ``waiting_thread`` option: anything else was passed.
_GONE = object()
#: pyACL's timeouts are C ``int32_t`` milliseconds.
_MAX_SLICE_MS = 2**31 - 1
#: Polls sleep with ``threading.Lock.acquire(timeout=...)``: an hour is plenty below
#: its limit (``threading.TIMEOUT_MAX``) and far beyond any sensible poll.
_MAX_POLL_US = 3600e6


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """Tuning of a device worker.

    Parameters
    ----------
    wait_slice_ms:
        Longest time the worker blocks in ``synchronize_event_with_timeout`` while
        waiting quietly for default-mode streams; a job submitted meanwhile waits at
        most this long (pyACL timeouts are whole milliseconds).
    busy_poll_us, busy_window_ms:
        After jobs arrived in the last ``busy_window_ms``, the worker polls the
        streams it waits for every ``busy_poll_us`` at most (waking at once for new
        jobs) instead of blocking in slices, and first when a stream's recent waits
        say its work is due; with several streams waited for it then lends none to
        the waiting thread: a query finds finished work without a passive wait's
        wake-up latency, and the worker is awake for the jobs anyway.
    fast_sync_poll_us:
        Interval at which the worker polls while a FAST_SYNC stream has waiters
        (lower latency, more CPU: the documented FAST_SYNC trade-off).
    inline_fast_sync:
        While a FAST_SYNC stream's sync is all the device waits for and no job is
        queued, the worker waits for it itself, in ``wait_slice_ms`` slices, instead
        of waking the waiting thread: the wait starts at once, as in a thread that
        launches and syncs, so a request costs no more thread wake-ups than that
        thread's. A job submitted meanwhile (another stream's launch, say) waits for
        the slice to end. With False, every wait goes to the waiting thread.
    inline_default_sync:
        The same for a default-mode stream whose last sync ended within two
        ``wait_slice_ms`` slices: the worker waits for it itself for two slices at
        most, then lends the wait to the waiting thread (and lends that stream's
        waits at once until one is short again). A short request then costs what a
        thread that launches and syncs itself pays; a long wait costs one thread
        wake-up more than that thread's (the waiting thread's) and no slices' CPU.
        With False, such waits go to the waiting thread.
    cpu:
        Pin the worker thread to this CPU (Linux only), or ``"loop"``: pin both the
        thread that opens the device (the event loop's) and the worker to the CPU that
        thread is running on. Loop and worker on one CPU save two cross-CPU wake-ups
        per round trip (an idle-stream sync drops from about 60 to about 30 us on a
        two-vCPU VM, see docs/benchmark-history.md), at the price of sharing that CPU.
    """

    wait_slice_ms: int = 1
    busy_poll_us: float = 250.0
    busy_window_ms: float = 50.0
    fast_sync_poll_us: float = 20.0
    inline_fast_sync: bool = True
    inline_default_sync: bool = True
    cpu: int | Literal["loop"] | None = None
    waiting_thread: dataclasses.InitVar[object] = _GONE

    def __post_init__(self, waiting_thread: object) -> None:
        if waiting_thread is not _GONE:
            raise TypeError(
                "WorkerOptions(waiting_thread=...) is gone: every device now has a waiting "
                "thread, which blocks in the runtime's own waits (the design without one "
                "polled quiet waits, at 4-9 % of a core per device against 0.2-0.3 % "
                "measured with one)"
            )
        if isinstance(self.wait_slice_ms, bool) or not isinstance(self.wait_slice_ms, int):
            raise TypeError("wait_slice_ms must be an int (milliseconds)")
        if not 1 <= self.wait_slice_ms <= _MAX_SLICE_MS:  # pyACL's timeouts are int32 ms
            raise ValueError(
                f"wait_slice_ms must be from 1 to {_MAX_SLICE_MS}, got {self.wait_slice_ms}"
            )
        for name in ("busy_poll_us", "fast_sync_poll_us", "busy_window_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
        for name in ("busy_poll_us", "fast_sync_poll_us"):  # sleeps: threading's limit
            if not 0 < getattr(self, name) <= _MAX_POLL_US:
                raise ValueError(
                    f"{name} must be > 0 and <= {_MAX_POLL_US:g}, got {getattr(self, name)!r}"
                )
        for name in ("inline_fast_sync", "inline_default_sync"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool")
        if not self.busy_window_ms >= 0:
            raise ValueError(f"busy_window_ms must be >= 0, got {self.busy_window_ms!r}")
        if self.cpu == "loop":
            if not hasattr(os, "sched_setaffinity"):
                raise ValueError("cpu='loop' needs os.sched_setaffinity (Linux)")
        elif self.cpu is not None:
            if isinstance(self.cpu, bool) or not isinstance(self.cpu, int):
                raise TypeError(f"cpu must be an int, 'loop' or None, got {self.cpu!r}")
            if self.cpu not in os.sched_getaffinity(0):
                raise ValueError(f"cpu {self.cpu!r} is not available to this process")

    def resolve_cpu(self) -> int | None:
        """The CPU to pin the worker to; for ``"loop"``, pin the calling thread too."""
        if self.cpu != "loop":
            return self.cpu
        cpu = _current_cpu()
        os.sched_setaffinity(0, {cpu})
        return cpu


def _current_cpu() -> int:
    """The CPU the calling thread runs on (Linux: field 39 of /proc/thread-self/stat)."""
    with open("/proc/thread-self/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[36])
