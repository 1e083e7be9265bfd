"""Smoke test of the benchmark suite: it runs, reports progress and writes sound JSON.

No performance thresholds here: benchmarks judge speed, tests judge behaviour.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from aclasync._cli._bench import BENCHMARKS, format_table, run


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_quick_run_writes_results_and_reports_progress(tmp_path: Path) -> None:
    lines: list[str] = []
    json_path = tmp_path / "bench.json"

    results = run(
        ["overhead", "launch"],
        quick=True,
        loops=["asyncio", "trio"],
        json_path=json_path,
        plot_path=None,
        progress=lines.append,
        scale=0.05,
    )

    assert json.loads(json_path.read_text()) == json.loads(json.dumps(results))
    machine = results["machine"]
    for key in ("platform", "python", "cpu_count", "cpu_model", "packages"):
        assert key in machine
    assert machine["packages"]["anyio"]
    assert results["config"]["loops"] == ["asyncio", "trio"]
    assert results["config"]["quick"] is True
    assert set(results["benchmarks"]) == {"overhead", "launch"}

    overhead = results["benchmarks"]["overhead"]
    variants = {(row["loop"], row["variant"]) for row in overhead["rows"]}
    for loop in ("asyncio", "trio"):
        assert (loop, "aclasync") in variants
        assert (loop, "to_thread (naive)") in variants
        assert (loop, "raw (1 thread)") in variants
    assert ("asyncio", "asyncio.to_thread") in variants
    assert ("trio", "asyncio.to_thread") not in variants
    for row in overhead["rows"]:
        assert _positive(row["median_us"])
        assert _positive(row["p99_us"])
        assert _positive(row["vs_naive"])

    launch = results["benchmarks"]["launch"]
    assert {row["loop"] for row in launch["rows"]} == {"asyncio", "trio"}
    for row in launch["rows"]:
        assert _positive(row["per_s"])
    for bench in (overhead, launch):
        assert bench["checks"]
        assert _positive(bench["seconds"])
        keys = {column["key"] for column in bench["columns"]}
        assert all(set(row) <= keys | {"n"} for row in bench["rows"])

    assert any(line.startswith("overhead") for line in lines)
    assert any(line.startswith("launch [trio]") for line in lines)
    assert any(str(json_path) in line for line in lines)

    table = format_table(results)
    assert "== overhead" in table
    assert "== launch" in table


def test_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown benchmark"):
        run(["no-such-benchmark"], progress=lambda line: None)
    with pytest.raises(ValueError, match="unknown loop"):
        run(["overhead"], loops=["tokio"], progress=lambda line: None)


def test_every_registered_benchmark_is_documented_and_vice_versa() -> None:
    readme = (Path(__file__).parents[1] / "benchmarks" / "README.md").read_text()
    documented = re.findall(r"^### `([a-z-]+)`", readme, re.MULTILINE)
    assert sorted(documented) == sorted(BENCHMARKS)


def test_plot_labels_axes_in_words_and_draws_each_target(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from aclasync._cli._bench._plot import build_figure

    png = tmp_path / "bench.png"
    names = ["overhead", "scale", "pipeline"]
    results = run(
        names, quick=True, loops=["asyncio", "trio"], plot_path=png, progress=print, scale=0.02
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    figure = build_figure(results)
    try:
        commit = (results["machine"]["git"] or {}).get("commit")
        headline = figure._suptitle.get_text()
        assert results["machine"]["cpu_model"] in headline
        assert (commit[:10] if commit else "no git commit") in headline
        charts = [
            (chart, results["benchmarks"][name]["rows"])
            for name in names
            for chart in results["benchmarks"][name]["charts"]
        ]
        assert len(figure.axes) == len(charts)
        for axis, (chart, rows) in zip(figure.axes, charts, strict=True):
            assert axis.get_xlabel() == f"{chart['axis']} ({chart['unit']})"
            assert len(chart["axis"].split()) >= 4  # words, not a row key
            legend = [text.get_text() for text in axis.get_legend().get_texts()]
            assert legend[0] == chart["target_label"]
            series = {str(row[chart["series"]]) for row in rows}
            assert series <= set(legend[1:])
            colours = {tuple(patch.get_facecolor()) for patch in axis.patches}
            assert len(colours) == len(series)  # one colour per variant
            targets = [line for line in axis.lines if line.get_linestyle() == "--"]
            assert [line.get_xdata()[0] for line in targets] == [chart["target"]]
    finally:
        plt.close(figure)


def test_soak_runs_for_the_given_seconds_without_unexpected_errors() -> None:
    results = run(["soak"], loops=["asyncio"], progress=lambda line: None, seconds=0.5)
    (row,) = results["benchmarks"]["soak"]["rows"]
    assert 0.5 <= row["seconds"] < 30
    assert row["operations"] > 0
    assert row["unexpected_errors"] == 0, row["errors"]
    assert row["threads_end"] == row["threads_start"]
    with pytest.raises(ValueError, match="seconds"):
        run(["soak"], seconds=0, progress=lambda line: None)


def test_serve_gives_its_whole_run_thread_counts_one_labelled_line() -> None:
    from aclasync._cli._bench import _serve

    assert "threads" not in {col["key"] for col in _serve.COLUMNS}  # not repeated per row
    note = _serve.threads_note({"aclasync": 12, "naive": 45})
    assert "over the whole run" in note
    assert "aclasync 12, naive 45" in note


def test_bench_help_gives_the_soak_default_the_code_uses() -> None:
    import argparse

    from aclasync._cli import build_parser
    from aclasync._cli._bench._soak import QUICK_SECONDS, SECONDS

    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    (action,) = [a for a in commands.choices["bench"]._actions if "--seconds" in a.option_strings]
    assert f"default: {SECONDS:g}, or {QUICK_SECONDS:g} with --quick" in str(action.help)


@pytest.mark.anyio
async def test_model_and_request_concurrent_alternate_their_variants_in_rounds() -> None:
    """Each round runs every variant once, the order reversed every other round, and
    the rates reported are the medians over the rounds."""
    from aclasync._cli._bench import _model, _request

    seen: list[str] = []

    def variant(name: str) -> Any:
        async def request(*_: Any) -> None:
            seen.append(name)

        return request

    for alternate in (_model.alternate, _request.alternate):
        seen.clear()
        result = await alternate({"a": variant("a"), "b": variant("b")}, 2, 40, 4)
        assert len(seen) == 80  # 40 of each, in blocks of 10 (one per round)
        assert seen[::10] == ["a", "b", "b", "a", "a", "b", "b", "a"]
        assert all(len(set(seen[i : i + 10])) == 1 for i in range(0, 80, 10))
        assert set(result) == {"a", "b"}
    assert len(result["a"]) == 2  # request: (median req/s, median CPU us per request)
    rate, latencies = (await _model.alternate({"a": variant("a")}, 2, 40, 4))["a"]
    assert rate > 0
    assert len(latencies) == 40  # every round's requests, pooled


def test_notes_about_the_simulator_are_only_for_runs_on_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A card user's report must not describe the simulator: the notes that do are
    chosen by ``Target.simulated``, which asks where the native ``acl`` comes from."""
    from aclasync import sim
    from aclasync._cli._bench import _common

    assert _common.Target().simulated
    native = _common.Target(backend="native")
    runtime = sim.create(device_count=1)
    try:
        monkeypatch.setattr(_common, "native_runtime", lambda: (runtime, 1))
        assert native.simulated
    finally:
        runtime.sim.close()
    cann = type("acl", (), {"__file__": "/usr/local/Ascend/python/site-packages/acl.so"})()
    monkeypatch.setattr(_common, "native_runtime", lambda: (cann, 1))
    assert not native.simulated
