"""``dispatch()`` without a Ray cluster: its argument checks, and how it treats actors
that Ray restarts, over stand-in actor handles whose calls answer as scripted, on a
clock that only its pauses move."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import ray
import ray.exceptions

import aclasync.ray
from aclasync.ray import ActorLostError, dispatch


def _unavailable() -> ray.exceptions.ActorUnavailableError:
    return ray.exceptions.ActorUnavailableError("the actor is restarting", None)


class _Ref:
    """What a stand-in call returns: its value, or the error ``ray.get`` raises."""

    def __init__(self, item: Any, error: Exception | None) -> None:
        self.item, self.error = item, error


class _Scripted:
    """A stand-in actor handle: call *k* of ``work.remote`` fails with ``script[k]``
    (``None``: it succeeds and returns the item); calls past the script succeed."""

    def __init__(self, *script: Exception | None) -> None:
        self.script = list(script)
        self.calls: list[Any] = []
        self.work = self

    def remote(self, item: Any) -> _Ref:
        self.calls.append(item)
        return _Ref(item, self.script.pop(0) if self.script else None)


class _Restarting(_Scripted):
    """An actor Ray restarts until *up_at* on the clock: calls fail until then."""

    def __init__(self, clock: Callable[[], float], up_at: float) -> None:
        super().__init__()
        self.clock, self.up_at = clock, up_at

    def remote(self, item: Any) -> _Ref:
        self.calls.append(item)
        return _Ref(item, _unavailable() if self.clock() < self.up_at else None)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[], float]:
    """dispatch()'s clock: it moves only when dispatch sleeps (its pauses)."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    fake = types.SimpleNamespace(monotonic=lambda: now[0], sleep=sleep)
    monkeypatch.setattr(aclasync.ray, "time", fake)
    return fake.monotonic


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ray.wait`` hands back the oldest call, ``ray.get`` answers it as scripted."""

    def wait(
        refs: list[_Ref], *, num_returns: int, timeout: float | None = None
    ) -> tuple[list[_Ref], list[_Ref]]:
        return refs[:num_returns], refs[num_returns:]

    def get(ref: _Ref) -> Any:
        if ref.error is not None:
            raise ref.error
        return ref.item

    monkeypatch.setattr(ray, "wait", wait)
    monkeypatch.setattr(ray, "get", get)
    monkeypatch.setattr(ray, "cancel", lambda ref: None)


def test_dispatch_checks_its_arguments_at_the_call() -> None:
    read: list[int] = []

    def items() -> Iterator[int]:
        read.append(1)
        yield 1

    actor = _Scripted()
    with pytest.raises(ValueError, match="needs at least one actor"):
        dispatch([], "work", items())
    with pytest.raises(ValueError, match=r"in_flight must be >= 1, got 0"):
        dispatch([actor], "work", items(), in_flight=0)
    for bad in ("2", 1.5, True, None):
        with pytest.raises(TypeError, match=r"in_flight must be an int, got (str|float|bool|None)"):
            dispatch([actor], "work", items(), in_flight=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"actors must be a sequence .* got list_iterator"):
        dispatch(iter([actor]), "work", items())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="method must be a method name"):
        dispatch([actor], actor.work, items())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="items must be iterable, got int"):
        dispatch([actor], "work", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lost must be a list or None, got tuple"):
        dispatch([actor], "work", items(), lost=())  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match=r"actors\[0\] has no method 'wrok'"):
        dispatch([actor], "wrok", items())  # (it came at the first item read)
    assert read == []  # nothing was read, nothing was sent
    assert actor.calls == []


@pytest.mark.usefixtures("fake_ray", "clock")
def test_an_item_lost_to_a_restart_is_sent_again_and_the_actor_kept() -> None:
    actor = _Scripted(_unavailable(), _unavailable())  # two items in flight: one restart
    lost: list[int] = []
    done = list(dispatch([actor], "work", range(4), in_flight=2, lost=lost))
    assert sorted(d.value for d in done) == [0, 1, 2, 3]
    assert lost == []
    assert actor.calls == [0, 1, 0, 1, 2, 3]


@pytest.mark.usefixtures("fake_ray")
def test_a_slow_restart_keeps_the_actor(clock: Callable[[], float]) -> None:
    # Calls made while Ray restarts an actor fail at once: each such failure counted as
    # a restart, and an actor whose restart took seconds was dropped, its items lost.
    actor = _Restarting(clock, up_at=10.0)
    lost: list[int] = []
    done = list(dispatch([actor], "work", range(4), in_flight=2, lost=lost))
    assert sorted(d.value for d in done) == [0, 1, 2, 3]
    assert lost == []
    assert clock() >= 10.0
    assert len(actor.calls) < 30  # paused between tries, not sent work in a loop


@pytest.mark.usefixtures("fake_ray")
def test_an_actor_unavailable_for_a_minute_is_dropped(clock: Callable[[], float]) -> None:
    restarting = _Restarting(clock, up_at=float("inf"))
    lost: list[int] = []
    with pytest.raises(ActorLostError, match="all 1 actors died") as caught:
        list(dispatch([restarting], "work", ["item"], in_flight=1, lost=lost))
    assert isinstance(caught.value.__cause__, ray.exceptions.ActorUnavailableError)
    assert lost == [0]
    assert 60.0 <= clock() < 65.0


@pytest.mark.usefixtures("fake_ray")
def test_a_result_starts_the_count_again(clock: Callable[[], float]) -> None:
    flaky = _Scripted(_unavailable(), _unavailable(), None, _unavailable(), _unavailable())
    lost: list[int] = []
    done = list(dispatch([flaky], "work", range(3), in_flight=1, lost=lost))
    assert sorted(d.value for d in done) == [0, 1, 2]
    assert lost == []


@pytest.mark.usefixtures("fake_ray", "clock")
def test_the_items_of_a_dead_actor_go_to_the_others() -> None:
    dead, healthy = _Scripted(*[ray.exceptions.RayActorError()] * 10), _Scripted()
    lost: list[int] = []
    done = list(dispatch([dead, healthy], "work", range(6), in_flight=1, lost=lost))
    assert sorted(d.value for d in done) == list(range(6))
    assert lost == [0]
    assert {d.actor for d in done} == {1}


@pytest.mark.usefixtures("fake_ray")
def test_the_others_work_while_an_actor_restarts(clock: Callable[[], float]) -> None:
    restarting, healthy = _Restarting(clock, up_at=float("inf")), _Scripted()
    lost: list[int] = []
    done = list(dispatch([restarting, healthy], "work", range(6), in_flight=1, lost=lost))
    assert sorted(d.value for d in done) == list(range(6))
    assert lost == []  # paused, not dead: the items were done before a minute passed
    assert {d.actor for d in done} == {1}
