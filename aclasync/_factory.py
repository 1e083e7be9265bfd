"""Objects that come from factories only (``dev.create_stream()``), as in trio and cuda.core."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["NoPublicConstructor"]

_T = TypeVar("_T")


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
