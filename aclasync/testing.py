"""Simulated Ascend devices for your own tests: a pytest plugin.

Installing aclasync registers this module as a pytest plugin (entry point
``pytest11``), so its fixtures are available in every test session:

``acl_sim``
    A fresh simulated runtime (``aclasync.sim.create(...)``) per test, closed at
    teardown. Configure it with the ``aclasync_sim`` marker.
``sim_device``
    An open ``aclasync.Device[SimAcl]`` (device 0 of ``acl_sim``; its ``acl`` is the
    simulator, ``.sim`` included, for the type checker too), closed at teardown. It is
    an async fixture run by anyio's pytest plugin, so the tests using it must be
    marked ``@pytest.mark.anyio`` (or be collected by anyio another way).

and a plain helper, ``assert_no_leaked_threads()``.

Example
-------
.. code-block:: python

    import pytest
    from aclasync.sim import Kernel
    from aclasync.testing import assert_no_leaked_threads

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(request):
        return request.param

    @pytest.mark.anyio
    async def test_kernel_runs(sim_device):
        async with sim_device.create_stream() as stream:
            stream.launch(sim_device.acl.sim.launch_kernel, Kernel(duration_us=200))
            await stream.synchronize(timeout=1.0)

    @pytest.mark.aclasync_sim(device_count=4, soc="Ascend310B4", notify_latency_us=50)
    def test_four_small_devices(acl_sim):
        assert acl_sim.rt.get_device_count() == (4, 0)

    def test_nothing_left_running():
        assert_no_leaked_threads()
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from . import sim
from ._device import Device, open_device

__all__ = ["acl_sim", "assert_no_leaked_threads", "pytest_configure", "sim_device"]

#: Prefix of every thread aclasync starts (device workers, waiting threads, the
#: simulator's threads, those ``acl.util.start_thread`` starts included).
_THREAD_PREFIX = "aclasync-"


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``aclasync_sim`` marker (so ``--strict-markers`` accepts it)."""
    config.addinivalue_line(
        "markers",
        "aclasync_sim(device_count=2, soc='Ascend910B3', **model_params): "
        "configure the simulated runtime of the acl_sim and sim_device fixtures",
    )


@pytest.fixture
def acl_sim(request: pytest.FixtureRequest) -> Iterator[sim.SimAcl]:
    """A fresh simulated pyACL runtime for one test, closed (``.sim.close()``) afterwards.

    ``@pytest.mark.aclasync_sim(device_count=..., soc=..., **model_params)`` passes its
    keyword arguments to ``aclasync.sim.create``; without the marker the runtime has two
    ``Ascend910B3`` devices. Every device is visible unless the marker says otherwise
    (``visible_devices=``): ``ASCEND_RT_VISIBLE_DEVICES``, often set on a machine with
    cards, does not reach the test. Only the closest marker counts (pytest's rule): a
    function's marker replaces its module's, its keywords are not merged.
    """
    marker = request.node.get_closest_marker("aclasync_sim")
    options = {}
    if marker is not None:
        if marker.args:
            raise TypeError(
                "@pytest.mark.aclasync_sim takes keyword arguments only "
                "(device_count=..., soc=..., model parameters)"
            )
        options = dict(marker.kwargs)
        if "strict" in options:
            raise TypeError(
                "@pytest.mark.aclasync_sim: acl_sim is the full simulator; call "
                "aclasync.sim.create(strict=True) in the test for a strict one"
            )
    count = options.get("device_count", 2)
    if "visible_devices" not in options and isinstance(count, int) and count >= 1:
        options["visible_devices"] = range(count)  # not the environment's choice
    runtime = sim.create(**options)
    try:
        yield runtime
    finally:
        runtime.sim.close()


@pytest.fixture
async def sim_device(acl_sim: sim.SimAcl) -> AsyncIterator[Device[sim.SimAcl]]:
    """Device 0 of ``acl_sim``, opened with ``aclasync.open_device`` and closed afterwards.

    An async fixture: tests using it need ``@pytest.mark.anyio``; they run on the
    event loops the ``anyio_backend`` fixture selects.
    """
    async with open_device(0, backend=acl_sim) as device:
        yield device


def assert_no_leaked_threads(timeout: float = 1.0) -> None:
    """Fail if an aclasync thread (``aclasync-*``) is still alive.

    Blocks for up to *timeout* seconds, giving threads that are already shutting down
    the chance to finish.

    Raises
    ------
    AssertionError
        Naming the threads still alive: a device left open, or a simulated runtime
        whose devices are still active (close it with ``runtime.sim.close()``).
    """
    deadline = time.monotonic() + timeout
    alive = []
    for thread in threading.enumerate():
        if not thread.name.startswith(_THREAD_PREFIX) or thread is threading.current_thread():
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            alive.append(thread.name)
    if alive:
        raise AssertionError(
            f"aclasync threads still running: {', '.join(sorted(alive))} "
            "(a device left open, or a simulated runtime not closed?)"
        )
