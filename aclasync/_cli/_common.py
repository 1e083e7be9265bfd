"""What the CLI's subcommands share: expected errors, event loops, running a coroutine."""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

__all__ = ["LOOP_CHOICES", "CliError", "run_on_loop"]

_T = TypeVar("_T")

#: Event loops by their CLI name: (anyio backend, backend options, module it needs).
_LOOPS: dict[str, tuple[str, dict[str, Any], str]] = {
    "asyncio": ("asyncio", {}, "asyncio"),
    "uvloop": ("asyncio", {"use_uvloop": True}, "uvloop"),
    "trio": ("trio", {}, "trio"),
}

LOOP_CHOICES = tuple(_LOOPS)


class CliError(Exception):
    """An expected failure: printed as one ``aclasync: error: ...`` line, no traceback.

    Parameters
    ----------
    message:
        What went wrong and, where it helps, what to do instead.
    exit_code:
        The process exit status (1 unless the usage was wrong, then 2).
    """

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run_on_loop(loop: str, fn: Callable[[], Awaitable[_T]]) -> _T:
    """Run ``await fn()`` on the event loop named *loop*; blocks until it returns.

    Raises
    ------
    CliError
        If the loop's library (uvloop, trio) is not installed.
    """
    backend, options, module = _LOOPS[loop]
    if importlib.util.find_spec(module) is None:
        raise CliError(f"--loop {loop} needs {module}: pip install 'aclasync[{module}]'")

    async def main() -> _T:
        return await fn()

    return anyio.run(main, backend=backend, backend_options=options)
