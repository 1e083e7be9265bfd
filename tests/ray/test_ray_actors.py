"""aclasync in async Ray actors that own one NPU each, on a real local Ray cluster."""

from __future__ import annotations

import pickle
import traceback
from pathlib import Path

import pytest
import ray
import ray.exceptions
from ray_support import CrashOnce, Squarer, TwoLoops

import aclasync
from aclasync.ray import ActorInfo, ActorLostError, Completed, dispatch, visible_devices

pytestmark = [pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(120)]


def test_each_actor_sees_its_own_npu_as_device_zero() -> None:
    actors = [Squarer.remote(backend="sim") for _ in range(4)]
    infos: list[ActorInfo] = ray.get([a.describe.remote() for a in actors])
    assert sorted(info.physical_device for info in infos) == [0, 1, 2, 3]
    for info in infos:
        assert info.visible_devices == (info.physical_device,)
        assert info.device_id == 0
        assert info.device_count == 1  # the simulator numbers only the visible set
        assert info.backend_name == "sim"
    assert len({info.pid for info in infos}) == 4
    for actor in actors:
        ray.kill(actor)


def test_results_come_back_correct_through_dispatch() -> None:
    actors = [Squarer.remote(backend="sim") for _ in range(2)]
    items = [[float(i), float(i) + 0.5, -float(i)] for i in range(24)]
    done = list(dispatch(actors, "square", items, in_flight=3))
    assert sorted(d.index for d in done) == list(range(24))
    for d in done:
        assert d.value == [x * x for x in items[d.index]]
    assert {d.actor for d in done} == {0, 1}  # both actors took work
    for actor in actors:
        ray.kill(actor)


def test_acl_errors_reach_the_driver_with_their_type_and_fields() -> None:
    actor = Squarer.remote(backend="sim")
    with pytest.raises(aclasync.AclError) as caught:
        ray.get(actor.fail.remote(507015))
    error = caught.value
    assert isinstance(error, ray.exceptions.RayTaskError)
    assert (error.code, error.name) == (507015, "ACL_ERROR_RT_AICORE_EXCEPTION")
    assert error.api == "acl.rt.synchronize_stream"
    assert error.device == 0
    # The actor and its device are still usable after the error.
    assert ray.get(actor.square.remote([3.0])) == [9.0]
    ray.kill(actor)


def test_acl_error_pickles_with_its_fields() -> None:
    error = aclasync.AclTimeoutError(507046, "acl.rt.synchronize_stream", device=3, stream=7)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is aclasync.AclTimeoutError
    assert (copy.code, copy.name, copy.api, copy.device, copy.stream) == (
        507046,
        "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT",
        "acl.rt.synchronize_stream",
        3,
        7,
    )
    assert str(copy) == str(error)


def test_a_killed_actor_is_a_clear_error_and_the_pipeline_goes_on() -> None:
    victim, survivor = Squarer.remote(backend="sim"), Squarer.remote(backend="sim")
    ray.get([victim.describe.remote(), survivor.describe.remote()])
    # The victim is busy with a long kernel when it dies: its call fails clearly.
    busy = victim.hold.remote(60.0)
    ray.kill(victim)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(busy, timeout=60)
    lost: list[int] = []
    items = [[float(i)] for i in range(10)]
    done = list(dispatch([victim, survivor], "square", items, in_flight=2, lost=lost))
    assert lost == [0]
    assert sorted(d.index for d in done) == list(range(10))
    assert all(d.actor == 1 and d.value == [x * x for x in items[d.index]] for d in done)
    ray.kill(survivor)


def test_dispatch_raises_when_every_actor_is_gone() -> None:
    actor = Squarer.remote(backend="sim")
    ray.get(actor.describe.remote())
    ray.kill(actor)
    with pytest.raises(ActorLostError, match="all 1 actors died"):
        list(dispatch([actor], "square", [[1.0], [2.0]]))


