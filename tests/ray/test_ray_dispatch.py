"""``dispatch()`` without a Ray cluster: its argument checks, and how it treats actors
that Ray restarts, over stand-in actor handles whose calls answer as scripted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import ray
import ray.exceptions

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


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ray.wait`` hands back the oldest call, ``ray.get`` answers it as scripted."""

    def wait(refs: list[_Ref], *, num_returns: int) -> tuple[list[_Ref], list[_Ref]]:
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
    assert read == []  # nothing was read, nothing was sent
    assert actor.calls == []


@pytest.mark.usefixtures("fake_ray")
def test_an_item_lost_to_a_restart_is_sent_again_and_the_actor_kept() -> None:
    actor = _Scripted(_unavailable(), _unavailable())  # two items in flight: one restart
    lost: list[int] = []
    done = list(dispatch([actor], "work", range(4), in_flight=2, lost=lost))
    assert sorted(d.value for d in done) == [0, 1, 2, 3]
    assert lost == []
    assert actor.calls == [0, 1, 0, 1, 2, 3]


@pytest.mark.usefixtures("fake_ray")
def test_an_actor_unavailable_three_restarts_in_a_row_is_dropped() -> None:
    restarting = _Scripted(*[_unavailable()] * 10)
    lost: list[int] = []
    with pytest.raises(ActorLostError, match="all 1 actors died") as caught:
        list(dispatch([restarting], "work", ["item"], in_flight=1, lost=lost))
    assert isinstance(caught.value.__cause__, ray.exceptions.ActorUnavailableError)
    assert lost == [0]
    assert restarting.calls == ["item"] * 3


@pytest.mark.usefixtures("fake_ray")
def test_a_result_between_restarts_starts_the_count_again() -> None:
    flaky = _Scripted(_unavailable(), _unavailable(), None, _unavailable(), _unavailable())
    lost: list[int] = []
    done = list(dispatch([flaky], "work", range(3), in_flight=1, lost=lost))
    assert sorted(d.value for d in done) == [0, 1, 2]
    assert lost == []


@pytest.mark.usefixtures("fake_ray")
def test_the_items_of_a_dropped_actor_go_to_the_others() -> None:
    restarting, healthy = _Scripted(*[_unavailable()] * 10), _Scripted()
    lost: list[int] = []
    done = list(dispatch([restarting, healthy], "work", range(6), in_flight=1, lost=lost))
    assert sorted(d.value for d in done) == list(range(6))
    assert lost == [0]
    assert {d.actor for d in done} == {1}
