"""``aclasync doctor``: the runtime this host has, and whether it behaves as aclasync relies on.

One command for a user on an Ascend host, whose output goes with a bug report:

- the backend and why that one, and whether its ``acl`` is aclasync's simulator;
- what the runtime reports: ACL version (``acl.get_version``), SoC, devices and their
  memory, run mode, and the stream and event limits it lets the process reach
  (``_conformance.probe_limits``);
- the conformance checks (``_conformance``, the same ones ``tests/conformance`` runs),
  each ``PASS``, ``FAIL`` naming the difference, or ``SKIP`` with the reason;
- a short sync-modes measurement: default against FAST_SYNC streams, at the raw level
  and through aclasync, with the pyACL-only workload where there is no simulator.

Exit status 0 when no check failed, 1 otherwise.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .._backend import is_aclasync_simulator, resolve_backend
from .._conformance import FAIL, PASS, SKIP, probe_limits, run_checks
from .._pyacl.codes import code_name
from .._pyacl.constants import MemAttr, RunMode
from .._version import __version__
from ._common import CliError, pyacl_call, write_text
from ._info import choose_backend

__all__ = ["collect_report", "format_report", "run_doctor"]

#: Samples of the sync-modes measurement per work length (µs), one round, asyncio.
_SYNC_COUNTS = {0: 4, 100: 20, 1_000: 20, 10_000: 4}
_SYNC_LENGTHS = (100, 1_000, 10_000)


def run_doctor(
    requested: str | None,
    json_path: str | None,
    device: int,
    out: TextIO,
    progress: Callable[[str], None],
) -> int:
    """Examine the runtime, print the report to *out* (and JSON to *json_path*).

    Blocks for a few seconds (the limit probe creates every stream and event the device
    allows; the checks and the measurement take about a second each).

    Returns
    -------
    int
        0 when no check failed, 1 otherwise.
    """
    report = collect_report(requested, device, progress)
    if json_path is not None:
        where = write_text(json_path, json.dumps(report, indent=2) + "\n")
        progress(f"doctor: wrote the report to {where}")
    print(format_report(report), file=out, flush=True)
    return 1 if report["summary"][FAIL] else 0


def collect_report(
    requested: str | None, device: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Everything ``doctor`` reports, as a JSON-ready dict (see the module docstring)."""
    name, reason = choose_backend(requested)
    acl, _ = resolve_backend(name)
    simulator = is_aclasync_simulator(acl)
    origin = getattr(acl, "__file__", None)
    report: dict[str, Any] = {
        "aclasync": __version__,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "backend": {
            "name": name,
            "reason": reason,
            "acl_module": origin if isinstance(origin, str) else None,
            "acl_is_simulator": simulator,
            "simulator_strict": _strict(acl) if simulator else None,
        },
        "device": device,
    }
    initialised = pyacl_call(acl, "init", size=1) == 0
    try:
        progress("doctor: asking the runtime what it has")
        report["runtime"] = _runtime(acl)
        count = report["runtime"]["device_count"]
        if count is None:
            failed = report["runtime"]["device_count_error"]
            raise CliError(f"acl.rt.get_device_count failed with {failed}: no device to check")
        if not 0 <= device < count:
            raise ValueError(f"--device {device}: the runtime has {count} device(s)")
        progress(f"doctor: creating streams and events on device {device} until refused")
        report["limits"] = probe_limits(acl, device)
        progress(f"doctor: conformance checks on device {device}")
        checks = run_checks(acl, device)
        report["checks"] = [result.as_dict() for result in checks]
        progress("doctor: sync modes, default against FAST_SYNC (asyncio)")
        fast = next(r for r in checks if r.name == "fast-sync")
        report["sync_modes"] = _sync_modes(name, device, skip=fast.verdict != PASS)
    finally:
        if initialised:
            pyacl_call(acl, "finalize", size=1)
    verdicts = [check["verdict"] for check in report["checks"]]
    report["summary"] = {verdict: verdicts.count(verdict) for verdict in (PASS, FAIL, SKIP)}
    return report


