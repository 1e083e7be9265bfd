"""Host memory as pyACL sees it: any address the process has mapped.

The real runtime copies to and from whatever host address it is given. The simulator
does the same with ``ctypes.memmove``-backed views, after checking that the whole range
lies in mappings of ``/proc/self/maps`` with the access the copy needs, so that a bad
pointer is an error code instead of a crash.
"""

from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["MAPS_PATH", "host_view", "is_mapped"]

#: Where the kernel lists the process's mappings.
MAPS_PATH = "/proc/self/maps"

_read_lock = threading.Lock()


def _mappings() -> list[tuple[int, int, str]]:
    """Return ``(start, end, perms)`` of every mapping, in address order."""
    with _read_lock, open(MAPS_PATH, "rb") as maps:
        text = maps.read()
    found = []
    for line in text.splitlines():
        span, _, rest = line.partition(b" ")
        start, _, end = span.partition(b"-")
        found.append((int(start, 16), int(end, 16), rest[:4].decode()))
    return found


def is_mapped(address: int, count: int, *, write: bool) -> bool:
    """Whether ``[address, address + count)`` is mapped readable (and writable if asked).

    The range may span adjacent mappings. The maps file is read afresh on every call:
    a cached copy could still list memory the process has since unmapped.
    """
    if address <= 0 or count < 0:
        return False
    end = address + max(count, 1)
    need = "w" if write else "r"
    cursor = address
    for start, stop, perms in _mappings():
        if stop <= cursor:
            continue
        if start > cursor or need not in perms or "r" not in perms:
            return False
        cursor = stop
        if cursor >= end:
            return True
    return False


def host_view(address: int, count: int, *, write: bool) -> memoryview | None:
    """A byte view of real host memory at *address*, or None if it is not mapped so."""
    if count == 0:
        return memoryview(bytearray())
    if not is_mapped(address, count, write=write):
        return None
    return memoryview((ctypes.c_char * count).from_address(address)).cast("B")


def page_size() -> int:
    """The host page size, for ``pointer_get_attributes``."""
    return os.sysconf("SC_PAGE_SIZE")
