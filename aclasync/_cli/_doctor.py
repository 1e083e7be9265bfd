"""``aclasync doctor``: the runtime this host has, and whether it behaves as aclasync relies on.

One command for a user on an Ascend host, whose output goes with a bug report:

- the backend and why that one, and whether its ``acl`` is aclasync's simulator;
- what the runtime reports: ``acl.init``'s status, ACL version (``acl.get_version``),
  SoC, devices and their memory, run mode, and the stream and event limits it lets the
  process reach (``_conformance.probe_limits``); a query that fails, raises or answers
  in another shape than pyACL's is a failure naming the call and what it gave, and
  the rest of the report goes on;
- the conformance checks (``_conformance``, the same ones ``tests/conformance`` runs),
  each ``PASS``, ``FAIL`` naming the difference, or ``SKIP`` with the reason;
- a short sync-modes measurement: default against FAST_SYNC streams, at the raw level
  and through aclasync, with the pyACL-only workload where there is no simulator.

Exit status 0 when no check and no runtime query failed, 1 otherwise. The text is
``_doctor_text``'s.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .._backend import is_aclasync_simulator, resolve_backend
from .._conformance import CHECKS, FAIL, PASS, SKIP, probe_limits, run_check
from .._pyacl.codes import ErrorCode, code_name
from .._pyacl.constants import MemAttr, RunMode
from .._version import __version__
from ._common import CliError, call_text, pyacl_call, write_text
from ._doctor_text import RUNTIME_FAILURES, format_report
from ._info import choose_backend
from ._loops import deferred_interrupts

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
    allows; the checks and the measurement take about a second each). The report is
    printed before the JSON is written: a write that fails (a full disk) loses nothing
    but the file, and is one error after the report.

    Returns
    -------
    int
        0 when no check and no runtime query failed, 1 otherwise.
    """
    with deferred_interrupts() as checkpoint:
        report = collect_report(requested, device, progress, checkpoint)
    print(format_report(report), file=out, flush=True)
    if json_path is not None:
        # default=repr: a value a runtime gave that JSON cannot hold goes as its repr.
        where = write_text(json_path, json.dumps(report, indent=2, default=repr) + "\n")
        progress(f"doctor: wrote the report to {where}")
    summary = report["summary"]
    return 1 if summary[FAIL] or summary[RUNTIME_FAILURES] else 0


