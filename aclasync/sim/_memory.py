"""Simulated memory: device address spaces and the host buffers the runtime knows."""

from __future__ import annotations

import bisect
import ctypes
import mmap
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ._host import forget_mapping

__all__ = ["DeviceMemory", "HostMemory", "Region", "device_base"]

_DEVICE_BASE = 0x1000_0000_0000
_DEVICE_SPAN = 0x100_0000_0000  # 1 TiB of address space per device
#: Blocks from this size on are mapped lazily; smaller ones are heap bytes, quicker to
#: make and to free.
_LAZY_MIN = 1 << 20


def device_base(device_id: int) -> int:
    """Return the first address of *device_id*'s address range."""
    return _DEVICE_BASE + device_id * _DEVICE_SPAN


def _zeroed(size: int) -> memoryview | None:
    """*size* zero bytes; None if the host cannot give them.

    From ``_LAZY_MIN`` bytes on, an anonymous private mapping: the kernel commits its
    pages one at a time, as they are first written, so a large block that is barely
    used costs little host memory. It is unmapped when its last view goes.
    """
    try:
        if size < _LAZY_MIN:
            return memoryview(bytearray(size))
        mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    except (MemoryError, OSError):
        return None
    address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    weakref.finalize(mapping, forget_mapping, address, size)
    return memoryview(mapping)


class Region:
    """A block of memory the runtime handed out or registered."""

    __slots__ = ("_buffer", "pinned", "size", "start", "writable")

    def __init__(
        self,
        start: int,
        size: int,
        buffer: Callable[[], memoryview | None],
        *,
        pinned: bool,
        writable: bool = True,
    ) -> None:
        self.start = start
        self.size = size
        self._buffer = buffer
        self.pinned = pinned
        self.writable = writable

    def view(self, address: int, count: int) -> memoryview | None:
        """Return a byte view of ``[address, address + count)``, or None if out of range."""
        offset = address - self.start
        if offset < 0 or count < 0 or offset + count > self.size:
            return None
        buffer = self._buffer()
        if buffer is None:
            return None
        return buffer[offset : offset + count]


class _RegionTable:
    """Regions sorted by start address, found by any address inside them."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._regions: dict[int, Region] = {}

    def add(self, region: Region) -> None:
        if region.start not in self._regions:
            bisect.insort(self._starts, region.start)
        self._regions[region.start] = region

    def get(self, start: int) -> Region | None:
        return self._regions.get(start)

    def pop(self, start: int) -> Region | None:
        region = self._regions.pop(start, None)
        if region is not None:
            del self._starts[bisect.bisect_left(self._starts, start)]
        return region

    def find(self, address: int) -> Region | None:
        index = bisect.bisect_right(self._starts, address) - 1
        if index < 0:
            return None
        region = self._regions[self._starts[index]]
        return region if address < region.start + max(region.size, 1) else None

    def __len__(self) -> int:
        return len(self._regions)


class DeviceMemory:
    """One device's memory: real bytes at simulated addresses, never reused."""

    def __init__(self, device_id: int, capacity: int) -> None:
        self.device_id = device_id
        self.capacity = capacity
        self.base = device_base(device_id)
        self._next = self.base
        self._table = _RegionTable()
        self._mapped: set[int] = set()
        self.used = 0

    def contains(self, address: int) -> bool:
        return self.base <= address < self.base + _DEVICE_SPAN

    def allocate(self, size: int, *, pad: bool = True) -> int | None:
        """Allocate *size* bytes (rounded up to 32, plus 32 if *pad*); None when out of
        memory, the device's or the host's."""
        padded = (size + 31) // 32 * 32 + (32 if pad else 0)
        if self.used + padded > self.capacity or self._next + padded > self.base + _DEVICE_SPAN:
            return None
        view = _zeroed(padded)
        if view is None:
            return None
        start = self._next
        self._next = (start + padded + 63) // 64 * 64
        self._table.add(Region(start, padded, lambda: view, pinned=True))
        self.used += padded
        return start

    def release(self, address: int) -> bool:
        """Free the block starting at *address*; False if there is none (or it maps host memory)."""
        region = self._table.get(address)
        if region is None or address in self._mapped:
            return False
        self._table.pop(address)
        self.used -= region.size
        return True

    def map_host(self, view: memoryview) -> int:
        """Give registered host memory a device address; the bytes stay the host's."""
        size = len(view)
        start = self._next
        self._next = (start + size + 63) // 64 * 64
        self._table.add(Region(start, size, lambda: view, pinned=True))
        self._mapped.add(start)
        return start

    def unmap_host(self, address: int) -> None:
        self._mapped.discard(address)
        self._table.pop(address)

    def find(self, address: int) -> Region | None:
        return self._table.find(address)

    @property
    def allocations(self) -> int:
        """Number of live ``malloc`` blocks."""
        return len(self._table) - len(self._mapped)

    def clear(self) -> None:
        self._table = _RegionTable()
        self._mapped.clear()
        self.used = 0


class HostMemory:
    """Host blocks from ``malloc_host``: real, 64-byte aligned memory the runtime owns."""

    def __init__(self) -> None:
        self._table = _RegionTable()
        self._owned: dict[int, np.ndarray[Any, Any]] = {}

    def allocate(self, size: int) -> int | None:
        """Allocate *size* bytes of pinned host memory; None if the host has not got it."""
        try:
            raw = np.zeros(size + 64, dtype=np.uint8)
        except (MemoryError, ValueError):
            return None
        if size >= _LAZY_MIN:  # mapped by the allocator, and unmapped when freed
            weakref.finalize(raw, forget_mapping, raw.ctypes.data, raw.nbytes)
        offset = (-raw.ctypes.data) % 64
        block = raw[offset : offset + size]
        start = int(block.ctypes.data)
        view = memoryview(block.data).cast("B")
        self._owned[start] = block
        self._table.add(Region(start, size, lambda: view, pinned=True))
        return start

    def release(self, address: int) -> bool:
        if self._owned.pop(address, None) is None:
            return False
        self._table.pop(address)
        return True

    def find(self, address: int) -> Region | None:
        return self._table.find(address)

    @property
    def allocations(self) -> int:
        """Number of live ``malloc_host`` blocks."""
        return len(self._owned)

    def clear(self) -> None:
        self._table = _RegionTable()
        self._owned.clear()
