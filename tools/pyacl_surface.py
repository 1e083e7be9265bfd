#!/usr/bin/env python3
"""Read pyACL's open-source C++ wrappers and write its Python surface as a table.

pyACL (``import acl``) is a CPython extension whose sources are public (hicann/runtime,
``python/pyACL/``). Its method tables name every Python function, each function's
``PyArg_ParseTuple`` call fixes its arguments and its ``Py_BuildValue`` calls fix what
it returns. This script reads a checkout of that folder and writes, for the namespaces
``acl``, ``acl.rt``, ``acl.mdl`` and ``acl.util``, one row per function:

- ``namespace``, ``name``: where Python finds it (``acl.rt``, ``create_stream``);
- ``wrapper``, ``file``: the C++ function behind it and the file defining it;
- ``c_function``: the first ACL C call it makes (``aclrtCreateStream``), or null;
- ``format``: its ``PyArg_ParseTuple`` format, or null when it parses no arguments
  (it then accepts any positional arguments and ignores them); ``params``: the C
  variables that format fills, in snake case (null likewise);
- ``returns``: the shape of its result, from its ``Py_BuildValue`` calls (``ret``,
  ``(int, ret)``, ``(dict | None, ret)``, ``str``, ``None`` ...), where ``ret`` is an
  ``aclError`` status;
- ``build``: the raw ``Py_BuildValue`` formats (or constructors) the shape comes from;
- ``releases_gil``: whether it releases the GIL around its C call;
- ``condition``: the preprocessor symbol its table entry depends on (``USE_MDL``), or null.

Usage::

    python tools/pyacl_surface.py DIR [--commit SHA] [--out FILE]   # write the table
    python tools/pyacl_surface.py --check DIR [--commit SHA]        # diff, exit 1 if stale

``DIR`` is a checkout of ``python/pyACL``. The commit is taken from ``git`` when ``DIR``
is in a git work tree, else from ``--commit``. The default ``--out`` is the table the
package ships, ``aclasync/_pyacl/surface.json``.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_TABLE", "NAMESPACES", "generate", "main", "render", "scan"]

DEFAULT_TABLE = Path(__file__).resolve().parents[1] / "aclasync" / "_pyacl" / "surface.json"
#: The namespaces tabled, in order; other submodules are listed by name only.
NAMESPACES = ("acl", "acl.rt", "acl.mdl", "acl.util")
TABLE_FORMAT = "aclasync.pyacl-surface"

_INT_CODES = set("bBhHiIlkLKnc")
_SIMPLE = {"f": "float", "d": "float", "s": "str", "z": "str", "U": "str", "y": "bytes"}
_STATUS = re.compile(r"ACL_ERROR_\w+|ACL_SUCCESS")
_IDENT = re.compile(r"[A-Za-z_]\w*")


# -- C++ text helpers ---------------------------------------------------------------


def strip_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments, keeping strings and line numbers."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """Index of the quote closing the string or character literal opened at *start*."""
    i = start + 1
    while i < len(text) and text[i] != text[start]:
        i += 2 if text[i] == "\\" else 1
    return i


def _closing(text: str, start: int, pair: str) -> int:
    """Index of the bracket closing the one at *start*, skipping strings."""
    opener, closer = pair[0], pair[1]
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i = _string_end(text, i)
        elif c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced {pair!r} at offset {start}")


def split_args(text: str) -> list[str]:
    """Split a C argument list at its top-level commas."""
    parts, depth, current, quote = [], 0, [], ""
    for c in text:
        if quote:
            current.append(c)
            quote = "" if c == quote and (len(current) < 2 or current[-2] != "\\") else quote
            continue
        if c in "\"'":
            quote = c
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(c)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def conditions(text: str) -> list[str | None]:
    """The preprocessor condition in force on each line (``USE_MDL``, ``!X``), or None."""
    stack: list[str] = []
    result: list[str | None] = []
    for line in text.splitlines():
        directive = line.strip()
        match = re.match(r"#\s*(ifdef|ifndef|if|else|elif|endif)\b\s*(.*)", directive)
        if match:
            kind, rest = match.groups()
            if kind in ("ifdef", "if"):
                stack.append(rest.strip())
            elif kind == "ifndef":
                stack.append("!" + rest.strip())
            elif kind in ("else", "elif") and stack:
                stack[-1] = ("!" + stack[-1]) if kind == "else" else rest.strip()
            elif kind == "endif" and stack:
                stack.pop()
        result.append(" && ".join(stack) or None)
    return result


# -- what the sources define --------------------------------------------------------


class Sources:
    """Every ``.cpp``/``.h`` file under a folder, comments stripped, with lookups."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = {
            p.relative_to(root).as_posix(): strip_comments(p.read_text(encoding="utf-8"))
            for p in sorted(root.rglob("*"))
            if p.suffix in (".cpp", ".h", ".cc") and p.is_file()
        }
        self.functions: dict[str, tuple[str, str]] = {}  # name -> (file, body)
        for path, text in self.files.items():
            for match in re.finditer(r"\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*\{", text):
                if match.group(1) in ("if", "for", "while", "switch", "catch"):
                    continue
                open_at = match.end() - 1
                body = text[open_at + 1 : _closing(text, open_at, "{}")]
                self.functions.setdefault(match.group(1), (path, body))

    def tables(self) -> dict[str, list[tuple[str, str, str | None]]]:
        """``PyMethodDef`` arrays: table -> [(python name, wrapper, condition)]."""
        found: dict[str, list[tuple[str, str, str | None]]] = {}
        for text in self.files.values():
            lines = conditions(text)
            for match in re.finditer(r"PyMethodDef\s+(\w+)\s*\[\s*\]\s*=\s*\{", text):
                start = match.end() - 1
                body_end = _closing(text, start, "{}")
                entries = found.setdefault(match.group(1), [])
                entry = re.compile(r'\{\s*"(\w+)"\s*,\s*(?:\(\s*PyCFunction\s*\)\s*)?(\w+)\s*,')
                for item in entry.finditer(text, start + 1, body_end):
                    line = text.count("\n", 0, item.start())
                    entries.append((item.group(1), item.group(2), lines[line]))
        return found

    def namespaces(self) -> tuple[dict[str, str], list[str]]:
        """``{namespace: table}`` for the tabled namespaces, and every submodule's name."""
        getters: dict[str, str] = {}
        result: dict[str, str] = {}
        submodules: list[str] = []
        for text in self.files.values():
            getter = r"PyMethodDef\s*\*\s*(\w+)\s*\(\s*(?:void)?\s*\)\s*\{\s*return\s+(\w+)\s*;"
            getters.update(re.findall(getter, text))
        for text in self.files.values():
            for module_def in re.finditer(r"PyModuleDef\s+\w+\s*=\s*\{", text):
                start = module_def.end() - 1
                fields = split_args(text[start + 1 : _closing(text, start, "{}")])
                if '"acl"' in fields:
                    result["acl"] = next(f for f in fields[2:] if _IDENT.fullmatch(f))
            call = r'AddSubModule\s*\(\s*\w+\s*,\s*"(\w+)"\s*,\s*(\w+)\s*\(\s*\)\s*\)'
            for name, getter_name in re.findall(call, text):
                submodules.append(name)
                if f"acl.{name}" in NAMESPACES and getter_name in getters:
                    result[f"acl.{name}"] = getters[getter_name]
        return result, submodules


