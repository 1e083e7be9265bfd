"""What the CLI's subcommands share: the expected-failure exception and output targets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

__all__ = ["STDOUT", "CliError", "message_stream", "write_text"]

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


def write_text(path: str, text: str) -> str:
    """Write *text* to the file *path*, or to stdout when *path* is ``-``.

    Returns how to name the destination in a message. Blocks while writing.
    """
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return "standard output"
    target = Path(path)
    target.write_text(text)
    return str(target.resolve())


def message_stream(path: str | None) -> TextIO:
    """Where a subcommand's human-readable report goes: stderr if stdout carries data."""
    return sys.stderr if path == STDOUT else sys.stdout
