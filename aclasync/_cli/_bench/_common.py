"""What every benchmark shares: sizes, progress, raw-runtime helpers.

The event loops and ``run_on_loop`` are the command line's own (``.._loops``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from aclasync.sim import Kernel

from .._loops import run_on_loop

__all__ = [
    "BenchConfig",
    "Progress",
    "Skip",
    "check",
    "column",
    "expect",
    "raw_close",
    "raw_open",
    "run_on_loop",
]

_T = TypeVar("_T")

#: A progress sink: called with one line of text per step.
Progress = Callable[[str], None]


class Skip(Exception):
    """Raised by a benchmark that cannot run here; the message says why."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """How one benchmark is to run.

    Parameters
    ----------
    quick:
        Use the small sizes (the whole suite in about a minute and a half).
    loops:
        Names from ``LOOPS`` to run on, already checked to be available.
    progress:
        Receives a line of text per step.
    scale:
        Multiplies every sample count and problem size (tests use tiny values).
    seconds:
        How long a timed benchmark (``soak``) runs per loop; ``None``: its default.
    """

    quick: bool
    loops: tuple[str, ...]
    progress: Progress
    scale: float = 1.0
    seconds: float | None = None

    def size(self, full: int, quick: int, *, minimum: int = 1) -> int:
        """Return the full or quick size, times ``scale``, at least *minimum*."""
        return max(minimum, round((quick if self.quick else full) * self.scale))


def expect(ret: int, api: str) -> None:
    """Raise ``RuntimeError`` if a raw runtime call returned a non-zero status."""
    if ret:
        raise RuntimeError(f"{api} returned {ret}")


def raw_open(acl: Any, device_id: int, flags: int = 0) -> tuple[int, int]:
    """On the calling thread: set the device and make a warmed-up stream.

    Returns ``(context, stream)``. The stream has run one kernel, so it has paid its
    first-launch set-up cost. Blocks.
    """
    rt = acl.rt
    expect(rt.set_device(device_id), "acl.rt.set_device")
    context, ret = rt.get_context()
    expect(ret, "acl.rt.get_context")
    stream, ret = rt.create_stream_with_config(0, flags)
    expect(ret, "acl.rt.create_stream_with_config")
    expect(acl.sim.launch_kernel(Kernel(), stream), "acl.sim.launch_kernel")
    expect(rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
    return int(context), int(stream)


def raw_close(acl: Any, device_id: int, context: int, stream: int) -> None:
    """On the calling thread: destroy *stream* and drop the device reference. Blocks."""
    rt = acl.rt
    expect(rt.set_context(context), "acl.rt.set_context")
    expect(rt.destroy_stream(stream), "acl.rt.destroy_stream")
    expect(rt.reset_device(device_id), "acl.rt.reset_device")


def column(key: str, header: str, fmt: str = "") -> dict[str, str]:
    """Describe a table column: the row key, its header and a format spec."""
    return {"key": key, "header": header, "fmt": fmt}


def check(what: str, value: float | None, target: str, ok: bool | None) -> dict[str, Any]:
    """Describe a target check (``ok`` is ``None`` when it could not be measured)."""
    return {"what": what, "value": value, "target": target, "ok": ok}
