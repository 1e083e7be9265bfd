"""The simulated runtime object: ``acl`` with its ``rt``, ``util`` and ``sim`` namespaces."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from ._args import parsed
from ._core import Core
from ._extension import Media, SimExtension
from ._mdl_dataset import DataBufferCalls  # acl.mdl hook
from ._mdl_runtime import Mdl  # acl.mdl hook
from ._mdl_state import ModelRegistry  # acl.mdl hook
from ._profiles import SocProfile, resolve_profile
from ._rc import RC
from ._rt_callback import CallbackCalls
from ._rt_control import ControlCalls
from ._rt_device import DeviceCalls
from ._rt_event import EventCalls
from ._rt_info import DeviceInfoCalls
from ._rt_memory import MemoryCalls
from ._rt_memory_more import MoreMemoryCalls
from ._rt_notify import NotifyCalls
from ._rt_stream import StreamCalls
from ._rt_stream_more import MoreStreamCalls
from ._tensor_desc import TensorDescCalls
from ._unmodelled import attach_unmodelled
from ._util import Util

if TYPE_CHECKING:
    # The type checker holds the simulator to pyACL's surface: every method must fit
    # the protocol built from the table, and the protocol supplies the functions that
    # attach_unmodelled and UnsupportedCalls add when this module is imported.
    from .._pyacl.backend import AclBackend, AclRt

    _AclSurface = AclBackend
    _RtSurface = AclRt
else:
    _AclSurface = _RtSurface = object

__all__ = [
    "DEFAULT_DEVICE_COUNT",
    "MAX_DEVICE_COUNT",
    "VISIBLE_DEVICES_ENV",
    "Rt",
    "SimAcl",
    "create",
]

#: The ACL interface version the simulator follows (the newest public headers).
ACL_VERSION = (1, 17, 0)

#: The environment variable CANN reads to choose (and renumber) the visible devices.
VISIBLE_DEVICES_ENV = "ASCEND_RT_VISIBLE_DEVICES"

_app_log = logging.getLogger("aclasync.sim.app")
# aclLogLevel: ACL_DEBUG, ACL_INFO, ACL_WARNING, ACL_ERROR.
_LOG_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}


class Rt(
    DeviceCalls,
    DeviceInfoCalls,
    StreamCalls,
    MoreStreamCalls,
    EventCalls,
    MemoryCalls,
    MoreMemoryCalls,
    CallbackCalls,
    ControlCalls,
    NotifyCalls,
    _RtSurface,
):
    """The ``acl.rt`` namespace of a simulated runtime: all 182 names pyACL registers."""


class SimAcl(DataBufferCalls, TensorDescCalls, _AclSurface):
    """A simulated pyACL runtime: use it where you would use ``import acl``.

    The devices are built on first use, reading ``ASCEND_RT_VISIBLE_DEVICES`` then
    unless *visible_devices* is given.
    """

    def __init__(
        self,
        *,
        device_count: int,
        profile: SocProfile,
        visible_devices: Sequence[int] | str | None = None,
    ) -> None:
        self._device_count = device_count
        self._profile = profile
        self._visible = visible_devices
        self._core_: Core | None = None
        self._rt: Rt | None = None
        self._util: Util | None = None
        self._sim: SimExtension | None = None
        self._media: Media | None = None
        self._models = ModelRegistry()  # acl.mdl: models, datasets, data buffers
        self._mdl: Mdl | None = None

    def _build(self) -> Core:
        if self._core_ is None:
            visible = self._visible
            if visible is None:
                visible = os.environ.get(VISIBLE_DEVICES_ENV)
            physical = None if visible is None else parse_visible(visible, self._device_count)
            core = Core(self._device_count, self._profile, physical)
            self._rt = Rt(core)  # type: ignore[abstract]  # unmodelled calls: attached at import
            self._util = Util(core)
            self._sim = SimExtension(core)
            self._sim._util = self._util
            self._sim._models = self._models
            self._mdl = Mdl(core, self._models)  # type: ignore[abstract]  # likewise
            self._media = Media(core)
            self._core_ = core
        return self._core_

    @property
    def _core(self) -> Core:
        return self._core_ if self._core_ is not None else self._build()

    @property
    def rt(self) -> Rt:
        """``acl.rt``: devices, contexts, streams, events, memory, callbacks, ..."""
        self._build()
        assert self._rt is not None
        return self._rt

    @property
    def util(self) -> Util:
        """``acl.util``: pointers of bytes and arrays, raw threads."""
        self._build()
        assert self._util is not None
        return self._util

    @property
    def sim(self) -> SimExtension:
        """``acl.sim``: the simulator's own extensions."""
        self._build()
        assert self._sim is not None
        return self._sim

    @property
    def media(self) -> Media:
        """``acl.media``: ``dvpp_malloc`` / ``dvpp_free`` only."""
        self._build()
        assert self._media is not None
        return self._media

    @property
    def mdl(self) -> Mdl:
        """``acl.mdl``: load declared models, describe them, build datasets, execute."""
        self._build()
        assert self._mdl is not None
        return self._mdl

    def __repr__(self) -> str:
        return (
            f"<aclasync.sim runtime soc={self._profile.name!r} devices={len(self._core.devices)}>"
        )

    @parsed("acl.init")
    def init(self, config_path: str | None = None, /) -> int:
        """Initialise (ref-counted): a repeat call returns 100002 and still counts.

        A first call whose *config_path* names no regular file, or one over 10 MiB,
        gives 100003 (ACL_ERROR_INVALID_FILE); one that is not JSON, or nests objects
        or arrays more than 10 deep, 100006 (ACL_ERROR_PARSE_FILE); an empty one is
        fine. A repeat call is counted before its path is read, as ``aclInit`` does.
        """
        with self._core.lock:
            if self._core.init_count:
                self._core.init_count += 1
                return RC.REPEAT_INITIALIZE
            if config_path:
                ret = _config_status(config_path)
                if ret:
                    return ret
            self._core.init_count = 1
            self._core.finalized = False
            return RC.OK

    @parsed("acl.finalize")
    def finalize(self) -> int:
        """Clear the init count at once, initialised or not; 100037 if already finalized
        (by ``finalize`` or the last ``finalize_reference``) and not initialised since."""
        with self._core.lock:
            if self._core.finalized:
                return RC.REPEAT_FINALIZE
            self._core.finalized = True
            self._core.init_count = 0
            return RC.OK

    @parsed("acl.finalize_reference")
    def finalize_reference(self) -> tuple[int, int]:
        """Undo one ``init``: ``(references left, ret)``; finalizes at 0 (100037 if none)."""
        with self._core.lock:
            if self._core.init_count == 0:
                return 0, RC.REPEAT_FINALIZE
            self._core.init_count -= 1
            if self._core.init_count == 0:
                self._core.finalized = True
            return self._core.init_count, RC.OK

    @parsed("acl.get_version")
    def get_version(self) -> tuple[int, int, int, int]:
        """``(major, minor, patch, ret)`` of the ACL interface modelled: 1.17.0."""
        return *ACL_VERSION, RC.OK

    @parsed("acl.get_soc_name")
    def get_soc_name(self) -> str | None:
        """The SoC name of the profile (device 0's, as the real call reports)."""
        return self._profile.name

    @parsed("acl.float16_to_float")
    def float16_to_float(self, value: int, /) -> float:
        """Decode the bits of an IEEE half-precision number."""
        bits = np.array(value & 0xFFFF, dtype=np.uint16)  # "H" masks, as CPython does
        return float(bits.view(np.float16))

    @parsed("acl.float_to_float16")
    def float_to_float16(self, value: float, /) -> int:
        """Encode a number as the bits of an IEEE half-precision number."""
        with np.errstate(over="ignore"):  # too large becomes inf, as in C
            return int(np.array(value, dtype=np.float16).view(np.uint16))

    @parsed("acl.app_log")
    def app_log(self, level: int, message: str, /) -> None:
        """Write *message* to the ``aclasync.sim.app`` logger at an ``aclLogLevel``
        (0 debug, 1 info, 2 warning, 3 error; others log as errors)."""
        _app_log.log(_LOG_LEVELS.get(level, logging.ERROR), "%s", message)

    @parsed("acl.get_recent_err_msg")
    def get_recent_err_msg(self) -> str | None:
        """Describe the calling thread's most recent failed call and forget it; None if none."""
        return self._core.recent_error_message()


