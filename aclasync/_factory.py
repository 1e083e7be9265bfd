"""Base classes of aclasync's objects: factory-only construction (as in trio and
cuda.core) and trio's ``AsyncResource`` shape (``async with`` calls ``aclose``)."""

from __future__ import annotations

from collections.abc import Generator
from types import TracebackType
from typing import Any, Generic, TypeVar

from ._loop import is_cancellation

__all__ = ["AsyncResource", "Creation", "NoPublicConstructor"]

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
        try:
            await self.aclose()
        except BaseException as error:
            # Rule 6: the close never replaces the exception in flight; a cancellation
            # its checkpoint met (the block's scope was cancelled too) comes again at
            # the next one, and the scope would have dropped that exception with it.
            if exc is None or error is exc or not is_cancellation(error):
                raise


class Creation(Generic[_R]):
    """What a factory returns: ``await`` it for the resource (then close it yourself), or
    use it with ``async with``, which closes the resource when the block exits.

    Subclasses implement ``_create``. The close on exit goes through the resource's own
    ``__aexit__``, so an exception ending the block is handed on (a resource that adds
    unreported failures as notes sees it).
    """

    _resource: _R | None = None

    async def _create(self) -> _R:
        raise NotImplementedError

    def __await__(self) -> Generator[Any, None, _R]:
        return self._create().__await__()

    async def __aenter__(self) -> _R:
        self._resource = await self._create()
        return self._resource

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._resource is not None:
            await self._resource.__aexit__(exc_type, exc, tb)
