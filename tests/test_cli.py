"""The ``aclasync`` command line, run in-process (``_cli.main``) and as ``python -m aclasync``."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shlex
import subprocess
import sys
import tempfile
import tracemalloc
import types
from pathlib import Path
from typing import Any

import anyio
import pytest

import aclasync
import aclasync._cli._pipeline
import aclasync.sim
from aclasync._cli import main
from aclasync._cli._demo import ProgressDisplay

ROOT = Path(__file__).resolve().parents[1]
CLI_TIMEOUT_S = 60


def run_module(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m aclasync ARGS`` and return its outcome."""
    return subprocess.run(
        [sys.executable, "-m", "aclasync", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env=env,
        check=False,
    )


@pytest.fixture
def no_native(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import acl`` fail and clear ``$ACLASYNC_BACKEND``, whatever is installed."""
    monkeypatch.setitem(sys.modules, "acl", None)
    monkeypatch.delenv("ACLASYNC_BACKEND", raising=False)


def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("aclasync: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


# -- info ------------------------------------------------------------------------------


def test_info_sim_reports_runtime_and_every_profile_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["info", "--backend", "sim"]) == 0
    out = capsys.readouterr().out
    assert f"aclasync  {aclasync.__version__}" in out
    assert "backend   sim (chosen with --backend)" in out
    assert "devices   8" in out
    assert "SoC       Ascend910B3" in out
    assert "run mode  HOST (1)" in out
    for field in dataclasses.fields(aclasync.sim.SocProfile):
        if field.name != "name":
            assert f"  {field.name} " in out


def test_info_json_matches_the_default_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--backend", "sim", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    acl = aclasync.sim.acl
    assert info["version"] == aclasync.__version__
    assert info["backend"] == "sim"
    assert info["device_count"] == acl.rt.get_device_count()[0]
    assert info["soc_name"] == acl.get_soc_name()
    assert (info["run_mode"], info["run_mode_code"]) == ("HOST", 1)
    assert info["profile"] == dataclasses.asdict(acl.sim.profile)


@pytest.mark.usefixtures("no_native")
def test_info_without_acl_falls_back_to_the_simulator_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "sim"
    assert "import acl" in info["backend_reason"]


@pytest.mark.usefixtures("no_native")
def test_info_with_an_acl_that_is_not_pyacl_falls_back_to_the_simulator(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unrelated module named acl: info stopped with "backend='native' needs CANN",
    # a backend the user never chose.
    monkeypatch.setitem(sys.modules, "acl", types.ModuleType("acl"))
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "sim"
    assert "is not pyACL" in info["backend_reason"]


@pytest.mark.usefixtures("no_native")
def test_info_follows_the_environment_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACLASYNC_BACKEND", "sim")
    assert main(["info"]) == 0
    assert "backend   sim (from $ACLASYNC_BACKEND)" in capsys.readouterr().out
    monkeypatch.setenv("ACLASYNC_BACKEND", " Sim ")
    assert main(["info"]) == 0
    assert "backend   sim (from $ACLASYNC_BACKEND)" in capsys.readouterr().out
    monkeypatch.setenv("ACLASYNC_BACKEND", "gpu")
    with pytest.raises(SystemExit) as exit_info:
        main(["info"])
    assert exit_info.value.code == 2  # a usage error: the usage, then the error line
    err = capsys.readouterr().err
    assert err.startswith("usage: aclasync info ")
    assert err.splitlines()[-1].startswith("aclasync info: error: ACLASYNC_BACKEND='gpu'")


@pytest.mark.usefixtures("no_native")
def test_info_native_without_cann_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--backend", "native"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_error_line(captured.err, "backend='native' needs CANN", "backend='sim'")


def test_module_entry_point_reports_native_error_without_traceback(tmp_path: Path) -> None:
    # A stand-in `acl` whose import fails, as on a machine without CANN.
    (tmp_path / "acl.py").write_text("raise ImportError('libascendcl.so: cannot open')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("ACLASYNC_BACKEND", None)
    done = run_module("info", "--backend", "native", env=env)
    assert done.returncode == 1
    assert done.stdout == ""
    assert_one_error_line(done.stderr, "libascendcl.so")


def test_module_entry_point_prints_info_json() -> None:
    done = run_module("info", "--backend", "sim", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["soc_name"] == "Ascend910B3"


# -- demo ------------------------------------------------------------------------------


@pytest.mark.parametrize("loop", ["asyncio", "uvloop", "trio"])
def test_demo_runs_verifies_and_summarises(capsys: pytest.CaptureFixture[str], loop: str) -> None:
    argv = ["demo", "--devices", "2", "--items", "16", "--kernel-us", "500", "--loop", loop]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "verified 16/16 results against the host reference" in captured.out
    rows = [line.split() for line in captured.out.splitlines()]
    devices = [row for row in rows if len(row) == 4 and row[0] in ("0", "1")]
    assert [(row[0], row[1]) for row in devices] == [("0", "8"), ("1", "8")]
    assert all(0 < float(row[3].rstrip("%")) <= 100 for row in devices)
    assert any(row[:2] == ["total", "16"] for row in rows)
    assert "wall time" in captured.out
    # Not a TTY: progress is a line every ~10 %, ending with the total.
    progress = captured.err.strip().splitlines()
    assert 2 <= len(progress) <= 11
    assert progress[-1].startswith("16/16 items")


def test_demo_reports_failed_verification(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = aclasync._cli._pipeline.host_reference

    def host_reference_off_by_one(item: int, w: Any) -> Any:
        return real(item, w) + 1

    monkeypatch.setattr(aclasync._cli._pipeline, "host_reference", host_reference_off_by_one)
    assert main(["demo", "--devices", "2", "--items", "8", "--kernel-us", "100"]) == 1
    captured = capsys.readouterr()
    assert "verified" not in captured.out
    assert_one_error_line(
        captured.err.splitlines()[-1], "verification failed", "8 of 8 results differ"
    )


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point ``tempfile`` at an empty directory of this test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("loop", ["asyncio", "uvloop", "trio"])
def test_demo_with_a_model_verifies_says_so_and_removes_its_spec_file(
    capsys: pytest.CaptureFixture[str], private_tmp: Path, loop: str
) -> None:
    argv = ["demo", "--model", "--devices", "2", "--items", "12", "--kernel-us", "500"]
    assert main([*argv, "--loop", loop]) == 0
    out = capsys.readouterr().out
    assert "registered model 500 us" in out.splitlines()[0]
    assert "compute step: a registered simulated model" in out
    assert "verified 12/12 results against the host reference" in out
    rows = [line.split() for line in out.splitlines()]
    assert [row[:2] for row in rows if row[:1] in (["0"], ["1"])] == [["0", "6"], ["1", "6"]]
    assert list(private_tmp.iterdir()) == []


def test_demo_with_pyacl_work_checks_that_every_result_comes_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["demo", "--devices", "2", "--items", "6", "--kernel-us", "200", "--workload", "memset"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "work 200 us" in out.splitlines()[0]
    assert "compute step: pyACL alone: acl.rt.memset_async work" in out
    assert "workload: acl.rt.memset_async on a " in out
    assert "verified 6/6 results came back unchanged" in out


def test_the_default_demo_says_nothing_of_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--devices", "1", "--items", "2", "--kernel-us", "10"]) == 0
    out = capsys.readouterr().out
    assert "kernel 10 us" in out.splitlines()[0]
    assert "model" not in out


def test_demo_with_a_model_computes_through_the_model_body(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, private_tmp: Path
) -> None:
    # A wrong body shows in every result: the model, not a kernel, did the work.
    real = aclasync._cli._pipeline.model_body

    def body_off_by_one(w: Any, x: Any) -> Any:
        return real(w, x) + 1

    monkeypatch.setattr(aclasync._cli._pipeline, "model_body", body_off_by_one)
    argv = ["demo", "--model", "--devices", "2", "--items", "6", "--kernel-us", "100"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "verified" not in captured.out
    assert_one_error_line(
        captured.err.splitlines()[-1], "verification failed", "6 of 6 results differ"
    )
    assert list(private_tmp.iterdir()) == []


@pytest.mark.anyio
async def test_pipeline_model_leaves_no_model_object_on_a_given_runtime(
    private_tmp: Path,
) -> None:
    runtime = aclasync.sim.create(device_count=2)
    try:
        result = await aclasync._cli._pipeline.run_pipeline(
            devices=2, items=5, kernel_us=50, size=8, backend=runtime, model=True
        )
        assert (result["compute"], result["verified"]) == ("model", 5)
        counts = runtime.sim.model_objects()
        assert counts == {"models": 0, "model_descs": 0, "datasets": 0, "data_buffers": 0}
    finally:
        runtime.sim.close()
    assert os.listdir(private_tmp) == []


@pytest.mark.anyio
async def test_pipeline_model_needs_a_simulated_runtime_object(private_tmp: Path) -> None:
    with pytest.raises(RuntimeError, match="needs a simulated runtime"):
        await aclasync._cli._pipeline.run_pipeline(items=1, backend="sim", model=True)
    assert os.listdir(private_tmp) == []


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_an_error_inside_a_device_task_is_one_line_not_a_group_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, loop: str
) -> None:
    real = aclasync._cli._pipeline.item_input

    def item_input_failing_on_item_5(item: int, size: int) -> Any:
        if item == 5:
            raise ValueError("item 5 has no input")
        return real(item, size)

    monkeypatch.setattr(aclasync._cli._pipeline, "item_input", item_input_failing_on_item_5)
    argv = ["demo", "--devices", "2", "--items", "8", "--kernel-us", "100", "--loop", loop]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == "aclasync: error: item 5 has no input"


@pytest.mark.anyio
async def test_a_huge_item_count_costs_no_memory_up_front() -> None:
    # 10**12 items: a list of them would need terabytes before the first item ran.
    tracemalloc.start()
    try:
        with anyio.CancelScope() as scope:

            def stop_after_four(state: aclasync._cli._pipeline.PipelineProgress) -> None:
                if state.done >= 4:
                    scope.cancel()

            await aclasync._cli._pipeline.run_pipeline(
                devices=2, items=10**12, kernel_us=10, size=8, progress=stop_after_four
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert scope.cancelled_caught
    assert peak < 32 * 2**20


def test_unknown_loop_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--loop", "tokio"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'tokio'" in capsys.readouterr().err


def test_progress_redraws_one_line_on_a_tty() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    display = ProgressDisplay(out)
    state = aclasync._cli._pipeline.PipelineProgress(total=3, per_device={0: 0, 1: 0})
    for device in (0, 1, 0):
        state.done += 1
        state.per_device[device] += 1
        display(state)
    display.close()
    text = out.getvalue()
    assert text.count("\n") == 1
    assert text.endswith("\n")
    assert text.startswith("\r")
    assert text.rstrip("\n").rsplit("\r\x1b[K", 1)[-1].startswith("3/3 items")
    assert "d0:2 d1:1" in text


# -- bench -----------------------------------------------------------------------------


def test_bench_writes_json_and_prints_the_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bench.json"
    argv = ["bench", "overhead", "--quick", "--loop", "asyncio", "--scale", "0.05"]
    assert main([*argv, "--json", str(path)]) == 0
    results = json.loads(path.read_text())
    assert list(results["benchmarks"]) == ["overhead"]
    assert results["config"]["loops"] == ["asyncio"]
    assert "== overhead" in capsys.readouterr().out


# -- trace -----------------------------------------------------------------------------


def load_trace(path: Path) -> tuple[list[dict[str, Any]], dict[tuple[int, int], str]]:
    trace = json.loads(path.read_text())
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    for span in spans:
        assert span["ts"] >= 0
        assert span["dur"] >= 0
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    return spans, tracks


def test_trace_writes_a_timeline_with_a_track_per_stream(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "out" / "trace.json"
    path.parent.mkdir()
    assert main(["trace", "--items", "4", "--out", str(path)]) == 0
    out = capsys.readouterr().out
    assert str(path) in out
    assert "ui.perfetto.dev" in out
    assert "chrome://tracing" in out
    spans, tracks = load_trace(path)
    kernels = [s for s in spans if s["name"] == "kernel"]
    assert len(kernels) == 4
    assert {s["pid"] for s in kernels} == {1, 2}  # devices 0 and 1
    assert all(tracks[s["pid"], s["tid"]].startswith("stream 0x") for s in kernels)
    assert all(s["dur"] >= 4000 for s in kernels)  # the demo's 5 ms kernels
    for device_pid in (1, 2):
        own = sorted(
            (s for s in spans if s["pid"] == device_pid and s["tid"] == 1), key=lambda s: s["ts"]
        )
        assert tracks[device_pid, 1] == "items finished"
        # Set-up first, labelled as such; item 1 starts where it ends.
        assert [s["name"] for s in own] == ["set-up", "item 1", "item 2"]
        setup, first = own[0], own[1]
        assert first["ts"] == pytest.approx(setup["ts"] + setup["dur"], abs=1.0)
    run = {s["name"]: s for s in spans if s["pid"] == 0}
    assert set(run) == {"start-up", "run_pipeline"}
    assert run["run_pipeline"]["ts"] == pytest.approx(
        run["start-up"]["ts"] + run["start-up"]["dur"], abs=1.0
    )
    # Every device's set-up happens inside the run, after start-up.
    assert all(s["ts"] >= run["run_pipeline"]["ts"] - 1.0 for s in spans if s["name"] == "set-up")


def test_debug_environment_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACLASYNC_DEBUG", "1")
    with pytest.raises(aclasync.BackendUnavailableError, match="backend='sim'"):
        main(["info", "--backend", "native"])


@pytest.mark.parametrize("args", [("info",), ("trace", "--items", "4", "--out", "-")])
def test_a_closed_standard_output_is_one_error_line(args: tuple[str, ...]) -> None:
    command = " ".join([shlex.quote(sys.executable), "-m", "aclasync", *args])
    done = subprocess.run(
        ["sh", "-c", f"exec {command} >&-"],
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert_one_error_line(done.stderr, "standard output is closed")


@pytest.mark.parametrize("argv", [["trace", "--items", "2", "--out"], ["doctor", "--json"]])
def test_an_output_file_that_cannot_be_written_is_named(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk (Linux's /dev/full) gave "[Errno 28] No space left on device", naming
    # no file.
    monkeypatch.setenv("ACLASYNC_BACKEND", "sim")
    assert main([*argv, "/dev/full"]) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "aclasync: error: cannot write /dev/full: No space left on device"


def test_bench_model_says_it_cannot_time_a_model_numpy_has_no_dtype_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # It failed half way with Model.run's advice to use Model.launch, which a command
    # line user cannot act on, after setting up its pyACL side.
    from aclasync.sim._mdl_desc import DescCalls

    spec = {
        "format": "aclasync.sim.model",
        "version": 1,
        "fn": "numpy:negative",
        "inputs": [["x", [4], "float16"]],
        "outputs": [["y", [4], "float16"]],
        "duration_us": 100.0,
        "batch_sizes": [],
    }
    path = tmp_path / "bf16.om"
    path.write_text(json.dumps(spec))
    monkeypatch.setattr(DescCalls, "get_input_data_type", lambda self, desc, index: 27)
    monkeypatch.delenv("ACLASYNC_BACKEND", raising=False)
    argv = ["bench", "model", "--model", str(path), "--quick", "--loop", "asyncio"]
    assert main(argv) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("aclasync: error: ")
    assert "this benchmark times Model.run" in last
    assert "x (4,) ACL data type 27" in last
