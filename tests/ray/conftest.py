"""A real local Ray cluster (2 CPUs, 4 NPUs as a resource) for the tests in this folder."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from cluster_support import ProcessTree


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """Start a cluster for the module; at the end, check none of its processes is left.

    Its session directory (Ray's logs) lives in a temporary directory of its own (short:
    Ray's socket paths live below it), removed at the end.
    """
    temp_dir = Path(tempfile.mkdtemp(prefix="aclray"))
    try:
        with ProcessTree(os.getpid()) as tree:
            ray.init(
                num_cpus=2,
                resources={"NPU": 4},
                include_dashboard=False,
                configure_logging=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}},
                _temp_dir=str(temp_dir),
            )
            try:
                yield
            finally:
                ray.shutdown()
            # Every process the cluster started is gone.
            left = tree.left()
        assert not left, f"Ray processes left behind: {sorted(left)}"
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
