"""``doctor`` and ``info`` on a runtime that answers otherwise than pyACL does.

A failing ``acl.init()``, a result of another shape, a call missing or one that raises:
each is a diagnosis naming the call and what it gave (a failing item of the doctor's
report, which goes on; one error line from ``info``), never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import Faulty

import aclasync._cli._doctor
import aclasync._cli._info
import aclasync.sim
from aclasync._cli import main
from aclasync.testing import assert_no_leaked_threads

pytestmark = pytest.mark.slow

Fault = Callable[[Any], dict[str, Any]]


@pytest.fixture(autouse=True)
def _no_backend_variable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("ACLASYNC_BACKEND", raising=False)
    yield
    assert_no_leaked_threads()  # every device the doctor set, it reset, whatever failed


def _raises(*args: Any) -> Any:
    raise RuntimeError("EE1001: internal error")


def _use(monkeypatch: pytest.MonkeyPatch, fault: Fault) -> None:
    """Make *fault*'s replacements of the strict simulator the native backend of
    ``doctor`` and ``info``."""
    strict = aclasync.sim.create(device_count=2, strict=True)
    faulty = Faulty(strict, **fault(strict))

    def resolve(name: str) -> tuple[Any, str]:
        return faulty, name

    monkeypatch.setattr(aclasync._cli._doctor, "resolve_backend", resolve)
    monkeypatch.setattr(aclasync._cli._info, "resolve_backend", resolve)


def _doctor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, dict[str, Any]]:
    """Run the doctor on the native backend; its status, text and JSON report."""
    path = tmp_path / "report.json"
    status = main(["doctor", "--backend", "native", "--json", str(path)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert "verdict" in captured.out  # the whole report, whatever failed
    return status, captured.out, json.loads(path.read_text())


def _failure_lines(out: str) -> list[str]:
    return [" ".join(line.split()) for line in out.splitlines() if line.startswith("  FAIL")]


# -- acl.init() ------------------------------------------------------------------------


def test_a_failing_init_fails_the_doctor_with_its_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # It was called and its status dropped: "all passed", exit 0, no word of it.
    _use(monkeypatch, lambda acl: {"init": lambda *config: 500001})
    status, out, report = _doctor(tmp_path, capsys)
    assert status == 1
    assert "init      acl.init() gave 500001 (ACL_ERROR_FAILURE)" in out
    assert "FAIL init acl.init() gave 500001 (ACL_ERROR_FAILURE)" in _failure_lines(out)
    assert "1 runtime query failed" in out
    assert report["init"] == {"status": 500001, "name": "ACL_ERROR_FAILURE"}
    assert report["failures"] == [
        {"item": "init", "message": "acl.init() gave 500001 (ACL_ERROR_FAILURE)"}
    ]
    assert report["summary"]["runtime_failures"] == 1


def test_a_runtime_initialised_already_is_fine_for_the_doctor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _use(monkeypatch, lambda acl: {"init": lambda *config: 100002})
    status, out, report = _doctor(tmp_path, capsys)
    assert status == 0
    assert "init      acl.init() gave 100002 (ACL_ERROR_REPEAT_INITIALIZE)" in out
    assert report["failures"] == []


@pytest.mark.parametrize("as_json", [False, True])
def test_a_failing_init_fails_info_after_its_report(
    as_json: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _use(monkeypatch, lambda acl: {"init": lambda *config: 500001})
    assert main(["info", "--backend", "native", *(["--json"] if as_json else [])]) == 1
    captured = capsys.readouterr()
    if as_json:
        assert json.loads(captured.out)["init"] == {"status": 500001, "name": "ACL_ERROR_FAILURE"}
    else:
        assert "init      acl.init() gave 500001 (ACL_ERROR_FAILURE)" in captured.out
    assert captured.err == (
        "aclasync: error: acl.init() gave 500001 (ACL_ERROR_FAILURE): "
        "the runtime did not initialise\n"
    )


# -- results of another shape, calls missing -------------------------------------------

SHAPES: dict[str, tuple[Fault, str]] = {
    "soc-bytes": (
        lambda acl: {"get_soc_name": lambda: b"Ascend910B3"},
        "FAIL soc acl.get_soc_name() returned b'Ascend910B3', not the str pyACL returns",
    ),
    "memory-none": (
        lambda acl: {"rt_get_mem_info": lambda attr: (None, None, 0)},
        "FAIL memory (device 0) acl.rt.get_mem_info(ACL_HBM_MEM) on device 0 returned "
        "(None, None, 0): free and total are not byte counts",
    ),
    "create-stream-bare": (
        lambda acl: {"rt_create_stream": lambda: 0},
        "FAIL limits (streams) acl.rt.create_stream() returned 0; pyACL returns (handle, ret)",
    ),
    "stream-count-bare": (
        lambda acl: {"rt_get_stream_available_num": lambda: 5},
        "FAIL limits (streams) acl.rt.get_stream_available_num() returned 5; "
        "pyACL returns (count, ret)",
    ),
    "create-stream-missing": (
        lambda acl: {"rt_create_stream": None},
        "FAIL limits (streams) the runtime has no acl.rt.create_stream",
    ),
}


@pytest.mark.parametrize("case", list(SHAPES))
def test_an_answer_of_another_shape_is_a_failing_item_of_the_doctor(
    case: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # Each was a TypeError or AttributeError traceback (bytes in the JSON, None / 2**30,
    # an int unpacked, a missing create_stream in the limit probe).
    fault, expected = SHAPES[case]
    _use(monkeypatch, fault)
    status, out, report = _doctor(tmp_path, capsys)
    assert status == 1
    assert any(line.startswith(expected) for line in _failure_lines(out)), out
    item = expected.split(" acl.")[0].split(" the runtime")[0].removeprefix("FAIL ")
    assert item in [failure["item"] for failure in report["failures"]]


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            {"get_soc_name": lambda: b"Ascend910B3"},
            "acl.get_soc_name() returned b'Ascend910B3', not the str pyACL returns",
        ),
        (
            {"rt_get_run_mode": lambda: ("HOST", 0)},
            "acl.rt.get_run_mode() returned ('HOST', 0): 'HOST' is not the int pyACL gives",
        ),
    ],
    ids=["soc-bytes", "run-mode-str"],
)
def test_an_answer_of_another_shape_is_one_error_line_of_info(
    fault: dict[str, Any],
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _use(monkeypatch, lambda acl: fault)
    assert main(["info", "--backend", "native", "--json"]) == 1
    assert capsys.readouterr().err == f"aclasync: error: {expected}\n"


# -- calls that raise ------------------------------------------------------------------

RAISING = {
    "get_mem_info": ("rt_get_mem_info", "memory (device 0)", "acl.rt.get_mem_info(1)"),
    "set_device": ("rt_set_device", "memory (device 0)", "acl.rt.set_device(0)"),
    "create_stream": ("rt_create_stream", "limits (streams)", "acl.rt.create_stream()"),
    "create_event": ("rt_create_event", "limits (events)", "acl.rt.create_event()"),
    "get_soc_name": ("get_soc_name", "soc", "acl.get_soc_name()"),
}


@pytest.mark.parametrize("call", list(RAISING))
def test_a_call_that_raises_fails_its_item_and_the_report_goes_on(
    call: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # It ended the whole report with one line not naming the call, and no JSON.
    replaced, item, shown = RAISING[call]
    _use(monkeypatch, lambda acl: {replaced: _raises})
    status, out, report = _doctor(tmp_path, capsys)
    assert status == 1
    message = f"{shown} raised RuntimeError: EE1001: internal error"
    assert f"FAIL {item} {message}" in _failure_lines(out)
    assert {"item": item, "message": message} in report["failures"]
    assert len(report["checks"]) == 10  # the checks still ran
