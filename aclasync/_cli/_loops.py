"""The event loops the command line runs on, and running a coroutine on one of them.

``run_on_loop`` turns Ctrl-C into cancellation: while the coroutine runs, SIGINT
cancels it (so every ``async with`` below unwinds, devices close and the simulator's
threads stop) and ``KeyboardInterrupt`` is raised once it has unwound. A second Ctrl-C,
or a clean-up still running after ``GRACE_S``, ends the process at once (exit 130).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ._common import CliError

if TYPE_CHECKING:
    import anyio.abc

__all__ = [
    "GRACE_S",
    "LOOPS",
    "LOOP_CHOICES",
    "arm_watchdog",
    "deferred_interrupts",
    "disarm_watchdog",
    "exit_now",
    "loop_unavailable",
    "require_loop",
    "run_on_loop",
    "temporary_directory",
]

_T = TypeVar("_T")

#: Event loops by their CLI name: (anyio backend, backend options, module it needs).
LOOPS: dict[str, tuple[str, dict[str, Any], str]] = {
    "asyncio": ("asyncio", {}, "asyncio"),
    "uvloop": ("asyncio", {"use_uvloop": True}, "uvloop"),
    "trio": ("trio", {}, "trio"),
}

LOOP_CHOICES = tuple(LOOPS)

#: The loop modules that an extra of aclasync installs (the others come with it).
_EXTRAS = ("uvloop",)

#: Seconds the clean-up after Ctrl-C may take before the process exits without it.
GRACE_S = 4.0

# Process-wide by nature (it ends the process); main() disarms it when it returns.
_watchdog_lock = threading.Lock()
_watchdog: threading.Timer | None = None
# The directories of the ``temporary_directory`` blocks running: exit_now removes them.
_directories_lock = threading.Lock()
_directories: set[str] = set()


def loop_unavailable(name: str) -> str | None:
    """Return why the loop *name* cannot run here, or ``None`` if it can."""
    if name not in LOOPS:
        return f"unknown loop {name!r}; expected one of {', '.join(LOOPS)}"
    module = LOOPS[name][2]
    if importlib.util.find_spec(module) is None:
        if module not in _EXTRAS:  # a dependency of aclasync's own: a broken install
            return f"{module} is not installed, though aclasync depends on it: pip install {module}"
        return (
            f"{module} is not installed: pip install 'aclasync[{module}]' "
            f"(in a checkout: pip install -e '.[{module}]')"
        )
    return None


def require_loop(name: str) -> None:
    """Raise ``CliError`` (exit status 1) if the loop *name* cannot run here.

    Commands call it before they print or start anything.
    """
    why = loop_unavailable(name)
    if why is not None:
        raise CliError(f"--loop {name}: {why}")


def run_on_loop(loop: str, fn: Callable[..., Awaitable[_T]], *args: Any) -> _T:
    """Run ``await fn(*args)`` on a fresh event loop of kind *loop*; block until done.

    On the main thread, SIGINT cancels the coroutine; ``KeyboardInterrupt`` is raised
    after it has unwound, whatever it returned or raised meanwhile.

    Raises
    ------
    CliError
        If the loop's library (uvloop, trio) is not installed.
    KeyboardInterrupt
        After Ctrl-C.
    """
    import anyio  # here, not at the top: see _cli's main

    require_loop(loop)
    backend, options, _ = LOOPS[loop]
    if threading.current_thread() is not threading.main_thread():
        return anyio.run(fn, *args, backend=backend, backend_options=options)
    return anyio.run(_interruptible, fn, args, backend=backend, backend_options=options)


def arm_watchdog() -> None:
    """Make sure the process ends within ``GRACE_S`` from now, clean-up done or not.

    Idempotent; ``disarm_watchdog`` undoes it (``main`` does, when it returns).
    """
    global _watchdog
    with _watchdog_lock:
        if _watchdog is None:
            _watchdog = threading.Timer(GRACE_S, exit_now, kwargs={"why": "clean-up timed out"})
            _watchdog.daemon = True
            _watchdog.start()


def disarm_watchdog() -> None:
    """Cancel the timer ``arm_watchdog`` started, if any."""
    global _watchdog
    with _watchdog_lock:
        if _watchdog is not None:
            _watchdog.cancel()
            _watchdog = None


async def _interruptible(fn: Callable[..., Awaitable[_T]], args: tuple[Any, ...]) -> _T:
    import anyio

    work = anyio.CancelScope()
    interrupted = False
    error: Exception | None = None
    result: list[_T] = []

    async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                if interrupted:
                    exit_now(why="interrupted twice")
                interrupted = True
                arm_watchdog()
                work.cancel()

    async with anyio.create_task_group() as tg:
        await tg.start(watch)
        with work:
            try:
                result.append(await fn(*args))
            except Exception as exc:  # re-raised below, outside the task group's wrapping
                error = exc
        tg.cancel_scope.cancel()
    if interrupted:
        raise KeyboardInterrupt
    if error is not None:
        raise error
    if not result:  # cancelled from outside (not by us): unwound like an interrupt
        raise KeyboardInterrupt
    return result[0]


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[Callable[[], None]]:
    """Hold Ctrl-C until the body's next checkpoint, for plain synchronous runtime work.

    Python's own handler raises ``KeyboardInterrupt`` wherever the main thread is,
    inside a runtime's ``set_device`` too, leaving a device half set up and its threads
    running. Within the block the first SIGINT is only noted (and arms the watchdog);
    the checkpoint yielded raises ``KeyboardInterrupt`` once it came, where the work
    can unwind (so call it between steps that each release what they acquired). A
    second SIGINT ends the process at once. ``run_on_loop`` inside the block takes
    SIGINT over while its loop runs. Elsewhere than on the main thread with Python's
    own handler in place, nothing changes and the checkpoint does nothing.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield lambda: None
        return
    pressed = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        if pressed.is_set():
            exit_now(why="interrupted twice")
        pressed.set()
        arm_watchdog()

    def checkpoint() -> None:
        if pressed.is_set():
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield checkpoint
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    checkpoint()  # a Ctrl-C during the last step


@contextlib.contextmanager
def temporary_directory(prefix: str = "aclasync-") -> Iterator[str]:
    """``tempfile.TemporaryDirectory(prefix=...)`` that ``exit_now`` removes as well."""
    with tempfile.TemporaryDirectory(prefix=prefix) as directory:
        with _directories_lock:
            _directories.add(directory)
        try:
            yield directory
        finally:
            with _directories_lock:
                _directories.discard(directory)


def exit_now(*, why: str) -> None:
    """Leave at once with status 130, flushing what can be flushed and removing the
    directories of running ``temporary_directory`` blocks."""
    with contextlib.suppress(OSError, ValueError):
        print(f"aclasync: interrupted ({why})", file=sys.stderr, flush=True)
        sys.stdout.flush()
    with _directories_lock:
        directories = list(_directories)
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)
    os._exit(130)
