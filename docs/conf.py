"""Sphinx configuration of aclasync's documentation site.

Build it (after ``pip install -e '.[docs]' -c requirements/pins.txt``) with::

    python -m sphinx -n -W --keep-going -b html docs build/docs

``-n`` makes every cross-reference that resolves nowhere a warning and ``-W`` makes a
warning fail the build. The build reaches no network: references to other projects'
objects (the standard library, anyio, numpy, Ray, pytest) are linked by
``_external_reference`` below, from the table ``EXTERNAL``, instead of intersphinx
inventories downloaded at build time.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, TypeVar

from docutils import nodes
from sphinx import addnodes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aclasync  # noqa: E402

project = "aclasync"
author = "the aclasync authors"
copyright = "the aclasync authors"
release = version = aclasync.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxcontrib_trio",
    "myst_parser",
    "sphinx_design",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"aclasync {release}"
html_static_path: list[str] = []
templates_path: list[str] = []

# MyST: ::: fences for directives (so that the code blocks inside them stay plain
# ``` blocks, which .ci/doc_blocks.py runs), and anchors for headings down to ###.
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# autodoc. sphinxcontrib-trio marks async functions and async context managers through
# autodoc's class-based documenters, which Sphinx 9 keeps behind this switch.
autodoc_use_legacy_class_based = True
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_default_options: dict[str, Any] = {}
python_use_unqualified_type_names = True
add_module_names = False
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

# aclasync.ray needs Ray, which the docs extra does not install: stand in for it.
autodoc_mock_imports = [name for name in ("ray",) if importlib.util.find_spec(name) is None]

#: Where other projects document their objects: a dotted-name prefix, and the address
#: of the page (``{name}`` is the full dotted name) that has an anchor for it.
EXTERNAL = {
    "anyio": "https://anyio.readthedocs.io/en/stable/api.html#{name}",
    "numpy": "https://numpy.org/doc/stable/reference/generated/{name}.html",
    "pytest": "https://docs.pytest.org/en/stable/reference/reference.html#{name}",
    "ray": "https://docs.ray.io/en/latest/ray-core/api/doc/{name}.html",
    "trio": "https://trio.readthedocs.io/en/stable/reference-core.html#{name}",
}
PYTHON_DOCS = "https://docs.python.org/3/library/"

#: Public modules whose names ``_public_name`` maps private paths to.
PUBLIC_MODULES = ("aclasync", "aclasync.sim", "aclasync.ray", "aclasync.testing")


def _python_address(target: str) -> str | None:
    """The standard library's page for *target* (``threading.Thread``, ``int``)."""
    head = target.partition(".")[0]
    if "." not in target and hasattr(builtins, target):
        value = getattr(builtins, target)
        if isinstance(value, type) and issubclass(value, BaseException):
            return f"{PYTHON_DOCS}exceptions.html#{target}"
        if isinstance(value, type):
            return f"{PYTHON_DOCS}stdtypes.html#{target}"
        return f"{PYTHON_DOCS}functions.html#{target}"
    if head not in sys.stdlib_module_names:
        return None
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # the longest prefix that is a module
        module = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            return f"{PYTHON_DOCS}{module}.html#{target}"
    return None


def _public_name(target: str) -> str | None:
    """The public name of ``aclasync._device.Device`` (``aclasync.Device``), if any."""
    if not target.startswith("aclasync.") or "._" not in f".{target}":
        return None
    name = target.rpartition(".")[2]
    for module_name in PUBLIC_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if name in getattr(module, "__all__", ()):
            return f"{module_name}.{name}"
    return None


def _type_variable(target: str) -> bool:
    """Whether *target* names a ``TypeVar`` (``aclasync._device.AclT``): shown as text."""
    module_name, _, name = target.rpartition(".")
    try:
        value = getattr(importlib.import_module(module_name), name, None)
    except (ImportError, ValueError):
        return False
    return isinstance(value, TypeVar)


def _external_reference(
    app: Any, env: Any, node: Any, contnode: nodes.Element
) -> nodes.Element | None:
    """Resolve a Python reference Sphinx found no target for, or leave it (a warning)."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if _type_variable(target):
        return contnode
    if target.startswith("_pytest."):  # pytest's classes live in _pytest, named pytest.X
        target = "pytest." + target.rpartition(".")[2]
    if target.startswith("np."):  # numpy, as annotations name it
        target = "numpy." + target.removeprefix("np.")
    public = _public_name(target)
    if public is not None:
        domain = env.get_domain("py")
        node["reftarget"] = public
        return domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], public, node, contnode
        )
    address = _python_address(target)
    if address is None:
        prefix = target.partition(".")[0]
        template = EXTERNAL.get(prefix)
        address = template.format(name=target) if template else None
    if address is None:
        return None
    reference = nodes.reference("", "", internal=False, refuri=address, reftitle=target)
    reference.append(contnode)
    return reference


def _drop_private_returns(app: Any, doctree: nodes.document) -> None:
    """Leave out a return annotation that names a private class.

    ``open_device`` returns an opener (``_DeviceOpener[SimAcl]``) whose only use is
    ``async with`` or ``await``; its entry says ``async with open_device(...) as dev``.
    """
    for returns in list(doctree.findall(addnodes.desc_returns)):
        if returns.astext().removeprefix(" -> ").startswith("_"):
            returns.parent.remove(returns)


def setup(app: Any) -> None:
    app.connect("doctree-read", _drop_private_returns)
    # Before Python's own resolver, which accepts built-in names without a link.
    app.connect("missing-reference", _external_reference, priority=400)
