"""The CLI's device work (``_cli._workload``) and stream gates (``_cli._gates``).

The memset workload is pyACL alone, so it is exercised on the strict simulator (no
``acl.sim``); lengths are judged by timing events on the device, with wide bounds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anyio
import pytest

import aclasync
import aclasync.sim
from aclasync._cli import _workload
from aclasync._cli._gates import DeviceGates
from aclasync._cli._workload import (
    MIN_FILL,
    SCRATCH_CAP,
    FillRate,
    Stopwatch,
    Workload,
    describe_line,
)
from aclasync._conformance import ReportThread
from aclasync.sim import Kernel

pytestmark = pytest.mark.anyio


async def _device_time_us(
    dev: aclasync.Device, work: Workload, stream: aclasync.Stream, us: float
) -> float:
    watch = await Stopwatch.create(dev)
    try:
        watch.start(stream)
        work.launch(stream, us)
        watch.stop(stream)
        await stream.synchronize()
        return await watch.elapsed_us()
    finally:
        await watch.aclose()


async def test_memset_work_is_calibrated_on_the_device_and_lasts_about_as_asked() -> None:
    acl = aclasync.sim.create(device_count=1, strict=True)
    async with aclasync.open_device(0, backend=acl) as dev:
        work = await Workload.calibrate(dev)
        described = work.describe()
        assert described["kind"] == "memset"
        assert described["calls"] == "acl.rt.memset_async"
        assert described["bytes_per_us"] > 0
        assert 0 < described["scratch_bytes"] <= SCRATCH_CAP
        assert described["calibration"]["fills"], "fills of growing size were timed"
        assert "calibrated on the device" in describe_line(described)
        async with dev.create_stream() as stream:
            await work.prepare(stream)
            # The shortest of three: a load spike on the host lengthens one, never
            # shortens it (a 2 ms fill once read 15 ms beside other test runs).
            short = min([await _device_time_us(dev, work, stream, 2_000) for _ in "abc"])
            long = min([await _device_time_us(dev, work, stream, 20_000) for _ in "abc"])
            await work.aclose()
    # On the simulator a fill is real host work, so its time follows the host's load:
    # wide bounds, and a ratio between two lengths measured in the same run.
    assert 0.1 * 20_000 <= long <= 10 * 20_000, long
    assert long / short > 2, (short, long)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def test_a_busy_device_during_two_of_three_samples_does_not_skew_the_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The calibration times every run three times. Here two of every three jobs it
    # queues first keep the device busy for 5 ms, as a busy host would: the shortest
    # sample is the true one, and the work it plans lasts about as asked.
    acl = aclasync.sim.create(device_count=1)
    jobs = 0
    plain_fill = _workload.fill

    def busy_fill(memset: Callable[..., int], *args: int) -> int:
        nonlocal jobs
        jobs += 1
        if jobs % 3:
            acl.sim.launch_kernel(Kernel(fn=lambda: _spin(0.005)), args[-1])
        return plain_fill(memset, *args)

    async with aclasync.open_device(0, backend=acl) as dev:
        monkeypatch.setattr(_workload, "fill", busy_fill)
        work = await Workload.calibrate(dev, kind="memset")
        monkeypatch.setattr(_workload, "fill", plain_fill)
        async with dev.create_stream() as stream:
            await work.prepare(stream)
            took = min([await _device_time_us(dev, work, stream, 20_000) for _ in "abc"])
            await work.aclose()
    assert jobs >= 18, "the overhead and at least one size were timed"
    # Taking the median of the three, a 20 ms fill lasted about 1 ms.
    assert 0.3 * 20_000 <= took <= 10 * 20_000, (took, work.describe())


async def test_the_cap_bounds_each_streams_scratch_buffer() -> None:
    acl = aclasync.sim.create(device_count=1, strict=True)
    cap = 256 << 10
    async with aclasync.open_device(0, backend=acl) as dev:
        work = await Workload.calibrate(dev, cap=cap)
        assert work.scratch_bytes <= cap
        async with dev.create_stream() as stream:
            await work.prepare(stream)
            _fn, args = work.work(5_000, 1234)
            calls, each = args[-2:]
            assert each <= cap
            assert calls >= 1
            work.launch(stream, 5_000)
            await stream.synchronize()
        assert acl.rt.get_device_count() == (1, 0)


async def test_launch_needs_a_prepared_stream() -> None:
    acl = aclasync.sim.create(device_count=1, strict=True)
    async with aclasync.open_device(0, backend=acl) as dev, dev.create_stream() as stream:
        work = await Workload.calibrate(dev)
        with pytest.raises(ValueError, match="await prepare"):
            work.launch(stream, 10)


async def test_simulated_kernels_are_the_default_where_acl_sim_exists() -> None:
    async with aclasync.open_device(0, backend=aclasync.sim.create(device_count=1)) as dev:
        work = await Workload.calibrate(dev)
        assert work.describe() == {
            "kind": "sim-kernel",
            "calls": "acl.sim.launch_kernel",
            "timing": "modelled exactly",
        }
        async with dev.create_stream() as stream:
            measured = await _device_time_us(dev, work, stream, 5_000)
        assert 4_000 <= measured <= 50_000
        assert (await Workload.calibrate(dev, kind="memset")).kind == "memset"


async def test_simulated_kernels_need_the_simulator() -> None:
    acl = aclasync.sim.create(device_count=1, strict=True)
    async with aclasync.open_device(0, backend=acl) as dev:
        with pytest.raises(ValueError, match=r"needs the simulator.s acl\.sim\.launch_kernel"):
            await Workload.calibrate(dev, kind="sim-kernel")
        with pytest.raises(ValueError, match="unknown workload 'gpu'"):
            await Workload.calibrate(dev, kind="gpu")


def test_a_plan_splits_long_work_into_calls_of_at_most_the_chunk() -> None:
    rate = FillRate(bytes_per_us=1_000.0, overhead_us=10.0, chunk_bytes=100_000)
    assert rate.plan(0) == (1, MIN_FILL)
    assert rate.plan(10) == (1, MIN_FILL)
    calls, each = rate.plan(50)
    assert (calls, each) == (1, 40_000)
    calls, each = rate.plan(10_000)
    assert each <= 100_000
    assert each % MIN_FILL == 0
    assert calls * (10 + each / 1_000) == pytest.approx(10_000, rel=0.02)


def test_no_calibration_plans_more_calls_than_microseconds() -> None:
    # A disturbed calibration once found 2.6e8 bytes per us and no overhead: 20 ms of
    # work was planned as 20,000,000 calls, queued as one job.
    rate = FillRate(bytes_per_us=2.6e8, overhead_us=0.0, chunk_bytes=256 << 10)
    calls, _each = rate.plan(20_000)
    assert calls <= 20_000


async def test_a_stall_in_the_shorter_run_is_no_free_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every sample of every run of n calls runs behind 1 ms of device work, as if the
    # host had stalled then, and none of the runs of 2n: their difference is negative.
    # It was taken as a call costing nothing (the rate 2.6e8 bytes per us above).
    acl = aclasync.sim.create(device_count=1)
    plain_fill = _workload.fill

    def stalled_fill(memset: Callable[..., int], *args: int) -> int:
        calls = args[-3]
        if calls in (8, 32):  # the n-call runs of a size and of the empty calls
            acl.sim.launch_kernel(Kernel(duration_us=1_000), args[-1])
        return plain_fill(memset, *args)

    async with aclasync.open_device(0, backend=acl) as dev:
        monkeypatch.setattr(_workload, "fill", stalled_fill)
        work = await Workload.calibrate(dev, kind="memset", cap=256 << 10)
        monkeypatch.setattr(_workload, "fill", plain_fill)
    described = work.describe()
    assert described["bytes_per_us"] < 1e7, described  # about 1e4-1e5 on this host
    calls, _each = work.work(20_000)[1][-2:]
    assert calls < 20_000


async def test_a_gate_holds_the_work_queued_behind_it_until_it_opens() -> None:
    acl = aclasync.sim.create(device_count=1, strict=True)
    async with aclasync.open_device(0, backend=acl) as dev, dev.create_stream() as stream:
        work = await Workload.calibrate(dev)
        await work.prepare(stream)
        async with DeviceGates(dev) as gates:
            gate = await gates.hold(stream)
            work.launch(stream, 10)
            assert await anyio.to_thread.run_sync(gate.reached.wait, 10)
            with pytest.raises(aclasync.AclTimeoutError):
                await stream.synchronize(timeout=0.05)
            assert not await stream.query()
            gate.open()
            await stream.synchronize(timeout=10)
            assert await stream.query()


async def test_leaving_the_gates_opens_them() -> None:
    acl = aclasync.sim.create(device_count=1, strict=True)
    async with aclasync.open_device(0, backend=acl) as dev, dev.create_stream() as stream:
        async with DeviceGates(dev) as gates:
            gate = await gates.hold(stream)
        assert gate.is_open
        await stream.synchronize(timeout=10)


def test_a_report_thread_does_not_spin_before_its_first_subscription() -> None:
    acl = aclasync.sim.create(device_count=1, strict=True)
    with ReportThread(acl) as thread:
        before = time.process_time()
        time.sleep(0.5)  # the thread gets 107012 at once from every process_report
        spent = time.process_time() - before
    assert spent < 0.25, f"{spent:.3f} s of CPU in 0.5 s: the loop spins"
    assert thread.errors == []
    assert not any(t.name == "aclasync-report" for t in threading.enumerate())
