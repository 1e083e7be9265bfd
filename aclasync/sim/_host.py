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

__all__ = ["MAPS_PATH", "forget_mapping", "host_view", "is_mapped", "page_size"]

#: Where the kernel lists the process's mappings.
MAPS_PATH = "/proc/self/maps"
MEM_PATH = "/proc/self/mem"
#: Ranges up to this many pages are checked against cached maps plus page probes.
PROBED_PAGES = 16
_PAGE = os.sysconf("SC_PAGE_SIZE")

_read_lock = threading.Lock()


def _mappings() -> list[tuple[int, int, str]]:
    """Return ``(start, end, perms)`` of every mapping, in address order."""
    with open(MAPS_PATH, "rb") as maps:
        text = maps.read()
    found = []
    for line in text.splitlines():
        span, _, rest = line.partition(b" ")
        start, _, end = span.partition(b"-")
        found.append((int(start, 16), int(end, 16), rest[:4].decode()))
    return found


def _covers(mappings: list[tuple[int, int, str]], address: int, end: int, need: str) -> bool:
    cursor = address
    for start, stop, perms in mappings:
        if stop <= cursor:
            continue
        if start > cursor or need not in perms or "r" not in perms:
            return False
        cursor = stop
        if cursor >= end:
            return True
    return False


class _MapsCache:
    """The last maps read, trusted for short ranges whose every page still reads.

    Probing a page is a one-byte ``pread`` of ``/proc/self/mem`` (EIO when unmapped),
    about 50 times cheaper than reading the maps again.
    """

    def __init__(self) -> None:
        self.mappings: list[tuple[int, int, str]] = []
        self._mem_fd: int | None = None
        self._pid = 0

    def probe(self, address: int, end: int) -> bool:
        if self._mem_fd is None or self._pid != os.getpid():  # a forked child reopens
            try:
                self._mem_fd = os.open(MEM_PATH, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return False
            self._pid = os.getpid()
        page = _PAGE
        first = address - address % page
        try:
            for offset in range(first, end, page):
                os.pread(self._mem_fd, 1, max(offset, address))
        except OSError:
            return False
        return True


_cache = _MapsCache()


def is_mapped(address: int, count: int, *, write: bool) -> bool:
    """Whether ``[address, address + count)`` is mapped readable (and writable if asked).

    The range may span adjacent mappings. A short range (up to ``PROBED_PAGES`` pages)
    found in the cached maps is confirmed by probing each of its pages; anything else
    reads the maps afresh, so memory the process has since unmapped is refused.
    """
    if address <= 0 or count < 0:
        return False
    end = address + max(count, 1)
    need = "w" if write else "r"
    short = (end - address) <= PROBED_PAGES * _PAGE
    with _read_lock:
        if short and _covers(_cache.mappings, address, end, need) and _cache.probe(address, end):
            return True
    mappings = _mappings()
    with _read_lock:
        _cache.mappings = mappings
    return _covers(mappings, address, end, need)


def forget_mapping(address: int, size: int) -> None:
    """Drop the cached maps that touch ``[address, address + size)``: the simulator
    has just unmapped that memory of its own, and a later mapping (read-only, say) may
    take its addresses. A copy there then reads the maps afresh.

    No lock: it may run wherever a block is freed, even inside ``is_mapped``.
    """
    start = address - address % _PAGE
    end = address + size
    _cache.mappings = [m for m in _cache.mappings if m[1] <= start or m[0] >= end]


def host_view(address: int, count: int, *, write: bool) -> memoryview | None:
    """A byte view of real host memory at *address*, or None if it is not mapped so."""
    if count == 0:
        return memoryview(bytearray())
    if not is_mapped(address, count, write=write):
        return None
    return memoryview((ctypes.c_char * count).from_address(address)).cast("B")


def page_size() -> int:
    """The host page size, for ``pointer_get_attributes``."""
    return _PAGE
