"""The documentation site documents every public name, and every one has a docstring.

Two checks. The docstrings are read from the package itself: every name a public
module exports (its ``__all__``), and every public method and property of the classes
among them, has one. The site is built as ``.ci/run`` builds it (``python -m sphinx -n
-W --keep-going``: any warning fails), and its inventory, ``objects.inv``, must hold an
anchor for each of those names (``aclasync.Stream.synchronize``,
``aclasync.sim.create``, ``aclasync.ray.dispatch``...). The build needs the ``docs``
extra, which the ``test`` extra includes: without Sphinx the test fails rather than
skips, so that a missing install cannot pass for a documented API.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import pkgutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import aclasync

ROOT = Path(__file__).resolve().parents[1]
#: The public modules: the package, and each module of it whose name has no underscore.
PUBLIC_MODULES = ("aclasync", "aclasync.ray", "aclasync.sim", "aclasync.testing")


def public_names() -> Iterator[tuple[str, object]]:
    """``(dotted name, object)`` for every name of a public module's ``__all__``."""
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            yield f"{module_name}.{name}", getattr(module, name)


def public_members(cls: type) -> Iterator[tuple[str, object]]:
    """Methods and properties of *cls* that aclasync defines, with their raw objects."""
    if issubclass(cls, enum.Enum):
        return
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or not owner.__module__.startswith("aclasync"):
            continue
        raw = vars(owner)[name]
        if isinstance(raw, (staticmethod, classmethod)):
            raw = raw.__func__
        if isinstance(raw, property) or inspect.isroutine(raw):
            yield name, raw


def documented_objects() -> Iterator[tuple[str, object]]:
    """Every public name, then every public method and property of a public class."""
    for dotted, value in public_names():
        yield dotted, value
        if inspect.isclass(value):
            for name, raw in public_members(value):
                yield f"{dotted}.{name}", raw


def test_the_public_modules_are_the_ones_the_site_documents() -> None:
    found = {"aclasync"} | {
        info.name
        for info in pkgutil.walk_packages(aclasync.__path__, "aclasync.")
        if not any(part.startswith("_") for part in info.name.split("."))
    }
    assert found == set(PUBLIC_MODULES)
    pages = {path.stem for path in (ROOT / "docs" / "api").glob("*.rst")}
    assert {name.rpartition(".")[2] for name in PUBLIC_MODULES} <= pages


def test_every_public_name_method_and_property_has_a_docstring() -> None:
    missing = []
    for dotted, value in documented_objects():
        if not (inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, property)):
            continue  # data: documented on the site (the next test), not by a docstring
        if not inspect.getdoc(value):
            missing.append(dotted)
    assert missing == []


def inventory(html: Path) -> set[str]:
    """The Python objects Sphinx's ``objects.inv`` in *html* has anchors for."""
    raw = (html / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):  # four header lines, then zlib-compressed entries
        header_end = raw.index(b"\n", header_end) + 1
    assert raw.startswith(b"# Sphinx inventory version 2")
    names = set()
    for line in zlib.decompress(raw[header_end:]).decode().splitlines():
        name, role = line.split(" ", 2)[:2]
        if role.startswith("py:"):
            names.add(name)
    return names


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("sphinx") is None:
        pytest.fail("Sphinx is missing: install the docs extra (the test extra includes it)")
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q"]
    done = subprocess.run(
        [*command, "-b", "html", str(ROOT / "docs"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"the site's build warned or failed:\n{done.stderr}"
    return out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_site_builds_without_a_warning_and_anchors_every_public_name(
    built_site: Path,
) -> None:
    anchors = inventory(built_site)
    assert {"aclasync.Stream.synchronize", "aclasync.sim.create", "aclasync.ray.dispatch"} <= (
        anchors
    )
    missing = sorted(dotted for dotted, _ in documented_objects() if dotted not in anchors)
    assert missing == []
    assert {"aclasync", "aclasync.sim", "aclasync.ray", "aclasync.testing"} <= anchors
