"""What the CLI's subcommands share: the expected-failure exception and output targets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ..sim import SimAcl

__all__ = [
    "STDOUT",
    "CliError",
    "call_text",
    "message_stream",
    "pyacl_call",
    "sim_runtime",
    "write_text",
]

#: The output path that means standard output.
STDOUT = "-"


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


def sim_runtime(devices: int) -> SimAcl:
    """A fresh simulator with *devices* devices, every one visible.

    ``ASCEND_RT_VISIBLE_DEVICES`` chooses among a host's real cards: the command line's
    own simulated runtimes ignore it, as the pytest plugin's do.
    """
    from .. import sim

    return sim.create(device_count=devices, visible_devices=range(devices))


def write_text(path: str, text: str) -> str:
    """Write *text* to the file *path*, or to stdout when *path* is ``-``.

    Returns how to name the destination in a message. Blocks while writing. Raises
    ``CliError`` naming the file if it cannot be written (a full disk, say).
    """
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return "standard output"
    target = Path(path)
    try:
        target.write_text(text)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return str(target.resolve())


def message_stream(path: str | None) -> TextIO:
    """Where a subcommand's human-readable report goes: stderr if stdout carries data."""
    return sys.stderr if path == STDOUT else sys.stdout


def call_text(name: str, args: tuple[Any, ...]) -> str:
    """How a call of ``acl.<name>`` with *args* is written in a message."""
    return f"acl.{name}({', '.join(repr(arg) for arg in args)})"


def pyacl_call(acl: Any, name: str, *args: Any, size: int = 2) -> Any:
    """Call ``acl.<name>(*args)`` and check the shape of its result: a *size*-tuple
    ending in an ``int`` status, as pyACL's calls return (*size* 1: a bare ``int``
    status; 0: any result).

    Raises
    ------
    CliError
        Saying so, if the call is missing, raises (chained to what it raised) or
        returns a result not shaped as pyACL's: a module that is not pyACL is one
        error line naming the call, not a traceback.
    """
    target = acl
    for part in name.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise CliError(f"the acl module has no acl.{name}: is it pyACL?")
    call = call_text(name, args)
    try:
        result = target(*args)
    except Exception as exc:  # pyACL answers with a status: say which call raised instead
        raise CliError(f"{call} raised {type(exc).__name__}: {exc}") from exc
    if size == 1 and not isinstance(result, int):
        raise CliError(
            f"{call} returned {result!r}, not the int status that pyACL returns: "
            "is the acl module pyACL?"
        )
    if size > 1 and not (
        isinstance(result, tuple) and len(result) == size and isinstance(result[-1], int)
    ):
        raise CliError(
            f"{call} returned {result!r}, not the {size}-tuple ending in a status "
            "that pyACL returns: is the acl module pyACL?"
        )
    return result
