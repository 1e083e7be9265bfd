"""Base classes of aclasync's objects: factory-only construction (as in trio and
cuda.core) and trio's ``AsyncResource`` shape (``async with`` calls ``aclose``)."""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeVar

__all__ = ["AsyncResource", "NoPublicConstructor"]

_T = TypeVar("_T")
_R = TypeVar("_R", bound="AsyncResource")


class NoPublicConstructor(type):
    """Metaclass: calling the class raises; the library builds instances with ``_create``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} has no public constructor; "
            "get one from its factory (aclasync.open_device, Device.create_stream, "
            "Stream.record_event)"
        )

    def _create(cls: type[_T], *args: Any, **kwargs: Any) -> _T:
        return super().__call__(*args, **kwargs)  # type: ignore[misc, no-any-return]


class AsyncResource(metaclass=NoPublicConstructor):
    """A resource with an idempotent ``aclose()``; ``async with`` closes it on exit."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _R) -> _R:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
