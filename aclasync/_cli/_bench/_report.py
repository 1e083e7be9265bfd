"""Reporting: the machine description, text tables and JSON (charts: ``_plot``)."""

from __future__ import annotations

import importlib.metadata
import json
import operator
import os
import platform
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._common import write_text
from .._workload import describe_line

__all__ = ["check_value", "describe_backend", "describe_machine", "format_table", "write_json"]

_PACKAGES = ("aclasync", "anyio", "trio", "uvloop", "numpy", "sniffio")


def describe_machine() -> dict[str, Any]:
    """Describe where the figures come from: OS, Python, CPUs, library versions, commit."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "cpu_model": _cpu_model(),
        "load_average": load,
        "packages": {name: _version(name) for name in _PACKAGES},
        "git": _git(),
    }


def describe_backend(backend: str) -> dict[str, Any]:
    """The backend a run used: its name, and for ``native`` what its ``acl`` module is."""
    if backend != "native":
        return {"name": backend, "acl": "aclasync.sim (a fresh runtime per measurement)"}
    from ..._backend import is_aclasync_simulator, resolve_backend

    acl, _ = resolve_backend("native")
    origin = getattr(acl, "__file__", None)
    version = None
    get_version = getattr(acl, "get_version", None)
    if callable(get_version):
        *numbers, ret = get_version()
        version = ".".join(str(n) for n in numbers) if ret == 0 else None
    return {
        "name": backend,
        "acl": origin if isinstance(origin, str) else "built in",
        "acl_is_simulator": is_aclasync_simulator(acl),
        "acl_version": version,
        "soc": acl.get_soc_name(),
    }


def format_table(results: dict[str, Any]) -> str:
    """Render a results dict (as returned by ``run``) as plain-text tables.

    One table per benchmark (plus its extra ``tables``, each a ``title/columns/rows``
    dict), then its target checks and notes; skipped benchmarks are listed with the
    reason.
    """
    lines: list[str] = []
    machine = results.get("machine", {})
    config = results.get("config", {})
    if machine:
        lines.append(
            f"# {machine.get('cpu_model') or '?'} x{machine.get('cpu_count')}, "
            f"{machine.get('python')}, {machine.get('platform')}"
        )
    if config:
        mode = "quick" if config.get("quick") else "full"
        loops = ", ".join(config.get("loops", []))
        lines.append(f"# {mode} run on {loops}; {config.get('seconds', 0):.1f} s")
        backend = config.get("backend") or {}
        if backend.get("name") == "native":
            what = "aclasync's simulator as acl" if backend.get("acl_is_simulator") else "CANN"
            lines.append(
                f"# native backend: {what} ({backend.get('acl')}), "
                f"ACL {backend.get('acl_version')}, SoC {backend.get('soc')}"
            )
        if config.get("quick"):
            lines.append(
                "# the targets are for full runs: a quick run's small samples make "
                "[MISS] likely and no verdict"
            )
    for name, bench in results.get("benchmarks", {}).items():
        lines.append("")
        lines.append(f"== {name}: {bench.get('title', '')} ({bench.get('seconds', 0):.1f} s)")
        if bench.get("workload"):
            lines.append(f"  {describe_line(bench['workload'])}")
        lines.extend(_table(bench["columns"], bench["rows"]))
        for extra in bench.get("tables", []):
            lines.append(f"  -- {extra['title']}")
            lines.extend(_table(extra["columns"], extra["rows"]))
        for item in bench.get("checks", []):
            mark = {True: "ok  ", False: "MISS", None: "n/a "}[item["ok"]]
            value = item["value"]
            shown = "-" if value is None else check_value(value, item["target"])
            lines.append(f"  [{mark}] {item['what']}: {shown} (target {item['target']})")
        lines.extend(f"  note: {note}" for note in bench.get("notes", []))
    for name, reason in results.get("skipped", {}).items():
        lines.append("")
        lines.append(f"== {name}: skipped ({reason})")
    return "\n".join(lines)


def write_json(results: dict[str, Any], path: str | os.PathLike[str]) -> str:
    """Write *results* as indented JSON to *path* (``-``: stdout); return where to."""
    return write_text(os.fspath(path), json.dumps(results, indent=2, sort_keys=False) + "\n")


def _table(columns: list[dict[str, str]], rows: list[dict[str, Any]]) -> list[str]:
    headers = [col["header"] for col in columns]
    cells = [[_cell(row.get(col["key"]), col["fmt"]) for col in columns] for row in rows]
    widths = [max(len(text) for text in column) for column in zip(headers, *cells, strict=True)]
    numeric = [bool(col["fmt"]) for col in columns]

    def line(values: list[str]) -> str:
        parts = [
            text.rjust(width) if right else text.ljust(width)
            for text, width, right in zip(values, widths, numeric, strict=True)
        ]
        return "  " + "  ".join(parts).rstrip()

    return [line(headers), "  " + "  ".join("-" * width for width in widths)] + [
        line(row) for row in cells
    ]


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, fmt)
    return str(value)


def _cpu_model() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Processor", "cpu model"):
            return value.strip()
    return platform.processor() or None


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git() -> dict[str, Any] | None:
    """The commit of the source tree aclasync runs from, if it is a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(dirty)} if commit else None


_COMPARISON = re.compile(r"^\s*(<=|>=|<|>|==)\s*([-+]?\d[\d,]*(?:\.\d*)?(?:[eE][-+]?\d+)?)")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d*)?(?:[eE][-+]?\d+)?")
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
}


def check_value(value: float, target: str) -> str:
    """*value* of a check against *target* (e.g. ``">= 30"``), in 3 significant digits,
    or as many more as it takes for the figure shown to fall on the same side of the
    target as the value itself: 29.97 against ">= 30" reads "29.97", never "30"."""
    found = _COMPARISON.match(target)
    compare = _COMPARE[found.group(1)] if found else None
    limit = float(found.group(2).replace(",", "")) if found else None
    numbers = [float(text.replace(",", "")) for text in _NUMBER.findall(target)]
    shown = f"{value:.3g}"
    for digits in range(4, 18):
        read = float(shown)
        misleads = any(read == number != value for number in numbers)
        if compare is not None and limit is not None:
            misleads = misleads or compare(read, limit) != compare(value, limit)
        if not misleads:
            break
        shown = f"{value:.{digits}g}"
    return shown
