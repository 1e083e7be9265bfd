"""``aclasync demo``: the multi-device pipeline with live progress and a summary."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from . import _pipeline
from ._common import CliError
from ._loops import run_on_loop
from ._workload import describe_line

__all__ = ["ProgressDisplay", "demo_bytes", "format_summary", "run_demo"]

#: Seconds between redraws of the single TTY progress line.
_REDRAW_S = 0.1


class ProgressDisplay:
    """Show a pipeline's progress on *out*: one redrawn line on a TTY, else every ~10 %.

    Called in the event loop once per finished item, so it does no more than format
    a line now and then.
    """

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._tty = out.isatty()
        self._last_draw = 0.0
        self._next_tenth = 1
        self.last: _pipeline.PipelineProgress | None = None

    def __call__(self, state: _pipeline.PipelineProgress) -> None:
        self.last = state
        finished = state.done == state.total
        if self._tty:
            now = time.perf_counter()
            if finished or now - self._last_draw >= _REDRAW_S:
                self._last_draw = now
                self._out.write("\r\x1b[K" + _progress_line(state))
                self._out.flush()
        elif state.done * 10 >= self._next_tenth * state.total:
            while state.done * 10 >= self._next_tenth * state.total:
                self._next_tenth += 1
            print(_progress_line(state), file=self._out, flush=True)

    def close(self) -> None:
        """End the redrawn line, so that what follows starts on a fresh one."""
        if self._tty and self._last_draw:
            self._out.write("\n")
            self._out.flush()


def demo_bytes(devices: int, size: int) -> int:
    """Roughly the memory a demo run of *size* x *size* matrices on *devices* holds.

    Per device, two slots of four float32 buffers (host and device, in and out; the
    simulator keeps device memory in host memory too), plus the weights and the host
    reference's temporaries.
    """
    matrix = size * size * 4
    return devices * _pipeline.SLOTS * 4 * matrix + 6 * matrix


def run_demo(
    *,
    devices: int,
    items: int,
    loop: str,
    kernel_us: float,
    size: int,
    out: TextIO,
    model: bool = False,
    model_path: str | None = None,
    workload: str | None = None,
    backend: str = "sim",
) -> int:
    """Run the demo pipeline and print a summary to *out*.

    On ``backend="sim"`` it runs on a fresh simulator, on ``"native"`` on the ``acl``
    module (CANN's, or the simulator imported as ``acl``). With *model*, the compute
    step is a registered simulated model run with ``Model.launch`` instead of a kernel
    (its temporary spec file is removed at the end); with *model_path*, the offline
    model in that file; *workload* chooses the device work otherwise (see
    ``_pipeline``).

    Blocks until the pipeline has finished; Ctrl-C cancels it and raises
    ``KeyboardInterrupt`` once the devices are closed. Progress goes to stderr.

    Returns
    -------
    int
        0 when every item ran and every checked result matched, 1 otherwise.
    """
    display = ProgressDisplay(sys.stderr)
    if model_path is not None:
        step = f"model {model_path}"
    elif model:
        step = f"registered model {kernel_us:g} us"
    elif backend == "sim" and workload in (None, "sim-kernel"):
        step = f"kernel {kernel_us:g} us"
    else:
        step = f"work {kernel_us:g} us"
    what = "" if model_path is not None else f" of {size}x{size} float32"
    print(
        f"pipeline: {items} items{what} over {devices} "
        f"{_where(backend)} device(s), {step}, on {loop}",
        file=out,
        flush=True,
    )

    async def pipeline() -> dict[str, Any]:
        return await _pipeline.run_pipeline(
            devices=devices,
            items=items,
            kernel_us=kernel_us,
            size=size,
            progress=display,
            model=model,
            model_path=model_path,
            workload=workload,
            backend=None if backend == "sim" else backend,
        )

    try:
        result = run_on_loop(loop, pipeline)
    except RuntimeError as exc:
        state = display.last
        if state is None or not state.mismatches:
            raise
        raise CliError(f"verification failed: {exc}") from exc
    finally:
        display.close()
    print(format_summary(result, said_kernel=step.startswith("kernel ")), file=out)
    done = sum(row["items"] for row in result["per_device"])
    if not result.get("checked", True):
        return 0 if done == items else 1
    return 0 if result["verified"] == items else 1


def _where(backend: str) -> str:
    """How the run's devices are named in its first line."""
    if backend != "native":
        return "simulated"
    from .._backend import is_aclasync_simulator, resolve_backend

    acl, _ = resolve_backend("native")
    return "native (aclasync's simulator as acl)" if is_aclasync_simulator(acl) else "native"


def format_summary(result: dict[str, Any], said_kernel: bool = True) -> str:
    """Render the dict ``run_pipeline`` returns as a table and a verification line;
    *said_kernel*: the run's first line named its simulated kernels already."""
    header = f"  {'device':>6}  {'items':>6}  {'items/s':>9}  {'compute utilisation':>19}"
    lines = [header, "  " + "-" * (len(header) - 2)]
    for row in result["per_device"]:
        lines.append(
            f"  {row['device']:>6}  {row['items']:>6}  {row['items_per_s']:>9.1f}  "
            f"{row['utilisation'] * 100:>18.1f}%"
        )
    lines.append(f"  {'total':>6}  {result['items']:>6}  {result['items_per_s']:>9.1f}")
    lines.append(f"wall time {result['seconds']:.3f} s")
    compute = result.get("compute")
    if compute == "model" and result.get("model_path"):
        lines.append(
            f"compute step: the offline model {result['model_path']}, queued with "
            "Model.launch on each device's compute stream"
        )
    elif compute == "model":
        lines.append(
            "compute step: a registered simulated model (acl.sim.register_model), "
            "queued with Model.launch on each device's compute stream"
        )
    elif compute == "memset":
        lines.append(
            "compute step: pyACL alone: acl.rt.memset_async work of the requested length, "
            "then a device-to-device copy of the input into the output"
        )
    lines.extend(_workload_lines(result.get("workloads", {}), said_kernel))
    runs = "model executions" if compute == "model" else "kernels"
    if compute == "memset":
        runs = "compute steps"
    measured = compute == "model" and result.get("model_path")
    length = "timed once before the run" if measured else "as planned"
    lines.append(
        f"compute utilisation: the share of the wall time each device's {runs} ran "
        f"(the overlap of copies and compute achieved), each step's length {length}"
    )
    if not result.get("checked", True):
        lines.append(
            f"ran {result['items']} items; the model's outputs were copied back, not "
            "checked: aclasync cannot know what your model should answer"
        )
    elif compute == "memset":
        lines.append(f"verified {result['verified']}/{result['items']} results came back unchanged")
    else:
        lines.append(
            f"verified {result['verified']}/{result['items']} results against the host reference"
        )
    return "\n".join(lines)


def _workload_lines(workloads: dict[str, dict[str, Any]], said_kernel: bool) -> list[str]:
    """Which workload ran and its calibration: device 0's, and the others' spread."""
    if not workloads:
        return []
    first = workloads[min(workloads, key=int)]
    if first.get("kind") == "sim-kernel" and said_kernel:
        return []  # the simulator's default: said by "kernel" in the first line
    lines = [describe_line(first) + (" (device 0)" if len(workloads) > 1 else "")]
    rates = [w["gb_per_s"] for w in workloads.values() if "gb_per_s" in w]
    if len(rates) > 1:
        lines.append(f"  each device calibrated its own: {min(rates):.3g} to {max(rates):.3g} GB/s")
    return lines


def _progress_line(state: _pipeline.PipelineProgress) -> str:
    elapsed = max(time.perf_counter() - state.started, 1e-9)
    devices = " ".join(f"d{d}:{n}" for d, n in sorted(state.per_device.items()))
    return f"{state.done}/{state.total} items  {state.done / elapsed:.0f} items/s  [{devices}]"
