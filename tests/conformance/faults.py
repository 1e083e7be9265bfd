"""A pyACL-shaped backend with faults: a runtime with some of its calls replaced.

The conformance checks' tests (and the doctor's) use it to show that each check fails,
naming the difference, when a runtime differs from what aclasync relies on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Faulty"]


class _Namespace:
    """A module of *base* with some functions replaced."""

    def __init__(self, base: Any, replaced: dict[str, Callable[..., Any]]) -> None:
        self._base = base
        self._replaced = replaced

    def __getattr__(self, name: str) -> Any:
        if name in self._replaced:
            return self._replaced[name]
        return getattr(self._base, name)


class Faulty:
    """A pyACL-shaped backend: *acl* with the calls named like ``"rt.create_stream"``
    (or ``"get_version"``) replaced."""

    def __init__(self, acl: Any, **replaced: Callable[..., Any]) -> None:
        def part(prefix: str) -> dict[str, Callable[..., Any]]:
            return {k[len(prefix) :]: v for k, v in replaced.items() if k.startswith(prefix)}

        self.rt = _Namespace(acl.rt, part("rt_"))
        self.util = acl.util
        self.mdl = acl.mdl
        self._top = {k: v for k, v in replaced.items() if not k.startswith("rt_")}
        self._acl = acl

    def __getattr__(self, name: str) -> Any:
        if name in self._top:
            return self._top[name]
        return getattr(self._acl, name)
