"""The layering rules of docs/design.md ("The layers"), checked on the source and in a fresh
interpreter.

- ``aclasync._pyacl`` (pyACL's vocabulary) and ``aclasync._platform`` (what the library's
  threads ask of the operating system) are leaves: they import nothing else of aclasync.
- The simulator imports only itself and those leaves, and no event-loop library.
- The device worker never imports the simulator: it drives whatever backend it is given.
- The library (front end, worker, simulator, ``testing``) never imports the command line
  (``aclasync._cli``: the subcommands and the demo and benchmark runners they drive).
- Only ``aclasync._loop`` imports asyncio, trio or uvloop (the rest goes through anyio),
  but for ``aclasync.ray`` (Ray's asyncio actor loop) and the command line.
- Only ``aclasync.ray`` and the benchmark that drives it import Ray (an optional extra).
- The conformance checks (``aclasync._conformance``, what ``aclasync doctor`` runs) see
  the runtime as a plain pyACL program does: they import nothing of aclasync but the
  vocabulary, and no event-loop library.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_worker_structure import WORKER_MODULES

import aclasync

PACKAGE_DIR = Path(aclasync.__file__).parent
LOOP_LIBRARIES = ("anyio", "asyncio", "trio", "uvloop", "outcome", "sniffio")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line, module)`` for every import in *path*, function-level ones included.

    ``from x import y`` yields both ``x`` and ``x.y``, since ``y`` may be a submodule.
    """
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"


def _sources() -> list[tuple[str, Path]]:
    return sorted((_module_name(p), p) for p in PACKAGE_DIR.rglob("*.py"))


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _violations(rule: str) -> list[str]:
    found = []
    for module, path in _sources():
        for line, target in _imports(path):
            if _breaks(rule, module, target):
                found.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{line} imports {target}")
    return found


def _reaches_out(
    module: str, target: str, own: str, allowed: tuple[str, ...] = (), *, loops: bool = False
) -> bool:
    """Whether *module*, inside *own*, imports *target*: a part of aclasync outside *own*
    and *allowed* (the package root aside), or, with *loops*, an event-loop library."""
    if not _within(module, own):
        return False
    if loops and any(_within(target, lib) for lib in LOOP_LIBRARIES):
        return True
    return (
        _within(target, "aclasync")
        and target != "aclasync"
        and not any(_within(target, part) for part in (own, *allowed))
    )


def _breaks(rule: str, module: str, target: str) -> bool:
    if rule == "vocabulary is a leaf":
        return _reaches_out(module, target, "aclasync._pyacl")
    if rule == "platform helpers are a leaf":
        return _reaches_out(module, target, "aclasync._platform")
    if rule == "sim imports only itself and the leaves":
        leaves = ("aclasync._pyacl", "aclasync._platform")
        return _reaches_out(module, target, "aclasync.sim", leaves, loops=True)
    if rule == "worker never imports sim":
        worker = any(_within(module, f"aclasync.{m}") for m in WORKER_MODULES)
        return worker and _within(target, "aclasync.sim")
    if rule == "library never imports the command line":
        return (
            not _within(module, "aclasync._cli")
            and module != "aclasync.__main__"
            and _within(target, "aclasync._cli")
        )
    if rule == "conformance checks use pyACL alone":
        return _reaches_out(
            module, target, "aclasync._conformance", ("aclasync._pyacl",), loops=True
        )
    if rule == "only aclasync._loop touches asyncio or trio":
        # The rest of the library goes through anyio; aclasync.ray runs in Ray's
        # asyncio actor loop, and the command line picks the loop to run.
        return (
            any(_within(target, lib) for lib in ("asyncio", "trio", "uvloop"))
            and module not in ("aclasync._loop", "aclasync.ray")
            and not _within(module, "aclasync._cli")
        )
    if rule == "only aclasync.ray imports Ray":
        return (
            _within(target, "ray")
            and not _within(module, "aclasync.ray")
            and not module.startswith("aclasync._cli._bench._ray")
        )
    raise AssertionError(rule)