# -- one wrapper --------------------------------------------------------------------


def _statements(body: str, keyword: str) -> Iterator[tuple[int, str]]:
    """``(offset, expression)`` of each ``keyword <expression>;`` in *body*."""
    for match in re.finditer(rf"\b{keyword}\b", body):
        i, depth = match.end(), 0
        while i < len(body) and not (body[i] == ";" and depth == 0):
            if body[i] in "\"'":
                i = _string_end(body, i)
            depth += body[i] in "([{"
            depth -= body[i] in ")]}"
            i += 1
        yield match.start(), body[match.end() : i].strip()


def _assigned(var: str, body: str, before: int) -> str | None:
    """The expression last assigned to *var* before offset *before*."""
    value = None
    for match in re.finditer(rf"\b{re.escape(var)}\s*=(?!=)", body[:before]):
        end = body.find(";", match.end())
        value = body[match.end() : end].strip()
    return value


def snake_case(name: str) -> str:
    """``deviceId`` -> ``device_id``; a Python keyword gets a trailing underscore."""
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1\2", name).lower()
    return snake + "_" if keyword.iskeyword(snake) else snake


def _callee(expr: str) -> str | None:
    match = re.match(r"(?:\(\s*\w+\s*\*?\s*\)\s*)?([A-Za-z_]\w*)\s*\(", expr.strip())
    return match.group(1) if match else None


