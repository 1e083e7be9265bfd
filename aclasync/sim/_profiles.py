"""SoC profiles: the limits, feature set and timing model of each simulated chip."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["PROFILES", "SocProfile", "resolve_profile"]

_GiB = 1 << 30
_MiB = 1 << 20
_DAY_US = 86_400e6


def _is_a(value: object, kind: str) -> bool:
    """Whether *value* fits the field annotation *kind* (numpy scalars included; a bool
    is no number here)."""
    if value is None:
        return kind.endswith("| None")
    if kind == "str" or kind == "bool":
        return isinstance(value, str if kind == "str" else bool)
    number = numbers.Real if kind == "float" else numbers.Integral
    return isinstance(value, number) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SocProfile:
    """Limits, features and model parameters of one simulated SoC.

    Every field can be overridden through ``aclasync.sim.create(**model_params)``.
    Times are in microseconds, bandwidths in GB/s (10**9 bytes per second).
    """

    name: str
    #: Streams per device, default and internal sync streams included.
    stream_limit: int = 1984
    #: Streams an active device holds itself (its default stream and the internal sync stream).
    reserved_streams: int = 2
    #: Hardware events per device (``create_event`` and events with SYNC or EXTERNAL).
    event_limit: int = 65536
    #: Highest stream priority; ``None`` means the priority is reserved and always 0.
    max_priority: int | None = 7
    #: Whether ``set/get_stream_overflow_switch`` are supported (207000 otherwise).
    overflow_switch_supported: bool = True
    #: Flag bits ``create_event_with_flag`` accepts (the reference page allows only TIME_LINE).
    event_with_flag_mask: int = 0x8
    #: Whether ``set_stream_failure_mode`` accepts the default stream (handle 0).
    failure_mode_on_default_stream: bool = False
    #: Device memory per device, in bytes.
    memory_bytes: int = 64 * _GiB
    #: Whether the device memory is HBM (``get_mem_info(ACL_HBM_MEM)``) or DDR.
    memory_is_hbm: bool = True
    #: ``get_run_mode()``: 1 = ACL_HOST (an ordinary host), 0 = ACL_DEVICE.
    run_mode: int = 1
    #: Saturation mode a device starts in (0 = SATURATION, 1 = INFNAN).
    default_sat_mode: int = 0
    #: Delay between work completing and a passive (default-mode) waiter waking up.
    notify_latency_us: float = 200.0
    #: Interval between status polls of a FAST_SYNC waiter; it sleeps between polls.
    fast_sync_poll_us: float = 10.0
    #: Set-up cost a stream without FAST_LAUNCH pays on its first launch.
    lazy_setup_us: float = 300.0
    #: Set-up cost a FAST_LAUNCH stream pays at creation instead.
    fast_launch_setup_us: float = 300.0
    #: Device memory a FAST_LAUNCH stream reserves while it exists.
    fast_launch_reserved_bytes: int = 2 * _MiB
    #: Threads running kernel bodies, shared by all devices of a runtime.
    core_threads: int = 2
    #: What ``get_device_info`` reports: AI CPUs, cube (AI) cores, vector cores, L2 cache.
    aicpu_cores: int = 6
    cube_cores: int = 20
    vector_cores: int = 40
    l2_cache_bytes: int = 192 * _MiB
    #: Copy bandwidths that give copy tasks their duration.
    h2d_gbps: float = 25.0
    d2h_gbps: float = 25.0
    d2d_gbps: float = 400.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            kind = str(field.type)  # the annotation's text: "int", "float", "int | None"...
            if not _is_a(value, kind):
                raise TypeError(
                    f"SocProfile.{field.name} must be {kind}, got {type(value).__name__}"
                )
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                continue
            value = float(value)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"SocProfile.{field.name} must be finite and >= 0, got {value!r}")
            if field.name.endswith("_us") and value > _DAY_US:
                raise ValueError(f"SocProfile.{field.name} must be at most a day, got {value!r}")
        if self.core_threads < 1:
            raise ValueError("SocProfile.core_threads must be >= 1")
        if self.reserved_streams > self.stream_limit:
            raise ValueError("SocProfile.reserved_streams cannot exceed stream_limit")
        for name in ("h2d_gbps", "d2h_gbps", "d2d_gbps"):
            if getattr(self, name) == 0:
                raise ValueError(f"SocProfile.{name} must be > 0")


PROFILES: Mapping[str, SocProfile] = MappingProxyType(
    {
        # Atlas A2 training series: the default, following the reference pages.
        "Ascend910B3": SocProfile(name="Ascend910B3"),
        # Atlas 200I/500 A2 inference: 512 streams, priority reserved, no overflow switch.
        "Ascend310B4": SocProfile(
            name="Ascend310B4",
            stream_limit=512,
            max_priority=None,
            overflow_switch_supported=False,
            memory_bytes=8 * _GiB,
            memory_is_hbm=False,
            aicpu_cores=4,
            cube_cores=1,
            vector_cores=1,
            l2_cache_bytes=4 * _MiB,
            h2d_gbps=8.0,
            d2h_gbps=8.0,
            d2d_gbps=50.0,
        ),
    }
)


def resolve_profile(soc: str | SocProfile, overrides: Mapping[str, Any]) -> SocProfile:
    """Return the profile named *soc* (or *soc* itself) with *overrides* applied."""
    if isinstance(soc, SocProfile):
        base = soc
    elif isinstance(soc, str):
        try:
            base = PROFILES[soc]
        except KeyError:
            known = ", ".join(sorted(PROFILES))
            raise ValueError(f"unknown soc {soc!r}; expected one of: {known}") from None
    else:
        raise TypeError(f"soc must be a str or SocProfile, got {type(soc).__name__}")
    names = {field.name for field in dataclasses.fields(SocProfile)} - {"name"}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise TypeError(f"unknown model parameter(s) {unknown}; expected some of {sorted(names)}")
    return dataclasses.replace(base, **overrides)
