"""Sample-style pyACL programs run unchanged, as their own process, against each backend.

For the simulator a one-line ``acl`` module on ``PYTHONPATH`` makes ``import acl``
resolve to ``aclasync.sim.acl``, which is how users point their CI at the simulator.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parents[1]
SAMPLES = ["sample_memory.py"]
SHIM = "import sys\nfrom aclasync.sim import acl\n\nsys.modules[__name__] = acl\n"


def backends() -> list[str]:
    """The simulator always; CANN's ``acl`` when this machine has it."""
    return ["sim"] if importlib.util.find_spec("acl") is None else ["sim", "native"]


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_runs_unchanged(tmp_path, backend, sample):
    env = dict(os.environ)
    paths = [str(REPO)]
    if backend == "sim":
        (tmp_path / "acl.py").write_text(SHIM)
        paths.insert(0, str(tmp_path))
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
