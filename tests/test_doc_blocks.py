"""The documentation's code blocks are marked as the runner wants, and the runner checks.

``.ci/doc_blocks.py run`` (a step of ``.ci/run``) runs every block of README.md,
examples/README.md and docs/ in fresh virtualenvs; that takes a minute, so it is not run
here. What is checked here, in well under a second: every block is runnable or marked
with a kind and a reason, the marks are well formed, and every block's syntax is right.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_blocks", ROOT / ".ci" / "doc_blocks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


doc_blocks = _load_runner()


def _blocks(tmp_path: Path, text: str) -> list[object]:
    path = tmp_path / "doc.md"
    path.write_text(text)
    blocks: list[object] = doc_blocks.parse(path)
    return blocks


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(doc_blocks.DocBlockError) as caught:
        doc_blocks.check(_blocks(tmp_path, text), whole=False)
    return str(caught.value)


def test_every_block_of_the_documentation_is_runnable_or_marked_with_a_reason() -> None:
    blocks = doc_blocks.all_blocks()
    doc_blocks.check(blocks)  # raises DocBlockError naming the first bad block
    documents = {block.path.relative_to(ROOT).as_posix() for block in blocks}
    assert {"README.md", "examples/README.md", "docs/simulator.md"} <= documents
    assert all(block.reason for block in blocks if block.marked)


def test_docs_in_nested_folders_are_included(tmp_path: Path) -> None:
    (tmp_path / "docs" / "guides").mkdir(parents=True)
    (tmp_path / "docs" / "guides" / "intro.md").write_text("# x\n")
    (tmp_path / "README.md").write_text("# y\n")
    assert doc_blocks.documents(tmp_path) == [
        tmp_path / "README.md",
        tmp_path / "docs" / "guides" / "intro.md",
    ]


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    (ci,) = [block for block in doc_blocks.all_blocks() if block.kind == "ci"]
    assert "-m pytest" in ci.text
    assert "'.[test]' -c requirements/pins.txt" in ci.text
    ci_script = (ROOT / ".ci" / "run").read_text()
    assert "doc_blocks.py command ci" in ci_script
    assert "doc_blocks.py run" in ci_script


def test_the_setup_block_is_the_readme_install() -> None:
    (setup,) = [block for block in doc_blocks.all_blocks() if block.kind == "setup"]
    assert setup.commands == [
        "python3 -m venv .venv && .venv/bin/python -m pip install -e . && .venv/bin/aclasync demo"
    ]


def test_a_mark_without_a_reason_is_an_error(tmp_path: Path) -> None:
    text = "<!-- doc-block: skip -->\n```python\nimport acl\n```\n"
    assert "the mark needs a reason" in _error(tmp_path, text)


def test_an_unmarked_block_that_cannot_run_is_an_error(tmp_path: Path) -> None:
    assert "a plain block cannot run: mark it" in _error(tmp_path, "```\nusage: x\n```\n")
    assert "a toml block cannot run" in _error(tmp_path, "```toml\na = 1\n```\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- doc-block skip — no colon -->\n```sh\nls\n```\n", "malformed mark"),
        ("<!-- doc-block: skip — why -->\n\n```sh\nls\n```\n", "right before"),
        ("<!-- doc-block: skip — why -->\ntext\n```sh\nls\n```\n", "no block after it"),
        ("<!-- doc-block: skip — why -->\n", "no block after it"),
        ("<!-- doc-block: later — why -->\n```sh\nls\n```\n", "unknown kind 'later'"),
        ("<!-- doc-block: skip timeout=5 — why -->\n```sh\nls\n```\n", "skip takes no option"),
        ("<!-- doc-block: run timeout=0 — why -->\n```sh\nls\n```\n", "timeout must be"),
        ("<!-- doc-block: server — why -->\n```sh\nx --port 8\n```\n", "needs port=N"),
        ("<!-- doc-block: client — why -->\n```sh\ncurl x\n```\n", "must follow a server"),
        ("```sh\npython serve.py --port 8000\n```\n", "starts a server: mark it"),
        ("```python\ndef f(:\n```\n", "Python syntax error"),
        ("```sh\nif then\n```\n", "shell syntax error"),
        ("<!-- doc-block: text — data -->\n```json\n{1}\n```\n", "not JSON"),
        ("```sh\nls\n", "unclosed fence"),
    ],
)
def test_the_checker_refuses(tmp_path: Path, text: str, message: str) -> None:
    assert message in _error(tmp_path, text)


def test_a_shell_block_shows_how_to_install_the_extras_it_is_marked_with(
    tmp_path: Path,
) -> None:
    missing = "<!-- doc-block: run extras=ray — needs Ray -->\n```sh\npython x.py\n```\n"
    assert "no pip install in it names them" in _error(tmp_path, missing)
    shown = (
        "<!-- doc-block: run extras=ray — needs Ray -->\n"
        "```sh\npython -m pip install -e '.[ray]'\npython x.py\n```\n"
    )
    doc_blocks.check(_blocks(tmp_path, shown), whole=False)


def test_fragments_may_await_at_the_top_level(tmp_path: Path) -> None:
    text = "<!-- doc-block: fragment — part of main() -->\n```python\nawait f()\n```\n"
    doc_blocks.check(_blocks(tmp_path, text), whole=False)
    assert "Python syntax error" in _error(tmp_path, "```python\nawait f()\n```\n")


def test_markdown_the_site_includes_is_a_document(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text(":::{include} ../NOTES.md\n:::\n")
    (tmp_path / "NOTES.md").write_text("# notes\n")
    (tmp_path / "README.md").write_text("# y\n")
    assert doc_blocks.documents(tmp_path) == [
        tmp_path / "README.md",
        tmp_path / "docs" / "notes.md",
        tmp_path / "NOTES.md",
    ]


def test_a_directive_in_a_backtick_fence_is_an_error(tmp_path: Path) -> None:
    text = "```{note}\n```python\nprint(1)\n```\n```\n"
    assert "write it with a colon fence (:::{note})" in _error(tmp_path, text)


def test_code_in_a_restructuredtext_page_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "api.rst"
    page.write_text("API\n===\n\n.. autoclass:: aclasync.Stream\n   :members:\n")
    doc_blocks.check_rst(tmp_path)  # autodoc directives only: fine
    page.write_text("API\n===\n\nFor example::\n\n    import aclasync\n")
    with pytest.raises(doc_blocks.DocBlockError, match="a block of code in a reStructured"):
        doc_blocks.check_rst(tmp_path)
    page.write_text("API\n===\n\n.. code-block:: python\n\n    import aclasync\n")
    with pytest.raises(doc_blocks.DocBlockError, match="a block of code in a reStructured"):
        doc_blocks.check_rst(tmp_path)
