"""The device worker's shape, checked on its source (docs/design.md, "Threads, and who
owns what"): every piece of state has one owner, so no class of the worker's modules
declares a field that code outside the class assigns; and no module of them is over
400 lines, so each can be read in one sitting.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import aclasync

PACKAGE_DIR = Path(aclasync.__file__).parent
WORKER_MODULES = ("_worker", "_watcher", "_points", "_waiting_thread", "_lanes", "_jobs")


def _tree(module: str) -> ast.Module:
    return ast.parse((PACKAGE_DIR / f"{module}.py").read_text())


def _declared_fields() -> dict[str, str]:
    """Field name -> the class declaring it, over the worker's modules: ``self.x = ...``
    in a method, an entry of ``__slots__``, or an annotated field in the class body."""
    fields: dict[str, str] = {}
    for module in WORKER_MODULES:
        for cls in ast.walk(_tree(module)):
            if not isinstance(cls, ast.ClassDef):
                continue
            names = [
                node.attr
                for node in ast.walk(cls)
                if isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ]
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names.append(node.target.id)
                elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
                ):
                    names += [e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)]
            for name in names:
                fields.setdefault(name, f"{module}.{cls.name}")
    return fields


def _stores(tree: ast.AST) -> list[tuple[int, str, str]]:
    """``(line, owner, attribute)`` of every assignment to an attribute of a name."""
    return [
        (node.lineno, node.value.id, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
    ]


def _foreign_stores(module: str) -> list[tuple[int, str]]:
    """``(line, attribute)`` of every assignment to an attribute of anything but ``self``
    (an attribute of an expression, ``a.b.c = ...``, counts too)."""
    tree = _tree(module)
    stores = [(line, attr) for line, owner, attr in _stores(tree) if owner != "self"]
    return stores + [
        (node.lineno, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and not isinstance(node.value, ast.Name)
    ]


def test_the_field_finder_sees_the_lane_and_the_worker() -> None:
    fields = _declared_fields()
    assert fields["loan"] == "_lanes.Lane"
    assert fields["quick"] == "_lanes.Lane"
    assert fields["_inbox"] == "_worker.DeviceWorker"
    assert fields["waiter"] == "_jobs.Call"  # a dataclass field


@pytest.mark.parametrize("module", WORKER_MODULES)
def test_no_class_sets_a_field_another_class_declares(module: str) -> None:
    fields = _declared_fields()
    foreign = [
        f"{module}.py:{line} sets {attr}, a field of {fields[attr]}"
        for line, attr in _foreign_stores(module)
        if attr in fields
    ]
    assert not foreign


@pytest.mark.parametrize("module", WORKER_MODULES)
def test_no_worker_module_is_over_400_lines(module: str) -> None:
    lines = (PACKAGE_DIR / f"{module}.py").read_text().count("\n")
    assert lines <= 400, f"{module}.py has {lines} lines"


def test_the_outside_changes_a_lane_through_its_methods() -> None:
    """The event loop's side and the handles count and store through ``Lane`` methods."""
    fields = {name for name, owner in _declared_fields().items() if owner == "_lanes.Lane"}
    for path in PACKAGE_DIR.rglob("*.py"):
        for line, owner, attr in _stores(ast.parse(path.read_text())):
            assert owner != "lane" or attr not in fields, f"{path.name}:{line} sets {attr}"
