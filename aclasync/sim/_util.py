"""``acl.util``: raw pointers for bytes and numpy arrays, and raw threads.

As in pyACL, the pointers are the real addresses of the objects' buffers (nothing is
registered or kept alive), and ``ptr_to_*`` read whatever host memory the address names.
Unlike pyACL, an address the process has not mapped raises ``ValueError`` instead of
crashing the interpreter.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import traceback
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ._args import parsed
from ._core import Core
from ._host import host_view

if TYPE_CHECKING:
    from .._pyacl.backend import AclUtil as _UtilSurface
else:
    _UtilSurface = object

__all__ = ["Util"]

_ESRCH = 3  # what pthread_join returns for a thread it does not know
_EDEADLK = 35  # ... and for a thread joining itself
_log = logging.getLogger("aclasync.sim")


class Util(_UtilSurface):
    """The ``acl.util`` namespace of a simulated runtime."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._lock = threading.Lock()
        #: Thread id -> (thread, its leave to exit): a finished thread waits to be joined,
        #: as a joinable pthread's id is not given out again before that.
        self._threads: dict[int, tuple[threading.Thread, threading.Event]] = {}
        #: Ids of threads whose function returned (they wait to be joined).
        self._finished: set[int] = set()
        self._errors: dict[int, list[str]] = {}
        self._dtypes: dict[int, np.dtype[Any]] = {}

    @parsed("acl.util.bytes_to_ptr")
    def bytes_to_ptr(self, data: bytes, /) -> int:
        """Return the address of the buffer of *data* (a ``bytes`` object; not kept alive)."""
        if not isinstance(data, bytes):
            raise ValueError("needs an byte as argument")
        address = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
        return int(address or 0)

    @parsed("acl.util.ptr_to_bytes")
    def ptr_to_bytes(self, ptr: int, size: int, /) -> bytes:
        """Return a copy of *size* bytes of host memory at *ptr*."""
        view = host_view(ptr, size, write=False) if size >= 0 else None
        if view is None:
            raise ValueError("convert c pointer to bytes failed")
        return bytes(view)

    @parsed("acl.util.numpy_to_ptr")
    def numpy_to_ptr(self, array: np.ndarray[Any, Any], /) -> int:
        """Return the address of *array*'s data (its first element; no copy, not kept alive).

        A non-contiguous array warns, as pyACL does (a copy from that address would not
        read the array's elements).
        """
        if not isinstance(array, np.ndarray):
            raise ValueError("needs an ndarray as argument")
        if not array.flags["C_CONTIGUOUS"]:
            warnings.warn(
                "The input ndarray is discontiguous. Please use acl.util.bytes_to_ptr instead.",
                Warning,
                stacklevel=2,
            )
        return int(array.__array_interface__["data"][0])

    @parsed("acl.util.numpy_contiguous_to_ptr")
    def numpy_contiguous_to_ptr(
        self, array: np.ndarray[Any, Any], /
    ) -> tuple[int, np.ndarray[Any, Any]]:
        """Return ``(address, contiguous)``: *array* itself if C-contiguous, else a C-ordered copy.

        Keep ``contiguous`` alive while the address is in use.
        """
        if not isinstance(array, np.ndarray):
            raise ValueError("needs an ndarray as argument")
        contiguous = np.ascontiguousarray(array)
        return int(contiguous.__array_interface__["data"][0]), contiguous

    @parsed("acl.util.ptr_to_numpy")
    def ptr_to_numpy(self, ptr: int, shape: tuple[int, ...], npy_type: int, /) -> Any:
        """Return a writable array viewing host memory at *ptr* (no copy).

        *shape* is a tuple of ints, *npy_type* a numpy type number (``dtype.num``).
        """
        if not isinstance(shape, tuple):
            raise ValueError("shape is empty")
        if not all(isinstance(d, int) for d in shape):
            raise TypeError("the second argument is not list of int")
        if any(d < 0 for d in shape):
            raise ValueError("negative dimensions are not allowed")
        dtype = self._dtype(npy_type)
        count = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        view = host_view(ptr, count, write=True)
        if view is None:
            raise ValueError(f"{ptr:#x} (+{count} bytes) is not writable host memory")
        return np.frombuffer(view, dtype=dtype).reshape(shape)

    @parsed("acl.util.start_thread")
    def start_thread(self, fn: Callable[..., Any], fn_args: Any, /) -> tuple[int, int]:
        """Start a thread calling ``fn(args_list)`` (``fn()`` if it is None): ``(thread_id, 0)``.

        Exactly two positional arguments (CPython's own ``TypeError`` otherwise: pyACL's
        wrapper does not replace it). An exception in *fn* is printed and raised again
        as ``RuntimeError`` by ``stop_thread``.
        """
        if not callable(fn):
            raise TypeError("parameter must be callable")
        joined = threading.Event()
        thread = threading.Thread(
            target=self._run, args=(fn, fn_args, joined), name="aclasync-sim-util", daemon=True
        )
        with self._lock:
            thread.start()
            assert thread.ident is not None
            self._threads[thread.ident] = (thread, joined)
        return thread.ident, 0

    @parsed("acl.util.stop_thread")
    def stop_thread(self, thread_id: int, /) -> int:
        """Join a thread from ``start_thread`` (it stops nothing: its function must return).

        Blocks until then. Returns ``pthread_join``'s result (``ESRCH``, 3, for an unknown
        or already joined thread, ``EDEADLK``, 35, for the calling thread itself); raises
        ``RuntimeError`` if the thread's function raised.
        """
        if thread_id == threading.get_ident():
            return _EDEADLK
        with self._lock:
            entry = self._threads.pop(thread_id, None)
        if entry is None:
            return _ESRCH
        thread, joined = entry
        joined.set()
        thread.join()
        with self._lock:
            errors = self._errors.pop(thread_id, [])
        if errors:
            raise RuntimeError("".join(f"{error};" for error in errors))
        return 0

    @property
    def live_threads(self) -> int:
        """Threads started and not yet joined with ``stop_thread``."""
        with self._lock:
            return len(self._threads)

    def _run(self, fn: Callable[..., Any], fn_args: Any, joined: threading.Event) -> None:
        try:
            self._call(fn, fn_args)
        finally:
            del fn, fn_args  # (a finished thread holds nothing of its caller's)
            self._finished.add(threading.get_ident())
            joined.wait()  # keeps the thread, and its id, until stop_thread or close
            self._finished.discard(threading.get_ident())

    def close(self) -> None:
        """Let every thread end once its function has returned, and join those that
        have (the runtime closes: nobody will join them); they stay counted until
        ``stop_thread``, as pyACL's."""
        with self._lock:
            entries = list(self._threads.values())
        for _, joined in entries:
            joined.set()
        for thread, _ in entries:
            if thread.ident in self._finished:
                thread.join()

    def _call(self, fn: Callable[..., Any], fn_args: Any) -> None:
        try:
            if fn_args is None:
                fn()
            else:
                fn(fn_args)
        except BaseException as exc:  # reported by stop_thread, as pyACL does
            traceback.print_exc()
            ident = threading.get_ident()
            with self._lock:
                self._errors.setdefault(ident, []).append(
                    f"exception={type(exc).__name__},msg=thread call failed"
                )
            _log.error("tid=%d, thread call failed: %r", ident, exc)

    def _dtype(self, number: int) -> np.dtype[Any]:
        if not self._dtypes:
            for scalar in set(np.sctypeDict.values()):
                dtype = np.dtype(scalar)
                self._dtypes.setdefault(dtype.num, dtype)
        try:
            return self._dtypes[number]
        except KeyError:
            raise ValueError(f"unknown numpy type number {number}") from None
