"""Ray detects simulated NPUs itself, and ``NpuActor`` opens the NPU Ray assigned, in both
of Ray's modes.

The cluster is ``ray start --head`` with ``aclasync.sim.acl_module_path()`` on
``PYTHONPATH`` and no ``--resources``: Ray's own NPU detection (``import acl``,
``acl.rt.get_device_count()``, ``acl.get_soc_name()``) finds the simulated cards, and
aclasync inside each actor takes that ``acl`` (strict: pyACL's surface only) for the
native backend.

- default: Ray sets ``ASCEND_RT_VISIBLE_DEVICES`` to the actor's NPUs, which it sees as
  devices 0..n-1.
- ``RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1``: Ray leaves the variable as the
  node had it (here ``3,1,2`` of four cards), so the actor sees the node's devices and
  must find its own by the physical id Ray gives (``get_accelerator_ids()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import ray
from cluster_support import detected_cluster
from ray_support import Squarer

from aclasync.ray import ActorInfo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SOC = "Ascend310B4"  # not the simulator's default: Ray must have asked
CARDS = 4
#: What the node sees: every card (default mode), or 3, 1 and 2 in that order (noset).
MODES: dict[str, dict[str, Any]] = {
    "default": {"noset": False, "visible": None, "npus": (0, 1, 2, 3)},
    "noset": {"noset": True, "visible": "3,1,2", "npus": (3, 1, 2)},
}


@pytest.fixture(scope="module", params=list(MODES))
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    name: str = request.param
    settings = MODES[name]
    with detected_cluster(
        npus=CARDS, soc=SOC, visible=settings["visible"], noset=settings["noset"], strict=True
    ):
        yield name


def test_ray_counts_the_simulated_npus_and_names_their_soc(mode: str) -> None:
    npus = MODES[mode]["npus"]
    resources = ray.cluster_resources()
    assert resources["NPU"] == len(npus)
    assert resources[f"accelerator_type:{SOC}"] == 1
    (node,) = ray.nodes()
    assert node["Labels"]["ray.io/accelerator-type"] == SOC


def test_each_actor_opens_the_npu_ray_assigned_to_it(mode: str) -> None:
    npus = MODES[mode]["npus"]
    actors = [Squarer.remote() for _ in npus]  # backend=None: `import acl` works, native
    try:
        infos: list[ActorInfo] = ray.get([actor.describe.remote() for actor in actors])
    finally:
        for actor in actors:
            ray.kill(actor)
    assert sorted(info.physical_device for info in infos) == sorted(npus)
    assert len({info.pid for info in infos}) == len(npus)
    for info in infos:
        assert info.backend_name == "native"
        assert info.soc_name == SOC
        assert info.ray_npus == (info.physical_device,)
        if mode == "default":
            # Ray narrowed the visible set to the actor's NPU: device 0 of one.
            assert info.visible_devices == (info.physical_device,)
            assert (info.device_id, info.device_count) == (0, 1)
        else:
            # The node's visible set, untouched: the NPU is where the list puts it.
            assert info.visible_devices == npus
            assert info.device_count == len(npus)
            assert info.device_id == npus.index(info.physical_device)


def test_an_actor_with_two_npus_opens_the_one_asked_for(mode: str) -> None:
    actor = Squarer.options(resources={"NPU": 2}).remote(device_id=1)
    try:
        info: ActorInfo = ray.get(actor.describe.remote())
    finally:
        ray.kill(actor)
    assert len(info.ray_npus) == 2
    assert info.physical_device == info.ray_npus[1]  # the second, by physical id
    assert info.visible_devices is not None
    assert info.device_id == info.visible_devices.index(info.physical_device)
