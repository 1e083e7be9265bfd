"""Keeping Ray's NPU detection quiet where there is no NPU runtime to detect.

When a Ray node starts with an ``NPU`` resource (``ray.init(resources={"NPU": 4})``),
Ray asks ``NPUAcceleratorManager.get_current_node_accelerator_type()`` for the chip's
name, twice (for the node's labels and for its resources). That method does
``import acl`` and, when the import fails, logs ``"Failed to detect NPU type."`` at
ERROR level with the whole traceback, although nothing is wrong: the resource was
declared by hand, and a machine without CANN simply has no ``acl`` to ask. A run on the
simulator printed two such tracebacks before its correct result.

``quiet_npu_detection`` adds a filter to that one logger which drops exactly that
record when its exception says that the module ``acl`` does not exist. Every other
record passes, among them the same message for any other failure (an ``acl`` that
imports but cannot name the chip), so real errors still show. Where ``import acl``
works, nothing is installed at all.
"""

from __future__ import annotations

import importlib.util
import logging

__all__ = ["NPU_DETECTION_LOGGER", "quiet_npu_detection"]

#: The logger of Ray's NPU accelerator manager (``ray/_private/accelerators/npu.py``).
NPU_DETECTION_LOGGER = "ray._private.accelerators.npu"
_MESSAGE = "Failed to detect NPU type."


class _NoAclToDetect(logging.Filter):
    """Drop "Failed to detect NPU type." when it only means that ``acl`` is absent."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _MESSAGE or not record.exc_info:
            return True
        error = record.exc_info[1]
        return not (isinstance(error, ModuleNotFoundError) and error.name == "acl")


def quiet_npu_detection() -> bool:
    """Install the filter (once) if ``import acl`` cannot work here; return whether it is.

    Does nothing when a module ``acl`` is importable: Ray's detection then has a
    runtime to ask, and whatever it logs is worth reading.
    """
    try:
        if importlib.util.find_spec("acl") is not None:
            return False
    except (ImportError, ValueError):  # a broken or half-imported acl: leave it to Ray
        return False
    logger = logging.getLogger(NPU_DETECTION_LOGGER)
    if not any(isinstance(existing, _NoAclToDetect) for existing in logger.filters):
        logger.addFilter(_NoAclToDetect())
    return True
