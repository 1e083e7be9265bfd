"""Ray's NPU detection stays quiet where there is no ``acl`` to detect with, and only there.

Ray's ``NPUAcceleratorManager.get_current_node_accelerator_type()`` logs "Failed to
detect NPU type." with a traceback whenever ``import acl`` fails. ``aclasync.ray``
filters out exactly that record, for exactly that cause.
"""

from __future__ import annotations

import importlib.machinery
import logging
import sys
import types
from collections.abc import Iterator

import pytest
from ray._private.accelerators.npu import NPUAcceleratorManager

import aclasync.ray  # noqa: F401 - importing it installs the filter
from aclasync._ray_logging import NPU_DETECTION_LOGGER, quiet_npu_detection


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """What the NPU detection logger lets through (its filters run before handlers)."""
    logger = logging.getLogger(NPU_DETECTION_LOGGER)
    handler = _Records()
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def _broken_acl() -> types.ModuleType:
    """An ``acl`` that imports but cannot name its chip: a real error to report."""
    acl = types.ModuleType("acl")
    acl.__spec__ = importlib.machinery.ModuleSpec("acl", loader=None)

    def get_soc_name() -> str:
        raise RuntimeError("driver not loaded")

    acl.get_soc_name = get_soc_name  # type: ignore[attr-defined]
    return acl


def test_no_acl_means_no_traceback(
    monkeypatch: pytest.MonkeyPatch, records: list[logging.LogRecord]
) -> None:
    monkeypatch.setitem(sys.modules, "acl", None)  # `import acl` fails, as without CANN
    assert NPUAcceleratorManager.get_current_node_accelerator_type() is None
    assert records == []


def test_an_acl_that_fails_is_still_reported(
    monkeypatch: pytest.MonkeyPatch, records: list[logging.LogRecord]
) -> None:
    monkeypatch.setitem(sys.modules, "acl", _broken_acl())
    assert NPUAcceleratorManager.get_current_node_accelerator_type() is None
    (record,) = records
    assert record.getMessage() == "Failed to detect NPU type."
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


def test_other_records_of_that_logger_pass(
    monkeypatch: pytest.MonkeyPatch, records: list[logging.LogRecord]
) -> None:
    monkeypatch.setitem(sys.modules, "acl", None)
    logger = logging.getLogger(NPU_DETECTION_LOGGER)
    logger.error("something else went wrong")
    try:
        import acl  # noqa: F401
    except ImportError:
        logger.exception("another message about the same failure")
    assert [r.getMessage() for r in records] == [
        "something else went wrong",
        "another message about the same failure",
    ]


def test_where_acl_imports_ray_logging_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger(NPU_DETECTION_LOGGER)
    monkeypatch.setattr(logger, "filters", [])
    monkeypatch.setitem(sys.modules, "acl", _broken_acl())
    assert quiet_npu_detection() is False
    assert logger.filters == []
    monkeypatch.setitem(sys.modules, "acl", None)
    assert quiet_npu_detection() is True
    assert quiet_npu_detection() is True  # once only
    assert len(logger.filters) == 1
