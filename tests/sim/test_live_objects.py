"""``acl.sim.live_objects()``: counts of what a simulated runtime holds, for leak checks."""

from __future__ import annotations

import threading

from aclasync._pyacl.constants import MallocPolicy

NOTHING = {
    "streams": 0,
    "events": 0,
    "contexts": 0,
    "memory_regions": 0,
    "device_refs": 0,
    "threads": 0,
    "notifies": 0,
    "host_registrations": 0,
    "util_threads": 0,
    "models": 0,
    "model_descs": 0,
    "datasets": 0,
    "data_buffers": 0,
    "tensor_descs": 0,
}


def test_fresh_runtime_holds_nothing(rt):
    counts = rt.sim.live_objects()
    assert counts == NOTHING
    assert all(type(value) is int for value in counts.values())


def test_counts_follow_every_object_kind(rt, check):
    check(rt.rt.set_device(0))
    check(rt.rt.set_device(0))
    after_set = rt.sim.live_objects()
    # One scheduler for device 0 and the two kernel-body core threads of the profile.
    assert after_set == {**NOTHING, "contexts": 1, "device_refs": 2, "threads": 3}

    streams = [check(rt.rt.create_stream()) for _ in range(3)]
    events = [check(rt.rt.create_event()) for _ in range(2)]
    default_ctx = check(rt.rt.get_context())
    ctx = check(rt.rt.create_context(0))
    dev_ptr = check(rt.rt.malloc(256, MallocPolicy.HUGE_FIRST))
    host_ptr = check(rt.rt.malloc_host(256))
    assert rt.sim.live_objects() == {
        **NOTHING,
        "streams": 3,
        "events": 2,
        "contexts": 2,
        "memory_regions": 2,
        "device_refs": 2,
        "threads": 3,
    }

    check(rt.rt.free_host(host_ptr))
    check(rt.rt.free(dev_ptr))
    check(rt.rt.destroy_context(ctx))
    check(rt.rt.set_context(default_ctx))
    check(rt.rt.reset_device(0))
    for event in events:
        check(rt.rt.destroy_event(event))
    for stream in streams[:2]:
        check(rt.rt.destroy_stream(stream))
    counts = rt.sim.live_objects()
    assert counts["streams"] == 1
    assert counts["events"] == 0
    assert counts["contexts"] == 1
    assert counts["memory_regions"] == 0
    assert counts["device_refs"] == 1


def test_release_returns_to_nothing(rt, check):
    check(rt.rt.set_device(1))
    check(rt.rt.create_stream())
    check(rt.rt.malloc(64, MallocPolicy.HUGE_FIRST))
    check(rt.rt.create_event())
    check(rt.rt.reset_device(1))  # releases streams, events and device memory with it
    assert rt.sim.live_objects() == NOTHING


def test_host_memory_outlives_devices(rt, check):
    host_ptr = check(rt.rt.malloc_host(64))
    assert rt.sim.live_objects() == {**NOTHING, "memory_regions": 1}
    check(rt.rt.free_host(host_ptr))
    assert rt.sim.live_objects() == NOTHING


def test_threads_count_follows_active_devices(make_rt, check):
    runtime = make_rt(core_threads=3)
    done = threading.Event()

    def on_other_thread() -> None:
        check(runtime.rt.set_device(1))
        done.set()

    check(runtime.rt.set_device(0))
    worker = threading.Thread(target=on_other_thread)
    worker.start()
    worker.join(10)
    assert done.is_set()
    # Two schedulers and three core threads; device references from both threads.
    assert runtime.sim.live_objects()["threads"] == 5
    assert runtime.sim.live_objects()["device_refs"] == 2
    runtime.sim.close()
    assert runtime.sim.live_objects() == NOTHING
