"""``mypy --strict`` on user code: ``Device.acl`` is typed with pyACL's surface.

``typing_fixtures/device_acl.py`` misuses ``Device.acl`` on purpose; mypy must report
exactly its lines marked ``# mypy-error``. The Python examples of the README and of the
documentation site's guides (every block ``.ci/doc_blocks.py`` runs, and the fragments)
must type-check cleanly; a fragment (an example that uses names it does not define, or
awaits at top level) is checked as the body of an async function, its undefined names
typed ``Any``.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HERE = Path(__file__).parent
FIXTURE = HERE / "typing_fixtures" / "device_acl.py"
README = HERE.parent / "README.md"
MARK = re.compile(r"#\s*mypy-error\s*$")
REPORT = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: ")


def mypy_errors(tmp_path: Path, *files: Path) -> dict[Path, list[int]]:
    """Run ``mypy --strict`` (no project configuration) and return the error lines."""
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--no-error-summary",
            *map(str, files),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 2: mypy itself failed
    found: dict[Path, list[int]] = {Path(f).resolve(): [] for f in files}
    for line in done.stdout.splitlines():
        match = REPORT.match(line)
        if match:
            found[(tmp_path / match["path"]).resolve()].append(int(match["line"]))
    return found


def marked_lines(path: Path) -> list[int]:
    return [n for n, line in enumerate(path.read_text().splitlines(), 1) if MARK.search(line)]


#: Guides whose examples drive pyACL's own calls loosely, as pyACL programs do (their
#: results unpacked without the types mypy wants): run, but not type-checked.
UNTYPED_PAGES = {"docs/simulator.md", "docs/interop.md"}


def _doc_blocks() -> ModuleType:
    path = HERE.parent / ".ci" / "doc_blocks.py"
    spec = importlib.util.spec_from_file_location("doc_blocks", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def readme_examples() -> list[str]:
    """The README's Python examples, then those of the site's guides (see above)."""
    examples = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL)
    for block in _doc_blocks().all_blocks():
        page = block.path.relative_to(HERE.parent).as_posix()
        if (
            page.startswith("docs/")
            and page not in UNTYPED_PAGES
            and block.language in ("python", "py")
            and block.kind in ("run", "fragment")
        ):
            examples.append(block.text)
    return examples


def as_module(example: str) -> str:
    """An example as a module mypy can check; fragments get a harness (see module doc)."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(example, "<example>", "exec", flags=flags)
    top_level_await = any(
        isinstance(node, (ast.Await, ast.AsyncWith, ast.AsyncFor))
        for statement in tree.body
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for node in ast.walk(statement)
    )
    defined = set(dir(builtins)) | {"aclasync"}
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else defined).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    prelude = ["from typing import Any", "import aclasync", "import aclasync.sim"]
    prelude += [f"{name}: Any = None" for name in sorted(used - defined)]
    body = example
    if top_level_await:
        body = "async def _example() -> None:\n" + textwrap.indent(example, "    ")
    return "\n".join(prelude) + "\n\n" + body


def test_the_fixture_marks_the_misuses_it_makes() -> None:
    assert len(marked_lines(FIXTURE)) >= 10


def test_mypy_reports_exactly_the_marked_misuses_of_device_acl(tmp_path: Path) -> None:
    errors = mypy_errors(tmp_path, FIXTURE)[FIXTURE.resolve()]
    assert sorted(set(errors)) == marked_lines(FIXTURE)


def test_the_readme_examples_type_check(tmp_path: Path) -> None:
    examples = readme_examples()
    assert len(examples) >= 5
    files = []
    for index, example in enumerate(examples):
        path = tmp_path / f"readme_example_{index}.py"
        path.write_text(as_module(example))
        files.append(path)
    errors = mypy_errors(tmp_path, *files)
    reported = {path.name: lines for path, lines in errors.items() if lines}
    assert reported == {}


def test_the_harness_types_a_fragments_free_names_any() -> None:
    module = as_module("async with aclasync.open_device(0) as dev:\n    print(dev, image)\n")
    assert "image: Any = None" in module
    assert "dev: Any" not in module
    assert "async def _example() -> None:" in module
