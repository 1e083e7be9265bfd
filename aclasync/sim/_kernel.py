"""The simulated kernel: work that occupies a stream for a modelled time."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

__all__ = ["Kernel"]


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A kernel for ``acl.sim.launch_kernel(kernel, stream)``.

    Parameters
    ----------
    duration_us:
        Real time the kernel occupies its stream, in microseconds. When ``fn`` takes
        longer, the kernel lasts as long as ``fn``.
    fn:
        Called with no arguments on the simulated device's core thread when the kernel
        starts. If it raises, the kernel fails with 507015 (ACL_ERROR_RT_AICORE_EXCEPTION).
    overflow:
        Set the overflow status of the stream's context, if the stream's overflow switch
        was on at launch and the device is in saturation mode.
    error:
        An ACL error code the kernel fails with (0: it succeeds). The code is returned
        by the next synchronisation of its stream, honouring the stream's failure mode.
    """

    duration_us: float = 0.0
    fn: Callable[[], Any] | None = None
    overflow: bool = False
    error: int = 0

    def __post_init__(self) -> None:
        duration = self.duration_us
        if isinstance(duration, bool) or not isinstance(duration, (int, float)):
            raise TypeError(f"duration_us must be a number, got {type(duration).__name__}")
        if not math.isfinite(duration) or duration < 0:
            raise ValueError(f"duration_us must be finite and >= 0, got {duration!r}")
        if self.fn is not None and not callable(self.fn):
            raise TypeError(f"fn must be callable or None, got {type(self.fn).__name__}")
        if isinstance(self.error, bool) or not isinstance(self.error, int):
            raise TypeError(f"error must be an int ACL code, got {type(self.error).__name__}")
        if self.error < 0:
            raise ValueError(f"error must be 0 or a positive ACL code, got {self.error}")
