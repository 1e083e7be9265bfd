"""The Ray examples, run as a user runs them, each on its own local Ray cluster."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
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


@pytest.fixture
def ray_root() -> Iterator[Path]:
    """A Ray root for an example's run (short: Ray's socket paths live below it)."""
    root = Path(tempfile.mkdtemp(prefix="aclray"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_refused(command: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    """Run an example that must refuse its options, with *root* as its Ray root."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_TMPDIR": str(root)}
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, env=env, timeout=90
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--actors", "0"], "--actors must be >= 1, got 0"),
        (["--in-flight", "0"], "--in-flight must be >= 1, got 0"),
        (["--items", "-3"], "--items must be >= 1, got -3"),
        (["--kernel-ms", "-1"], "--kernel-ms must be finite and >= 0, got -1.0"),
        (["--kernel-ms", "nan"], "--kernel-ms must be finite and >= 0, got nan"),
        (["--kernel-ms", "1e308"], "--kernel-ms must be finite and >= 0, got 1e+308"),
    ],
)
def test_the_ray_pipeline_example_refuses_bad_options_before_ray_starts(
    ray_root: Path, option: list[str], says: str
) -> None:
    done = _run_refused([str(EXAMPLE), "--items", "5", *option], ray_root)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == f"ray_pipeline.py: error: {says}", done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert not (ray_root / "ray").exists()  # Ray never started


@pytest.mark.timeout(120)
def test_the_serve_example_says_in_one_line_that_its_port_is_taken(ray_root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [str(SERVE_EXAMPLE), "--requests", "5", "--port", str(port)]
        done = _run_refused(command, ray_root)
    assert done.returncode == 1, done.stdout + done.stderr
    said = f"ray_serve_app.py: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert done.stderr.splitlines()[-1] == said, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert not (ray_root / "ray").exists()  # Ray never started
    done = _run_refused([str(SERVE_EXAMPLE), "--port", "70000"], ray_root)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--port must be 0 (any free port) to 65535, got 70000" in done.stderr
    for ms in ("nan", "1e308"):
        done = _run_refused([str(SERVE_EXAMPLE), "--model-ms", ms], ray_root)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "--model-ms must be finite and >= 0" in done.stderr
    assert not (ray_root / "ray").exists()
