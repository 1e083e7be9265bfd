"""``aclasync.testing``: the pytest plugin, exercised on a user's test file with pytester."""

from __future__ import annotations

import importlib.metadata
import threading

import pytest

import aclasync.sim
from aclasync.testing import assert_no_leaked_threads

pytest_plugins = ["pytester"]

USER_TESTS = """
import anyio
import pytest

import aclasync
from aclasync.sim import Kernel
from aclasync.testing import assert_no_leaked_threads

RUNTIMES = []


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


@pytest.mark.anyio
async def test_kernel_runs_on_the_device(sim_device, anyio_backend):
    ran = []
    async with sim_device.create_stream() as stream:
        kernel = Kernel(duration_us=200, fn=lambda: ran.append(anyio_backend))
        stream.launch(sim_device.acl.sim.launch_kernel, kernel)
        await stream.synchronize(timeout=5.0)
    assert ran == [anyio_backend]
    assert sim_device.id == 0 and sim_device.backend_name == "SimAcl"


@pytest.mark.anyio
async def test_failing_kernel_raises(sim_device):
    async with sim_device.create_stream() as stream:
        stream.launch(sim_device.acl.sim.launch_kernel, Kernel(error=507015))
        with pytest.raises(aclasync.AclError) as info:
            await stream.synchronize(timeout=5.0)
    assert info.value.code == 507015


@pytest.mark.anyio
async def test_open_device_is_seen_as_a_leak(sim_device):
    with pytest.raises(AssertionError, match="aclasync-device0"):
        assert_no_leaked_threads(timeout=0)


@pytest.mark.aclasync_sim(device_count=4, soc="Ascend310B4", notify_latency_us=50)
def test_marker_configures_the_runtime(acl_sim):
    RUNTIMES.append(acl_sim)
    assert acl_sim.rt.get_device_count() == (4, 0)
    assert acl_sim.get_soc_name() == "Ascend310B4"
    assert acl_sim.sim.profile.notify_latency_us == 50
    assert acl_sim.sim.profile.stream_limit == 512


def test_default_runtime_is_fresh(acl_sim):
    RUNTIMES.append(acl_sim)
    assert acl_sim.rt.get_device_count() == (2, 0)
    assert acl_sim.get_soc_name() == "Ascend910B3"
    assert acl_sim is not RUNTIMES[0]
    assert acl_sim is not aclasync.sim.acl


@pytest.mark.aclasync_sim(bogus_knob=1)
def test_unknown_model_parameter(acl_sim):
    pass


def test_zz_everything_was_closed():
    assert_no_leaked_threads()
"""


def test_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    plugins = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    # Named as its module, so that a conftest's ``pytest_plugins = ["aclasync.testing"]``
    # (or ``-p aclasync.testing``) finds it registered instead of registering it twice.
    assert plugins.get("aclasync.testing") == "aclasync.testing"


@pytest.mark.parametrize("how", ["conftest", "-p"])
def test_loading_the_plugin_by_name_as_well_is_harmless(
    pytester: pytest.Pytester, how: str
) -> None:
    if how == "conftest":
        pytester.makeconftest('pytest_plugins = ["aclasync.testing"]')
    pytester.makepyfile(
        """
        def test_runtime(acl_sim):
            assert acl_sim.rt.get_device_count() == (2, 0)
        """
    )
    args = ["-p", "aclasync.testing"] if how == "-p" else []
    result = pytester.runpytest(*args, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_environments_visible_devices_do_not_reach_the_fixture(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")  # as a card machine may have it
    pytester.makepyfile(
        """
        import pytest

        def test_default(acl_sim):
            assert acl_sim.rt.get_device_count() == (2, 0)

        @pytest.mark.aclasync_sim(device_count=4)
        def test_four(acl_sim):
            assert acl_sim.rt.get_device_count() == (4, 0)

        @pytest.mark.aclasync_sim(device_count=4, visible_devices="3,1")
        def test_chosen(acl_sim):
            assert acl_sim.rt.get_device_count() == (2, 0)
            assert acl_sim.rt.get_phy_dev_id_by_logic_dev_id(0) == (3, 0)

        @pytest.mark.anyio
        async def test_device(sim_device):
            assert sim_device.id == 0
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.stdout.fnmatch_lines(["*test_chosen PASSED*", "*test_device?asyncio? PASSED*"])
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 4
    assert "failed" not in outcomes
    assert "errors" not in outcomes


def test_fixtures_work_on_asyncio_and_trio(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest("--strict-markers", "-v", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "*test_kernel_runs_on_the_device?asyncio? PASSED*",
            "*test_kernel_runs_on_the_device?trio? PASSED*",
            "*test_failing_kernel_raises?trio? PASSED*",
            "*test_unknown_model_parameter ERROR*",
            "E *TypeError: unknown model parameter(s)*bogus_knob*",
        ]
    )
    result.assert_outcomes(passed=9, errors=1)


def test_positional_marker_arguments_are_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.aclasync_sim(4)
        def test_positional(acl_sim):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*aclasync_sim takes keyword arguments only*"])


def test_assert_no_leaked_threads_names_what_is_alive() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="aclasync-device7", daemon=True)
    thread.start()
    try:
        with pytest.raises(AssertionError, match="aclasync-device7"):
            assert_no_leaked_threads(timeout=0.01)
    finally:
        release.set()
        thread.join()
    assert_no_leaked_threads()


def test_assert_no_leaked_threads_sees_an_unclosed_runtime() -> None:
    runtime = aclasync.sim.create(device_count=1)
    assert runtime.rt.set_device(0) == 0
    try:
        with pytest.raises(AssertionError, match="aclasync-sim-dev0"):
            assert_no_leaked_threads(timeout=0)
    finally:
        runtime.sim.close()
    assert_no_leaked_threads()


def test_assert_no_leaked_threads_sees_a_util_thread_left_running() -> None:
    runtime = aclasync.sim.create(device_count=1)
    release = threading.Event()
    thread_id, ret = runtime.util.start_thread(release.wait, None)
    assert ret == 0
    try:
        with pytest.raises(AssertionError, match="aclasync-sim-util"):
            assert_no_leaked_threads(timeout=0)
    finally:
        release.set()
        assert runtime.util.stop_thread(thread_id) == 0
        runtime.sim.close()
    assert_no_leaked_threads()
