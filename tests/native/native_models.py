"""A model body for self-contained simulated model files (``"fn": "native_models:double"``)."""

from __future__ import annotations

from typing import Any

__all__ = ["double"]


def double(x: Any) -> Any:
    """Twice the input."""
    return x * 2
