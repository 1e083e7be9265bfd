"""``acl.util``: host pointers for numpy arrays and bytes, and raw callback threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._core import Core, check_ints

__all__ = ["Util"]

_ESRCH = 3  # what pthread_join returns for a thread it does not know


class Util:
    """The ``acl.util`` namespace of a simulated runtime."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._threads: dict[int, threading.Thread] = {}
        self._dtypes: dict[int, np.dtype[Any]] = {}

    def numpy_to_ptr(self, array: np.ndarray[Any, Any], /) -> int:
        """Return the address of *array*'s data; the simulator can then copy to and from it."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"numpy_to_ptr: expected numpy.ndarray, not {type(array).__name__}")
        if not array.flags.c_contiguous:
            raise ValueError("numpy_to_ptr: the array must be C-contiguous")
        with self._core.lock:
            return self._core.host.register_array(array)

    def bytes_to_ptr(self, data: bytes | bytearray, /) -> int:
        """Return the address of *data*'s buffer (kept alive by the runtime)."""
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"bytes_to_ptr: expected bytes, not {type(data).__name__}")
        with self._core.lock:
            return self._core.host.register_bytes(data)

    def ptr_to_numpy(self, ptr: int, shape: Sequence[int] | int, npy_type: int, /) -> Any:
        """Return an array viewing host memory at *ptr* (shape and numpy type number)."""
        check_ints("ptr_to_numpy", ptr, npy_type)
        dtype = self._dtype(npy_type)
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if not all(isinstance(d, int) and d >= 0 for d in dims):
            raise ValueError(f"ptr_to_numpy: shape must be non-negative ints, got {shape!r}")
        count = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
        view = self._host_view(ptr, count, "ptr_to_numpy")
        return np.frombuffer(view, dtype=dtype).reshape(dims)

    def ptr_to_bytes(self, ptr: int, size: int, /) -> bytes:
        """Return a copy of *size* bytes of host memory at *ptr*."""
        check_ints("ptr_to_bytes", ptr, size)
        if size < 0:
            raise ValueError(f"ptr_to_bytes: size must be >= 0, got {size}")
        return bytes(self._host_view(ptr, size, "ptr_to_bytes"))

    def start_thread(self, fn: Callable[[Any], Any], args: Any, /) -> tuple[int, int]:
        """Start a thread running ``fn(args)``; return ``(thread_id, 0)``."""
        if not callable(fn):
            raise TypeError(f"start_thread: argument 1 must be callable, not {type(fn).__name__}")
        thread = threading.Thread(target=fn, args=(args,), name="acl-util-thread", daemon=True)
        thread.start()
        assert thread.ident is not None
        self._threads[thread.ident] = thread
        return thread.ident, 0

    def stop_thread(self, thread_id: int, /) -> int:
        """Join a thread from ``start_thread`` (it stops nothing; *fn* must return)."""
        check_ints("stop_thread", thread_id)
        thread = self._threads.pop(thread_id, None)
        if thread is None:
            return _ESRCH
        thread.join()
        return 0

    def _dtype(self, number: int) -> np.dtype[Any]:
        if not self._dtypes:
            for scalar in set(np.sctypeDict.values()):
                dtype = np.dtype(scalar)
                self._dtypes.setdefault(dtype.num, dtype)
        try:
            return self._dtypes[number]
        except KeyError:
            raise ValueError(f"unknown numpy type number {number}") from None

    def _host_view(self, ptr: int, count: int, api: str) -> memoryview:
        with self._core.lock:  # allocations on other threads reshape the table
            region = self._core.host.find(ptr)
        view = None if region is None else region.view(ptr, count)
        if view is None:
            raise ValueError(f"{api}: {ptr:#x} (+{count} bytes) is not host memory known to acl")
        return view
