"""Issue 13's measurements: the wake-up floor, aclasync - raw - floor, quiet-wait CPU,
the raw thread they are measured against, and the bare-thread floor of ``bench
overhead``.

Timing values are not judged here (benchmarks judge speed); these tests check that
every figure is there, is a number, is consistent with the figures it is computed
from, and that the floor's thread behaves.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from typing import Any

import anyio
import pytest

from aclasync._cli._bench import format_table, run
from aclasync._cli._bench._floor import BareThread
from aclasync._cli._bench._raw_level import RawThread
from aclasync._cli._bench._sync_modes import MODES as SYNC_MODES

pytestmark = pytest.mark.timeout(180)  # the module fixture runs two benchmarks on 3 loops

LOOPS = ["asyncio", "uvloop", "trio"]
MODES = {"default", "FAST_SYNC", "FAST_LAUNCH|FAST_SYNC"}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return run(
        ["sync-modes", "overhead"],
        quick=True,
        loops=LOOPS,
        progress=lambda line: None,
        scale=0.05,
    )


def test_sync_modes_reports_the_floor_and_what_aclasync_adds(results: dict[str, Any]) -> None:
    bench = results["benchmarks"]["sync-modes"]
    keys = [column["key"] for column in bench["columns"]]
    assert {"floor_us", "raw_floor_us", "over_us"} <= set(keys)
    rows = bench["rows"]
    raw = {(row["mode"], row["kernel_us"]): row["p50_us"] for row in rows if row["level"] == "raw"}
    assert len(raw) == 12
    for row in rows:
        if row["level"] == "raw":
            assert row["floor_us"] is None
            assert row["raw_floor_us"] is None
            assert row["over_us"] is None
            continue
        assert _number(row["floor_us"])
        assert row["floor_us"] > 0
        assert _number(row["raw_floor_us"])
        # Summed sample by sample, so no smaller than either term's median.
        assert row["raw_floor_us"] >= max(row["raw_us"], row["floor_us"]) - 1e-6
        # Each loop is judged against the raw samples interleaved with its own rounds;
        # the raw rows are the first loop's.
        assert _number(row["raw_us"])
        if row["level"] == LOOPS[0]:
            assert row["raw_us"] == pytest.approx(raw[(row["mode"], row["kernel_us"])])
        expected = row["p50_us"] - row["raw_floor_us"]
        assert row["over_us"] == pytest.approx(expected)
    # The floor is the raw thread's own post-to-resume time, one per loop, mode and
    # kernel length; the raw rows carry none.
    cells = {(row["level"], row["mode"], row["kernel_us"]) for row in rows}
    assert len(cells) == len(rows) == (1 + len(LOOPS)) * len(MODES) * 4

    over = [c for c in bench["checks"] if c["what"].startswith("aclasync - raw - floor")]
    assert len(over) == len(LOOPS) * len(MODES)
    for loop in LOOPS:
        for mode in MODES:
            (found,) = [c for c in over if f", {mode} [{loop}]" in c["what"]]
            worst = max(
                row["over_us"] for row in rows if row["level"] == loop and row["mode"] == mode
            )
            assert found["value"] == worst
            assert found["ok"] is (worst <= 20)
    # The checks the benchmark had before are still there.
    assert any(c["what"].startswith("FAST_SYNC p50 / default p50") for c in bench["checks"])
    charts = {chart["value"]: chart for chart in bench["charts"]}
    assert charts["over_us"]["target"] == 20
    assert "lat_vs_default" in charts


def test_sync_modes_reports_quiet_wait_cpu(results: dict[str, Any]) -> None:
    bench = results["benchmarks"]["sync-modes"]
    (table,) = bench["tables"]
    seconds = bench["params"]["quiet_wait_s"]
    assert seconds == pytest.approx(0.2)  # --scale 0.05 of 0.5 s, floored at 0.2 s
    rows = {(row["loop"], row["devices"], row["variant"]): row for row in table["rows"]}
    assert set(rows) == {
        (loop, devices, variant)
        for loop in LOOPS
        for devices in (1, 8)
        for variant in ("raw thread", "aclasync")
    }
    for (loop, devices, variant), row in rows.items():
        assert row["n"] >= 3
        assert row["wall_s"] >= seconds  # a wait cannot end before its kernel
        assert _number(row["cpu_ms"])
        assert row["cpu_ms"] >= 0
        assert row["core_pct"] == pytest.approx(row["cpu_ms"] / 1e3 / row["wall_s"] * 100)
        if variant == "raw thread":
            assert row["beyond_raw_pct"] is None
        else:
            raw_cpu = rows[(loop, devices, "raw thread")]["cpu_ms"] / 1e3
            expected = (row["cpu_ms"] / 1e3 - raw_cpu) / row["wall_s"] * 100
            assert row["beyond_raw_pct"] == pytest.approx(expected)
    quiet = [c for c in bench["checks"] if c["what"].startswith("quiet wait CPU")]
    targets = set()
    for c in quiet:
        found = re.search(r", (\d) device", c["what"])
        assert found, c["what"]
        targets.add((found.group(1), c["target"]))
    assert targets == {("1", "<= 0.5"), ("8", "<= 2")}
    assert len(quiet) == 2 * len(LOOPS)
    assert all(_number(c["value"]) and isinstance(c["ok"], bool) for c in quiet)

    text = format_table(results)
    assert "Quiet waits" in text
    assert "beyond raw %" in text
    assert "floor us" in text


def test_overhead_reports_the_bare_thread_floor(results: dict[str, Any]) -> None:
    bench = results["benchmarks"]["overhead"]
    assert "vs_bare_us" in {column["key"] for column in bench["columns"]}
    placed = len(os.sched_getaffinity(0)) > 1  # else no placed pair: the free one is judged
    for loop in LOOPS:
        rows = {row["variant"]: row for row in bench["rows"] if row["loop"] == loop}
        assert ("aclasync, placed" in rows) is placed
        bare = rows["bare thread"]["median_us"]
        assert _number(bare)
        assert bare > 0
        assert ("aclasync same-CPU" in rows) is placed
        assert ("bare thread, same-CPU" in rows) is placed
        for variant, row in rows.items():
            own = "bare thread"
            if variant.endswith(", placed"):
                own = "bare thread, placed"
            elif variant.endswith("same-CPU"):
                own = "bare thread, same-CPU"
            assert row["vs_bare_us"] == pytest.approx(row["median_us"] - rows[own]["median_us"])
        judged = "aclasync, placed" if placed else "aclasync"
        (found,) = [
            c
            for c in bench["checks"]
            if c["what"].startswith("aclasync - bare thread") and c["what"].endswith(f"[{loop}]")
        ]
        assert found["value"] == pytest.approx(rows[judged]["vs_bare_us"])
        assert found["ok"] is (found["value"] <= 5)
        assert ("placed alike" in found["what"]) is placed
        assert any(c["what"] == f"aclasync / naive median [{loop}]" for c in bench["checks"])


def test_the_over_chart_draws_its_target(results: dict[str, Any]) -> None:
    import matplotlib.pyplot as plt

    from aclasync._cli._bench._plot import build_figure

    only = {**results, "benchmarks": {"sync-modes": results["benchmarks"]["sync-modes"]}}
    figure = build_figure(only)
    try:
        axis = figure.axes[1]
        assert "beyond the raw wait and the floor" in axis.get_title(loc="left")
        targets = [line for line in axis.lines if line.get_linestyle() == "--"]
        assert [line.get_xdata()[0] for line in targets] == [20]
        bars = len(axis.patches)
        assert bars == len(LOOPS) * len(MODES) * 4  # loops x modes x kernel lengths; no raw
    finally:
        plt.close(figure)


@pytest.mark.anyio
async def test_bare_thread_answers_and_stops() -> None:
    threads = threading.active_count()
    with anyio.fail_after(10), BareThread() as bare:
        assert threading.active_count() == threads + 1
        for _ in range(20):
            before = time.perf_counter()
            stamp = await bare.round_trip()
            assert before <= stamp <= time.perf_counter()
    assert threading.active_count() == threads


@pytest.mark.anyio
async def test_a_placed_bare_thread_runs_on_its_cpu_only() -> None:
    ours = os.sched_getaffinity(0)
    cpu = max(ours)
    seen: list[set[int]] = []
    with anyio.fail_after(10), BareThread(cpu=cpu) as bare:
        await bare.round_trip()
        (thread,) = [t for t in threading.enumerate() if t.name == "aclasync-bench-bare"]
        assert thread.native_id is not None
        seen.append(os.sched_getaffinity(thread.native_id))
    assert seen == [{cpu}]
    assert os.sched_getaffinity(0) == ours  # the caller's thread is left as it was


@pytest.mark.anyio
async def test_raw_thread_waits_for_each_kernel_then_posts_and_stops() -> None:
    threads = threading.active_count()
    with anyio.fail_after(10), RawThread(SYNC_MODES) as raw:
        assert "aclasync-bench-raw" in {thread.name for thread in threading.enumerate()}
        for mode in SYNC_MODES:
            for _ in range(5):
                before = time.perf_counter()
                sample, resumed = await raw.sample(mode, 0.002)
                assert sample.ran >= 0.002  # the kernel ran its length on the device
                assert sample.latency >= 0  # the runtime returned after it ended
                assert before + 0.002 <= sample.posted <= resumed <= time.perf_counter()
                assert sample.thread_cpu >= 0
    assert threading.active_count() == threads  # its runtime's threads stopped too


@pytest.mark.anyio
async def test_raw_thread_keeps_answering_after_a_cancelled_sample() -> None:
    with anyio.fail_after(10), RawThread(SYNC_MODES) as raw:
        for _ in range(10):
            with anyio.CancelScope() as scope:
                scope.cancel()
                await raw.sample("FAST_SYNC", 0.001)
            before = time.perf_counter()
            sample, _ = await raw.sample("default", 0)
            assert sample.posted >= before  # its own answer, not the abandoned one's


@pytest.mark.anyio
async def test_raw_thread_raises_its_failures_in_the_caller() -> None:
    with anyio.fail_after(10), RawThread({"default": 0}) as raw:
        with pytest.raises(KeyError, match="FAST_SYNC"):
            await raw.sample("FAST_SYNC", 0)
        sample, _ = await raw.sample("default", 0)  # still serving
        assert sample.latency >= 0
    threads = threading.active_count()
    with pytest.raises(TypeError, match="create_stream_with_config"):
        RawThread({"bad": "FAST_SYNC"}).__enter__()  # type: ignore[dict-item]
    assert threading.active_count() == threads


@pytest.mark.anyio
async def test_bare_thread_keeps_answering_after_a_cancelled_round_trip() -> None:
    with anyio.fail_after(10), BareThread() as bare:
        for _ in range(50):
            with anyio.CancelScope() as scope:
                scope.cancel()
                await bare.round_trip()
            before = time.perf_counter()
            stamp = await bare.round_trip()  # its own answer, not the abandoned one's
            assert before <= stamp <= time.perf_counter()


def test_overhead_compares_each_variant_with_the_bare_thread_placed_alike() -> None:
    from aclasync._cli._bench import _overhead as o

    for variant in (o.RAW, o.BARE, o.ACLASYNC, o.NAIVE, o.STDLIB):
        assert o._BARE_OF.get(variant, o.BARE) == o.BARE
    for variant in (o.BARE_PLACED, o.ACLASYNC_PLACED):
        assert o._BARE_OF[variant] == o.BARE_PLACED
    for variant in (o.BARE_PINNED, o.PINNED):  # loop, worker and bare thread on one CPU
        assert o._BARE_OF[variant] == o.BARE_PINNED


class _NoWork:
    """A stand-in workload for the raw thread's event-timed samples: nothing to queue."""

    scratch_bytes = 32

    def work(self, length_us: float, scratch: int, acl: Any) -> tuple[Any, tuple[Any, ...]]:
        return (lambda handle: 0), ()


@pytest.mark.anyio
async def test_the_raw_levels_event_query_lies_outside_its_window() -> None:
    """The raw thread queries its events before it posts; that query (here 60 ms of
    CPU) counts in neither its latency nor its CPU, as with aclasync's sample."""
    from aclasync import sim
    from aclasync._cli._bench._sync_modes import _new_cell, _raw_timed_sample

    acl = sim.create(device_count=1)
    real = acl.rt.event_elapsed_time
    queries: list[float] = []

    def slow_elapsed(start: int, end: int) -> Any:
        queries.append(time.perf_counter())
        until = time.thread_time() + 0.06
        while time.thread_time() < until:
            pass
        return real(start, end)

    acl.rt.event_elapsed_time = slow_elapsed
    try:
        with anyio.fail_after(10), RawThread({"default": 0}, _NoWork(), acl) as raw:  # type: ignore[arg-type]
            cell = _new_cell()
            for _ in range(3):
                await _raw_timed_sample(raw, "default", 0, cell)
    finally:
        acl.sim.close()
    assert len(queries) == 3  # the slow query was made, in the window
    assert max(cell["latency"]) < 0.04
    assert cell["process_cpu"] / 3 < 0.04
    assert all(floor < 0.04 for floor in cell["floor"])