def collect_report(
    requested: str | None,
    device: int,
    progress: Callable[[str], None],
    checkpoint: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Everything ``doctor`` reports, as a JSON-ready dict (see the module docstring).

    *checkpoint* is called between steps, each of which leaves every device it set as
    it found it: ``run_doctor`` passes ``deferred_interrupts``'s, so that Ctrl-C ends
    the report there (``KeyboardInterrupt``) and not inside a ``set_device``.

    A runtime query that fails, raises or answers in another shape than pyACL's does
    not end the report: it is one entry of ``failures`` (``item`` and ``message``,
    naming the call and what it gave), and what needs its answer is skipped.
    """
    name, reason = choose_backend(requested)
    acl, _ = resolve_backend(name)
    simulator = is_aclasync_simulator(acl)
    origin = getattr(acl, "__file__", None)
    failures: list[dict[str, str]] = []
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
        "failures": failures,
    }
    asker = _Asker(acl, failures)
    report["init"], initialised = _init(asker)
    try:
        checkpoint()
        progress("doctor: asking the runtime what it has")
        report["runtime"] = _runtime(asker, checkpoint)
        count = report["runtime"]["device_count"]
        if count is not None and not 0 <= device < count:
            raise ValueError(f"--device {device}: the runtime has {count} device(s)")
        if count is None:
            why = "the runtime gave no device count (acl.rt.get_device_count)"
            report["limits"] = {"skipped": why}
            report["checks"] = []
            report["sync_modes"] = {"skipped": why}
        else:
            checkpoint()
            progress(f"doctor: creating streams and events on device {device} until refused")
            report["limits"] = probe_limits(acl, device)
            failures.extend(_limit_failures(report["limits"]))
            progress(f"doctor: conformance checks on device {device}")
            checks = []
            for check in CHECKS:
                checkpoint()
                checks.append(run_check(check, acl, device))
            report["checks"] = [result.as_dict() for result in checks]
            checkpoint()
            progress("doctor: sync modes, default against FAST_SYNC (asyncio)")
            fast = next(r for r in checks if r.name == "fast-sync")
            report["sync_modes"] = _sync_modes(name, device, skip=fast.verdict != PASS)
    finally:
        if initialised:
            asker.status("finalize", "finalize")
    verdicts = [check["verdict"] for check in report["checks"]]
    report["summary"] = {verdict: verdicts.count(verdict) for verdict in (PASS, FAIL, SKIP)}
    report["summary"][RUNTIME_FAILURES] = len(failures)
    return report


class _Asker:
    """Asks the runtime (``pyacl_call``); a call that is missing, raises or answers in
    another shape is recorded in *failures* under its item and gives ``None``."""

    def __init__(self, acl: Any, failures: list[dict[str, str]]) -> None:
        self.acl = acl
        self.failures = failures

    def fail(self, item: str, message: str) -> None:
        self.failures.append({"item": item, "message": message})

    def ask(self, item: str, name: str, *args: Any, size: int = 2) -> Any:
        try:
            return pyacl_call(self.acl, name, *args, size=size)
        except CliError as exc:
            self.fail(item, str(exc))
            return None

    def status(self, item: str, name: str, *args: Any, fine: tuple[int, ...] = ()) -> int | None:
        """The status of a call answered with a bare one; a failure unless 0 or *fine*."""
        ret: int | None = self.ask(item, name, *args, size=1)
        if ret is not None and ret != 0 and ret not in fine:
            self.fail(item, f"{call_text(name, args)} gave {ret} ({code_name(ret)})")
        return ret

    def values(self, item: str, name: str, *args: Any, size: int = 2) -> tuple[Any, ...] | None:
        """The values of a call answered with ``(values, ..., ret)``, or ``None`` (a
        failure) if it failed."""
        result = self.ask(item, name, *args, size=size)
        if result is None:
            return None
        if result[-1] != 0:
            ret = result[-1]
            self.fail(item, f"{call_text(name, args)} gave {ret} ({code_name(ret)})")
            return None
        return tuple(result[:-1])


def _init(asker: _Asker) -> tuple[dict[str, Any], bool]:
    """``acl.init()``: its status for the report, and whether ``finalize`` is ours to call.

    100002 (initialised already, by someone else) is fine, and that init is not ours.
    """
    ret = asker.status("init", "init", fine=(int(ErrorCode.ACL_ERROR_REPEAT_INITIALIZE),))
    status = {"status": ret, "name": None if ret is None else code_name(ret)}
    return status, ret == 0


def _strict(acl: Any) -> bool:
    from ..sim._strict import StrictAcl

    return isinstance(acl, StrictAcl)


def _runtime(asker: _Asker, checkpoint: Callable[[], None]) -> dict[str, Any]:
    """Version, SoC, devices, memory and run mode, each as the runtime reports it."""
    info: dict[str, Any] = {"acl_version": None, "soc": None, "device_count": None}
    version = asker.values("version", "get_version", size=4)
    if version is not None:
        info["acl_version"] = ".".join(str(n) for n in version)
    soc = asker.ask("soc", "get_soc_name", size=0)
    if soc is None or isinstance(soc, str):
        info["soc"] = soc
    else:
        asker.fail("soc", f"acl.get_soc_name() returned {soc!r}, not the str pyACL returns")
    counted = asker.values("device_count", "rt.get_device_count")
    if counted is not None:
        if isinstance(counted[0], int) and counted[0] >= 0:
            info["device_count"] = counted[0]
        else:
            asker.fail(
                "device_count",
                f"acl.rt.get_device_count() returned ({counted[0]!r}, 0): no count of devices",
            )
    info["memory"] = []
    for device in range(info["device_count"] or 0):
        checkpoint()
        info["memory"].append(_device_memory(asker, device, info))
    return info


def _device_memory(asker: _Asker, device: int, info: dict[str, Any]) -> dict[str, Any]:
    """Set *device*, read its memory (and on device 0 the run mode), reset it."""
    item = f"memory (device {device})"
    ret = asker.status(item, "rt.set_device", device)
    if ret != 0:
        return {"device": device, "error": f"acl.rt.set_device({device}) failed"}
    try:
        if device == 0:
            mode = asker.values("run_mode", "rt.get_run_mode")
            if mode is not None and isinstance(mode[0], int):
                info["run_mode"] = _run_mode(mode[0])
            elif mode is not None:
                asker.fail(
                    "run_mode", f"acl.rt.get_run_mode() returned ({mode[0]!r}, 0): no run mode"
                )
        memory = asker.values(item, "rt.get_mem_info", int(MemAttr.HBM_MEM), size=3)
        if memory is None:
            return {"device": device, "error": "acl.rt.get_mem_info failed"}
        free, total = memory
        if not all(isinstance(n, int) and n >= 0 for n in (free, total)):
            asker.fail(
                item,
                f"acl.rt.get_mem_info(ACL_HBM_MEM) on device {device} returned "
                f"({free!r}, {total!r}, 0): free and total are not byte counts",
            )
            return {"device": device, "error": "acl.rt.get_mem_info gave no byte counts"}
        return {"device": device, "free": free, "total": total}
    finally:
        asker.ask(item, "rt.reset_device", device, size=1)


def _limit_failures(limits: dict[str, Any]) -> list[dict[str, str]]:
    """The limit probe's failures (a call missing, raising or of another shape)."""
    found = [{"item": "limits", "message": limits["error"]}] if "error" in limits else []
    for kind in ("streams", "events"):
        probe = limits.get(kind, {})
        for key in ("available_error", "error"):
            if key in probe:
                found.append({"item": f"limits ({kind})", "message": probe[key]})
    return found


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


def stderr(line: str) -> None:
    """The doctor's progress sink: one line to stderr, flushed."""
    print(line, file=sys.stderr, flush=True)
