"""Checks of a pyACL runtime against what aclasync relies on, with pyACL calls alone.

``aclasync doctor`` runs them on the runtime it finds, and ``tests/conformance`` runs
the same checks against the simulator (strict and not) and, with fault-injected
backends, checks that each one fails when the runtime differs. The package imports
nothing of aclasync but pyACL's vocabulary (``aclasync._pyacl``), so the checks see
the runtime as a plain pyACL program does.
"""

from __future__ import annotations

from ._reports import Gate as Gate
from ._reports import ReportThread as ReportThread

__all__ = ["Gate", "ReportThread"]
