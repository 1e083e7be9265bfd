"""Checking the command line's options before any work starts.

The ``*_option`` factories return ``type=`` callables for argparse: a bad value is a
usage error (the subcommand's usage, one ``error:`` line, exit status 2) found while
parsing, so that a long run is never lost to a typo in its last option.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ._common import STDOUT, CliError, pyacl_call

__all__ = [
    "MAX_COUNT",
    "available_memory",
    "check_backend_variable",
    "check_fits_in_memory",
    "command_backend",
    "device_count_option",
    "float_option",
    "int_option",
    "native_runtime",
    "output_option",
]

#: The largest count a ``range`` (and so a loop over items) can hold.
MAX_COUNT = sys.maxsize

#: Share of the available memory one run may plan to use.
_MEMORY_SHARE = 0.5


def int_option(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from *low* to *high*, inclusive."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high:,}, got {text}")
        return value

    return parse


def float_option(*, high: float, zero_ok: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number above zero (or zero, if *zero_ok*), up to *high*."""
    floor = "0 or more" if zero_ok else "above 0"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < 0 or (value == 0 and not zero_ok) or value > high:
            raise argparse.ArgumentTypeError(f"must be {floor} and at most {high:g}, got {text}")
        return value

    return parse


def output_option(*, stdout_ok: bool) -> Callable[[str], str]:
    """An argparse type: a file this process can create or overwrite (or ``-``).

    Checks, where a link leads if the path is one, that the parent is an existing,
    writable directory, that the path resolves (a name too long, a loop of links) and
    that it is not a directory or an unwritable file. Nothing is created.
    """

    def parse(text: str) -> str:
        if text == STDOUT:
            if stdout_ok:
                return text
            raise argparse.ArgumentTypeError("needs a file name ('-' is not supported here)")
        if not text.strip():
            raise argparse.ArgumentTypeError("needs a file name, got an empty string")
        if text.endswith(("/", os.sep)):
            raise argparse.ArgumentTypeError(f"{text} names a directory, expected a file name")
        path = Path(text).expanduser()
        if not path.parent.is_dir():  # as written: "missing/../x" fails at the open
            raise argparse.ArgumentTypeError(
                f"cannot write {text}: {path.parent} does not exist or is not a directory"
            )
        try:
            target = Path(os.path.realpath(path, strict=True))  # what is written: a link's end
        except FileNotFoundError:  # a new file, or a link to one
            target = Path(os.path.realpath(path))
        except OSError as exc:  # a name too long, a loop of links
            raise argparse.ArgumentTypeError(f"cannot write {text}: {exc.strerror}") from None
        parent = target.parent
        if target.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a directory, expected a file name")
        if not parent.exists():
            raise argparse.ArgumentTypeError(f"cannot write {text}: {parent} does not exist")
        if not parent.is_dir():
            raise argparse.ArgumentTypeError(f"cannot write {text}: {parent} is not a directory")
        if target.exists() and not os.access(target, os.W_OK):
            raise argparse.ArgumentTypeError(f"cannot write {text}: permission denied")
        if not target.exists() and not os.access(parent, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"cannot write {text}: {parent} is not writable")
        return str(path)

    return parse


def available_memory() -> int:
    """Bytes of memory this process can still use: Linux's ``MemAvailable``, or a guess.

    Falls back on the physical memory size, and on 1 GiB where that is unknown too.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return 1 << 30


def check_fits_in_memory(what: str, needed: float, parser: argparse.ArgumentParser) -> None:
    """Stop with a usage error if *needed* bytes exceed half the available memory."""
    budget = available_memory() * _MEMORY_SHARE
    if needed > budget:
        parser.error(
            f"{what} needs about {_gib(needed)} of memory; this machine has "
            f"{_gib(budget / _MEMORY_SHARE)} available (a run may plan to use half)"
        )


def check_backend_variable(parser: argparse.ArgumentParser) -> str | None:
    """Return the backend ``$ACLASYNC_BACKEND`` names, or ``None`` when it is unset.

    A value that names no backend is a usage error (usage, one error line, exit 2).
    """
    from .._backend import backend_from_env  # here: it imports anyio (see _cli's main)

    try:
        return backend_from_env()
    except ValueError as exc:
        parser.error(str(exc))


def command_backend(parser: argparse.ArgumentParser) -> str:
    """The backend ``demo``, ``trace`` and ``bench`` run on: ``native`` when
    ``$ACLASYNC_BACKEND`` says so, else the simulator (unset included).

    A value that names no backend is a usage error (usage, one error line, exit 2).
    """
    return "native" if check_backend_variable(parser) == "native" else "sim"


def native_runtime() -> tuple[object, int]:
    """The native ``acl`` module and its device count.

    Raises
    ------
    aclasync.BackendUnavailableError
        If ``import acl`` fails (no CANN here).
    CliError
        If the runtime answers ``get_device_count`` with an error or no devices.
    """
    from .._backend import ENV_VAR, resolve_backend

    acl, _ = resolve_backend("native")
    count, ret = pyacl_call(acl, "rt.get_device_count")
    if ret or count < 1:
        raise CliError(
            f"{ENV_VAR}=native: acl.rt.get_device_count() gave ({count}, {ret}): "
            "no device to run on"
        )
    return acl, int(count)


def device_count_option(requested: int | None, default: int, backend: str) -> int:
    """The number of devices a command uses: *requested*, else *default* (capped by
    what the native runtime has). Asking the native runtime for more devices than it
    has is an error (``CliError``)."""
    if backend != "native":
        return default if requested is None else requested
    _, available = native_runtime()
    if requested is None:
        return min(default, available)
    if requested > available:
        raise CliError(f"--devices {requested}: the native runtime has {available} device(s)")
    return requested


def _gib(nbytes: float) -> str:
    return f"{nbytes / (1 << 30):,.1f} GiB"
