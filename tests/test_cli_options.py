"""The command line checks every option before any work, and honours ACLASYNC_BACKEND."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import aclasync
from aclasync._cli import main
from aclasync._cli._options import available_memory


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run *argv*, expect a usage error (status 2); return the error line."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert "Traceback" not in err
    # The subcommand's usage, then exactly one error line naming the subcommand.
    assert err.startswith(f"usage: aclasync {argv[0]} "), err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    assert errors[0].startswith(f"aclasync {argv[0]}: error: ")
    assert err.endswith(errors[0] + "\n")
    return errors[0]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["demo", "--items", "99999999999999999999"], "argument --items: must be from 1 to"),
        (["demo", "--items", "0"], "argument --items: must be from 1 to"),
        (["demo", "--items", "many"], "argument --items: expected an integer, got 'many'"),
        (["demo", "--devices", "0"], "argument --devices: must be from 1 to 8, got 0"),
        (["demo", "--devices", "9"], "argument --devices: must be from 1 to 8, got 9"),
        (["demo", "--size", "0"], "argument --size: must be from 1 to"),
        (["demo", "--size", "100000"], "--size 100000 on 4 device(s) needs about"),
        (["demo", "--kernel-us", "nan"], "argument --kernel-us: must be a finite number"),
        (["demo", "--kernel-us", "-1"], "argument --kernel-us: must be 0 or more"),
        (["demo", "--kernel-us", "1e300"], "argument --kernel-us: must be 0 or more and at most"),
        (["demo", "--loop", "tokio"], "argument --loop: invalid choice: 'tokio'"),
        (["demo", "--bogus"], "unrecognized arguments: --bogus"),
        (["demo", "--model=yes"], "argument --model: yes is not a file"),
        (["bench", "--model", "no.om"], "argument --model: no.om is not a file"),
        (["trace", "--workload", "gpu"], "argument --workload: invalid choice: 'gpu'"),
        (["demo", "--model", "--size", "100000"], "--size 100000 on 4 device(s) needs about"),
        (["bench", "--scale", "inf"], "argument --scale: must be a finite number, got inf"),
        (["bench", "--scale", "nan"], "argument --scale: must be a finite number, got nan"),
        (["bench", "--scale", "0"], "argument --scale: must be above 0"),
        (["bench", "--scale", "1e5"], "--scale 100000 needs about"),
        (["bench", "overhead", "nope"], "unknown benchmark(s): nope; valid names: overhead"),
        (["bench", "--plot", "-"], "argument --plot: needs a file name"),
        (["trace", "--items", "10000000000"], "--items 10000000000 needs about"),
        (["trace", "--devices", "12"], "argument --devices: must be from 1 to 8"),
        (["trace", "--out", ""], "argument --out: needs a file name"),
        (["info", "--verbose"], "unrecognized arguments: --verbose"),
    ],
)
def test_bad_values_are_one_usage_error_before_any_work(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    assert fragment in usage_error(capsys, argv)


def test_memory_limits_name_what_the_machine_has(capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(capsys, ["demo", "--size", "100000"])
    available_gib = available_memory() / (1 << 30)
    assert f"this machine has {available_gib:,.1f} GiB available" in line


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_bench_output_paths_are_checked_before_running(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str
) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("")
    cases = {
        str(tmp_path / "missing" / "out"): "does not exist",
        str(tmp_path): "is a directory",
        str(a_file / "out"): "is not a directory",
    }
    for path, fragment in cases.items():
        line = usage_error(capsys, ["bench", "overhead", option, path])
        assert f"argument {option}: " in line
        assert fragment in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_output_paths_that_only_fail_at_the_write_are_refused_before_running(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Each passed the check, then failed after the whole run.
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere" / "t.json")
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    cases = {
        str(dangling): "does not exist",
        f"{tmp_path}/missing/../t.json": "does not exist or is not a directory",
        str(tmp_path / "loop-a"): "Too many levels of symbolic links",
        str(tmp_path / ("x" * 300)): "File name too long",
        f"{tmp_path}/new/": "names a directory",
    }
    for path, fragment in cases.items():
        line = usage_error(capsys, ["trace", "--out", path])
        assert "argument --out: " in line
        assert fragment in line
    linked = tmp_path / "linked.json"  # a link to a place that can be written is fine
    linked.symlink_to(tmp_path / "real.json")
    assert main(["trace", "--items", "4", "--out", str(linked)]) == 0
    assert json.loads((tmp_path / "real.json").read_text())


def test_trace_output_path_is_checked_before_running(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = usage_error(capsys, ["trace", "--out", str(tmp_path / "no-dir" / "t.json")])
    assert "argument --out: cannot write" in line
    assert "does not exist" in line


def test_json_and_plot_may_not_name_the_same_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    same = str(tmp_path / "out.png")
    monkeypatch.chdir(tmp_path)
    for spelled in (same, "out.png", f"{tmp_path}/../{tmp_path.name}/out.png"):
        line = usage_error(capsys, ["bench", "--json", same, "--plot", spelled])
        assert "--json and --plot name the same file" in line


def test_a_plot_format_matplotlib_cannot_write_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = usage_error(capsys, ["bench", "overhead", "--plot", str(tmp_path / "chart.txt")])
    assert "--plot cannot write a 'txt' file" in line
    assert list(tmp_path.iterdir()) == []


def test_bench_json_dash_writes_only_json_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "launch", "--quick", "--loop", "asyncio", "--scale", "0.02", "--json", "-"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    results = json.loads(captured.out)
    assert list(results["benchmarks"]) == ["launch"]
    assert "== launch" in captured.err  # the table moves to stderr
    assert "wrote the results to standard output" in captured.err
    assert not Path("-").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a full disk)")
def test_a_bench_json_that_cannot_be_written_keeps_the_table_and_the_plot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The JSON was written before the table was printed: a write failing at the end
    # lost every result of the run (and the plot was never drawn).
    pytest.importorskip("matplotlib")
    chart = tmp_path / "chart.png"
    argv = ["bench", "launch", "--quick", "--loop", "asyncio", "--scale", "0.02"]
    assert main([*argv, "--json", "/dev/full", "--plot", str(chart)]) == 1
    captured = capsys.readouterr()
    assert "== launch" in captured.out
    assert chart.stat().st_size > 0
    assert captured.err.splitlines()[-1] == (
        "aclasync: error: cannot write /dev/full: No space left on device"
    )


def test_trace_out_dash_writes_the_trace_to_stdout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "--items", "2", "--out", "-"]) == 0
    captured = capsys.readouterr()
    trace = json.loads(captured.out)
    assert any(event["ph"] == "X" for event in trace["traceEvents"])
    assert "to standard output" in captured.err
    assert list(tmp_path.iterdir()) == []  # no file called '-'


@pytest.fixture
def no_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "acl", None)
    monkeypatch.delenv("ACLASYNC_BACKEND", raising=False)


@pytest.mark.usefixtures("no_native")
@pytest.mark.parametrize("value", ["sim", "SIM", "  Sim\t", "sIm "])
def test_every_subcommand_accepts_the_simulator_in_any_case(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    value: str,
) -> None:
    monkeypatch.setenv("ACLASYNC_BACKEND", value)
    assert main(["info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["backend_reason"] == "from $ACLASYNC_BACKEND"
    assert main(["demo", "--devices", "1", "--items", "2", "--kernel-us", "10"]) == 0
    assert "verified 2/2" in capsys.readouterr().out
    assert main(["trace", "--devices", "1", "--items", "1", "--out", str(tmp_path / "t")]) == 0
    capsys.readouterr()
    argv = ["bench", "launch", "--quick", "--loop", "trio", "--scale", "0.02"]
    assert main(argv) == 0
    assert "== launch" in capsys.readouterr().out


@pytest.mark.usefixtures("no_native")
@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--items", "2"],
        ["trace", "--items", "2"],
        ["bench", "launch", "--quick"],
    ],
)
@pytest.mark.parametrize("value", ["native", " NATIVE "])
def test_the_native_backend_without_cann_is_one_error_before_any_work(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    value: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACLASYNC_BACKEND", value)
    assert main(argv) == 1  # a command this machine cannot run: an error, like --plot's
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("aclasync: error: backend='native' needs CANN: `import acl` failed")
    assert "Use backend='sim' (or ACLASYNC_BACKEND=sim)" in lines[0]
    assert list(tmp_path.iterdir()) == []  # trace wrote nothing


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["demo", "--items", "2", "--model"], "demo --model without PATH registers a simulated"),
        (["trace", "--items", "2", "--model"], "trace --model without PATH registers a simulated"),
        (["demo", "--workload", "sim-kernel"], "--workload sim-kernel runs simulated kernels"),
        (["bench", "launch", "--workload", "sim-kernel"], "--workload sim-kernel runs simulated"),
    ],
)
def test_what_needs_the_simulator_is_refused_on_the_native_backend(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    fragment: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACLASYNC_BACKEND", "native")
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("aclasync: error: ")
    assert fragment in lines[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("no_native")
@pytest.mark.parametrize("argv", [["info"], ["demo"], ["trace"], ["bench", "launch"]])
def test_an_unknown_backend_name_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("ACLASYNC_BACKEND", "gpu")
    line = usage_error(capsys, argv)
    assert "ACLASYNC_BACKEND='gpu': expected 'sim' or 'native'" in line


@pytest.mark.usefixtures("no_native")
@pytest.mark.anyio
@pytest.mark.parametrize("value", ["SIM", " sim ", "Sim\n"])
async def test_open_device_reads_the_variable_in_any_case(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("ACLASYNC_BACKEND", value)
    async with aclasync.open_device(0) as dev:
        assert dev.backend_name == "sim"


@pytest.mark.usefixtures("no_native")
@pytest.mark.anyio
async def test_open_device_without_the_variable_still_refuses_to_guess() -> None:
    assert "ACLASYNC_BACKEND" not in os.environ
    with pytest.raises(aclasync.BackendUnavailableError, match="ACLASYNC_BACKEND=sim"):
        async with aclasync.open_device(0):
            pytest.fail("opened a device with no backend chosen")  # pragma: no cover
    await anyio.lowlevel.checkpoint()


# -- commands this machine cannot run: one rule (exit 1, one error line, no work) --------


@pytest.mark.usefixtures("no_native")
@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--loop", "uvloop", "--items", "2"],
        ["trace", "--loop", "uvloop", "--items", "2"],
        ["bench", "launch", "--quick", "--loop", "uvloop"],
    ],
)
def test_a_loop_that_is_not_installed_is_an_error_before_any_output(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # no banner, no table
    assert captured.err == (
        "aclasync: error: --loop uvloop: uvloop is not installed: pip install "
        "'aclasync[uvloop]' (in a checkout: pip install -e '.[uvloop]')\n"
    )
    assert list(tmp_path.iterdir()) == []  # trace wrote nothing


@pytest.mark.usefixtures("no_native")
def test_plot_without_matplotlib_is_an_error_before_any_work(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["bench", "launch", "--quick", "--plot", str(tmp_path / "out.png")]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "aclasync: error: --plot needs matplotlib: pip install 'aclasync[plot]'\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_bench_help_lists_every_benchmark_on_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from aclasync._cli._bench import BENCHMARKS

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: aclasync bench ")
    listed = out.split("benchmarks (a full run takes them all, in this order):\n", 1)[1]
    rows = [line.split(None, 1) for line in listed.splitlines()]
    assert [(name, summary) for name, summary in rows] == [
        (name, bench.summary) for name, bench in BENCHMARKS.items()
    ]
    assert "the targets are for full runs" in " ".join(out.split())  # under --quick


def test_a_missing_trio_is_a_broken_install_not_a_missing_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "trio", None)  # as if not installed
    assert main(["demo", "--loop", "trio", "--items", "2"]) == 1
    assert capsys.readouterr().err == (
        "aclasync: error: --loop trio: trio is not installed, though aclasync depends on it: "
        "pip install trio\n"
    )


# -- options that would be ignored: a usage error -------------------------------------------


@pytest.mark.parametrize("command", ["demo", "trace"])
@pytest.mark.parametrize("model", [[], ["model.om"]], ids=["registered", "path"])
def test_model_and_workload_together_are_a_usage_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: str,
    model: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.om").write_bytes(b"")
    argv = [command, "--model", *model, "--workload", "memset", "--items", "2"]
    line = usage_error(capsys, argv)
    assert "--model and --workload both choose the compute step: give one" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.om"]  # nothing written


def test_bench_model_option_without_bench_model_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = tmp_path / "model.om"
    model.write_bytes(b"")
    line = usage_error(capsys, ["bench", "overhead", "launch", "--model", str(model)])
    assert "--model is for bench model, which is not among the benchmarks named" in line


def test_bench_workload_without_a_benchmark_using_it_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # It was ignored without a word (soak, model, ray and serve time no such work).
    line = usage_error(capsys, ["bench", "soak", "model", "--workload", "memset"])
    assert "--workload is for the benchmarks that time device work" in line
    assert "none of which is named" in line


def test_an_unknown_option_before_the_command_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, fragment in (
        (["--bogus"], "aclasync: error: unrecognized arguments: --bogus"),
        ([], "aclasync: error: the following arguments are required: COMMAND"),
        (["--"], "aclasync: error: the following arguments are required: COMMAND"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("usage: aclasync "), err
        assert err.splitlines()[-1] == fragment


# -- --plot when nothing will have been drawn ------------------------------------------------


def test_plot_is_refused_before_any_work_when_every_benchmark_needs_the_simulator(
    tmp_path: Path,
) -> None:
    # The native path as .ci/run tests it: the strict simulator as `import acl`.
    env = {**os.environ, "ACLASYNC_SIM_STRICT": "1", "ACLASYNC_BACKEND": "native"}
    env["PYTHONPATH"] = os.pathsep.join([aclasync.sim.acl_module_path(), env.get("PYTHONPATH", "")])
    env.pop("ACLASYNC_DEBUG", None)
    argv = ["bench", "soak", "--quick", "--plot", "chart.png", "--json", "out.json"]
    done = subprocess.run(
        [sys.executable, "-m", "aclasync", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "aclasync: error: --plot has nothing to plot: the native backend skips soak "
        "(simulator only)\n"
    )
    assert list(tmp_path.iterdir()) == []  # neither file: nothing ran


def test_plot_with_every_benchmark_skipped_keeps_the_table_and_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from aclasync._cli._bench import BENCHMARKS
    from aclasync._cli._bench._common import Skip

    def skipped(cfg: Any) -> dict[str, Any]:
        raise Skip("not installed here")

    monkeypatch.setitem(BENCHMARKS, "launch", dataclasses.replace(BENCHMARKS["launch"], fn=skipped))
    chart, results = tmp_path / "chart.png", tmp_path / "out.json"
    argv = ["bench", "launch", "--quick", "--plot", str(chart), "--json", str(results)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "== launch: skipped (not installed here)" in captured.out  # the table
    assert f"nothing to plot: no benchmark produced chartable rows; {chart} not written" in (
        captured.err
    )
    assert "aclasync: error" not in captured.err
    assert json.loads(results.read_text())["skipped"] == {"launch": "not installed here"}
    assert not chart.exists()


@pytest.mark.parametrize(("strict", "code"), [(True, 1), (False, 0)])
def test_simulated_kernels_on_the_native_backend_need_an_acl_with_acl_sim(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    strict: bool,
    code: int,
) -> None:
    # `import acl` as aclasync's non-strict simulator has acl.sim: its default work is
    # simulated kernels, which --workload sim-kernel was refused ("on the native
    # backend the work is memset").
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACLASYNC_BACKEND", "native")
    monkeypatch.setitem(sys.modules, "acl", aclasync.sim.create(device_count=1, strict=strict))
    assert main(["demo", "--items", "2", "--devices", "1", "--workload", "sim-kernel"]) == code
    captured = capsys.readouterr()
    assert ("--workload sim-kernel runs simulated kernels" in captured.err) == strict
    # What ran is named (the first line says "work" on the native backend).
    assert ("workload: simulated kernels (acl.sim.launch_kernel)" in captured.out) != strict


def test_trace_on_a_native_acl_with_acl_sim_names_its_simulated_kernels(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACLASYNC_BACKEND", "native")
    monkeypatch.setitem(sys.modules, "acl", aclasync.sim.create(device_count=1))
    assert main(["trace", "--items", "2", "--devices", "1", "--out", "t.json"]) == 0
    assert "workload: simulated kernels (acl.sim.launch_kernel)" in capsys.readouterr().out
