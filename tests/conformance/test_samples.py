"""Sample-style pyACL programs run unchanged, as their own process, against each backend.

For the simulator, ``aclasync.sim.acl_module_path()`` on ``PYTHONPATH`` makes ``import
acl`` resolve to the process-wide simulated runtime, strict (``ACLASYNC_SIM_STRICT=1``:
pyACL's own surface and nothing else), which is how users point their CI at it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import aclasync.sim

HERE = Path(__file__).parent
REPO = HERE.parents[1]
SAMPLES = ["sample_memory.py"]


def backends() -> list[str]:
    """The simulator always; CANN's ``acl`` when this machine has it."""
    return ["sim"] if importlib.util.find_spec("acl") is None else ["sim", "native"]


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_runs_unchanged(tmp_path, backend, sample):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACLASYNC_SIM_")}
    paths = [str(REPO)]
    if backend == "sim":
        paths.insert(0, aclasync.sim.acl_module_path())
        env["ACLASYNC_SIM_STRICT"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    completed = subprocess.run(
        [sys.executable, str(HERE / sample)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "sample passed" in completed.stdout
