"""pyACL's Python surface as data: the table ``surface.json`` and what it says.

The table is generated from pyACL's open-source C++ wrappers (hicann/runtime,
``python/pyACL/``) by ``tools/pyacl_surface.py``: one row per function of ``acl``,
``acl.rt``, ``acl.mdl`` and ``acl.util`` with its ``PyArg_ParseTuple`` format and the
shape of what it returns (``ret``, ``(int, ret)``, ``(dict, ret)``, ``str | None`` ...).
The typing protocol of ``aclasync._pyacl.backend`` and the strict simulator are built
from it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = [
    "NAMESPACES",
    "PyFunction",
    "format_units",
    "functions",
    "names",
    "source",
    "split_shape",
]

#: The namespaces the table covers, in order.
NAMESPACES = ("acl", "acl.rt", "acl.mdl", "acl.util")


@dataclass(frozen=True)
class PyFunction:
    """One function of pyACL, as its C++ wrapper defines it."""

    namespace: str
    name: str
    wrapper: str
    file: str | None
    c_function: str | None
    #: The ``PyArg_ParseTuple`` format; None when the wrapper parses no arguments (it
    #: then takes any positional arguments and ignores them).
    format: str | None
    #: The C variables the format fills, in snake case (None when nothing is parsed).
    params: tuple[str, ...] | None
    #: What it returns: ``ret`` (an aclError), ``int``, ``(int, ret)``, ``(dict, ret)``...
    returns: str | None
    build: tuple[str, ...]
    releases_gil: bool
    #: A preprocessor symbol the method table lists it under (``USE_MDL``), or None.
    condition: str | None

    @property
    def api(self) -> str:
        """The full Python name, e.g. ``"acl.rt.create_stream"``."""
        return f"{self.namespace}.{self.name}"

    @property
    def arity(self) -> tuple[int, int | None]:
        """``(required, maximum)`` positional arguments; maximum None: any number."""
        if self.format is None:
            return 0, None
        units, required = format_units(self.format)
        return required, len(units)


def format_units(fmt: str) -> tuple[list[str], int]:
    """Split a ``PyArg_ParseTuple`` format into one unit per Python argument.

    Returns ``(units, required)``: ``"ki|s"`` gives ``(["k", "i", "s"], 2)``. A unit is
    a code with its modifiers (``"s#"``, ``"O!"``) or a parenthesised sub-format.
    """
    units: list[str] = []
    required: int | None = None
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c in ":;":
            break
        if c == "|":
            required = len(units)
            i += 1
            continue
        if c == "$" or c.isspace():
            i += 1
            continue
        if c == "(":
            depth, j = 0, i
            while j < len(fmt):
                depth += (fmt[j] == "(") - (fmt[j] == ")")
                j += 1
                if depth == 0:
                    break
            units.append(fmt[i:j])
            i = j
            continue
        j = i + 1
        if c == "e" and j < len(fmt):  # "es", "et" and their "#" forms
            j += 1
        while j < len(fmt) and fmt[j] in "#!&*":
            j += 1
        units.append(fmt[i:j])
        i = j
    return units, len(units) if required is None else required


def split_shape(shape: str) -> list[str]:
    """The elements of a return shape: ``"(dict | None, ret)"`` -> ``["dict | None", "ret"]``.

    A shape that is not a tuple is one element.
    """
    if shape.startswith("(") and shape.endswith(")"):
        return [part.strip() for part in shape[1:-1].split(",")]
    return [shape]


@functools.cache
def _table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("surface.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


@functools.cache
def functions() -> tuple[PyFunction, ...]:
    """Every function of the table, in table order (conditional ones included)."""
    rows = []
    for row in _table()["functions"]:
        params = row["params"]
        rows.append(
            PyFunction(
                **{
                    **row,
                    "params": None if params is None else tuple(params),
                    "build": tuple(row["build"]),
                }
            )
        )
    return tuple(rows)


@functools.cache
def names(namespace: str) -> tuple[str, ...]:
    """The names of *namespace* in every build of pyACL (no conditional ones)."""
    if namespace not in NAMESPACES:
        raise ValueError(f"unknown namespace {namespace!r}; expected one of {NAMESPACES}")
    return tuple(f.name for f in functions() if f.namespace == namespace and f.condition is None)


def source() -> dict[str, Any]:
    """Where the table comes from: repository, path and commit of the wrapper sources."""
    return dict(_table()["source"])
