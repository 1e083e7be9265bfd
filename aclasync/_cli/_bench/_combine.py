"""Medians over several full runs of ``sync-modes`` (``benchmarks/combine.py``).

One run of ``sync-modes`` judges ``over`` (aclasync - raw - floor) only to within tens of
microseconds on a shared VM; the figures the README quotes are medians over several
``aclasync bench --json`` files. ``combine`` computes them: per loop, mode and kernel
length, the median of the runs' ``over us`` and the runs themselves, then the worst
median per loop and mode against the target.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._sync_modes import LENGTHS_US, MODES, OVER_TARGET_US

__all__ = ["Combined", "combine", "format_markdown", "load_runs"]


@dataclass(frozen=True)
class Combined:
    """``over us`` of each run, per ``(loop, mode, kernel_us)``, in the runs' order."""

    runs: int
    cells: dict[tuple[str, str, int], list[float]]

    def median(self, loop: str, mode: str, length: int) -> float:
        return statistics.median(self.cells[(loop, mode, length)])

    def loops(self) -> list[str]:
        return list(dict.fromkeys(loop for loop, _, _ in self.cells))

    def worst(self, loop: str, mode: str) -> float:
        """The largest median over the kernel lengths of *loop* and *mode*."""
        return max(self.median(loop, mode, length) for length in LENGTHS_US)


def load_runs(paths: Sequence[str | Path]) -> list[Mapping[str, Any]]:
    """Read ``aclasync bench --json`` files; ``ValueError`` names a file that has no
    ``sync-modes`` result or is not such a file."""
    runs: list[Mapping[str, Any]] = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read it as JSON ({exc})") from None
        benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
        sync_modes = benchmarks.get("sync-modes") if isinstance(benchmarks, dict) else None
        if not isinstance(sync_modes, dict) or "rows" not in sync_modes:
            hint = "run 'aclasync bench sync-modes --json FILE'"
            raise ValueError(f"{path}: no sync-modes result ({hint})")
        runs.append(sync_modes)
    return runs


def combine(runs: Sequence[Mapping[str, Any]]) -> Combined:
    """Collect ``over us`` per cell from the ``sync-modes`` results of several runs.

    Raises ``ValueError`` if *runs* is empty or the runs do not cover the same cells
    (different loops, or a run without the floor).
    """
    if not runs:
        raise ValueError("no runs to combine")
    cells: dict[tuple[str, str, int], list[float]] = {}
    for run in runs:
        for row in run["rows"]:
            if row.get("over_us") is not None:
                key = (str(row["level"]), str(row["mode"]), int(row["kernel_us"]))
                cells.setdefault(key, []).append(float(row["over_us"]))
    counts = {len(values) for values in cells.values()}
    if counts != {len(runs)}:
        raise ValueError("the runs do not cover the same loops, modes and kernel lengths")
    return Combined(len(runs), cells)


def format_markdown(combined: Combined) -> str:
    """A Markdown table of the medians (each run in brackets) and the worst per mode."""
    modes = list(MODES)
    header = ["loop", "kernel", *(mode.replace("|", "\\|") for mode in modes)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for loop in combined.loops():
        for length in LENGTHS_US:
            row = [loop, f"{length:,} µs"]
            for mode in modes:
                runs = " / ".join(f"{value:+.0f}" for value in combined.cells[(loop, mode, length)])
                row.append(f"{combined.median(loop, mode, length):+.1f} ({runs})")
            lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append(
        f"Worst median per mode over {combined.runs} run(s), target <= {OVER_TARGET_US:g} us:"
    )
    for loop in combined.loops():
        parts = []
        for mode in modes:
            worst = combined.worst(loop, mode)
            mark = "ok" if worst <= OVER_TARGET_US else "MISS"
            parts.append(f"{mode} {worst:+.1f} [{mark}]")
        lines.append(f"- {loop}: " + "; ".join(parts))
    return "\n".join(lines) + "\n"
