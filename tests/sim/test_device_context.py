"""Process, device and context state of the simulated runtime."""

from __future__ import annotations

import re
import threading

import pytest

from aclasync._pyacl.codes import ErrorCode
from aclasync._pyacl.constants import MemAttr, OverflowMode, RunMode
from aclasync.sim import Kernel

GiB = 1 << 30
SCHEDULER = re.compile(r"aclasync-sim-dev(\d+)")
CORE = re.compile(r"aclasync-sim-core\d+")


def live_threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def schedulers(threads: set[threading.Thread], device: int) -> set[threading.Thread]:
    return {t for t in threads if (m := SCHEDULER.fullmatch(t.name)) and int(m[1]) == device}


def cores(threads: set[threading.Thread]) -> set[threading.Thread]:
    return {t for t in threads if CORE.fullmatch(t.name)}


# -- process level ---------------------------------------------------------------------


def test_init_is_ref_counted_and_one_finalize_clears_it(rt, check):
    check(rt.init(), what="first init")
    check(rt.init(), ErrorCode.ACL_ERROR_REPEAT_INITIALIZE, "second init")
    check(rt.init(), ErrorCode.ACL_ERROR_REPEAT_INITIALIZE, "third init")
    check(rt.finalize(), what="finalize after three inits")
    check(rt.finalize(), ErrorCode.ACL_ERROR_REPEAT_FINALIZE, "second finalize")
    check(rt.init(), what="init after finalize starts afresh")
    check(rt.finalize())


def test_finalize_refuses_only_after_a_finalize(make_rt, check):
    """aclFinalize fails once finalized (until an init), not for want of an init."""
    rt = make_rt()
    check(rt.finalize(), what="finalize with no init")
    check(rt.finalize(), ErrorCode.ACL_ERROR_REPEAT_FINALIZE, "finalize again")
    check(rt.init())
    check(rt.finalize_reference())
    check(rt.finalize(), ErrorCode.ACL_ERROR_REPEAT_FINALIZE, "the last reference finalized")
    fresh = make_rt()
    check(fresh.finalize_reference(), ErrorCode.ACL_ERROR_REPEAT_FINALIZE, "no reference")
    check(fresh.finalize(), what="a refused finalize_reference finalizes nothing")


def test_runtime_calls_do_not_require_init(rt, check):
    check(rt.rt.set_device(0))
    check(rt.rt.create_stream())


@pytest.mark.parametrize("soc", ["Ascend910B3", "Ascend310B4"])
def test_get_soc_name_reports_the_profile(make_rt, soc):
    assert make_rt(soc=soc).get_soc_name() == soc


def test_default_soc_is_910b3(rt):
    assert rt.get_soc_name() == "Ascend910B3"
    assert rt.sim.profile.stream_limit == 1984