class Wrapper:
    """What one wrapper function parses and returns."""

    def __init__(self, sources: Sources, name: str) -> None:
        self.sources = sources
        self.file, self.body = sources.functions[name]

    def parse_format(self) -> str | None:
        match = re.search(r'PyArg_ParseTuple\w*\s*\(\s*\w+\s*,\s*"([^"]*)"', self.body)
        return match.group(1) if match else None

    def parameters(self) -> list[str] | None:
        """The C variables ``PyArg_ParseTuple`` fills, in snake case (None: no parsing)."""
        match = re.search(r"PyArg_ParseTuple\w*\s*\(", self.body)
        if match is None:
            return None
        call = self.body[match.end() : _closing(self.body, match.end() - 1, "()")]
        names = [a[1:].strip() for a in split_args(call)[2:] if a.startswith("&")]
        return [snake_case(name) for name in names]

    def c_function(self) -> str | None:
        match = re.search(r"\b(acl[a-z]*[A-Z]\w*)\s*\(", self.body)
        return match.group(1) if match else None

    def shapes(self) -> tuple[list[tuple[str, ...]], list[str]]:
        """Every non-error result shape, and the raw formats they come from."""
        shapes: list[tuple[str, ...]] = []
        raw: list[str] = []
        if "Py_RETURN_NONE" in self.body:
            shapes.append(("None",))
            raw.append("Py_None")
        for offset, expr in _statements(self.body, "return"):
            for shape, source in self._result(expr, self.body, offset, depth=0):
                if shape not in shapes:
                    shapes.append(shape)
                if source not in raw:
                    raw.append(source)
        return shapes, raw

    def _result(
        self, expr: str, body: str, offset: int, depth: int
    ) -> Iterator[tuple[tuple[str, ...], str]]:
        if expr in ("nullptr", "NULL", "") or depth > 3:
            return
        if expr.startswith("Py_BuildValue"):
            fmt, *args = split_args(expr[expr.index("(") + 1 : expr.rindex(")")])
            fmt = fmt.strip('"')
            yield self._build(fmt, args, body, offset), fmt
        elif _IDENT.fullmatch(expr):
            if expr == "Py_None":
                yield ("None",), "Py_None"
                return
            value = _assigned(expr, body, offset)
            if value is not None:
                yield from self._result(value, body, offset, depth + 1)
        else:
            kind = self._object(expr, body, offset)
            yield (kind,), _callee(expr) or expr

    def _build(self, fmt: str, args: list[str], body: str, offset: int) -> tuple[str, ...]:
        codes = [c for c in fmt if c not in " \t,:()[]{}#&!"]
        kinds = []
        for code, arg in zip(codes, args, strict=False):
            if code in _INT_CODES:
                kinds.append("ret" if self._is_status(arg, body) else "int")
            elif code in "ONS":
                kinds.append(self._object(arg, body, offset))
            elif code in "sz" and self._may_be_null(arg, body):
                kinds.append("str | None")  # Py_BuildValue turns a NULL char* into None
            else:
                kinds.append(_SIMPLE.get(code, "object"))
        return tuple(kinds) if kinds else ("None",)

    @staticmethod
    def _may_be_null(arg: str, body: str) -> bool:
        return bool(re.search(rf"\bchar\s*\*\s*{re.escape(arg)}\b", body))

    def _is_status(self, arg: str, body: str) -> bool:
        if _STATUS.fullmatch(arg):
            return True
        return _IDENT.fullmatch(arg) is not None and bool(
            re.search(rf"\baclError\s+{re.escape(arg)}\b", body)
        )

    def _object(self, expr: str, body: str, offset: int, depth: int = 0) -> str:
        """The Python type an object-valued C expression evaluates to."""
        expr = expr.strip()
        if expr == "Py_None":
            return "None"
        if _IDENT.fullmatch(expr) and depth < 4:
            value = _assigned(expr, body, offset)
            return "object" if value is None else self._object(value, body, offset, depth + 1)
        callee = _callee(expr) or ""
        helper = self.sources.functions.get(callee)
        if helper is not None and depth < 4:
            kinds = {
                self._object(value, helper[1], at, depth + 1)
                for at, value in _statements(helper[1], "return")
                if value not in ("nullptr", "NULL")
            }
            if len(kinds) == 1:
                return kinds.pop()
        lowered = callee.lower()
        for needle, kind in (
            ("pyarray", "ndarray"),
            ("dict", "dict"),
            ("list", "list"),
            ("tuple", "tuple"),
            ("pyunicode", "str"),
            ("pybytes", "bytes"),
            ("pylong", "int"),
            ("pyfloat", "float"),
            ("pybool", "bool"),
        ):
            if needle in lowered:
                return kind
        return "object"

    def releases_gil(self) -> bool:
        return "PyEval_SaveThread" in self.body or "Py_BEGIN_ALLOW_THREADS" in self.body


