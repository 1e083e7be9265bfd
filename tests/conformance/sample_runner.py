"""Running a sample-style pyACL program unchanged, as its own process, as a user's CI does.

On the simulator, ``aclasync.sim.acl_module_path()`` on ``PYTHONPATH`` makes ``import
acl`` resolve to the process-wide simulated runtime, strict (``ACLASYNC_SIM_STRICT=1``:
pyACL's own surface and nothing else); otherwise the program gets CANN's ``acl``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import aclasync.sim

HERE = Path(__file__).parent
REPO = HERE.parents[1]


def run_sample(sample: str, *args: str, sim: bool, paths: list[str]) -> None:
    """Run ``HERE/sample`` with *args* and *paths* on ``PYTHONPATH``; assert it passed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACLASYNC_SIM_")}
    if sim:
        paths = [aclasync.sim.acl_module_path(), *paths]
        env["ACLASYNC_SIM_STRICT"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    completed = subprocess.run(
        [sys.executable, str(HERE / sample), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "sample passed" in completed.stdout