def test_runtimes_are_independent(make_rt, check):
    a, b = make_rt(), make_rt()
    check(a.rt.set_device(0))
    check(b.rt.get_device(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL, "other runtime")


# -- device count, run mode ------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 4])
def test_get_device_count_needs_no_context(make_rt, check, count):
    assert check(make_rt(device_count=count).rt.get_device_count()) == count


def test_get_run_mode_is_host(rt, check):
    assert check(rt.rt.get_run_mode()) == RunMode.HOST


@pytest.mark.parametrize("device", [2, 3, 1000, -1])
def test_set_device_with_invalid_id_fails(rt, check, device):
    check(rt.rt.set_device(device), ErrorCode.ACL_ERROR_RT_INVALID_DEVICEID)
    check(rt.rt.get_device(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL, "nothing became current")


# -- set_device / reset_device / reset_device_force (reference page 000) -------------

SET, RESET, FORCE = "set", "reset", "force"
RELEASED = ErrorCode.ACL_ERROR_RT_PARAM_INVALID

SEQUENCES = {
    "paired force": [(SET, 0), (FORCE, 0), (SET, 0), (FORCE, 0)],
    "unpaired force": [(SET, 0), (SET, 0), (FORCE, 0)],
    "mixed, each paired": [(SET, 0), (RESET, 0), (SET, 0), (FORCE, 0)],
    "mixed, force after reset": [(SET, 0), (SET, 0), (RESET, 0), (FORCE, 0)],
    "wrong: force after the count reached zero": [
        (SET, 0),
        (SET, 0),
        (RESET, 0),
        (RESET, 0),
        (FORCE, RELEASED),
    ],
    "wrong: two forces": [(SET, 0), (SET, 0), (RESET, 0), (FORCE, 0), (FORCE, RELEASED)],
    "wrong: reset after force": [(SET, 0), (SET, 0), (FORCE, 0), (RESET, RELEASED)],
    "reset of a device never set": [(RESET, RELEASED)],
    "force of a device never set": [(FORCE, RELEASED)],
    "plain pairs": [(SET, 0), (SET, 0), (RESET, 0), (RESET, 0), (RESET, RELEASED)],
}


@pytest.mark.parametrize("steps", SEQUENCES.values(), ids=SEQUENCES.keys())
def test_reset_sequences_of_reference_page(rt, check, steps):
    calls = {SET: rt.rt.set_device, RESET: rt.rt.reset_device, FORCE: rt.rt.reset_device_force}
    for i, (op, expected) in enumerate(steps):
        check(calls[op](1), expected, f"step {i}: {op}_device(1)")


def test_two_threads_each_forcing_the_second_fails(rt, check, spawn):
    t1, t2 = spawn(), spawn()
    check(t1.call(rt.rt.set_device, 1), what="thread 1 set")
    check(t2.call(rt.rt.set_device, 1), what="thread 2 set")
    check(t1.call(rt.rt.reset_device_force, 1), what="thread 1 force")
    check(t2.call(rt.rt.reset_device_force, 1), RELEASED, "thread 2 force")


def test_two_threads_one_force_at_the_end(rt, check, spawn):
    t1, t2 = spawn(), spawn()
    check(t1.call(rt.rt.set_device, 1))
    check(t2.call(rt.rt.set_device, 1))
    check(t2.call(rt.rt.reset_device_force, 1))
    null = ErrorCode.ACL_ERROR_RT_CONTEXT_NULL
    check(t1.call(rt.rt.get_context), null, "thread 1 after release")
    check(t2.call(rt.rt.get_context), null, "thread 2 after release")


def test_device_can_be_set_again_after_release(rt, check):
    check(rt.rt.set_device(0))
    first = check(rt.rt.get_context())
    check(rt.rt.reset_device(0))
    check(rt.rt.set_device(0))
    second = check(rt.rt.get_context())
    assert second != 0
    assert first != second, "a released context handle must not come back"
    check(rt.rt.create_stream())


# -- current device and context --------------------------------------------------------


def test_get_device_and_context_before_set_device(rt, check):
    check(rt.rt.get_device(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(rt.rt.get_context(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(rt.rt.create_stream(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(rt.rt.create_event(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(rt.rt.malloc(64, 0), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(rt.rt.synchronize_stream(0), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(rt.rt.synchronize_device(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)


def test_a_fresh_thread_has_no_context(dev0, check, spawn):
    other = spawn()
    check(other.call(dev0.rt.get_device), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(other.call(dev0.rt.get_context), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(other.call(dev0.rt.create_stream), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)


def test_set_device_makes_default_context_current(dev0, check, spawn):
    assert check(dev0.rt.get_device()) == 0
    ctx = check(dev0.rt.get_context())
    assert isinstance(ctx, int)
    assert ctx != 0
    other = spawn()
    check(other.call(dev0.rt.set_device, 0))
    assert check(other.call(dev0.rt.get_context)) == ctx, "threads share the default context"


def test_devices_have_distinct_default_contexts(rt, check):
    check(rt.rt.set_device(0))
    ctx0 = check(rt.rt.get_context())
    check(rt.rt.set_device(1))
    assert check(rt.rt.get_device()) == 1
    assert check(rt.rt.get_context()) != ctx0


def test_default_stream_is_usable_as_zero(dev0, check):
    check(dev0.sim.launch_kernel(Kernel(duration_us=1000), 0))
    check(dev0.rt.synchronize_stream(0))
    assert check(dev0.rt.stream_query(0)) == 0


def test_create_context_makes_it_current(dev0, check):
    default = check(dev0.rt.get_context())
    ctx = check(dev0.rt.create_context(0))
    assert ctx not in (0, default)
    assert check(dev0.rt.get_context()) == ctx
    stream = check(dev0.rt.create_stream())
    check(dev0.rt.destroy_stream(stream))
    check(dev0.rt.set_context(default))
    check(dev0.rt.destroy_context(ctx))


def test_last_set_context_wins(dev0, check):
    a = check(dev0.rt.create_context(0))
    b = check(dev0.rt.create_context(1))
    check(dev0.rt.set_context(b))
    check(dev0.rt.set_context(a))
    assert check(dev0.rt.get_context()) == a
    assert check(dev0.rt.get_device()) == 0
    check(dev0.rt.set_context(b))
    assert check(dev0.rt.get_context()) == b
    assert check(dev0.rt.get_device()) == 1, "a context on another device switches device"


def test_default_context_cannot_be_destroyed(dev0, check):
    default = check(dev0.rt.get_context())
    check(dev0.rt.destroy_context(default), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)
    assert check(dev0.rt.get_context()) == default
    check(dev0.rt.create_stream(), what="default context still usable")


def test_destroy_context_rejects_null_and_unknown(dev0, check):
    check(dev0.rt.destroy_context(0), ErrorCode.ACL_ERROR_INVALID_PARAM)
    ctx = check(dev0.rt.create_context(0))
    check(dev0.rt.destroy_context(ctx))
    check(dev0.rt.destroy_context(ctx), ErrorCode.ACL_ERROR_RT_PARAM_INVALID, "twice")


def test_set_context_of_released_default_context_fails(dev0, check):
    ctx = check(dev0.rt.get_context())
    check(dev0.rt.reset_device(0))
    check(dev0.rt.get_context(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
    check(dev0.rt.set_context(ctx), ErrorCode.ACL_ERROR_RT_PARAM_INVALID)


def test_create_context_activates_device_without_a_reference(rt, check):
    before = live_threads()
    ctx = check(rt.rt.create_context(1))
    assert check(rt.rt.get_device()) == 1
    started = schedulers(live_threads() - before, 1)
    assert len(started) == 1
    check(rt.rt.destroy_context(ctx))
    assert not any(t.is_alive() for t in started), "last explicit context: device released"
    check(rt.rt.reset_device(1), ErrorCode.ACL_ERROR_RT_PARAM_INVALID, "no set_device count")


def test_set_device_reference_outlives_explicit_contexts(rt, check):
    before = live_threads()
    check(rt.rt.set_device(0))
    started = schedulers(live_threads() - before, 0)
    ctx = check(rt.rt.create_context(0))
    check(rt.rt.destroy_context(ctx))
    assert all(t.is_alive() for t in started), "the set_device reference keeps the device"
    check(rt.rt.reset_device(0))
    assert not any(t.is_alive() for t in started)


# -- simulator threads and released handles --------------------------------------------


def test_threads_start_on_activation_and_stop_on_release(rt, check):
    before = live_threads()
    check(rt.rt.set_device(0))
    new = live_threads() - before
    dev0_scheduler = schedulers(new, 0)
    core_pool = cores(new)
    assert len(dev0_scheduler) == 1
    assert len(core_pool) == rt.sim.profile.core_threads == 2
    assert not schedulers(new, 1), "device 1 stays idle"
    check(rt.rt.set_device(1))
    new = live_threads() - before
    dev1_scheduler = schedulers(new, 1)
    assert len(dev1_scheduler) == 1
    assert cores(new) == core_pool, "the core pool is shared by the runtime's devices"
    check(rt.rt.set_device(0))
    check(rt.rt.reset_device(0))
    assert all(t.is_alive() for t in dev0_scheduler), "count is still one"
    check(rt.rt.reset_device(0))
    assert not any(t.is_alive() for t in dev0_scheduler)
    assert all(t.is_alive() for t in core_pool | dev1_scheduler)
    check(rt.rt.reset_device_force(1))
    assert not any(t.is_alive() for t in core_pool | dev1_scheduler)


def test_core_threads_override(make_rt, check):
    runtime = make_rt(core_threads=3)
    before = live_threads()
    check(runtime.rt.set_device(0))
    assert len(cores(live_threads() - before)) == 3


def test_close_joins_every_simulator_thread(make_rt, check):
    runtime = make_rt()
    before = live_threads()
    check(runtime.rt.set_device(0))
    check(runtime.rt.create_context(1))
    started = live_threads() - before
    assert len(schedulers(started, 0) | schedulers(started, 1) | cores(started)) == 4
    runtime.sim.close()
    assert not any(t.is_alive() for t in started)
    runtime.sim.close()  # idempotent


def test_released_handles_give_param_invalid(dev0, check):
    stream = check(dev0.rt.create_stream())
    event = check(dev0.rt.create_event())
    check(dev0.rt.reset_device(0))
    check(dev0.rt.set_device(0))
    invalid = ErrorCode.ACL_ERROR_RT_PARAM_INVALID
    check(dev0.rt.destroy_stream(stream), invalid, "destroy_stream")
    check(dev0.rt.synchronize_stream(stream), invalid, "synchronize_stream")
    check(dev0.rt.stream_query(stream), invalid, "stream_query")
    check(dev0.rt.record_event(event, 0), invalid, "record_event")
    check(dev0.rt.destroy_event(event), invalid, "destroy_event")


# -- memory info and saturation mode ---------------------------------------------------


def test_get_mem_info_needs_a_device(rt, check):
    check(rt.rt.get_mem_info(MemAttr.HBM_MEM), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)


@pytest.mark.parametrize(
    ("soc", "attr", "total"),
    [("Ascend910B3", MemAttr.HBM_MEM, 64 * GiB), ("Ascend310B4", MemAttr.DDR_MEM, 8 * GiB)],
)
def test_get_mem_info_reports_profile_memory(make_rt, check, soc, attr, total):
    runtime = make_rt(soc=soc)
    check(runtime.rt.set_device(0))
    free, got_total = check(runtime.rt.get_mem_info(attr))
    assert got_total == total
    assert 0 < free <= total


def test_get_mem_info_follows_memory_override(make_rt, check):
    runtime = make_rt(memory_bytes=1 << 24)
    check(runtime.rt.set_device(0))
    free, total = check(runtime.rt.get_mem_info(MemAttr.HBM_MEM))
    assert total == 1 << 24
    assert free <= total


def test_sat_mode_defaults_to_saturation_and_can_be_set(dev0, check):
    assert check(dev0.rt.get_device_sat_mode()) == OverflowMode.SATURATION
    check(dev0.rt.set_device_sat_mode(OverflowMode.INFNAN))
    assert check(dev0.rt.get_device_sat_mode()) == OverflowMode.INFNAN
    check(dev0.rt.set_device_sat_mode(7), ErrorCode.ACL_ERROR_INVALID_PARAM)
    assert check(dev0.rt.get_device_sat_mode()) == OverflowMode.INFNAN


def test_default_sat_mode_override(make_rt, check):
    runtime = make_rt(default_sat_mode=OverflowMode.INFNAN)
    check(runtime.rt.set_device(0))
    assert check(runtime.rt.get_device_sat_mode()) == OverflowMode.INFNAN


def test_sat_mode_needs_a_device(rt, check):
    check(rt.rt.get_device_sat_mode(), ErrorCode.ACL_ERROR_RT_CONTEXT_NULL)