def render(shapes: list[tuple[str, ...]]) -> str | None:
    """One shape string for all of a function's results (element-wise unions)."""
    if not shapes:
        return None
    if len({len(s) for s in shapes}) == 1:
        merged = [
            " | ".join(sorted(dict.fromkeys(s[i] for s in shapes), key=lambda k: k == "None"))
            for i in range(len(shapes[0]))
        ]
        return merged[0] if len(merged) == 1 else f"({', '.join(merged)})"
    return " | ".join(s[0] if len(s) == 1 else f"({', '.join(s)})" for s in shapes)


# -- the table ----------------------------------------------------------------------


def scan(root: Path) -> dict[str, Any]:
    """Read the wrapper sources under *root* and return the table (without a commit)."""
    sources = Sources(root)
    tables = sources.tables()
    namespaces, submodules = sources.namespaces()
    rows: list[dict[str, Any]] = []
    for namespace in NAMESPACES:
        table = namespaces.get(namespace)
        if table is None:
            raise SystemExit(f"pyacl_surface: no method table for {namespace} under {root}")
        for name, wrapper_name, condition in tables[table]:
            row: dict[str, Any] = {"namespace": namespace, "name": name, "wrapper": wrapper_name}
            if wrapper_name in sources.functions:
                wrapper = Wrapper(sources, wrapper_name)
                shapes, raw = wrapper.shapes()
                row.update(
                    file=wrapper.file,
                    c_function=wrapper.c_function(),
                    format=wrapper.parse_format(),
                    params=wrapper.parameters(),
                    returns=render(shapes),
                    build=raw,
                    releases_gil=wrapper.releases_gil(),
                )
            else:  # declared in a table, defined elsewhere: nothing more is known
                row.update(dict.fromkeys(("file", "c_function", "format", "params", "returns")))
                row.update(build=[], releases_gil=False)
            row["condition"] = condition
            rows.append(row)
    return {
        "format": TABLE_FORMAT,
        "version": 1,
        "source": {"repository": "hicann/runtime", "path": "python/pyACL", "commit": None},
        "submodules": [f"acl.{name}" for name in submodules],
        "functions": rows,
    }


def _git_commit(root: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except OSError:
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def generate(root: Path, commit: str | None = None) -> dict[str, Any]:
    """The table for *root*, with its commit (given, else from git, else null)."""
    table = scan(root)
    table["source"]["commit"] = commit or _git_commit(root)
    return table


def dumps(table: dict[str, Any]) -> str:
    """The table as JSON text: one function a line, so that diffs stay readable."""
    head = {key: value for key, value in table.items() if key != "functions"}
    lines = [json.dumps(head, indent=1)[:-2] + ',\n "functions": [']
    rows = [" " + json.dumps(row, separators=(", ", ": ")) for row in table["functions"]]
    lines.append(",\n".join(rows))
    lines.append(" ]\n}\n")
    return "\n".join(lines)


def _differences(old: dict[str, Any], new: dict[str, Any]) -> Iterable[str]:
    if old.get("source", {}).get("commit") and new["source"]["commit"] is None:
        new = {**new, "source": {**new["source"], "commit": old["source"]["commit"]}}
    for field in sorted((set(old) | set(new)) - {"functions"}):
        if old.get(field) != new.get(field):
            yield f"{field}: {old.get(field)!r} -> {new.get(field)!r}"
    before = {f"{r['namespace']}.{r['name']}": r for r in old.get("functions", [])}
    after = {f"{r['namespace']}.{r['name']}": r for r in new["functions"]}
    for api in sorted(set(before) | set(after)):
        if api not in after:
            yield f"{api}: removed"
        elif api not in before:
            yield f"{api}: added {after[api]}"
        elif before[api] != after[api]:
            for field in sorted(f for f in after[api] if before[api].get(f) != after[api][f]):
                yield f"{api}: {field} {before[api].get(field)!r} -> {after[api][field]!r}"
    if [k for k in before if k in after] != [k for k in after if k in before]:
        yield "the order of the functions changed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a checkout of python/pyACL")
    parser.add_argument("--commit", help="the sources' commit (default: from git)")
    parser.add_argument("--out", type=Path, default=DEFAULT_TABLE, help="the table to write")
    parser.add_argument("--check", action="store_true", help="compare with --out; write nothing")
    args = parser.parse_args(argv)
    table = generate(args.source, args.commit)
    if args.check:
        old = json.loads(args.out.read_text(encoding="utf-8"))
        problems = list(_differences(old, table))
        for problem in problems:
            print(problem)
        rows = len(table["functions"])
        print(f"{args.out}: {'differs' if problems else 'up to date'} ({rows} functions)")
        return 1 if problems else 0
    args.out.write_text(dumps(table), encoding="utf-8")
    print(f"wrote {len(table['functions'])} functions to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