def _strict(acl: Any) -> bool:
    from ..sim._strict import StrictAcl

    return isinstance(acl, StrictAcl)


def _runtime(acl: Any) -> dict[str, Any]:
    """Version, SoC, devices, memory and run mode, each as the runtime reports it."""
    info: dict[str, Any] = {}
    *version, ret = pyacl_call(acl, "get_version", size=4)
    info["acl_version"] = ".".join(str(n) for n in version) if ret == 0 else None
    info["soc"] = pyacl_call(acl, "get_soc_name", size=0)
    count, ret = pyacl_call(acl, "rt.get_device_count")
    info["device_count"] = int(count) if ret == 0 else None
    if ret:
        info["device_count_error"] = f"{ret} ({code_name(ret)})"
    memory = []
    for device in range(info["device_count"] or 0):
        if acl.rt.set_device(device):
            memory.append({"device": device, "error": "set_device failed"})
            continue
        try:
            if device == 0:
                mode, ret = pyacl_call(acl, "rt.get_run_mode")
                info["run_mode"] = _run_mode(mode) if ret == 0 else f"error {ret}"
            free, total, ret = pyacl_call(acl, "rt.get_mem_info", int(MemAttr.HBM_MEM), size=3)
            memory.append(
                {"device": device, "free": free, "total": total}
                if ret == 0
                else {"device": device, "error": f"{ret} ({code_name(ret)})"}
            )
        finally:
            acl.rt.reset_device(device)
    info["memory"] = memory
    return info


def _run_mode(mode: int) -> str:
    try:
        return f"{RunMode(mode).name} ({mode})"
    except ValueError:
        return f"unknown ({mode})"


def _sync_modes(backend: str, device: int, *, skip: bool) -> dict[str, Any]:
    """Default against FAST_SYNC, at the raw level and through aclasync (device 0)."""
    if skip:
        return {"skipped": "FAST_SYNC streams did not pass their check"}
    if device != 0:
        return {"skipped": "measured on device 0 only"}
    from ._bench._common import Target
    from ._bench._sync_modes import _aclasync_level, _rows
    from ._loops import run_on_loop

    target = Target(backend="native" if backend == "native" else "sim")
    try:
        cells, raw_cells, workload = run_on_loop(
            "asyncio", _aclasync_level, target, _SYNC_COUNTS, 1
        )
    except Exception as exc:  # a measurement that fails is reported, not fatal
        return {"error": f"{type(exc).__name__}: {exc}"}
    rows = _rows({"raw": raw_cells, "asyncio": cells}, {"asyncio": raw_cells})
    picked = []
    for level in ("raw", "asyncio"):
        for length in _SYNC_LENGTHS:
            by_mode = {
                row["mode"]: row
                for row in rows
                if row["level"] == level and row["kernel_us"] == length
            }
            default, fast = by_mode["default"], by_mode["FAST_SYNC"]
            picked.append(
                {
                    "level": "aclasync" if level == "asyncio" else "raw",
                    "work_us": length,
                    "ran_us": fast["measured_us"],
                    "default_p50_us": default["p50_us"],
                    "fast_sync_p50_us": fast["p50_us"],
                    "fast_vs_default": fast["lat_vs_default"],
                    "cpu_fast_vs_default": fast["cpu_vs_default"],
                }
            )
    return {"loop": "asyncio", "samples": _SYNC_COUNTS, "workload": workload, "rows": picked}


