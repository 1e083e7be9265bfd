"""What every benchmark shares: sizes, progress, raw-runtime helpers.

The event loops and ``run_on_loop`` are the command line's own (``.._loops``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from aclasync._backend import is_aclasync_simulator
from aclasync.sim import Kernel

from .._common import sim_runtime
from .._loops import run_on_loop
from .._options import native_runtime

__all__ = [
    "BenchConfig",
    "Progress",
    "Skip",
    "Target",
    "check",
    "column",
    "expect",
    "raw_close",
    "raw_open",
    "run_on_loop",
    "warm_stream",
    "warm_up",
]

_T = TypeVar("_T")

#: A progress sink: called with one line of text per step.
Progress = Callable[[str], None]


class Skip(Exception):
    """Raised by a benchmark that cannot run here; the message says why."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Target:
    """Where a benchmark's devices are and what work they run.

    Parameters
    ----------
    backend:
        ``"sim"``: each measurement gets a fresh simulator of its own (``runtime``);
        ``"native"``: the ``acl`` module (CANN's, or the simulator imported as ``acl``).
    workload:
        ``_workload`` kind to run (``None``: the runtime's default).
    model:
        An offline model's file for ``bench model`` (``None``: a registered simulated one).
    """

    backend: str = "sim"
    workload: str | None = None
    model: str | None = None

    @property
    def native(self) -> bool:
        return self.backend == "native"

    @property
    def simulated(self) -> bool:
        """Whether the devices are aclasync's simulator (the native ``acl`` may be it)."""
        return not self.native or is_aclasync_simulator(native_runtime()[0])

    def runtime(self, devices: int) -> Any:
        """A runtime with *devices* devices: a fresh simulator, or the native ``acl``."""
        if self.native:
            acl, _ = native_runtime()
            return acl
        return sim_runtime(devices)

    def release(self, acl: Any) -> None:
        """Close a runtime from ``runtime`` (the native one stays as it is)."""
        if not self.native:
            acl.sim.close()

    @contextlib.contextmanager
    def opened(self, devices: int) -> Iterator[Any]:
        """``runtime(devices)``, released when the block ends however it ends."""
        acl = self.runtime(devices)
        try:
            yield acl
        finally:
            self.release(acl)

    def devices(self, wanted: int) -> int:
        """How many of *wanted* devices there are: all on the simulator, at most the
        native runtime's count."""
        return min(wanted, native_runtime()[1]) if self.native else wanted


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
    target:
        The backend and the device work (``Target``).
    """

    quick: bool
    loops: tuple[str, ...]
    progress: Progress
    scale: float = 1.0
    seconds: float | None = None
    target: Target = dataclasses.field(default_factory=Target)

    def size(self, full: int, quick: int, *, minimum: int = 1) -> int:
        """Return the full or quick size, times ``scale``, at least *minimum*."""
        return max(minimum, round((quick if self.quick else full) * self.scale))


def expect(ret: int, api: str) -> None:
    """Raise ``RuntimeError`` if a raw runtime call returned a non-zero status."""
    if ret:
        raise RuntimeError(f"{api} returned {ret}")


def raw_open(acl: Any, device_id: int, flags: int = 0) -> tuple[int, int]:
    """On the calling thread: set the device and make a warmed-up stream.

    Returns ``(context, stream)``. The stream has run one task (``warm_up``), so it has
    paid its first-launch set-up cost. Blocks.
    """
    rt = acl.rt
    expect(rt.set_device(device_id), "acl.rt.set_device")
    context, ret = rt.get_context()
    expect(ret, "acl.rt.get_context")
    stream, ret = rt.create_stream_with_config(0, flags)
    expect(ret, "acl.rt.create_stream_with_config")
    warm_up(acl, stream)
    return int(context), int(stream)


def make_streams(rt: Any, modes: dict[str, int], streams: dict[str, int]) -> None:
    """On a thread with a context: create a stream per mode (its flags) into *streams*.

    Raises at the first failure; the streams made so far stay in *streams*, for the
    caller to destroy. Blocks.
    """
    for mode, flags in modes.items():
        handle, ret = rt.create_stream_with_config(0, flags)
        expect(ret, "acl.rt.create_stream_with_config")
        streams[mode] = int(handle)


def warm_up(acl: Any, stream: int) -> None:
    """Run one empty task on *stream* and wait for it (on a thread with its context).

    An empty simulated kernel where ``acl.sim`` exists (as always on the simulator),
    else an event record, with pyACL alone. Blocks.
    """
    if hasattr(acl, "sim"):
        expect(acl.sim.launch_kernel(Kernel(), stream), "acl.sim.launch_kernel")
    else:
        event, ret = acl.rt.create_event()
        expect(ret, "acl.rt.create_event")
        try:
            expect(acl.rt.record_event(event, stream), "acl.rt.record_event")
        finally:
            expect(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
            acl.rt.destroy_event(event)
        return
    expect(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")


async def warm_stream(stream: Any) -> None:
    """``warm_up`` for an aclasync stream: one empty task, awaited."""
    acl = stream.device.acl
    if hasattr(acl, "sim"):
        stream.launch(acl.sim.launch_kernel, Kernel())
    else:
        event = await stream.record_event()
        await event.aclose()
    await stream.synchronize()


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
