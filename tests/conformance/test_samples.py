"""Sample-style pyACL programs run unchanged, as their own process, against each backend.

For the simulator, ``aclasync.sim.acl_module_path()`` on ``PYTHONPATH`` makes ``import
acl`` resolve to the process-wide simulated runtime, strict (``ACLASYNC_SIM_STRICT=1``:
pyACL's own surface and nothing else), which is how users point their CI at it.
"""

from __future__ import annotations

import importlib.util

import pytest
from sample_runner import REPO, run_sample

SAMPLES = ["sample_memory.py"]


def backends() -> list[str]:
    """The simulator always; CANN's ``acl`` when this machine has it."""
    return ["sim"] if importlib.util.find_spec("acl") is None else ["sim", "native"]


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_runs_unchanged(tmp_path, backend, sample):
    run_sample(sample, sim=backend == "sim", paths=[str(REPO)])
