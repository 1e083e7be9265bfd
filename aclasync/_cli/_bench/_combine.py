"""Medians over several full runs of ``sync-modes`` (``benchmarks/combine.py``).

One run of ``sync-modes`` judges ``over`` (aclasync - raw - floor) only to within tens of
microseconds on a shared VM; the figures the README quotes are medians over several
``aclasync bench --json`` files. ``combine`` computes them: per loop, mode and kernel
length, the median of the runs' ``over us`` and the runs themselves, then the worst
median per loop and mode against the target.

The files must be distinct runs (the same run twice would count twice: refused) of one
configuration (workload, loops, backend: refused if they differ). Quick runs' medians
are shown with no verdict, as ``format_table`` gives none for a quick run.
"""

from __future__ import annotations

import json
import math
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
    #: Some run was a ``--quick`` one: its targets are for full runs, so no verdict.
    quick: bool = False

    def median(self, loop: str, mode: str, length: int) -> float:
        return statistics.median(self.cells[(loop, mode, length)])

    def loops(self) -> list[str]:
        return list(dict.fromkeys(loop for loop, _, _ in self.cells))

    def worst(self, loop: str, mode: str) -> float:
        """The largest median over the kernel lengths of *loop* and *mode*."""
        return max(self.median(loop, mode, length) for length in LENGTHS_US)


#: What the runs' ``config`` must agree on to be combined.
_SAME = ("workload", "loops", "backend")


def load_runs(paths: Sequence[str | Path]) -> list[Mapping[str, Any]]:
    """Read ``aclasync bench --json`` files; return each one's ``sync-modes`` result, with
    the file's ``config`` under ``"config"``.

    ``ValueError`` names a file that has no ``sync-modes`` result, is not such a file or
    has a malformed row, two files that hold the same run, or two whose workload, loops
    or backend differ.
    """
    runs: list[Mapping[str, Any]] = []
    seen: list[tuple[str | Path, Any]] = []
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
        _check_rows(path, sync_modes["rows"])
        config = _config(data)
        for other, before in seen:
            if _same_run(data, before):
                raise ValueError(
                    f"{path} and {other} hold the same run: combining it twice would count it twice"
                )
            first = _config(before)
            for key in _SAME:
                if _comparable(key, config.get(key)) != _comparable(key, first.get(key)):
                    raise ValueError(
                        f"{path} and {other} differ in {key} ({config.get(key)!r} against "
                        f"{first.get(key)!r}): only runs of one configuration combine"
                    )
        seen.append((path, data))
        runs.append({**sync_modes, "config": config})
    return runs


#: What a row with an ``over_us`` must hold for ``combine``: each key and its kind.
_ROW_FIELDS = (
    ("level", "a string"),
    ("mode", "a string"),
    ("kernel_us", "a number"),
    ("over_us", "a number"),
)


def _check_rows(path: str | Path, rows: Any) -> None:
    """Raise ``ValueError`` naming *path* unless *rows* are rows ``combine`` can read."""
    if not isinstance(rows, list):
        raise ValueError(f"{path}: sync-modes 'rows' is {type(rows).__name__}, not a list")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(
                f"{path}: sync-modes row {index} is {type(row).__name__}, not an object"
            )
        if row.get("over_us") is None:
            continue  # not combined (the raw level's rows)
        for key, kind in _ROW_FIELDS:
            value = row.get(key)
            valid = isinstance(value, str) if kind == "a string" else _finite(value)
            if not valid:
                raise ValueError(f"{path}: sync-modes row {index}: {key} is {value!r}, not {kind}")


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _same_run(one: Mapping[str, Any], two: Mapping[str, Any]) -> bool:
    """Identical files, or the same start time on the same machine."""
    if one == two:
        return True
    started = _config(one).get("started")
    return started is not None and (
        started == _config(two).get("started") and one.get("machine") == two.get("machine")
    )


def _config(data: Mapping[str, Any]) -> dict[str, Any]:
    """A run's ``config`` (empty if it has none, or not an object)."""
    config = data.get("config")
    return config if isinstance(config, dict) else {}


def _comparable(key: str, value: Any) -> Any:
    """The part of a config value that must agree: the backend's name and SoC (not
    where its ``acl`` module was installed)."""
    if key == "backend" and isinstance(value, dict):
        return (value.get("name"), value.get("soc"))
    return value


def combine(runs: Sequence[Mapping[str, Any]]) -> Combined:
    """Collect ``over us`` per cell from the ``sync-modes`` results of several runs.

    Raises ``ValueError`` if *runs* is empty or the runs do not cover the same cells
    (different loops, or a run without the floor), or not every mode and kernel length.
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
    loops = dict.fromkeys(loop for loop, _, _ in cells)
    missing = [
        f"{loop} {mode} {length} us"
        for loop in loops
        for mode in MODES
        for length in LENGTHS_US
        if (loop, mode, length) not in cells
    ]
    if missing:
        raise ValueError(
            f"the runs have no over_us for {len(missing)} loop, mode and kernel length "
            f"cell(s), {missing[0]} first: each must cover them all"
        )
    quick = any(bool(_config(run).get("quick")) for run in runs)
    return Combined(len(runs), cells, quick)


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
    if combined.quick:
        lines.append("(quick runs: the targets are for full runs, so their medians get no verdict)")
    for loop in combined.loops():
        parts = []
        for mode in modes:
            worst = combined.worst(loop, mode)
            mark = "ok" if worst <= OVER_TARGET_US else "MISS"
            if combined.quick:
                mark = "no verdict"
            parts.append(f"{mode} {worst:+.1f} [{mark}]")
        lines.append(f"- {loop}: " + "; ".join(parts))
    return "\n".join(lines) + "\n"
