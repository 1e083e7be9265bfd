"""Helpers shared by the pool tests: a simulated runtime whose ``acl.rt`` calls a test
can replace, hold behind a gate or make fail."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

#: ``hook(name, args, call)``: run instead of ``acl.rt.<name>(*args)``; ``call`` is the
#: real one, for the hook to call or not.
Hook = Callable[[str, tuple[Any, ...], Callable[..., Any]], Any]


class HookedAcl:
    """A pyACL-shaped object over a simulated runtime; every ``acl.rt`` call goes
    through ``hook`` (by default, straight to the runtime). Set ``hook`` at any time."""

    def __init__(self, inner: Any, hook: Hook | None = None) -> None:
        self._inner = inner
        self.hook: Hook = hook or passing
        self.rt = _HookedRt(inner.rt, self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _HookedRt:
    def __init__(self, inner: Any, owner: HookedAcl) -> None:
        self._inner, self._owner = inner, owner

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        def call(*args: Any) -> Any:
            return self._owner.hook(name, args, target)

        call.__name__ = name
        return call


class HeldCall:
    """``acl.rt.<name>`` with first argument *first* (any if None), held until
    ``release()``; ``reached`` is set once a call is held."""

    def __init__(self, name: str, first: Any = None, limit: float = 20.0) -> None:
        self.name, self.first, self._limit = name, first, limit
        self.reached = threading.Event()
        self._gate = threading.Event()

    def matches(self, name: str, args: tuple[Any, ...]) -> bool:
        return name == self.name and (self.first is None or (args and args[0] == self.first))

    def hold(self) -> None:
        self.reached.set()
        self._gate.wait(self._limit)

    def release(self) -> None:
        self._gate.set()

    async def wait_reached(self, limit: float = 10.0) -> None:
        """Return once a call is held (the holder is another thread)."""
        if not await anyio.to_thread.run_sync(self.reached.wait, limit):
            raise TimeoutError(f"acl.rt.{self.name} was not called within {limit} s")


def holding(*held: HeldCall, returning: dict[tuple[str, Any], Any] | None = None) -> Hook:
    """A hook that holds the calls *held* match, then makes each call keyed in
    *returning* (by ``(name, first argument)``, or ``(name, None)`` for any) return that
    value instead of running."""
    answers = returning or {}

    def hook(name: str, args: tuple[Any, ...], call: Callable[..., Any]) -> Any:
        for each in held:
            if each.matches(name, args):
                each.hold()
        for key in ((name, args[0] if args else None), (name, None)):
            if key in answers:
                return answers[key]
        return call(*args)

    return hook


def passing(name: str, args: tuple[Any, ...], call: Callable[..., Any]) -> Any:
    """The hook that changes nothing."""
    return call(*args)
