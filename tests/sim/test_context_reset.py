"""``reset_device`` frees the default context and its streams; explicit contexts stay.

pyACL's reference (reset_device_force, the resource release flow) says a reset at
reference count 0 releases "the default context, the default stream and every stream
created under the default context", after waiting for their tasks. Contexts from
``create_context`` are not in that list: the runtime's context creation holds the
device itself, so they stay usable handles until ``destroy_context``, which releases
the device with the last of them.
"""

from __future__ import annotations

import re
import threading

from aclasync._pyacl.codes import ErrorCode

CONTEXT_NULL = ErrorCode.ACL_ERROR_RT_CONTEXT_NULL
PARAM_INVALID = ErrorCode.ACL_ERROR_RT_PARAM_INVALID
SCHEDULER = re.compile(r"aclasync-sim-dev0")


def device0_running() -> bool:
    return any(SCHEDULER.fullmatch(t.name) for t in threading.enumerate())


def test_an_explicit_context_outlives_the_reset(rt, check):
    check(rt.rt.set_device(0))
    ctx = check(rt.rt.create_context(0))
    stream = check(rt.rt.create_stream())
    ptr = check(rt.rt.malloc(64, 0))
    check(rt.rt.reset_device(0))
    assert check(rt.rt.get_context()) == ctx, "still the thread's context"
    assert check(rt.rt.get_device()) == 0
    check(rt.rt.memset_async(ptr, 64, 1, 64, stream), what="its stream still works")
    check(rt.rt.synchronize_stream(stream))
    check(rt.rt.destroy_stream(stream))
    check(rt.rt.free(ptr), what="device memory lives while the device does")
    assert device0_running()
    check(rt.rt.destroy_context(ctx))
    assert not device0_running(), "the last explicit context released the device"
    assert rt.sim.live_objects()["contexts"] == 0
    check(rt.rt.get_context(), CONTEXT_NULL)


def test_an_evaluation_script_tears_down_reset_first(rt, check):
    # The order of a published evaluation script: reset, then the context it made.
    check(rt.init())
    check(rt.rt.set_device(0))
    check(rt.rt.create_context(0))
    check(rt.rt.reset_device(0))
    ctx = check(rt.rt.get_context())
    check(rt.rt.destroy_context(ctx))
    check(rt.rt.reset_device(0), PARAM_INVALID, "the reference count is already 0")
    check(rt.rt.destroy_context(ctx), PARAM_INVALID, "destroyed already")
    check(rt.finalize())


def test_the_default_context_and_its_streams_go(rt, check, spawn):
    worker = spawn()
    check(worker.call(rt.rt.set_device, 0))
    default_stream = check(worker.call(rt.rt.create_stream))
    default_ctx = check(worker.call(rt.rt.get_context))
    ctx = check(rt.rt.create_context(0))
    check(worker.call(rt.rt.reset_device, 0))
    check(worker.call(rt.rt.get_context), CONTEXT_NULL, "the worker's context was the default")
    check(rt.rt.set_context(default_ctx), PARAM_INVALID)
    check(rt.rt.synchronize_stream(default_stream), PARAM_INVALID)
    assert rt.sim.live_objects()["contexts"] == 1
    assert rt.rt.get_primary_ctx_state(0)[:2] == (0, 0)
    check(rt.rt.destroy_context(ctx))


def test_work_on_the_default_context_finishes_before_it_goes(rt, check, gate):
    check(rt.rt.set_device(0))
    stream = check(rt.rt.create_stream())
    held = gate()
    check(rt.sim.launch_kernel(held.kernel(), stream))
    check(rt.rt.create_context(0))
    done = threading.Event()
    reset = threading.Thread(target=lambda: (rt.rt.reset_device(0), done.set()))
    reset.start()
    assert held.started.wait(10)
    assert not done.wait(0.05), "the reset waits for the kernel"
    held.open()
    reset.join(10)
    assert held.finished.is_set()
    assert done.is_set()


def test_set_device_after_the_reset_makes_a_new_default_context(rt, check):
    check(rt.rt.set_device(0))
    old_default = check(rt.rt.get_context())
    ctx = check(rt.rt.create_context(0))
    check(rt.rt.reset_device(0))
    check(rt.rt.set_device(0))
    new_default = check(rt.rt.get_context())
    assert new_default not in (old_default, ctx)
    assert check(rt.rt.get_primary_ctx_state(0)[::2]) == 1
    check(rt.rt.synchronize_stream(0))
    check(rt.rt.destroy_context(ctx))
    assert device0_running(), "the set_device reference holds the device"
    check(rt.rt.reset_device(0))
    assert not device0_running()
