"""The Ray examples, run as a user runs them, each on its own local Ray cluster."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cluster_support import ProcessTree

EXAMPLE = Path(__file__).parents[2] / "examples" / "ray_pipeline.py"
SERVE_EXAMPLE = EXAMPLE.with_name("ray_serve_app.py")


@pytest.mark.timeout(180)
def test_the_ray_pipeline_example_checks_every_result_and_leaves_nothing() -> None:
    root = Path(tempfile.mkdtemp(prefix="aclray"))  # its Ray root: short socket paths
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_TMPDIR": str(root)}
    try:
        command = [sys.executable, str(EXAMPLE), "--actors", "3", "--items", "45"]
        process = subprocess.Popen(
            [*command, "--kernel-ms", "5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        with ProcessTree(process.pid) as tree:
            stdout, stderr = process.communicate(timeout=150)
        assert process.returncode == 0, stdout + stderr
        assert "verified 45/45 results against the host" in stdout
        # No CANN here: Ray's NPU detection has nothing to detect, and says nothing.
        assert "Failed to detect NPU type" not in stderr
        assert "Traceback" not in stderr
        per_actor = re.findall(r"^actor (\d): (\d+) items", stdout, re.MULTILINE)
        assert len(per_actor) == 3
        assert sum(int(n) for _, n in per_actor) == 45
        assert all(int(n) > 0 for _, n in per_actor)
        npus = re.findall(r"NPU (\d) as device 0", stdout)
        assert sorted(npus) == ["0", "1", "2"]
        assert tree.left() == set()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(240)
def test_the_serve_example_answers_every_request_and_leaves_nothing() -> None:
    # Its own Ray root, so that what the run leaves behind can be seen (and nothing else).
    root = Path(tempfile.mkdtemp(prefix="aclray"))  # short: Ray's socket paths live below
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "RAY_TMPDIR": str(root),
    }
    try:
        process = subprocess.Popen(
            [sys.executable, str(SERVE_EXAMPLE), "--replicas", "2", "--requests", "200"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        with ProcessTree(process.pid) as tree:
            stdout, stderr = process.communicate(timeout=200)
        assert process.returncode == 0, stdout + stderr
        # Ray found the simulator's eight NPUs itself; every answer was checked.
        assert "Ray detected 8 NPUs (Ascend910B3)" in stdout
        assert "verified 225/225 answers against NumPy" in stdout
        assert re.search(r"^200 requests at concurrency 32: [\d,.]+ requests/s, p50 ", stdout, re.M)
        most = re.search(
            r"^most batches in flight on one replica at once: (\d) \(of 4\)", stdout, re.M
        )
        assert most is not None
        assert int(most[1]) >= 2
        npus = re.findall(r"^replica \w+ on NPU (\d):", stdout, re.MULTILINE)
        assert len(set(npus)) == len(npus) == 2
        assert "Traceback" not in stderr
        assert tree.left() == set()
        assert list((root / "ray").glob("session_*")) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)
