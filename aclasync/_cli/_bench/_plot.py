"""Charts of a benchmark run that a reader understands without the table.

Each benchmark describes its charts under ``"charts"`` in its result:

``group``
    Row keys whose values label one group of bars (a tick on the vertical axis);
    ``group_format`` (a ``str.format`` template over the row) words it.
``series``, ``series_format``
    Row key whose values get one colour each, named in the legend (optional), and how
    the legend words a value (a ``str.format`` template, e.g. ``"{:,} µs kernel"``).
``value``, ``axis``, ``unit``
    The row key drawn, and the horizontal axis label in words with its unit.
``log``
    Draw the value axis on a log scale.
``target``, ``target_label``
    Where the target lies on the value axis, drawn as a dashed line in the legend.
``value_format``
    How the label at the end of each bar words the bar's own value (a ``str.format``
    template, default ``{:.3g}``; e.g. ``"p99 {:.1f} ms"``). Every bar is labelled, and
    the label starts with the figure the bar draws.
``annotate``, ``annotate_format``
    A row key added to that label in parentheses (e.g. the absolute figure of a ratio,
    or the maximum beside a p99).
``title``
    The chart's title after the benchmark's name (default: the benchmark's title); a
    benchmark with several charts gives each its own.

Rows whose ``value`` is ``None`` are not drawn (e.g. a figure only some levels have).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["bar_label", "build_figure", "has_charts", "plot", "series_label"]

_BAR_HEIGHT_IN = 0.22
#: matplotlib's ten-colour palette: ``overhead`` has nine variants.
_COLOURS = (
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:gray",
    "tab:olive",
    "tab:cyan",
)


def plot(results: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Draw every benchmark's charts into one PNG file at *path*. Blocks.

    Raises
    ------
    RuntimeError
        If matplotlib is not installed or no benchmark has anything to draw.
    """
    import matplotlib.pyplot as plt

    figure = build_figure(results)
    try:
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)


def check_format(path: str) -> None:
    """Raise ``RuntimeError`` unless matplotlib can write *path* (by its suffix; none
    is PNG): checked before a run, so that a long run is not lost to its last option."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    formats = FigureCanvasAgg(Figure()).get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lower().lstrip(".")
    if suffix and suffix not in formats:
        raise RuntimeError(
            f"--plot cannot write a {suffix!r} file; the formats are {', '.join(sorted(formats))}"
        )


def build_figure(results: dict[str, Any]) -> Any:
    """Return the matplotlib figure ``plot`` saves (the caller closes it).

    Raises
    ------
    RuntimeError
        If matplotlib is not installed or no benchmark has anything to draw.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError(
            "--plot needs matplotlib: pip install matplotlib (or 'aclasync[plot]')"
        ) from exc
    charts = _charts(results)
    if not charts:
        raise RuntimeError("nothing to plot: no benchmark produced chartable rows")
    heights = [_bar_count(bench["rows"], chart) + 2.5 for _, bench, chart in charts]
    figure, axes = plt.subplots(
        len(charts),
        1,
        figsize=(14, _BAR_HEIGHT_IN * sum(heights) + 0.9),
        squeeze=False,
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
    )
    for axis, (name, bench, chart) in zip(axes[:, 0], charts, strict=True):
        _draw(axis, name, bench, chart)
    figure.suptitle(_headline(results), fontsize=10)
    return figure


def has_charts(results: dict[str, Any]) -> bool:
    """Whether ``plot`` has anything to draw for *results*."""
    return bool(_charts(results))