def test_actor_lost_error_counts_read_and_unread_items() -> None:
    actor = Squarer.remote(backend="sim")
    ray.get(actor.describe.remote())
    ray.kill(actor)
    items = [[float(i)] for i in range(40)]
    with pytest.raises(ActorLostError) as listed:
        list(dispatch([actor], "square", items, in_flight=2))
    message = str(listed.value)
    assert "2 item(s) read and unfinished" in message, message
    assert "38 never read" in message, message
    with pytest.raises(ActorLostError) as generated:
        list(dispatch([actor], "square", iter(items), in_flight=2))
    message = str(generated.value)
    assert "2 item(s) read and unfinished" in message, message
    assert "the rest of the items were never read" in message, message


def test_actor_lost_error_is_caused_by_what_killed_the_last_actor() -> None:
    actors = [Squarer.remote(device_id=-1, backend="sim") for _ in range(2)]  # __init__ raises
    with pytest.raises(ActorLostError, match="all 2 actors died") as caught:
        list(dispatch(actors, "square", [[1.0], [2.0], [3.0]]))
    cause = caught.value.__cause__
    assert isinstance(cause, ray.exceptions.RayActorError), repr(cause)
    assert "device_id must be an int >= 0" in str(cause)
    assert "device_id must be an int >= 0" in "".join(traceback.format_exception(caught.value))
    for actor in actors:
        ray.kill(actor)


def test_dispatch_keeps_an_actor_that_ray_restarts_and_loses_no_item(tmp_path: Path) -> None:
    actor = CrashOnce.remote(str(tmp_path / "crashed"), backend="sim")
    first_pid = ray.get(actor.work.remote(0))[1]
    lost: list[int] = []
    done = list(dispatch([actor], "work", ["crash", 1, 2, 3], in_flight=1, lost=lost))
    assert (tmp_path / "crashed").exists()  # it did crash, and Ray restarted it
    assert lost == []
    assert sorted(str(d.value[0]) for d in done) == ["1", "2", "3", "crash"]
    assert {d.actor for d in done} == {0}
    assert first_pid not in {d.value[1] for d in done}
    ray.kill(actor)


def test_first_device_calls_from_two_concurrency_groups_both_return() -> None:
    actor = TwoLoops.remote(backend="sim")
    first, second = actor.open.remote(), actor.open_meanwhile.remote()
    try:
        threads = ray.get([first, second], timeout=30)
    except ray.exceptions.GetTimeoutError:
        pytest.fail("device() on the control group's loop never returned")
    finally:
        ray.kill(actor)
    assert threads[0] != threads[1]  # two loops, in two threads


def test_a_gracefully_exiting_actor_closes_its_device() -> None:
    actor = Squarer.remote(backend="sim")
    ray.get(actor.square.remote([2.0]))
    assert ray.get(actor.device_is_open.remote())
    names = ray.get(actor.threads.remote())
    assert any(name.startswith("aclasync-device") for name in names), names
    ray.get(actor.close.remote())
    assert not ray.get(actor.device_is_open.remote())
    assert not any(name.startswith("aclasync-device") for name in ray.get(actor.threads.remote()))
    with pytest.raises(Exception, match="closed"):
        ray.get(actor.square.remote([2.0]))
    ray.kill(actor)


def test_dispatch_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="at least one actor"):
        list(dispatch([], "square", [1]))
    with pytest.raises(ValueError, match="in_flight"):
        list(dispatch([object()], "square", [1], in_flight=0))


def test_completed_is_a_plain_record() -> None:
    assert Completed(1, 0, "x") == Completed(1, 0, "x")


def test_visible_devices_parses_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES", raising=False)
    assert visible_devices() is None
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "4, 6")
    assert visible_devices() == (4, 6)
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "")
    assert visible_devices() == ()
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "a,b")
    with pytest.raises(ValueError, match="comma-separated"):
        visible_devices()
