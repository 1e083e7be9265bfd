"""Smoke test of the benchmark suite: it runs, reports progress and writes sound JSON.

No performance thresholds here: benchmarks judge speed, tests judge behaviour.
"""

from __future__ import annotations

import json
import math
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


def test_registry_names_the_documented_benchmarks() -> None:
    assert list(BENCHMARKS) == ["overhead", "launch", "sync-modes", "scale", "pipeline", "serve"]
