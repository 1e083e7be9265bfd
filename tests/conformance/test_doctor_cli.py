"""``aclasync doctor``: the report a user sends, its JSON, and its exit status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from faults import Faulty

import aclasync
import aclasync._cli._doctor
import aclasync.sim
from aclasync._cli import main
from aclasync._conformance import CHECKS

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_backend_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACLASYNC_BACKEND", raising=False)


def test_doctor_reports_the_runtime_its_checks_and_the_sync_modes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "report.json"
    assert main(["doctor", "--backend", "sim", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"aclasync doctor {aclasync.__version__}" in out
    assert "backend   sim (chosen with --backend)" in out
    assert "ACL       1.17.0 (acl.get_version)" in out
    assert "SoC       Ascend910B3" in out
    assert "limits    streams on device 0: 1982 left by the runtime's count, 1982 created" in out
    assert "events on device 0: 65536 left by the runtime's count, 65536 created" in out
    for check in CHECKS:
        assert f"PASS  {check.name}" in out
    assert "default vs FAST_SYNC streams" in out
    assert "workload: simulated kernels" in out
    assert f"verdict   {len(CHECKS)} passed, 0 failed, 0 skipped" in out

    report = json.loads(path.read_text())
    assert report["backend"]["name"] == "sim"
    assert report["backend"]["acl_is_simulator"] is True
    assert report["runtime"]["device_count"] == aclasync.sim.acl.rt.get_device_count()[0]
    assert report["limits"]["streams"]["refused_with"] == 207005
    assert [c["name"] for c in report["checks"]] == [c.name for c in CHECKS]
    assert report["summary"] == {
        "PASS": len(CHECKS),
        "FAIL": 0,
        "SKIP": 0,
        "runtime_failures": 0,
    }
    assert report["failures"] == []
    levels = {row["level"] for row in report["sync_modes"]["rows"]}
    assert levels == {"raw", "aclasync"}
    assert all(row["default_p50_us"] > 0 for row in report["sync_modes"]["rows"])


def test_doctor_json_to_stdout_keeps_the_text_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", "--backend", "sim", "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["summary"]["FAIL"] == 0
    assert "verdict" in captured.err


def test_a_failing_check_fails_the_doctor_and_says_how(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    strict = aclasync.sim.create(device_count=2, strict=True)
    faulty = Faulty(strict, rt_reset_device=strict.rt.reset_device_force)

    def resolve(name: str) -> tuple[Any, str]:
        return faulty, name

    monkeypatch.setattr(aclasync._cli._doctor, "resolve_backend", resolve)
    path = tmp_path / "report.json"
    assert main(["doctor", "--backend", "native", "--json", str(path)]) == 1
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "device-refcount" in line]
    assert line.split()[0] == "FAIL"
    assert "the first reset released the device" in line
    assert "1 failed" in out
    report = json.loads(path.read_text())
    assert report["summary"]["FAIL"] == 1
    (failed,) = [c for c in report["checks"] if c["verdict"] == "FAIL"]
    assert failed["name"] == "device-refcount"


def test_a_device_the_runtime_lacks_is_one_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--backend", "sim", "--device", "99"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "aclasync: error: --device 99: the runtime has 8 device(s)"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a full disk)")
def test_a_report_that_cannot_be_written_is_printed_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The JSON was written before the text was printed: a full disk lost the whole run.
    assert main(["doctor", "--backend", "sim", "--json", "/dev/full"]) == 1
    captured = capsys.readouterr()
    assert f"verdict   {len(CHECKS)} passed, 0 failed, 0 skipped" in captured.out
    assert captured.err.splitlines()[-1] == (
        "aclasync: error: cannot write /dev/full: No space left on device"
    )
