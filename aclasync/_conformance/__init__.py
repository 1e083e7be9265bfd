"""Checks of a pyACL runtime against what aclasync relies on, with pyACL calls alone.

``aclasync doctor`` runs them on the runtime it finds, and ``tests/conformance`` runs
the same checks against the simulator (strict and not) and, with fault-injected
backends, checks that each one fails when the runtime differs. The package imports
nothing of aclasync but pyACL's vocabulary (``aclasync._pyacl``), so the checks see
the runtime as a plain pyACL program does.
"""

from __future__ import annotations

from ._checks import CHECKS as CHECKS
from ._checks import FAIL as FAIL
from ._checks import PASS as PASS
from ._checks import SKIP as SKIP
from ._checks import Check as Check
from ._checks import CheckResult as CheckResult
from ._checks import run_check as run_check
from ._checks import run_checks as run_checks
from ._limits import probe_limits as probe_limits
from ._reports import Gate as Gate
from ._reports import ReportThread as ReportThread

__all__ = [
    "CHECKS",
    "FAIL",
    "PASS",
    "SKIP",
    "Check",
    "CheckResult",
    "Gate",
    "ReportThread",
    "probe_limits",
    "run_check",
    "run_checks",
]
