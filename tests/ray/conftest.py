"""A real local Ray cluster (2 CPUs, 4 NPUs as a resource) for the tests in this folder."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
import ray
from ray_support import ray_processes, ray_processes_left


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """Start a cluster for the module; at the end, check none of its processes is left."""
    before = ray_processes()
    ray.init(
        num_cpus=2,
        resources={"NPU": 4},
        include_dashboard=False,
        configure_logging=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}},
    )
    try:
        yield
    finally:
        ray.shutdown()
    # Every process the cluster started is gone.
    left = ray_processes_left(before)
    assert not left, f"Ray processes left behind: {sorted(left)}"
