"""benchmarks/combine.py: medians of sync-modes' ``over`` across runs, and its bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aclasync._cli._bench._combine import combine, format_markdown, load_runs
from aclasync._cli._bench._sync_modes import LENGTHS_US, MODES

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "combine.py"


def _run_file(
    tmp_path: Path,
    name: str,
    over: float,
    *,
    loops: tuple[str, ...],
    config: dict[str, Any] | None = None,
) -> Path:
    """A minimal ``aclasync bench --json`` file whose sync-modes cells all read *over*,
    except FAST_SYNC at 0 us, which reads ``over + 30``; raw rows carry no ``over``."""
    rows: list[dict[str, Any]] = [
        {"level": "raw", "mode": mode, "kernel_us": length, "over_us": None}
        for mode in MODES
        for length in LENGTHS_US
    ]
    for loop in loops:
        for mode in MODES:
            for length in LENGTHS_US:
                value = over + 30 if (mode, length) == ("FAST_SYNC", 0) else over
                rows.append({"level": loop, "mode": mode, "kernel_us": length, "over_us": value})
    path = tmp_path / name
    data: dict[str, Any] = {"benchmarks": {"sync-modes": {"rows": rows}}}
    if config is not None:
        data["config"] = config
    path.write_text(json.dumps(data))
    return path


def test_medians_are_taken_per_cell_across_runs(tmp_path: Path) -> None:
    paths = [
        _run_file(tmp_path, f"r{i}.json", over, loops=("asyncio", "trio"))
        for i, over in enumerate((-10.0, 5.0, 100.0))
    ]
    combined = combine(load_runs(paths))
    assert combined.runs == 3
    assert combined.loops() == ["asyncio", "trio"]
    assert combined.median("trio", "default", 1_000) == 5.0  # not the mean (31.7)
    assert combined.cells[("asyncio", "default", 0)] == [-10.0, 5.0, 100.0]
    assert combined.worst("asyncio", "FAST_SYNC") == 35.0
    text = format_markdown(combined)
    assert "| asyncio | 0 µs | +5.0 (-10 / +5 / +100) |" in text
    assert "FAST_SYNC +35.0 [MISS]" in text
    assert "default +5.0 [ok]" in text


def test_runs_that_do_not_match_are_refused(tmp_path: Path) -> None:
    one = _run_file(tmp_path, "a.json", 0.0, loops=("asyncio",))
    two = _run_file(tmp_path, "b.json", 0.0, loops=("asyncio", "trio"))
    with pytest.raises(ValueError, match="same loops"):
        combine(load_runs([one, two]))
    with pytest.raises(ValueError, match="no runs"):
        combine([])


def test_the_script_says_what_is_wrong_with_a_file(tmp_path: Path) -> None:
    other = tmp_path / "serve.json"
    other.write_text(json.dumps({"benchmarks": {"serve": {"rows": []}}}))
    garbage = tmp_path / "chart.png"
    garbage.write_bytes(b"\x89PNG\r\n")
    for path, message in ((other, "no sync-modes result"), (garbage, "cannot read it as JSON")):
        done = subprocess.run(
            [sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 2
        assert message in done.stderr
        assert str(path) in done.stderr
    good = _run_file(tmp_path, "good.json", 1.0, loops=("uvloop",))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(good)], capture_output=True, text=True, check=True
    )
    assert "| uvloop | 10,000 µs |" in done.stdout


def _config(**changes: Any) -> dict[str, Any]:
    config = {
        "quick": False,
        "loops": ["asyncio"],
        "workload": None,
        "backend": {"name": "sim", "acl": "aclasync.sim"},
    }
    return {**config, **changes}


def test_the_same_run_twice_is_refused(tmp_path: Path) -> None:
    one = _run_file(tmp_path, "a.json", 1.0, loops=("asyncio",), config=_config(started="t1"))
    copy = tmp_path / "copy.json"
    copy.write_text(one.read_text())
    for twice in ([one, one], [one, copy]):
        with pytest.raises(ValueError, match="same run"):
            load_runs(twice)
    # Same start on the same machine: the same run, whatever its figures now read.
    edited = _run_file(tmp_path, "b.json", 9.0, loops=("asyncio",), config=_config(started="t1"))
    with pytest.raises(ValueError, match="same run"):
        load_runs([one, edited])
    other = _run_file(tmp_path, "c.json", 9.0, loops=("asyncio",), config=_config(started="t2"))
    assert combine(load_runs([one, other])).runs == 2


@pytest.mark.parametrize(
    "change",
    [
        {"workload": "memset"},
        {"loops": ["asyncio", "trio"]},
        {"backend": {"name": "native", "soc": "Ascend910B"}},
    ],
)
def test_runs_of_different_configurations_are_refused(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    one = _run_file(tmp_path, "a.json", 1.0, loops=("asyncio",), config=_config(started="t1"))
    two = _run_file(
        tmp_path, "b.json", 1.0, loops=("asyncio",), config=_config(started="t2", **change)
    )
    (key,) = change
    with pytest.raises(ValueError, match=f"differ in {key}"):
        load_runs([one, two])


def test_quick_runs_get_no_verdict(tmp_path: Path) -> None:
    paths = [
        _run_file(tmp_path, f"q{i}.json", 1.0, loops=("asyncio",), config=_config(quick=True))
        for i in range(2)
    ]
    paths[1].write_text(paths[1].read_text().replace('"over_us": 1.0', '"over_us": 2.0'))
    combined = combine(load_runs(paths))
    assert combined.quick
    text = format_markdown(combined)
    assert "[ok]" not in text
    assert "[MISS]" not in text
    assert "FAST_SYNC +31.0 [no verdict]" in text
    assert "no verdict" in text.splitlines()[-2]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"over_us": 1}], "bad.json: sync-modes row 0: level is None, not a string"),
        (5, "bad.json: sync-modes 'rows' is int, not a list"),
        (["asyncio"], "bad.json: sync-modes row 0 is str, not an object"),
        (
            [{"level": "asyncio", "mode": "default", "kernel_us": "0", "over_us": 1.0}],
            "bad.json: sync-modes row 0: kernel_us is '0', not a number",
        ),
        (
            [{"level": "asyncio", "mode": "default", "kernel_us": 0, "over_us": float("nan")}],
            "bad.json: sync-modes row 0: over_us is nan, not a number",
        ),
        (
            [
                {"level": "asyncio", "mode": "default", "kernel_us": length, "over_us": 1.0}
                for length in LENGTHS_US
            ],
            "the runs have no over_us for 8 loop, mode and kernel length cell(s)",
        ),
    ],
    ids=["no-level", "rows-not-a-list", "row-not-an-object", "text-length", "nan", "one-mode"],
)
def test_malformed_rows_are_one_line_and_exit_status_2(
    tmp_path: Path, rows: Any, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benchmarks": {"sync-modes": {"rows": rows}}}))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("combine: ")
    assert message in done.stderr
