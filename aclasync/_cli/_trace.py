"""``aclasync trace``: a timeline of a demo run as Chrome/Perfetto trace JSON.

Tracks come from what is observable from outside the runtime:

- a task observer, when the simulator offers one (``acl.sim.set_observer``): one track
  per device stream, one span per task;
- otherwise the demo's kernels are wrapped on their way into ``acl.sim.launch_kernel``
  (through a pyACL-shaped backend object), giving one span per kernel per device;
- always, the demo's progress callback: one span per finished item per device.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from .. import sim
from .._version import __version__
from . import _pipeline
from ._common import CliError, run_on_loop

__all__ = ["TraceRecorder", "run_trace"]

_RUN_PID = 0
_ITEMS_TID = 1
_KERNELS_TID = 2
_FIRST_STREAM_TID = 10


class TraceRecorder:
    """Collect spans from any thread and render them as trace events.

    Times are ``time.monotonic()`` seconds; the trace counts microseconds from the
    recorder's creation. One process per device (``pid = device + 1``), one thread
    per track.
    """

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._processes: dict[int, str] = {_RUN_PID: "pipeline"}
        self._tracks: dict[tuple[int, int], str] = {}
        self._stream_tids: dict[tuple[int, int], int] = {}

    def span(
        self,
        pid: int,
        tid: int,
        name: str,
        start: float,
        finish: float,
        args: dict[str, Any] | None = None,
    ) -> None:
        """Record a complete event from *start* to *finish* (monotonic seconds)."""
        event = {
            "name": name,
            "ph": "X",
            "ts": round((start - self._t0) * 1e6, 3),
            "dur": round(max(finish - start, 0.0) * 1e6, 3),
            "pid": pid,
            "tid": tid,
            "args": args or {},
        }
        with self._lock:
            self._events.append(event)

    def name_track(self, pid: int, tid: int, process: str, track: str) -> None:
        """Name the process *pid* and its thread *tid* as the trace viewer shows them."""
        with self._lock:
            self._processes.setdefault(pid, process)
            self._tracks.setdefault((pid, tid), track)

    def on_task(self, device: int, stream: int, name: str, start: float, finish: float) -> None:
        """The simulator observer: one span per task, one track per device stream."""
        pid = device + 1
        with self._lock:
            tid = self._stream_tids.setdefault(
                (device, stream), _FIRST_STREAM_TID + len(self._stream_tids)
            )
        label = "default stream" if stream == 0 else f"stream {stream:#x}"
        self.name_track(pid, tid, f"device {device}", label)
        if start == 0:
            # A task dropped without running (stop-on-failure, forced destroy).
            name, start = f"{name} (dropped)", finish
        self.span(pid, tid, name, start, finish, {"stream": f"{stream:#x}"})

    def trace(self, other: dict[str, Any]) -> dict[str, Any]:
        """Return the whole trace: metadata events naming the tracks, then the spans."""
        with self._lock:
            meta: list[dict[str, Any]] = []
            for pid, name in sorted(self._processes.items()):
                meta.append(_meta("process_name", pid, 0, name))
                meta.append(
                    {**_meta("process_sort_index", pid, 0, ""), "args": {"sort_index": pid}}
                )
            for (pid, tid), name in sorted(self._tracks.items()):
                meta.append(_meta("thread_name", pid, tid, name))
            spans = sorted(self._events, key=lambda event: (event["ts"], event["pid"]))
        return {"traceEvents": meta + spans, "displayTimeUnit": "ms", "otherData": other}


def run_trace(*, devices: int, items: int, out_path: str, loop: str, out: TextIO) -> int:
    """Run the demo pipeline on a fresh simulator and write its timeline to *out_path*.

    Blocks until the run has finished and the file is written.
    """
    for name, value in (("--devices", devices), ("--items", items)):
        if value < 1:
            raise CliError(f"{name} must be >= 1, got {value}", exit_code=2)
    recorder = TraceRecorder()
    runtime = sim.create(device_count=devices)
    source = "observer" if hasattr(runtime.sim, "set_observer") else "kernel wrapper"
    backend: object
    if source == "observer":
        runtime.sim.set_observer(recorder.on_task)
        backend = runtime
    else:
        backend = _TracingBackend(runtime, recorder)
    completions = _CompletionSpans(recorder, devices)

    async def pipeline() -> dict[str, Any]:
        return await _pipeline.run_pipeline(
            devices=devices, items=items, backend=backend, progress=completions
        )

    started = time.monotonic()
    try:
        result = run_on_loop(loop, pipeline)
    finally:
        runtime.sim.close()
    recorder.name_track(_RUN_PID, 1, "pipeline", "run")
    recorder.span(
        _RUN_PID, 1, "run_pipeline", started, time.monotonic(), {"loop": loop, "items": items}
    )
    trace = recorder.trace(
        {
            "aclasync": __version__,
            "devices": devices,
            "items": items,
            "loop": loop,
            "source": source,
            "items_per_s": result["items_per_s"],
        }
    )
    path = Path(out_path)
    path.write_text(json.dumps(trace) + "\n")
    print(
        f"wrote {len(trace['traceEvents'])} trace events ({source}) to {path.resolve()}\n"
        "open it at https://ui.perfetto.dev (Open trace file) or in chrome://tracing (Load)",
        file=out,
    )
    return 0


class _CompletionSpans:
    """The demo's progress callback: a span per finished item, on its device's track.

    A span runs from the device's previous completion (or the start) to this one:
    with double buffering, that is the share of time the device spent per item.
    """

    def __init__(self, recorder: TraceRecorder, devices: int) -> None:
        self._recorder = recorder
        self._last_time = dict.fromkeys(range(devices), time.monotonic())
        self._seen = dict.fromkeys(range(devices), 0)
        for device in range(devices):
            recorder.name_track(device + 1, _ITEMS_TID, f"device {device}", "items finished")

    def __call__(self, state: _pipeline.PipelineProgress) -> None:
        now = time.monotonic()
        for device, count in state.per_device.items():
            while self._seen.get(device, 0) < count:
                self._seen[device] = self._seen.get(device, 0) + 1
                start = self._last_time.get(device, now)
                self._recorder.span(
                    device + 1,
                    _ITEMS_TID,
                    f"item {self._seen[device]}",
                    start,
                    now,
                    {"done": state.done, "total": state.total},
                )
                self._last_time[device] = now


class _TracingBackend:
    """A simulated runtime whose kernels report when their bodies run.

    It is a pyACL-shaped backend object: ``rt`` and ``util`` are the runtime's own,
    ``sim.launch_kernel`` wraps each kernel's body with a clock.
    """

    def __init__(self, runtime: sim.SimAcl, recorder: TraceRecorder) -> None:
        self._runtime = runtime
        self.rt = runtime.rt
        self.util = runtime.util
        self.sim = _TracingSim(runtime, recorder)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


class _TracingSim:
    """``acl.sim`` with ``launch_kernel`` timing each kernel; the rest passes through."""

    def __init__(self, runtime: sim.SimAcl, recorder: TraceRecorder) -> None:
        self._runtime = runtime
        self._recorder = recorder
        self._counts: dict[int, int] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime.sim, name)

    def launch_kernel(self, kernel: sim.Kernel, stream: int, /) -> int:
        # Called on the device's worker thread, whose current device is the kernel's.
        device, ret = self._runtime.rt.get_device()
        if ret:
            return int(self._runtime.sim.launch_kernel(kernel, stream))
        with self._lock:
            number = self._counts[device] = self._counts.get(device, 0) + 1
        pid = device + 1
        self._recorder.name_track(pid, _KERNELS_TID, f"device {device}", "kernels")
        timed = dataclasses.replace(
            kernel, fn=_timed(kernel, self._recorder, pid, f"kernel {number}", stream)
        )
        return int(self._runtime.sim.launch_kernel(timed, stream))


def _timed(
    kernel: sim.Kernel, recorder: TraceRecorder, pid: int, name: str, stream: int
) -> Callable[[], None]:
    """Wrap the kernel's body: its span runs from the body's start for the kernel's
    modelled duration, or for as long as the body took if that was longer."""
    body = kernel.fn
    duration = kernel.duration_us / 1e6

    def fn() -> None:
        start = time.monotonic()
        try:
            if body is not None:
                body()
        finally:
            finish = time.monotonic()
            recorder.span(
                pid,
                _KERNELS_TID,
                name,
                start,
                max(finish, start + duration),
                {"stream": f"{stream:#x}", "body_us": round((finish - start) * 1e6, 1)},
            )

    return fn


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
