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
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sample_models import SPECS

import aclasync.sim

HERE = Path(__file__).parent
REPO = HERE.parents[1]


@pytest.mark.parametrize("sample", sorted(SPECS))
def test_model_sample_runs_unchanged(tmp_path: Path, sample: str) -> None:
    model = tmp_path / "model.om"
    model.write_text(json.dumps({"format": "aclasync.sim.model", "version": 1, **SPECS[sample]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACLASYNC_SIM_")}
    env["ACLASYNC_SIM_STRICT"] = "1"
    paths = [aclasync.sim.acl_module_path(), str(HERE), str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    completed = subprocess.run(
        [sys.executable, str(HERE / sample), str(model)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "sample passed" in completed.stdout
