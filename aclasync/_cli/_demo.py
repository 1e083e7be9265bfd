"""``aclasync demo``: the multi-device pipeline with live progress and a summary."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from . import _pipeline
from ._common import CliError
from ._loops import run_on_loop

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
) -> int:
    """Run the demo pipeline on a fresh simulator and print a summary to *out*.

    With *model*, the compute step is a registered simulated model run with
    ``Model.launch`` instead of a kernel (its temporary spec file is removed at the end).

    Blocks until the pipeline has finished; Ctrl-C cancels it and raises
    ``KeyboardInterrupt`` once the devices are closed. Progress goes to stderr.

    Returns
    -------
    int
        0 when every result matched the host reference, 1 otherwise.
    """
    display = ProgressDisplay(sys.stderr)
    step = "registered model" if model else "kernel"
    print(
        f"pipeline: {items} items of {size}x{size} float32 over {devices} simulated "
        f"device(s), {step} {kernel_us:g} us, on {loop}",
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
    print(format_summary(result), file=out)
    return 0 if result["verified"] == items else 1


def format_summary(result: dict[str, Any]) -> str:
    """Render the dict ``run_pipeline`` returns as a table and a verification line."""
    header = f"  {'device':>6}  {'items':>6}  {'items/s':>9}  {'compute utilisation':>19}"
    lines = [header, "  " + "-" * (len(header) - 2)]
    for row in result["per_device"]:
        lines.append(
            f"  {row['device']:>6}  {row['items']:>6}  {row['items_per_s']:>9.1f}  "
            f"{row['utilisation'] * 100:>18.1f}%"
        )
    lines.append(f"  {'total':>6}  {result['items']:>6}  {result['items_per_s']:>9.1f}")
    lines.append(f"wall time {result['seconds']:.3f} s")
    if result.get("compute") == "model":
        lines.append(
            "compute step: a registered simulated model (acl.sim.register_model), "
            "queued with Model.launch on each device's compute stream"
        )
    runs = "model executions" if result.get("compute") == "model" else "kernels"
    lines.append(
        f"compute utilisation: the share of the wall time each device's {runs} ran "
        "(the overlap of copies and compute achieved)"
    )
    lines.append(
        f"verified {result['verified']}/{result['items']} results against the host reference"
    )
    return "\n".join(lines)


def _progress_line(state: _pipeline.PipelineProgress) -> str:
    elapsed = max(time.perf_counter() - state.started, 1e-9)
    devices = " ".join(f"d{d}:{n}" for d, n in sorted(state.per_device.items()))
    return f"{state.done}/{state.total} items  {state.done / elapsed:.0f} items/s  [{devices}]"
