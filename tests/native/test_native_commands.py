"""The commands a user with a card runs, run here on the strict simulator imported as ``acl``.

Each runs as its own process with ``PYTHONPATH`` holding ``aclasync.sim.acl_module_path()``,
``ACLASYNC_SIM_STRICT=1`` and ``ACLASYNC_BACKEND=native``: the runtime has pyACL's
surface and nothing else, so whatever works here calls nothing CANN's ``acl`` lacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import aclasync.sim

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
TIMEOUT_S = 240


def aclasync_native(
    *args: str, cwd: Path, acl_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m aclasync ARGS`` on the native backend, the strict simulator as ``acl``
    (or the ``acl`` package in *acl_dir*)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACLASYNC_", "ASCEND_RT_"))}
    paths = [aclasync.sim.acl_module_path(), str(HERE), env.get("PYTHONPATH", "")]
    env.update(
        PYTHONPATH=str(acl_dir) if acl_dir else os.pathsep.join(p for p in paths if p),
        ACLASYNC_SIM_STRICT="1",
        ACLASYNC_BACKEND="native",
    )
    return subprocess.run(
        [sys.executable, "-m", "aclasync", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_info_names_the_native_backend_and_the_simulator_behind_it(tmp_path: Path) -> None:
    out = _ok(aclasync_native("info", cwd=tmp_path))
    assert "backend   native (from $ACLASYNC_BACKEND)" in out
    assert "aclasync's simulator (strict: pyACL's surface only)" in out


def test_demo_runs_pyacl_work_and_checks_every_result(tmp_path: Path) -> None:
    out = _ok(aclasync_native("demo", "--items", "12", "--kernel-us", "500", cwd=tmp_path))
    assert "over 4 native (aclasync's simulator as acl) device(s), work 500 us" in out
    assert "compute step: pyACL alone: acl.rt.memset_async work" in out
    assert "workload: acl.rt.memset_async on a " in out
    assert "calibrated on the device" in out
    assert "verified 12/12 results came back unchanged" in out


def test_demo_runs_an_offline_model_of_the_users(tmp_path: Path) -> None:
    model = _model_file(tmp_path)
    argv = ["demo", "--devices", "2", "--items", "6", "--model", str(model)]
    out = _ok(aclasync_native(*argv, cwd=tmp_path))
    assert f"compute step: the offline model {model}" in out
    assert "us per execution, timed on the device" in out
    assert "ran 6 items; the model's outputs were copied back, not checked" in out


def test_trace_draws_stream_tracks_from_timing_events(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    argv = ["trace", "--devices", "2", "--items", "4", "--out", str(trace_file)]
    out = _ok(aclasync_native(*argv, cwd=tmp_path))
    assert "stream tracks: one span per stage, from timing events on the device" in out
    trace = json.loads(trace_file.read_text())
    assert trace["otherData"]["stream_tracks"] == "timing events"
    assert trace["otherData"]["workloads"]["0"]["kind"] == "memset"
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"transfer stream", "compute stream", "items finished"} <= tracks
    stages = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["args"].get("from")]
    names = {e["name"].split(" item ")[0] for e in stages}
    assert names == {"upload", "compute", "download"}
    assert len(stages) == 4 * 3
    assert all(e["dur"] >= 0 for e in stages)


def test_doctor_passes_every_check_and_writes_its_report(tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    out = _ok(aclasync_native("doctor", "--json", str(report_file), cwd=tmp_path))
    assert "acl       aclasync's simulator, strict: pyACL's surface only" in out
    report = json.loads(report_file.read_text())
    assert report["backend"]["name"] == "native"
    assert report["summary"]["FAIL"] == 0
    assert report["summary"]["SKIP"] == 0
    assert report["sync_modes"]["workload"]["kind"] == "memset"
    assert {row["level"] for row in report["sync_modes"]["rows"]} == {"raw", "aclasync"}


def _bench(tmp_path: Path, *args: str) -> dict[str, Any]:
    results_file = tmp_path / "bench.json"
    argv = ["bench", *args, "--quick", "--scale", "0.05", "--json", str(results_file)]
    _ok(aclasync_native(*argv, cwd=tmp_path))
    results: dict[str, Any] = json.loads(results_file.read_text())
    assert results["config"]["backend"]["name"] == "native"
    assert results["config"]["backend"]["acl_is_simulator"] is True
    return results


def test_the_benchmarks_run_natively_with_pyacl_work(tmp_path: Path) -> None:
    names = ["sync-modes", "overhead", "launch", "scale", "pipeline", "request"]
    results = _bench(tmp_path, *names, "--loop", "asyncio")
    assert list(results["benchmarks"]) == names
    assert results["skipped"] == {}
    for name in ("sync-modes", "launch", "scale", "pipeline", "request"):
        assert results["benchmarks"][name]["workload"]["kind"] == "memset", name
    modes = {row["mode"] for row in results["benchmarks"]["sync-modes"]["rows"]}
    assert {"default", "FAST_SYNC"} <= modes
    levels = {row["level"] for row in results["benchmarks"]["sync-modes"]["rows"]}
    assert levels == {"raw", "asyncio"}
    request = results["benchmarks"]["request"]
    assert {row["kernel_us"] for row in request["rows"]} == {0, 200, 1_000, 10_000}
    assert all(row["thread_us"] > 0 and row["aclasync_us"] > 0 for row in request["rows"])


def test_benchmarks_that_need_the_simulator_say_so_in_one_line(tmp_path: Path) -> None:
    results_file = tmp_path / "bench.json"
    argv = ["bench", "soak", "model", "--quick", "--json", str(results_file)]
    done = aclasync_native(*argv, cwd=tmp_path)
    _ok(done)
    skipped = json.loads(results_file.read_text())["skipped"]
    assert skipped["soak"] == "needs the simulator (acl.sim); not run on the native backend"
    assert "needs --model PATH" in skipped["model"]
    assert "soak: needs the simulator (acl.sim); not run on the native backend" in done.stderr


def test_bench_model_runs_an_offline_model_of_the_users(tmp_path: Path) -> None:
    model = _model_file(tmp_path)
    results = _bench(tmp_path, "model", "--loop", "trio", "--model", str(model))
    bench = results["benchmarks"]["model"]
    assert bench["workload"]["path"] == str(model)
    assert {row["variant"] for row in bench["rows"]} == {"aclasync", "to_thread + execute"}


def _model_file(folder: Path) -> Path:
    """A model file for the simulator that another process can load: its body is named
    (``native_models:double``), not registered."""
    path = folder / "double.om"
    spec = {
        "format": "aclasync.sim.model",
        "version": 1,
        "fn": "native_models:double",
        "inputs": [["x", [8, 8], "float32"]],
        "outputs": [["y", [8, 8], "float32"]],
        "duration_us": 200.0,
        "batch_sizes": [],
    }
    path.write_text(json.dumps(spec))
    return path


#: ``acl`` packages a broken install could give: each must be one error line, exit 1
#: (the doctor's report names each call of one that imports).
_BROKEN_ACL = {
    "import-raises": 'raise KeyError("a driver table entry")\n',
    "not-pyacl": "VERSION = 1\n",
    "wrong-shapes": (
        "from types import SimpleNamespace\n"
        "import aclasync.sim\n"
        "_real = aclasync.sim.create(strict=True)\n"
        "rt = SimpleNamespace(**{k: getattr(_real.rt, k) for k in dir(_real.rt)\n"
        "                        if not k.startswith('__')})\n"
        "rt.get_device_count = lambda: 8  # a bare int, where pyACL gives (count, ret)\n"
        "mdl, util = _real.mdl, _real.util\n"
        "get_soc_name, init, finalize = _real.get_soc_name, _real.init, _real.finalize\n"
        "get_version = lambda: '8.0'\n"
    ),
}
#: Every acl.rt call aclasync needs, but no acl.init: info and doctor call it.
_NO_INIT_ACL = (
    "import aclasync.sim\n"
    "_real = aclasync.sim.create(strict=True)\n"
    "rt, mdl, util, get_soc_name = _real.rt, _real.mdl, _real.util, _real.get_soc_name\n"
)


@pytest.mark.parametrize(
    ("broken", "command"),
    [
        *(
            (b, c)
            for b in sorted(_BROKEN_ACL)
            for c in (["info"], ["doctor"], ["demo", "--items", "4"])
        ),
        ("no-init", ["info"]),
        ("no-init", ["doctor"]),
    ],
)
def test_a_broken_acl_module_is_one_error_line(
    tmp_path: Path, broken: str, command: list[str]
) -> None:
    package = tmp_path / "fake" / "acl"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(_BROKEN_ACL.get(broken, _NO_INIT_ACL))
    done = aclasync_native(*command, cwd=tmp_path, acl_dir=tmp_path / "fake")
    errors = [line for line in done.stderr.splitlines() if line.startswith("aclasync: error:")]
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    if command == ["doctor"] and broken in ("wrong-shapes", "no-init"):
        # A module that imports is diagnosed: the whole report, each call that differs
        # a failing item naming it, and no error line.
        failed = [line.split()[1] for line in done.stdout.splitlines() if "  FAIL  " in line]
        assert {"wrong-shapes": "device_count", "no-init": "init"}[broken] in failed
        assert not errors, done.stderr
        return
    assert len(errors) == 1, done.stderr