def format_report(report: dict[str, Any]) -> str:
    """Render ``collect_report``'s dict as text."""
    backend, runtime = report["backend"], report.get("runtime", {})
    lines = [
        f"aclasync doctor {report['aclasync']} ({report['python']}, {report['platform']})",
        f"backend   {backend['name']} ({backend['reason']})",
    ]
    if backend["acl_is_simulator"]:
        strict = ", strict: pyACL's surface only" if backend["simulator_strict"] else ""
        where = backend["acl_module"] or "built in"
        lines.append(f"acl       aclasync's simulator{strict} ({where})")
    else:
        lines.append(f"acl       CANN's pyACL ({backend['acl_module'] or 'built in'})")
    lines.append(f"ACL       {runtime.get('acl_version')} (acl.get_version)")
    lines.append(f"SoC       {runtime.get('soc')}")
    lines.append(
        f"devices   {runtime.get('device_count')}; run mode {runtime.get('run_mode', '?')}"
    )
    groups: dict[str, list[int]] = {}  # devices that report alike share a line
    for entry in runtime.get("memory", []):
        if "error" in entry:
            said = entry["error"]
        else:
            said = f"{_gib(entry['total'])} total, {_gib(entry['free'])} free"
        groups.setdefault(said, []).append(entry["device"])
    for said, devices in groups.items():
        which = f"device {devices[0]}" if len(devices) == 1 else f"devices {_ranges(devices)}"
        lines.append(f"memory    {which}: {said}{' each' if len(devices) > 1 else ''}")
    lines.extend(_limit_lines(report.get("limits", {}), report["device"]))
    lines.append(f"checks    on device {report['device']}")
    width = max(len(check["name"]) for check in report.get("checks", [{"name": ""}]))
    for check in report.get("checks", []):
        lines.append(f"  {check['verdict']:<4}  {check['name']:<{width}}  {check['message']}")
    lines.extend(_sync_lines(report.get("sync_modes", {})))
    summary = report["summary"]
    lines.append(
        f"verdict   {summary[PASS]} passed, {summary[FAIL]} failed, {summary[SKIP]} skipped"
        + ("" if not summary[FAIL] else ": this runtime differs from what aclasync relies on")
    )
    lines.append(
        "report    `aclasync doctor --json report.json` writes all of it; attach that file "
        "to a bug report"
    )
    return "\n".join(lines)


def _limit_lines(limits: dict[str, Any], device: int) -> list[str]:
    if "error" in limits:
        return [f"limits    {limits['error']}"]
    lines = []
    for kind in ("streams", "events"):
        probe = limits.get(kind)
        if probe is None:
            continue
        end = (
            f"then refused with {probe['refused_with']} ({probe['refused_with_name']})"
            if probe["refused_with"] is not None
            else f"stopped at the probe's cap ({probe['cap']})"
        )
        left = "?" if probe["available"] is None else probe["available"]
        lines.append(
            f"limits    {kind} on device {device}: {left} left by the runtime's count, "
            f"{probe['created']} created, {end}"
        )
    return lines


def _sync_lines(sync: dict[str, Any]) -> list[str]:
    if "skipped" in sync:
        return [f"sync      not measured: {sync['skipped']}"]
    if "error" in sync:
        return [f"sync      could not be measured: {sync['error']}"]
    from ._workload import describe_line

    lines = [
        "sync      default vs FAST_SYNC streams on asyncio, latency p50 in us (see `aclasync "
        "bench sync-modes`):",
        f"  {'level':<9} {'work us':>7} {'ran us':>7} {'default':>8} {'FAST_SYNC':>9} "
        f"{'FAST/dflt':>9} {'CPU FAST/dflt':>13}",
    ]
    for row in sync["rows"]:
        lines.append(
            f"  {row['level']:<9} {row['work_us']:>7} {row['ran_us']:>7.0f} "
            f"{row['default_p50_us']:>8.1f} {row['fast_sync_p50_us']:>9.1f} "
            f"{_ratio(row['fast_vs_default']):>9} {_ratio(row['cpu_fast_vs_default']):>13}"
        )
    lines.append(f"  {describe_line(sync['workload'])}")
    lines.append(
        "  (a few samples: for figures to compare, `aclasync bench sync-modes` on this host)"
    )
    return lines


def _ranges(numbers: list[int]) -> str:
    """``0-3, 5`` for [0, 1, 2, 3, 5]."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def stderr(line: str) -> None:
    """The doctor's progress sink: one line to stderr, flushed."""
    print(line, file=sys.stderr, flush=True)
