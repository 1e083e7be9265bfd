"""User code for ``tests/test_typing.py``: ``mypy --strict`` must flag exactly the lines
marked ``# mypy-error``, and nothing else. Never run, only type-checked."""

from __future__ import annotations

import aclasync
import aclasync.sim
from aclasync import AclBackend
from aclasync.sim import Kernel, SimAcl


async def native_device() -> None:
    async with aclasync.open_device(0) as dev:
        stream, ret = dev.acl.rt.create_stream()
        status: int = dev.acl.rt.synchronize_stream(stream)
        count, ret = dev.acl.rt.get_device_count()
        free, total, ret = dev.acl.rt.get_mem_info(0)
        name: str | None = dev.acl.get_soc_name()
        print(status, count, free, total, name, ret)

        bad: int = dev.acl.rt.create_stream()  # mypy-error
        dev.acl.rt.no_such_call()  # mypy-error
        dev.acl.sim.launch_kernel(Kernel(duration_us=1), stream)  # mypy-error
        dev.acl.rt.synchronize_stream()  # mypy-error
        dev.acl.rt.synchronize_stream(stream, 1000)  # mypy-error
        dev.acl.rt.synchronize_stream("stream")  # mypy-error
        dev.acl.rt.synchronize_stream(stream=stream)  # mypy-error
        dev.acl.rt.malloc(1024)  # mypy-error
        soc: str = dev.acl.get_soc_name()  # mypy-error
        first, second = dev.acl.rt.get_mem_info(0)  # mypy-error
        print(bad, soc, first, second)


async def simulated_devices() -> None:
    async with aclasync.open_device(0, backend="sim") as dev:
        dev.acl.sim.launch_kernel(Kernel(duration_us=1), 0)
    runtime = aclasync.sim.create()
    async with aclasync.open_device(0, backend=runtime) as sim_dev:
        sim_dev.acl.sim.close()
    strict = aclasync.sim.create(strict=True)
    async with aclasync.open_device(0, backend=strict) as strict_dev:
        strict_dev.acl.rt.synchronize_device()
        strict_dev.acl.sim.close()  # mypy-error
    backend: AclBackend = aclasync.sim.create()  # the simulator is a pyACL backend
    print(backend)


def annotated(dev: aclasync.Device, sim_dev: aclasync.Device[SimAcl]) -> None:
    sim_dev.acl.sim.close()
    sim_dev.acl.rt.create_stream()
    dev.acl.sim.close()  # mypy-error
    wider: aclasync.Device = sim_dev
    narrower: aclasync.Device[SimAcl] = dev  # mypy-error
    print(wider, narrower)
