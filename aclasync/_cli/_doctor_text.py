"""``aclasync doctor``'s report as text: ``format_report`` of ``collect_report``'s dict."""

from __future__ import annotations

from typing import Any

from .._conformance import FAIL, PASS, SKIP

__all__ = ["RUNTIME_FAILURES", "format_report"]

#: The summary's count of runtime queries that failed (``failures`` in the report).
RUNTIME_FAILURES = "runtime_failures"


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
    init = report["init"]
    said = "?" if init["status"] is None else f"{init['status']} ({init['name']})"
    lines.append(f"init      acl.init() gave {said}")
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
    lines.extend(_failure_lines(report["failures"]))
    lines.extend(_check_lines(report))
    lines.extend(_sync_lines(report.get("sync_modes", {})))
    summary = report["summary"]
    queries = summary[RUNTIME_FAILURES]
    lines.append(
        f"verdict   {summary[PASS]} passed, {summary[FAIL]} failed, {summary[SKIP]} skipped"
        + (f"; {queries} runtime quer{'y' if queries == 1 else 'ies'} failed" if queries else "")
        + (
            ": this runtime differs from what aclasync relies on"
            if summary[FAIL] or queries
            else ""
        )
    )
    lines.append(
        "report    `aclasync doctor --json report.json` writes all of it; attach that file "
        "to a bug report"
    )
    return "\n".join(lines)


def _failure_lines(failures: list[dict[str, str]]) -> list[str]:
    if not failures:
        return []
    width = max(len(failure["item"]) for failure in failures)
    lines = ["runtime   queries whose answers differ from pyACL's:"]
    for failure in failures:
        lines.append(f"  {FAIL:<4}  {failure['item']:<{width}}  {failure['message']}")
    return lines


def _check_lines(report: dict[str, Any]) -> list[str]:
    checks = report["checks"]
    if not checks:
        return [f"checks    not run: {report['limits'].get('skipped', 'no device')}"]
    lines = [f"checks    on device {report['device']}"]
    width = max(len(check["name"]) for check in checks)
    for check in checks:
        lines.append(f"  {check['verdict']:<4}  {check['name']:<{width}}  {check['message']}")
    return lines


def _limit_lines(limits: dict[str, Any], device: int) -> list[str]:
    if "error" in limits:
        return [f"limits    {limits['error']}"]
    if "skipped" in limits:
        return [f"limits    not probed: {limits['skipped']}"]
    lines = []
    for kind in ("streams", "events"):
        probe = limits.get(kind)
        if probe is None:
            continue
        if "error" in probe:
            lines.append(
                f"limits    {kind} on device {device}: not probed to the end: {probe['error']}"
            )
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
