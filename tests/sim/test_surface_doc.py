"""docs/simulator.md's surface table is what tools/sim_surface_table.py writes today."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aclasync._pyacl import surface

REPO = Path(__file__).parents[2]


def _tool() -> ModuleType:
    path = REPO / "tools" / "sim_surface_table.py"
    spec = importlib.util.spec_from_file_location("sim_surface_table", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tool = _tool()


def test_the_committed_table_matches_a_fresh_run() -> None:
    document = tool.DOC.read_text(encoding="utf-8")
    assert tool.splice(document, tool.render()) == document, (
        "docs/simulator.md is out of date: run python tools/sim_surface_table.py"
    )
    assert tool.main(["--check"]) == 0


def test_the_table_has_a_row_per_name_saying_modelled_or_207000() -> None:
    text = tool.render()
    for function in surface.functions():
        if function.condition is not None:
            continue
        rows = [line for line in text.splitlines() if line.startswith(f"| `{function.name}` |")]
        assert rows, function.api
        assert any(" | modelled | " in r or " | 207000 | " in r for r in rows), function.api


def test_check_reports_a_stale_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "simulator.md"
    stale.write_text(f"intro\n{tool.BEGIN}\n| old |\n{tool.END}\n", encoding="utf-8")
    monkeypatch.setattr(tool, "DOC", stale)
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0
    assert tool.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8").startswith("intro\n" + tool.BEGIN)
