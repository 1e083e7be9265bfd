"""``aclasync bench serve-ray``: what it reports, when it runs, and when it does not.

No performance thresholds here (benchmarks judge speed): a small run checks that every
variant answered, with the batching each promises, and that the run leaves no Ray
process behind.
"""

from __future__ import annotations

import importlib.util
import math
import os
from typing import Any

import pytest
from cluster_support import ProcessTree

from aclasync._cli._bench import BENCHMARKS, run
from aclasync._cli._bench._ray_serve_app import BATCHES, MAX_BATCH
from aclasync._cli._bench._runner import _select_benchmarks


def test_a_quick_run_leaves_it_out_unless_named() -> None:
    assert not BENCHMARKS["serve-ray"].quick
    assert all(bench.quick for name, bench in BENCHMARKS.items() if name != "serve-ray")
    assert "serve-ray" not in _select_benchmarks(None, quick=True)
    assert "serve-ray" in _select_benchmarks(None, quick=False)
    assert _select_benchmarks(["serve-ray"], quick=True) == ("serve-ray",)


def test_without_ray_serve_it_is_skipped_with_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "ray.serve" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    lines: list[str] = []
    results = run(["serve-ray"], quick=True, progress=lines.append)
    assert results["benchmarks"] == {}
    reason = results["skipped"]["serve-ray"]
    assert "Ray Serve is not installed" in reason
    assert "aclasync[ray-serve]" in reason
    assert any(reason in line for line in lines)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_small_run_reports_every_variant_and_leaves_nothing() -> None:
    with ProcessTree(os.getpid()) as tree:
        results = run(["serve-ray"], quick=True, progress=lambda line: None)
    assert tree.left() == set()
    bench = results["benchmarks"]["serve-ray"]
    rows = {row["variant"]: row for row in bench["rows"]}
    assert set(rows) == {
        f"aclasync, {BATCHES} batches",
        "aclasync, 1 batch",
        f"to_thread, {BATCHES} batches",
    }
    for row in rows.values():
        assert row["requests"] >= 128
        assert all(math.isfinite(row[key]) and row[key] > 0 for key in ("rps", "p50_ms", "p99_ms"))
        assert 1 <= row["mean_batch"] <= MAX_BATCH
    assert rows["aclasync, 1 batch"]["most_in_flight"] == 1
    assert 2 <= rows[f"aclasync, {BATCHES} batches"]["most_in_flight"] <= BATCHES
    assert 2 <= rows[f"to_thread, {BATCHES} batches"]["most_in_flight"] <= BATCHES
    assert [c["what"] for c in bench["checks"]] == [
        f"requests/s, {BATCHES} batches vs 1",
        f"p99, {BATCHES} batches vs 1",
        f"requests/s, {BATCHES} batches: aclasync vs to_thread",
    ]
    assert bench["params"]["ray"]
    assert bench["params"]["model_ms"] >= 20
