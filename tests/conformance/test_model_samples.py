"""Sample-style model programs, one per dynamic mode, run unchanged as their own process.

Each sample only does ``import acl``; ``aclasync.sim.acl_module_path()`` on
``PYTHONPATH`` makes that the process-wide simulated runtime, strict
(``ACLASYNC_SIM_STRICT=1``: pyACL's surface and nothing else). The model each loads is a
spec file written here (``sample_models.SPECS``) whose ``"fn"`` names a body in
``sample_models``: a closed ``.om`` format stands in for it on the simulator, so these
run on the simulator only (a CANN host runs the same programs on models built by ATC).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_models import SPECS
from sample_runner import HERE, REPO, run_sample


@pytest.mark.parametrize("sample", sorted(SPECS))
def test_model_sample_runs_unchanged(tmp_path: Path, sample: str) -> None:
    model = tmp_path / "model.om"
    model.write_text(json.dumps({"format": "aclasync.sim.model", "version": 1, **SPECS[sample]}))
    run_sample(sample, str(model), sim=True, paths=[str(HERE), str(REPO)])
