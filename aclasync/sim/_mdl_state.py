"""The state behind ``acl.mdl`` of one simulated runtime: registrations, loaded models,
model descriptions, datasets and data buffers, all owned by one ``ModelRegistry``."""

from __future__ import annotations

import itertools
import threading
from typing import TypeVar

from ._mdl_spec import ModelSpec

__all__ = ["DataBuffer", "Dataset", "LoadedModel", "ModelDesc", "ModelRegistry"]

_HANDLE_BASE = 0x5B00_0000_0000  # apart from the runtime's other handles
_T = TypeVar("_T")


class DataBuffer:
    """``aclDataBuffer``: an address and a size; the memory itself is the caller's."""

    __slots__ = ("addr", "size")

    def __init__(self, addr: int, size: int) -> None:
        self.addr = addr
        self.size = size


class Dataset:
    """``aclmdlDataset``: data-buffer handles in order, plus the dynamic batch chosen."""

    __slots__ = ("batch", "buffers")

    def __init__(self) -> None:
        self.buffers: list[int] = []
        self.batch = 0


class LoadedModel:
    """A model loaded with ``load_from_file``/``load_from_mem``, until ``unload``."""

    __slots__ = ("cur_batch", "model_id", "spec")

    def __init__(self, model_id: int, spec: ModelSpec) -> None:
        self.model_id = model_id
        self.spec = spec
        self.cur_batch = 0


class ModelDesc:
    """``aclmdlDesc``: empty until ``get_desc`` copies a loaded model's description."""

    __slots__ = ("model_id", "spec")

    def __init__(self) -> None:
        self.model_id = 0
        self.spec: ModelSpec | None = None


class ModelRegistry:
    """Every ``acl.mdl`` object of one runtime. Thread-safe: one lock guards the tables."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.registrations: dict[str, ModelSpec] = {}
        self.models: dict[int, LoadedModel] = {}
        self.descs: dict[int, ModelDesc] = {}
        self.datasets: dict[int, Dataset] = {}
        self.buffers: dict[int, DataBuffer] = {}
        self._handles = itertools.count(1)
        self._model_ids = itertools.count(1)

    def counts(self) -> dict[str, int]:
        """How many of each object are alive (for leak checks and ``live_objects``)."""
        with self.lock:
            return {
                "models": len(self.models),
                "model_descs": len(self.descs),
                "datasets": len(self.datasets),
                "data_buffers": len(self.buffers),
            }

    def add_model(self, spec: ModelSpec) -> int:
        with self.lock:
            model_id = next(self._model_ids)
            self.models[model_id] = LoadedModel(model_id, spec)
        return model_id

    def add(self, table: dict[int, _T], obj: _T) -> int:
        """Store *obj* in one of the handle tables; return its new handle."""
        with self.lock:
            handle = _HANDLE_BASE + next(self._handles) * 0x40
            table[handle] = obj
        return handle
