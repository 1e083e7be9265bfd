"""Helpers of the ``Model`` tests: the test model's body and a recording backend proxy."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np


def scale_shift(x: Any, bias: Any) -> tuple[Any, Any]:
    """The test model's body, and its host reference."""
    return x * 2.0 + bias, x.sum(axis=1).astype(np.int64)


class _Namespace:
    """Forwards attributes of one backend namespace, recording each call's name."""

    def __init__(self, inner: Any, name: str, record: Callable[[str, str], None]) -> None:
        self._inner = inner
        self._name = name
        self._record = record

    def __getattr__(self, attribute: str) -> Any:
        target = getattr(self._inner, attribute)
        if not callable(target):
            return target
        record, namespace = self._record, self._name

        def call(*args: Any) -> Any:
            record(namespace, attribute)
            return target(*args)

        call.__name__ = attribute
        return call


class RecordingAcl:
    """A pyACL-shaped proxy recording ``(namespace, call)`` for every call through it.

    ``rt``, ``util``, ``mdl`` and ``sim`` are proxied, and so are top-level calls
    (namespace ``""``), so a test can tell exactly which parts of the backend were used.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.calls: list[tuple[str, str]] = []
        for name in ("rt", "util", "mdl", "sim"):
            setattr(self, name, _Namespace(getattr(inner, name), name, self._add))
        self._top = _Namespace(inner, "", self._add)

    def _add(self, namespace: str, name: str) -> None:
        with self._lock:
            self.calls.append((namespace, name))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._top, name)

    def recorded(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self.calls)


class BreakingAcl:
    """A simulated runtime whose timed waits raise once ``armed`` is set: the device
    worker (or its waiting thread) dies in them, as on a backend fault."""

    _BREAKING = frozenset(
        {"query_event_status", "synchronize_event_with_timeout", "synchronize_stream_with_timeout"}
    )

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.armed = threading.Event()
        self.rt = _BreakingRt(inner.rt, self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _BreakingRt:
    def __init__(self, inner: Any, owner: BreakingAcl) -> None:
        self._inner = inner
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name not in BreakingAcl._BREAKING:
            return target
        armed = self._owner.armed

        def call(*args: Any) -> Any:
            if armed.is_set():
                raise RuntimeError("injected backend failure")
            return target(*args)

        return call
