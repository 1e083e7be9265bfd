"""The state behind ``acl.mdl`` of one simulated runtime: registrations, loaded models,
model descriptions, datasets, data buffers and tensor descriptions, all owned by one
``ModelRegistry``."""

from __future__ import annotations

import itertools
import threading
from typing import TypeVar

from ._mdl_spec import ModelSpec

__all__ = ["DataBuffer", "Dataset", "LoadedModel", "ModelDesc", "ModelRegistry", "TensorDesc"]

_HANDLE_BASE = 0x5B00_0000_0000  # apart from the runtime's other handles
_T = TypeVar("_T")


class DataBuffer:
    """``aclDataBuffer``: an address and a size; the memory itself is the caller's."""

    __slots__ = ("addr", "size")

    def __init__(self, addr: int, size: int) -> None:
        self.addr = addr
        self.size = size


class Dataset:
    """``aclmdlDataset``: data-buffer handles in order, a tensor description per buffer
    (``0`` for none; the dataset owns them) and the gear chosen for it."""

    __slots__ = ("buffers", "descs", "gear")

    def __init__(self) -> None:
        self.buffers: list[int] = []
        self.descs: list[int] = []
        self.gear: tuple[int, ...] | None = None


class LoadedModel:
    """A model loaded with ``load_from_file``/``load_from_mem``, until ``unload``."""

    __slots__ = ("cur_gear", "model_id", "spec")

    def __init__(self, model_id: int, spec: ModelSpec) -> None:
        self.model_id = model_id
        self.spec = spec
        #: The gear last chosen for any of the model's datasets (``get_cur_output_dims``).
        self.cur_gear: tuple[int, ...] | None = None


class ModelDesc:
    """``aclmdlDesc``: empty until ``get_desc`` copies a loaded model's description."""

    __slots__ = ("model_id", "spec")

    def __init__(self) -> None:
        self.model_id = 0
        self.spec: ModelSpec | None = None

    def clear(self) -> None:
        """Describe nothing again (ACL's ``aclmdlDesc::Clear``)."""
        self.model_id, self.spec = 0, None


class TensorDesc:
    """``aclTensorDesc``: what ``acl.create_tensor_desc`` and its setters describe."""

    __slots__ = (
        "const",
        "data_type",
        "dims",
        "dynamic_input",
        "format",
        "memtype",
        "name",
        "owner",
        "shape_range",
        "storage_dims",
        "storage_format",
        "value_range",
    )

    def __init__(self, data_type: int, dims: list[int], format: int) -> None:
        self.data_type = data_type
        self.format = format
        self.storage_format = -1
        self.dims = list(dims)
        self.storage_dims: list[int] = []
        self.name = ""
        self.shape_range: list[tuple[int, int]] = []
        self.value_range: list[tuple[int, int]] = []
        self.memtype = 0
        self.const: bytes | None = None
        self.dynamic_input = ""
        #: The dataset that owns this copy (``set_dataset_tensor_desc``), else 0.
        self.owner = 0

    def copy(self) -> TensorDesc:
        twin = TensorDesc(self.data_type, self.dims, self.format)
        for slot in self.__slots__:
            value = getattr(self, slot)
            setattr(twin, slot, list(value) if isinstance(value, list) else value)
        return twin


class ModelRegistry:
    """Every ``acl.mdl`` object of one runtime. Thread-safe: one lock guards the tables."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.registrations: dict[str, ModelSpec] = {}
        self.models: dict[int, LoadedModel] = {}
        self.descs: dict[int, ModelDesc] = {}
        self.datasets: dict[int, Dataset] = {}
        self.buffers: dict[int, DataBuffer] = {}
        self.tensor_descs: dict[int, TensorDesc] = {}
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

    def set_blob_desc(self, dataset: Dataset, index: int, desc: TensorDesc | None) -> None:
        """Give *dataset*'s buffer *index* a copy of *desc* (None: drop its own). Locked."""
        old = dataset.descs[index]
        self.tensor_descs.pop(old, None)
        dataset.descs[index] = 0
        if desc is not None:
            dataset.descs[index] = self.add(self.tensor_descs, desc)

    def drop_dataset(self, handle: int) -> Dataset | None:
        """Forget a dataset and the tensor descriptions it owns. Locked."""
        found = self.datasets.pop(handle, None)
        if found is not None:
            for desc in found.descs:
                self.tensor_descs.pop(desc, None)
        return found