RULES = [
    "vocabulary is a leaf",
    "platform helpers are a leaf",
    "sim imports only itself and the leaves",
    "worker never imports sim",
    "library never imports the command line",
    "only aclasync.ray imports Ray",
    "only aclasync._loop touches asyncio or trio",
    "conformance checks use pyACL alone",
]


@pytest.mark.parametrize("rule", RULES)
def test_layer_rule_holds(rule: str) -> None:
    assert _violations(rule) == []


def test_the_checker_sees_imports_of_every_form(tmp_path: Path) -> None:
    # Guards the checker itself: relative, absolute and function-level imports count.
    sim_dir = PACKAGE_DIR / "sim"
    assert any(t == "aclasync._pyacl.codes" for p in sim_dir.glob("*.py") for _, t in _imports(p))
    cli = PACKAGE_DIR / "_cli" / "__init__.py"
    assert any(_within(t, "aclasync._cli._bench") for _, t in _imports(cli))
    assert _breaks("library never imports the command line", "aclasync._device", "aclasync._cli")
    assert _breaks("sim imports only itself and the leaves", "aclasync.sim._x", "anyio")
    assert not _breaks("sim imports only itself and the leaves", "aclasync.sim._x", "numpy")
    loops = "only aclasync._loop touches asyncio or trio"
    assert _breaks(loops, "aclasync._stream", "trio.lowlevel")
    assert not _breaks(loops, "aclasync._stream", "anyio")


def test_importing_the_simulator_loads_no_front_end_and_no_event_loop_library() -> None:
    code = (
        "import sys, aclasync.sim\n"
        "acl = aclasync.sim.create(device_count=1)\n"
        "assert acl.rt.set_device(0) == 0\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    loaded = [m for m in out if any(_within(m, lib) for lib in LOOP_LIBRARIES)]
    front = [
        m
        for m in out
        if _within(m, "aclasync")
        and m != "aclasync"
        and not (_within(m, "aclasync.sim") or _within(m, "aclasync._pyacl"))
        and m not in ("aclasync._version", "aclasync._platform")
    ]
    assert loaded == []
    assert front == []


def test_the_package_imports_lazily_and_still_exports_everything() -> None:
    code = (
        "import sys, aclasync\n"
        "assert 'aclasync._device' not in sys.modules\n"
        "assert aclasync.open_device.__module__ == 'aclasync._device'\n"
        "assert 'aclasync._device' in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_the_simulator_loads_on_first_use_after_a_plain_import() -> None:
    # As the README writes it: `import aclasync`, then `aclasync.sim.create()`.
    code = (
        "import sys, aclasync\n"
        "assert 'aclasync.sim' not in sys.modules\n"
        "acl = aclasync.sim.create(device_count=1)\n"
        "assert acl.rt.set_device(0) == 0\n"
        "assert aclasync.sim is sys.modules['aclasync.sim']\n"
        "assert 'anyio' not in sys.modules and 'aclasync._device' not in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_import_acl_from_acl_module_path_loads_only_the_simulator() -> None:
    # The acl module of aclasync.sim.acl_module_path() ships with the package (this also
    # runs against the installed wheel) and is as light as the simulator itself.
    import aclasync.sim

    code = (
        "import sys, acl\n"
        "assert type(acl).__module__ == 'aclasync.sim._strict', type(acl)\n"
        "assert acl.rt.get_device_count() == (1, 0)\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [aclasync.sim.acl_module_path(), os.environ.get("PYTHONPATH")])
        ),
        "ACLASYNC_SIM_STRICT": "1",
        "ACLASYNC_SIM_DEVICE_COUNT": "1",
    }
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    modules = out.stdout.split()
    assert "aclasync.sim._as_acl" not in modules  # imported as acl, not as a submodule
    assert [m for m in modules if any(_within(m, lib) for lib in LOOP_LIBRARIES)] == []
    assert [
        m
        for m in modules
        if _within(m, "aclasync")
        and not (_within(m, "aclasync.sim") or _within(m, "aclasync._pyacl"))
        and m not in ("aclasync", "aclasync._version", "aclasync._platform")
    ] == []