def parse_visible(value: Sequence[int] | str, device_count: int) -> list[int]:
    """The physical devices ``ASCEND_RT_VISIBLE_DEVICES`` names, in order.

    Entries are separated by commas; the list stops at the first entry that is not a
    physical device id, or repeats one (later entries are ignored, as CUDA-style
    runtimes do). An empty value hides every device.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    physical: list[int] = []
    for item in items:
        try:
            number = int(item)
        except (TypeError, ValueError):
            break
        if not 0 <= number < device_count or number in physical:
            break
        physical.append(number)
    return physical


#: Devices of the process-wide default runtime: an eight-card server.
DEFAULT_DEVICE_COUNT = 8
#: The most devices a runtime has: CANN's runtime limit (``RT_MAX_DEV_NUM``), which the
#: simulator's address layout (1 TiB of addresses per device) also needs.
MAX_DEVICE_COUNT = 64


@overload
def create(
    *,
    device_count: int = ...,
    soc: str | SocProfile = ...,
    visible_devices: Sequence[int] | str | None = ...,
    strict: Literal[False] = ...,
    **model_params: Any,
) -> SimAcl: ...
@overload
def create(
    *,
    device_count: int = ...,
    soc: str | SocProfile = ...,
    visible_devices: Sequence[int] | str | None = ...,
    strict: bool,
    **model_params: Any,
) -> AclBackend: ...
def create(
    *,
    device_count: int = 2,
    soc: str | SocProfile = "Ascend910B3",
    visible_devices: Sequence[int] | str | None = None,
    strict: bool = False,
    **model_params: Any,
) -> SimAcl | AclBackend:
    """Return a fresh, independent simulated runtime.

    Parameters
    ----------
    device_count:
        Number of simulated physical devices (ids ``0 .. device_count - 1``), at most
        ``MAX_DEVICE_COUNT`` (64, as CANN's runtime).
    soc:
        Name of a profile in ``PROFILES``, or a ``SocProfile``.
    visible_devices:
        The physical devices to show, as logical devices ``0 .. n-1`` in this order (a
        sequence of ids or a comma-separated string). ``None`` reads
        ``ASCEND_RT_VISIBLE_DEVICES``; unset, every device is visible.
    strict:
        Expose only pyACL's own surface (the functions of ``acl``, ``acl.rt``,
        ``acl.mdl`` and ``acl.util`` in pyACL's table): no ``acl.sim``, no
        simulator-only helpers. The result is a module object typed as
        ``AclBackend``; a program that runs on it uses nothing CANN lacks.
    **model_params:
        Overrides of ``SocProfile`` fields, e.g. ``notify_latency_us=50``.
    """
    if isinstance(device_count, bool) or not isinstance(device_count, int):
        raise TypeError(f"device_count must be an int, got {type(device_count).__name__}")
    if not 1 <= device_count <= MAX_DEVICE_COUNT:
        raise ValueError(
            f"device_count must be 1 to {MAX_DEVICE_COUNT} (CANN's limit), got {device_count}"
        )
    if visible_devices is not None and not isinstance(visible_devices, (str, Sequence)):
        raise TypeError(
            f"visible_devices must be a sequence of ints or a str, not "
            f"{type(visible_devices).__name__}"
        )
    runtime = SimAcl(  # type: ignore[abstract]  # unmodelled calls: attached at import
        device_count=device_count,
        profile=resolve_profile(soc, model_params),
        visible_devices=visible_devices,
    )
    runtime._build()
    if strict:
        from ._strict import strict_view

        return strict_view(runtime)
    return runtime


attach_unmodelled(SimAcl, "acl")
attach_unmodelled(Rt, "acl.rt")


#: ``aclInit``'s limits on its configuration file (CANN's json_parser).
_CONFIG_MAX_BYTES, _CONFIG_MAX_DEPTH = 10 << 20, 10


def _config_status(path: str) -> int:
    """What ``aclInit`` answers for its configuration file *path*: 0 if it would use it."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > _CONFIG_MAX_BYTES:
            return RC.INVALID_FILE
        with open(path, "rb") as file:
            data = file.read().split(b"\0", 1)[0]
    except OSError:  # unreadable, or gone since: its ifstream does not open
        return RC.INVALID_FILE
    if not data:
        return RC.OK
    try:  # nlohmann's lexer skips a UTF-8 byte order mark and refuses ill-formed UTF-8
        text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError:
        return RC.PARSE_FILE
    depth = {"{": 0, "[": 0}
    deepest = 0
    for char in text:  # counted as CANN counts, brackets inside strings included
        if char in "{[":
            depth[char] += 1
            deepest = max(deepest, depth[char])
        elif char in "}]":
            opening = "{" if char == "}" else "["
            depth[opening] = max(0, depth[opening] - 1)
    if deepest > _CONFIG_MAX_DEPTH:
        return RC.PARSE_FILE
    try:  # and a lone surrogate escape ("\\ud800"), which Python's json takes
        json.dumps(json.loads(text, parse_constant=_not_json), ensure_ascii=False).encode()
    except ValueError:  # (UnicodeEncodeError included)
        return RC.PARSE_FILE
    return RC.OK


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not JSON")
