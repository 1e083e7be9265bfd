#!/usr/bin/env python3
"""Write ``aclasync/_pyacl/backend.py``: pyACL's surface table as typing protocols.

Every function the table lists for ``acl``, ``acl.rt``, ``acl.mdl`` and ``acl.util``
(except those a build flag adds) becomes a protocol method: its parameters come from
its ``PyArg_ParseTuple`` format (``k``, ``i``, ``I`` ... -> ``int``, ``s`` -> ``str``,
``O`` -> ``Any``; after ``|``: optional), all positional-only as pyACL takes no keyword
arguments, and its return type from the table's shape (``(int, ret)`` ->
``tuple[int, int]``, ``(dict | None, ret)`` -> ``tuple[dict[str, Any] | None, int]``).

Usage::

    python tools/pyacl_protocol.py            # rewrite the module from the table
    python tools/pyacl_protocol.py --check    # exit 1 if the module is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aclasync._pyacl.surface import PyFunction, format_units, functions, source, split_shape

__all__ = ["BACKEND_MODULE", "docstring", "main", "render_module"]

BACKEND_MODULE = Path(__file__).resolve().parents[1] / "aclasync" / "_pyacl" / "backend.py"
LINE = 100

_INT_CODES = set("bBhHiIlkLKn")
_PARAM_TYPES = {"f": "float", "d": "float", "s": "str", "z": "str | None", "y": "bytes"}
_RESULT_TYPES = {
    "ret": "int",
    "int": "int",
    "float": "float",
    "str": "str",
    "bytes": "bytes",
    "bool": "bool",
    "None": "None",
    "dict": "dict[str, Any]",
    "list": "list[Any]",
    "tuple": "tuple[Any, ...]",
    "ndarray": "np.ndarray[Any, Any]",
}
_CLASSES = (
    ("acl.rt", "AclRt"),
    ("acl.mdl", "AclMdl"),
    ("acl.util", "AclUtil"),
)

#: The submodules ``AclBackend`` has as properties: name, protocol, what it holds.
_NAMESPACES = (
    ("rt", "AclRt", "devices, contexts, streams, events, memory and callbacks"),
    ("mdl", "AclMdl", "offline models, their descriptions and datasets"),
    ("util", "AclUtil", "host pointers of Python data, and raw threads"),
)

_HEADER = '''"""pyACL's Python surface as typing protocols. Generated: do not edit by hand.

``python tools/pyacl_protocol.py`` writes this module from ``surface.json``, the table
of pyACL's functions read from its open-source wrappers (hicann/runtime, python/pyACL,
commit {commit}); ``tests/test_pyacl_surface.py`` checks that it is current.

``AclBackend`` is the ``acl`` module as the type checker sees it: ``Device.acl`` of a
native device has this type, so a call that pyACL does not have, or a result unpacked
in the wrong shape (``stream: int = acl.rt.create_stream()``), is a type error. The
arguments are positional-only because pyACL's functions take no keyword arguments.
A function the table marks as parsing no arguments is typed as taking none (pyACL
accepts and ignores any).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

__all__ = ["AclBackend", "AclMdl", "AclRt", "AclUtil"]
'''


def _param_type(unit: str) -> str:
    if unit.startswith("("):
        return "tuple[Any, ...]"
    if unit[0] in _INT_CODES:
        return "int"
    return _PARAM_TYPES.get(unit[0], "Any")


def _element_type(element: str) -> str:
    kinds = [_RESULT_TYPES.get(kind.strip(), "Any") for kind in element.split("|")]
    return "Any" if "Any" in kinds else " | ".join(dict.fromkeys(kinds))


def result_type(shape: str | None) -> str:
    """The Python type of a table shape: ``"(int, ret)"`` -> ``"tuple[int, int]"``."""
    if shape is None:
        return "Any"
    elements = [_element_type(e) for e in split_shape(shape)]
    if shape.startswith("("):
        return f"tuple[{', '.join(elements)}]"
    return elements[0]


def parameters(function: PyFunction) -> list[str]:
    """``name: type`` for each argument, then ``/`` (nothing for a no-argument call)."""
    if function.format is None:
        return []
    units, required = format_units(function.format)
    names = list(function.params or ())
    out = []
    for index, unit in enumerate(units):
        name = names[index] if index < len(names) else f"arg{index}"
        default = " = ..." if index >= required else ""
        out.append(f"{name}: {_param_type(unit)}{default}")
    return [*out, "/"] if out else []


def docstring(function: PyFunction) -> list[str]:
    """The method's docstring lines: the C function it wraps, what it returns, the GIL."""
    if function.c_function:
        words = f"Wraps ``{function.c_function}``"
    else:
        words = "A helper of pyACL's own (no ACL call)"
    if function.returns:
        words += f"; returns ``{function.returns}``"
    if function.releases_gil:
        words += "; releases the GIL while it runs"
    text = f'        """{words}."""'
    if len(text) <= LINE:
        return [text]
    first, _, rest = words.partition("; ")
    return [f'        """{first};', f"        {rest}.", '        """']


def _method(function: PyFunction) -> list[str]:
    params = ["self", *parameters(function)]
    head, tail = f"    def {function.name}(", f") -> {result_type(function.returns)}:"
    body = docstring(function)
    one_line = head + ", ".join(params) + tail
    if len(one_line) <= LINE:
        return [one_line, *body]
    inner = "        " + ", ".join(params)
    if len(inner) <= LINE:
        return [head, inner, "    " + tail, *body]
    return [head, *(f"        {p}," for p in params), "    " + tail, *body]


def _protocol(name: str, namespace: str, rows: list[PyFunction]) -> list[str]:
    lines = ["", "", f"class {name}(Protocol):"]
    lines.append(f'    """``{namespace}``: {len(rows)} functions."""')
    lines.append("")
    for index, function in enumerate(rows):
        lines.extend(([""] if index else []) + _method(function))
    return lines


def render_module() -> str:
    """The source of ``aclasync/_pyacl/backend.py`` for the table in the package."""
    rows = [f for f in functions() if f.condition is None]
    lines = [_HEADER.format(commit=(source().get("commit") or "unknown")[:12]).rstrip("\n")]
    for namespace, name in _CLASSES:
        lines.extend(_protocol(name, namespace, [f for f in rows if f.namespace == namespace]))
    top = [f for f in rows if f.namespace == "acl"]
    lines.extend(["", "", "class AclBackend(Protocol):"])
    lines.append(f'    """``acl``: its {len(top)} functions and the submodules above."""')
    lines.append("")
    for index, (attribute, protocol, what) in enumerate(_NAMESPACES):
        lines.extend([""] if index else [])
        lines.extend(["    @property", f"    def {attribute}(self) -> {protocol}:"])
        lines.append(f'        """``acl.{attribute}``: {what}."""')
    for function in top:
        lines.extend(["", *_method(function)])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare; write nothing")
    args = parser.parse_args(argv)
    text = render_module()
    if args.check:
        current = BACKEND_MODULE.read_text(encoding="utf-8")
        print(f"{BACKEND_MODULE}: {'up to date' if current == text else 'stale'}")
        return 0 if current == text else 1
    BACKEND_MODULE.write_text(text, encoding="utf-8")
    print(f"wrote {BACKEND_MODULE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
