"""Small statistics for noisy timings: percentiles, summaries and ratios."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["percentile", "ratio", "summarize"]


def percentile(samples: Sequence[float], q: float) -> float:
    """Return the *q*-th percentile (0-100) of *samples*, interpolating linearly.

    Parameters
    ----------
    samples:
        The values; they need not be sorted. Must not be empty.
    q:
        The percentile, from 0 (the minimum) to 100 (the maximum).
    """
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be between 0 and 100, got {q}")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def summarize(samples: Sequence[float], *, scale: float = 1.0) -> dict[str, float]:
    """Return the count, median, p99, min, max and mean of *samples*, times *scale*.

    Medians and tail percentiles are what the suite reports: on a shared machine a
    mean is dragged around by the odd descheduled sample.
    """
    if not samples:
        raise ValueError("summarize needs at least one sample")
    return {
        "n": float(len(samples)),
        "median": percentile(samples, 50) * scale,
        "p99": percentile(samples, 99) * scale,
        "min": min(samples) * scale,
        "max": max(samples) * scale,
        "mean": math.fsum(samples) / len(samples) * scale,
    }


def ratio(numerator: float, denominator: float) -> float | None:
    """Return ``numerator / denominator``, or ``None`` when the denominator is zero."""
    if denominator == 0 or math.isnan(denominator) or math.isnan(numerator):
        return None
    return numerator / denominator