def _charts(results: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(name, result, chart)`` of every chart with at least one value to draw."""
    return [
        (name, bench, chart)
        for name, bench in results.get("benchmarks", {}).items()
        for chart in bench.get("charts", ())
        if any(row.get(chart["value"]) is not None for row in bench.get("rows", ()))
    ]


def _bar_count(rows: list[dict[str, Any]], chart: dict[str, Any]) -> int:
    rows = [row for row in rows if row.get(chart["value"]) is not None]
    groups = {_group_label(row, chart) for row in rows}
    key = chart.get("series")
    series = 1 if not key or key in chart["group"] else len({row.get(key) for row in rows})
    return len(groups) * (series + 1)


def _draw(axis: Any, name: str, bench: dict[str, Any], chart: dict[str, Any]) -> None:
    rows = [row for row in bench["rows"] if row.get(chart["value"]) is not None]
    groups = list(dict.fromkeys(_group_label(row, chart) for row in rows))
    series_key = chart.get("series")
    # Each series by its value's text, with the legend's words for it.
    series = (
        {str(row[series_key]): series_label(row[series_key], chart) for row in rows}
        if series_key
        else {"": ""}
    )
    # A series that is also the group (one variant per loop) gets one bar per group.
    stacked = series_key in chart["group"]
    width = 1 if stacked else len(series)
    slot = width + 1  # bars per group, plus a gap
    for index, (key, label) in enumerate(series.items()):
        members = [row for row in rows if not series_key or str(row[series_key]) == key]
        offset = 0 if stacked else index
        ys = [groups.index(_group_label(row, chart)) * slot + offset for row in members]
        values = [float(row[chart["value"]]) for row in members]
        bars = axis.barh(
            ys,
            values,
            height=0.85,
            color=_COLOURS[index % len(_COLOURS)],
            label=label or None,
        )
        axis.bar_label(bars, [bar_label(row, chart) for row in members], padding=3, fontsize=7)
    axis.set_yticks([g * slot + (width - 1) / 2 for g in range(len(groups))], groups)
    axis.tick_params(axis="y", labelsize=8)
    axis.invert_yaxis()
    if chart.get("log"):
        axis.set_xscale("log")
    if chart.get("target") is not None:
        axis.axvline(
            chart["target"],
            color="black",
            linestyle="--",
            linewidth=1.2,
            label=chart.get("target_label", f"target {chart['target']:g}"),
        )
    axis.margins(x=0.18)  # room for the bar labels
    axis.set_xlabel(f"{chart['axis']} ({chart['unit']})", fontsize=8)
    axis.set_title(f"{name}: {chart.get('title', bench.get('title', ''))}", fontsize=9, loc="left")
    axis.grid(axis="x", linewidth=0.4, alpha=0.5)
    if series_key or chart.get("target") is not None:
        # Beside the axes, never over a bar.
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def bar_label(row: dict[str, Any], chart: dict[str, Any]) -> str:
    """The text at the end of *row*'s bar: its value, then the ``annotate`` figure."""
    text = _format(row[chart["value"]], chart.get("value_format", "{:.3g}"))
    annotate = chart.get("annotate")
    extra = _format(row.get(annotate), chart.get("annotate_format", "{}")) if annotate else ""
    return f"{text} ({extra})" if extra else text


def series_label(value: Any, chart: dict[str, Any]) -> str:
    """The legend's words for the series of *value* (``series_format``, default the
    value itself)."""
    return _format(value, chart.get("series_format", "{}")) or str(value)


def _group_label(row: dict[str, Any], chart: dict[str, Any]) -> str:
    template = chart.get("group_format")
    if template:
        return str(template.format(**row))
    return " / ".join(str(row[key]) for key in chart["group"])


def _format(value: Any, template: str) -> str:
    if value is None:
        return ""
    try:
        return template.format(value)
    except (ValueError, TypeError):
        return str(value)


def _headline(results: dict[str, Any]) -> str:
    machine = results.get("machine", {})
    config = results.get("config", {})
    git = machine.get("git") or {}
    commit = git.get("commit")
    where = f"commit {commit[:10]}" if commit else "no git commit"
    if git.get("dirty"):
        where += " + uncommitted changes"
    cpu = machine.get("cpu_model") or machine.get("machine") or "unknown CPU"
    mode = "quick run" if config.get("quick") else "full run"
    started = str(config.get("started", ""))[:16].replace("T", " ")
    load = machine.get("load_average")
    busy = f", load average {load[0]:.1f}" if load else ""
    return (
        f"aclasync benchmarks · {where} · {cpu}, {machine.get('cpu_count')} CPUs{busy}, "
        f"{machine.get('python', '')} · {mode}, {started} UTC"
    )
