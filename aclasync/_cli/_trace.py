"""``aclasync trace``: a timeline of a demo run as Chrome/Perfetto trace JSON.

Tracks come from what is observable from outside the runtime:

- on the simulator, its task observer (``acl.sim.set_observer``): one track per device
  stream, one span per task; on the native backend, which has no observer, timing
  events around each stage of each item (upload, compute, download), placed on the
  host's clock by their device timestamps (``acl.rt.event_elapsed_time`` from an event
  recorded, and waited for, when the device was set up): one track per stream, one
  span per stage;
- the demo's callbacks, on an "items finished" track per device: first a ``set-up``
  span (from the start of the run until the device has opened, made its streams and
  allocated its buffers), then one span per finished item, from the device's previous
  completion (or the end of its set-up) to this one;
- one ``run_pipeline`` span for the whole run, with a ``start-up`` span before it
  (creating the simulator and starting the event loop).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO

from .._version import __version__
from . import _pipeline
from ._common import sim_runtime, write_text
from ._demo import ProgressDisplay
from ._loops import run_on_loop
from ._workload import describe_line

__all__ = ["TraceRecorder", "run_trace"]

_RUN_PID = 0
_ITEMS_TID = 1
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
        self._stage_tids: dict[tuple[int, str], int] = {}

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

    def on_stage(self, device: int, stream: str, name: str, start: float, finish: float) -> None:
        """The pipeline's ``on_stage``: one span per stage, one track per device stream."""
        pid = device + 1
        with self._lock:
            tid = self._stage_tids.setdefault(
                (device, stream), _FIRST_STREAM_TID + len(self._stage_tids)
            )
        self.name_track(pid, tid, f"device {device}", f"{stream} stream")
        self.span(pid, tid, name, start, finish, {"from": "timing events"})

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


def run_trace(
    *,
    devices: int,
    items: int,
    out_path: str,
    loop: str,
    out: TextIO,
    backend: str = "sim",
    model: bool = False,
    model_path: str | None = None,
    workload: str | None = None,
) -> int:
    """Run the demo pipeline and write its timeline to *out_path*.

    On ``backend="sim"`` the run has a fresh simulator of its own, on ``"native"`` it
    uses the ``acl`` module; *model*, *model_path* and *workload* are the demo's. ``-``
    writes the trace to stdout. Progress goes to stderr, the closing message to *out*.
    Blocks until the run has finished and the trace is written; Ctrl-C cancels the run
    and raises ``KeyboardInterrupt`` without writing anything.
    """
    recorder = TraceRecorder()
    begun = time.monotonic()
    runtime: Any = None
    if backend == "sim":
        runtime = sim_runtime(devices)
        runtime.sim.set_observer(recorder.on_task)
    items_track = _ItemSpans(recorder, devices)
    display = ProgressDisplay(sys.stderr)

    def progress(state: _pipeline.PipelineProgress) -> None:
        items_track(state)
        display(state)

    async def pipeline() -> dict[str, Any]:
        items_track.start(time.monotonic())
        return await _pipeline.run_pipeline(
            devices=devices,
            items=items,
            backend=runtime if runtime is not None else backend,
            progress=progress,
            on_ready=items_track.ready,
            model=model,
            model_path=model_path,
            workload=workload,
            on_stage=None if runtime is not None else recorder.on_stage,
        )

    try:
        result = run_on_loop(loop, pipeline)
    finally:
        display.close()
        if runtime is not None:
            runtime.sim.close()
    started, finished = items_track.started, time.monotonic()
    recorder.name_track(_RUN_PID, 1, "pipeline", "run")
    recorder.span(_RUN_PID, 1, "start-up", begun, started, {"what": "runtime, event loop"})
    recorder.span(_RUN_PID, 1, "run_pipeline", started, finished, {"loop": loop, "items": items})
    trace = recorder.trace(
        {
            "aclasync": __version__,
            "backend": backend,
            "devices": devices,
            "items": items,
            "loop": loop,
            "items_per_s": result["items_per_s"],
            "compute": result["compute"],
            "stream_tracks": "simulator task observer" if runtime is not None else "timing events",
            "workloads": result["workloads"],
        }
    )
    where = write_text(out_path, json.dumps(trace) + "\n")
    workloads = result["workloads"]
    lines = [f"wrote {len(trace['traceEvents'])} trace events to {where}"]
    first = workloads[min(workloads, key=int)] if workloads else None
    if first is not None and (first.get("kind") != "sim-kernel" or backend != "sim"):
        lines.append(describe_line(first))
    if runtime is None:
        lines.append("stream tracks: one span per stage, from timing events on the device")
    lines.append(
        "open it at https://ui.perfetto.dev (Open trace file) or in chrome://tracing (Load)"
    )
    print("\n".join(lines), file=out)
    return 0


class _ItemSpans:
    """The "items finished" track of each device: its set-up, then one span per item.

    ``start`` marks the start of the run, ``ready`` the end of a device's set-up, and
    the instance itself is the pipeline's progress callback. An item's span runs from
    the device's previous completion (or the end of its set-up) to this one: with
    double buffering, the share of time the device spent per item.
    """

    def __init__(self, recorder: TraceRecorder, devices: int) -> None:
        self._recorder = recorder
        self.started = time.monotonic()
        self._last_time: dict[int, float] = {}
        self._seen = dict.fromkeys(range(devices), 0)
        for device in range(devices):
            recorder.name_track(device + 1, _ITEMS_TID, f"device {device}", "items finished")

    def start(self, now: float) -> None:
        self.started = now

    def ready(self, device: int) -> None:
        now = time.monotonic()
        self._recorder.span(
            device + 1,
            _ITEMS_TID,
            "set-up",
            self.started,
            now,
            {"what": "open_device, create_stream x2, buffers per slot, workload"},
        )
        self._last_time[device] = now

    def __call__(self, state: _pipeline.PipelineProgress) -> None:
        now = time.monotonic()
        for device, count in state.per_device.items():
            while self._seen.get(device, 0) < count:
                self._seen[device] = self._seen.get(device, 0) + 1
                start = self._last_time.get(device, self.started)
                self._recorder.span(
                    device + 1,
                    _ITEMS_TID,
                    f"item {self._seen[device]}",
                    start,
                    now,
                    {"done": state.done, "total": state.total},
                )
                self._last_time[device] = now


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
