"""Every chart of every benchmark says what its bars show, from synthetic results.

No benchmark runs here: each benchmark's chart descriptions (``CHARTS`` in its module)
are drawn over made-up rows, so that the checks cover every chart, ``serve`` and
``ray`` included, in well under a second.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from aclasync._cli._bench import BENCHMARKS, format_table
from aclasync._cli._bench._plot import build_figure


def _charts() -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, chart)
        for name, bench in BENCHMARKS.items()
        for chart in importlib.import_module(bench.fn.__module__).CHARTS
    ]


def _rows(chart: dict[str, Any]) -> list[dict[str, Any]]:
    """Two groups x two series of rows with distinct values for every key a chart reads."""
    numbers = itertools.count(1)
    keys = [*chart["group"], chart.get("series")]
    rows = []
    for first, second in itertools.product((1, 2), (3, 4)):
        row: dict[str, Any] = dict.fromkeys((key for key in keys if key), first)
        if chart.get("series") and chart["series"] not in chart["group"]:
            row[chart["series"]] = second
        row[chart["value"]] = 1234.5678 * next(numbers)
        if chart.get("annotate") and chart["annotate"] != chart["value"]:
            row[chart["annotate"]] = 42.25 * next(numbers)
        rows.append(row)
    return rows


def _results() -> dict[str, Any]:
    benchmarks: dict[str, Any] = {}
    for name, chart in _charts():
        bench = benchmarks.setdefault(name, {"title": f"{name} title", "rows": [], "charts": []})
        bench["charts"].append(chart)
        bench["rows"].extend(_rows(chart))
    return {"machine": {}, "config": {"quick": False}, "benchmarks": benchmarks}


@pytest.fixture(scope="module")
def figure() -> Iterator[Any]:
    import matplotlib.pyplot as plt

    drawn = build_figure(_results())
    try:
        yield drawn
    finally:
        plt.close(drawn)


def test_every_benchmark_chart_is_drawn(figure: Any) -> None:
    assert len(figure.axes) == len(_charts())


def test_every_bar_is_labelled_with_the_figure_it_draws(figure: Any) -> None:
    for axis, (name, chart) in zip(figure.axes, _charts(), strict=True):
        template = chart.get("value_format", "{:.3g}")
        bars = [bar for container in axis.containers for bar in container]
        labels = [text.get_text() for text in axis.texts]
        assert len(labels) == len(bars) > 0, name
        for bar, label in zip(bars, labels, strict=True):
            assert label.startswith(template.format(bar.get_width())), (name, label)


def test_a_p99_bar_is_labelled_p99(figure: Any) -> None:
    p99_charts = [(axis, chart) for axis, (_, chart) in zip(figure.axes, _charts(), strict=True)]
    p99_charts = [(axis, chart) for axis, chart in p99_charts if "p99" in chart["value"]]
    assert len(p99_charts) >= 3  # scale's ticker, serve's /health, soak's stalls
    for axis, _ in p99_charts:
        for text in axis.texts:
            assert text.get_text().startswith("p99 "), text.get_text()


def test_every_panel_has_its_own_title(figure: Any) -> None:
    titles = [axis.get_title(loc="left") for axis in figure.axes]
    assert len(set(titles)) == len(titles), titles


def test_scale_memory_label_leads_with_the_bar_and_names_the_other_figure() -> None:
    from aclasync._cli._bench._plot import bar_label

    (chart,) = [c for name, c in _charts() if name == "scale" and c["value"] == "bytes_own"]
    row = {"loop": "asyncio", "bytes_own": 1738.0, "bytes_per_waiter": 5380.0}
    assert bar_label(row, chart) == "1,738 B (5,380 B with the task)"


def test_a_quick_run_says_its_targets_are_for_full_runs() -> None:
    bench = {
        "title": "t",
        "columns": [{"key": "x", "header": "x", "fmt": ".1f"}],
        "rows": [{"x": 1.0}],
        "checks": [{"what": "x", "value": 1.0, "target": "<= 0.5", "ok": False}],
    }
    quick = format_table(
        {"config": {"quick": True, "loops": ["asyncio"]}, "benchmarks": {"b": bench}}
    )
    full = format_table(
        {"config": {"quick": False, "loops": ["asyncio"]}, "benchmarks": {"b": bench}}
    )
    note = "# the targets are for full runs: a quick run's small samples make [MISS] likely"
    assert note in quick
    assert "[MISS] x" in quick
    assert note not in full


def test_legends_word_their_series_with_series_format(figure: Any) -> None:
    """The ``request`` charts name each series "1,000 µs kernel", not a bare 1000."""
    texts = {
        text.get_text()
        for axis in figure.axes
        if axis.get_legend() is not None
        for text in axis.get_legend().get_texts()
    }
    formatted = [c for _, c in _charts() if c.get("series_format")]
    assert formatted  # the request charts
    for chart in formatted:
        assert chart["series_format"].format(3) in texts
    from aclasync._cli._bench._plot import series_label

    assert series_label(1000, {"series_format": "{:,} µs kernel"}) == "1,000 µs kernel"
    assert series_label("asyncio", {}) == "asyncio"


@pytest.mark.parametrize(
    ("value", "target", "shown"),
    [
        (29.97, ">= 30", "29.97"),
        (29.9996, ">= 30", "29.9996"),
        (30.004, "> 30", "30.004"),
        (0.69996, "< 0.7", "0.69996"),
        (0.70485, "<= 0.7049", "0.7048"),
        (1.234, ">= 1", "1.23"),
        (12.0, "<= 20 (max of 20 and the A/A spread)", "12"),
    ],
)
def test_a_check_value_never_reads_as_on_the_other_side_of_its_target(
    value: float, target: str, shown: str
) -> None:
    from aclasync._cli._bench._report import check_value

    assert check_value(value, target) == shown
    bench = {
        "title": "t",
        "columns": [],
        "rows": [],
        "checks": [{"what": "x", "value": value, "target": target, "ok": None}],
    }
    assert f"x: {shown} (target {target})" in format_table({"benchmarks": {"b": bench}})
