"""pyACL's surface as data: the generator, the table it wrote, and the protocol built from it.

``tools/pyacl_surface.py`` reads pyACL's C++ wrappers; CI has no copy of them, so the
generator is exercised on an invented fixture in the same style (``tests/pyacl_fixture``)
and the committed table is checked for what it must say. ``--check DIR`` compares the
table with a real checkout wherever one exists.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aclasync._pyacl import backend, surface

REPO = Path(__file__).parents[1]
FIXTURE = Path(__file__).with_name("pyacl_fixture")
RT_NAMES = Path(__file__).parent / "sim" / "pyacl_rt_names.txt"


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


generator = _tool("pyacl_surface")
protocol_tool = _tool("pyacl_protocol")


def _rows(table: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    fields = ("c_function", "format", "params", "returns", "releases_gil", "condition")
    return {
        f"{row['namespace']}.{row['name']}": tuple(row[f] for f in fields)
        for row in table["functions"]
    }


# -- the generator, on the fixture ----------------------------------------------------


def test_generator_reads_tables_formats_and_return_shapes() -> None:
    table = generator.generate(FIXTURE, commit="0123abcd")
    assert table["source"] == {
        "repository": "hicann/runtime",
        "path": "python/pyACL",
        "commit": "0123abcd",
    }
    assert table["submodules"] == ["acl.rt", "acl.extra", "acl.mdl", "acl.util"]
    assert _rows(table) == {
        "acl.start": ("aclStartEverything", "|s", ["config"], "ret", False, None),
        "acl.label": ("aclFakeLabel", None, None, "str | None", False, None),
        "acl.shout": (None, "s", ["text"], "None", False, None),
        "acl.rt.make_thing": (
            "aclrtMakeThing",
            "Ii",
            ["size_hint", "kind"],
            "(int, ret)",
            False,
            None,
        ),
        "acl.rt.wait_all": ("aclrtWaitAll", None, None, "ret", True, None),
        "acl.rt.thing_info": ("aclrtThingInfo", "k", ["thing"], "(dict, ret)", False, None),
        "acl.rt.thing_sizes": (
            "aclrtThingSizes",
            "kk",
            ["thing", "count"],
            "(list | None, ret)",
            False,
            None,
        ),
        "acl.rt.thing_count": ("aclrtThingCount", "k", ["thing"], "int", False, None),
        "acl.rt.debug_thing": ("aclrtDebugThing", "k", ["thing"], "ret", False, "WITH_DEBUG"),
        "acl.mdl.open_model": ("aclmdlOpenModel", "s", ["model_path"], "(int, ret)", False, None),
        "acl.util.copy_out": (None, "kk", ["ptr", "size"], "bytes", False, None),
        "acl.util.pin_array": (None, "O", ["in_arg"], "(int, ndarray)", False, None),
        "acl.util.not_defined_here": (None, None, None, None, False, None),
    }
    # acl.extra is a submodule outside the four tabled namespaces: named, not tabled.
    assert not [row for row in table["functions"] if row["namespace"] == "acl.extra"]


def test_check_mode_passes_on_the_same_sources_and_fails_on_a_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "surface.json"
    assert generator.main([str(FIXTURE), "--commit", "0123abcd", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["source"]["commit"] == "0123abcd"
    check = ["--commit", "0123abcd", "--out", str(out)]
    assert generator.main(["--check", str(FIXTURE), *check]) == 0
    assert "up to date (13 functions)" in capsys.readouterr().out

    changed = tmp_path / "changed"
    shutil.copytree(FIXTURE, changed)
    cpp = changed / "rt" / "fake_rt.cpp"
    cpp.write_text(cpp.read_text().replace('"Ii", &sizeHint', '"Ik", &sizeHint'))
    assert generator.main(["--check", str(changed), *check]) == 1
    report = capsys.readouterr().out
    assert "acl.rt.make_thing: format 'Ii' -> 'Ik'" in report
    assert "differs" in report


def test_the_written_table_is_one_function_a_line(tmp_path: Path) -> None:
    out = tmp_path / "surface.json"
    generator.main([str(FIXTURE), "--commit", "0123abcd", "--out", str(out)])
    lines = out.read_text().splitlines()
    assert sum('"namespace": ' in line for line in lines) == 13
    assert json.loads(out.read_text()) == generator.generate(FIXTURE, commit="0123abcd")


# -- the committed table ---------------------------------------------------------------


def test_the_table_names_its_sources_and_covers_four_namespaces() -> None:
    table = json.loads((REPO / "aclasync" / "_pyacl" / "surface.json").read_text())
    assert table["format"] == "aclasync.pyacl-surface"
    assert table["source"]["repository"] == "hicann/runtime"
    assert len(table["source"]["commit"]) == 40
    assert {"acl.rt", "acl.mdl", "acl.util", "acl.media", "acl.op"} <= set(table["submodules"])
    assert {f.namespace for f in surface.functions()} == set(surface.NAMESPACES)


def test_the_acl_rt_part_is_the_reference_list_of_182_names() -> None:
    reference = [
        line.strip()
        for line in RT_NAMES.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert list(surface.names("acl.rt")) == reference


def test_every_row_parses_and_returns_something_known() -> None:
    for function in surface.functions():
        assert function.returns is not None, function.api
        if function.format is None:
            assert function.params is None
            assert function.arity == (0, None)
        else:
            units, required = surface.format_units(function.format)
            assert function.params is not None
            assert len(function.params) >= len(units)
            assert function.arity == (required, len(units))


@pytest.mark.parametrize(
    ("api", "fmt", "returns"),
    [
        ("acl.init", "|s", "ret"),
        ("acl.get_soc_name", None, "str | None"),
        ("acl.rt.create_stream", None, "(int, ret)"),
        ("acl.rt.synchronize_device", None, "ret"),
        ("acl.rt.create_stream_with_config", "ii", "(int, ret)"),
        ("acl.rt.get_mem_info", "i", "(int, int, ret)"),
        ("acl.rt.pointer_get_attributes", "k", "(dict, ret)"),
        ("acl.rt.create_binary", "kk", "int"),
        ("acl.mdl.get_num_inputs", "k", "int"),
        ("acl.mdl.get_first_aipp_info", "Ik", "(dict | None, ret)"),
        ("acl.util.ptr_to_bytes", "kk", "bytes"),
    ],
)
def test_known_functions_are_tabled_as_their_wrappers_define_them(
    api: str, fmt: str | None, returns: str
) -> None:
    found = {f.api: f for f in surface.functions()}[api]
    assert (found.format, found.returns) == (fmt, returns)


def test_names_rejects_an_unknown_namespace() -> None:
    with pytest.raises(ValueError, match=r"acl\.media"):
        surface.names("acl.media")


@pytest.mark.parametrize(
    ("fmt", "units", "required"),
    [("", [], 0), ("ki|s", ["k", "i", "s"], 2), ("s#O!(ii)|k:name", ["s#", "O!", "(ii)", "k"], 3)],
)
def test_format_units(fmt: str, units: list[str], required: int) -> None:
    assert surface.format_units(fmt) == (units, required)


# -- the protocol --------------------------------------------------------------------


def test_the_protocol_module_is_generated_from_the_current_table() -> None:
    text = (REPO / "aclasync" / "_pyacl" / "backend.py").read_text()
    assert text == protocol_tool.render_module(), "run: python tools/pyacl_protocol.py"


PROTOCOLS = {
    "acl": backend.AclBackend,
    "acl.rt": backend.AclRt,
    "acl.mdl": backend.AclMdl,
    "acl.util": backend.AclUtil,
}


@pytest.mark.parametrize("namespace", sorted(PROTOCOLS))
def test_every_protocol_member_is_in_the_table_with_its_arity_and_shape(namespace: str) -> None:
    protocol = PROTOCOLS[namespace]
    table = {f.name: f for f in surface.functions() if f.namespace == namespace}
    members = {
        name: member
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }
    assert set(members) == set(surface.names(namespace))
    for name, member in members.items():
        params = list(inspect.signature(member).parameters.values())[1:]
        assert all(p.kind is p.POSITIONAL_ONLY for p in params), name
        required = sum(p.default is p.empty for p in params)
        low, high = table[name].arity
        assert (required, len(params)) == (low, 0 if high is None else high), name
        shape = table[name].returns
        assert shape is not None
        annotation = inspect.signature(member).return_annotation
        assert annotation == protocol_tool.result_type(shape)
        assert annotation.startswith("tuple[") == shape.startswith("(")


def test_result_types_follow_the_shapes() -> None:
    assert protocol_tool.result_type("ret") == "int"
    assert protocol_tool.result_type("(int, ret)") == "tuple[int, int]"
    assert protocol_tool.result_type("(dict | None, ret)") == "tuple[dict[str, Any] | None, int]"
    assert protocol_tool.result_type("str | None") == "str | None"
    assert protocol_tool.result_type("object") == "Any"
