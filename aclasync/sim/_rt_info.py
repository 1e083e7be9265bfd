"""``acl.rt`` device information, device ids, resource limits and peer access."""

from __future__ import annotations

import os
import uuid
from typing import Any

from ._args import parsed
from ._calls import CallGroup
from ._device import SimDevice
from ._rc import RC

__all__ = ["DeviceInfoCalls"]

# aclrtDevAttr values (acl_rt.h) and what answers them.
_AICPU_CORE_NUM, _AICORE_CORE_NUM, _CUBE_CORE_NUM = 1, 101, 102
_VECTOR_CORE_NUM, _TOTAL_GLOBAL_MEM_SIZE, _L2_CACHE_SIZE = 201, 301, 302
_PHY_CHIP_ID, _IS_VIRTUAL = 402, 501
# aclrtDevFeatureType values; the simulator has none of these features.
_FEATURES = (1, 21)
_TOPOLOGY_HCCS = 0x01
_TS_IDS = (0, 1)  # ACL_TS_ID_AICORE, ACL_TS_ID_AIVECTOR
_STATUS_NORMAL = 0
_RES_TYPES = (0, 1)  # ACL_RT_DEV_RES_CUBE_CORE, ACL_RT_DEV_RES_VECTOR_CORE
_UUID_NAMESPACE = uuid.UUID("6f2d5a8e-34a1-4c1b-9a57-5c1e0a0c9e11")
_UTILIZATION_UNKNOWN = -1  # DEVICE_UTILIZATION_NOT_SUPPORT (device.cpp)


def _as_c_int(value: int) -> int:
    """*value* read as a C ``int``: its low 32 bits, signed."""
    return ((value & 0xFFFF_FFFF) ^ 0x8000_0000) - 0x8000_0000


class DeviceInfoCalls(CallGroup):
    """Device attributes and status, id mappings, core limits and peer access."""

    def _device_or_code(self, device_id: int) -> tuple[SimDevice | None, int]:
        device = self._core.device(device_id)
        return device, (RC.OK if device is not None else RC.INVALID_DEVICEID)

    @parsed("acl.rt.set_ts_device")
    def set_ts_device(self, ts_id: int, /) -> int:
        """Choose the task scheduler (0 AI core, 1 AI vector); 100000 for others."""
        if self._core.context is None:
            return RC.CONTEXT_NULL
        return RC.OK if ts_id in _TS_IDS else RC.INVALID_PARAM

    @parsed("acl.rt.get_device_info")
    def get_device_info(self, device_id: int, attr: int, /) -> tuple[int, int]:
        """Return ``(value, ret)`` for an ``aclrtDevAttr``; 107000 for attributes not modelled.

        pyACL builds the result with ``Py_BuildValue("ii", value, ret)`` from an
        ``int64_t`` value, so the caller gets its low 32 bits as a signed C ``int``: the
        64 GiB of ``ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE`` (301) read 0.
        """
        device, ret = self._device_or_code(device_id)
        if device is None:
            return 0, ret
        profile = device.profile
        values = {
            _AICPU_CORE_NUM: profile.aicpu_cores,
            _AICORE_CORE_NUM: profile.cube_cores,
            _CUBE_CORE_NUM: profile.cube_cores,
            _VECTOR_CORE_NUM: profile.vector_cores,
            _TOTAL_GLOBAL_MEM_SIZE: profile.memory_bytes,
            _L2_CACHE_SIZE: profile.l2_cache_bytes,
            _PHY_CHIP_ID: device.physical_id,
            _IS_VIRTUAL: 0,
        }
        if attr not in values:
            return 0, RC.PARAM_INVALID
        return _as_c_int(values[attr]), RC.OK

    @parsed("acl.rt.get_device_capability")
    def get_device_capability(self, device_id: int, feature: int, /) -> tuple[int, int]:
        """Return ``(supported, ret)``: 0 for every known feature; 107000 for unknown ones."""
        device, ret = self._device_or_code(device_id)
        if device is None:
            return 0, ret
        return 0, (RC.OK if feature in _FEATURES else RC.PARAM_INVALID)

    @parsed("acl.rt.device_get_stream_priority_range")
    def device_get_stream_priority_range(self) -> tuple[int, int, int]:
        """Return ``(least, greatest, ret)`` priority of the current device (0 is greatest)."""
        if self._core.context is None:
            return 0, 0, RC.CONTEXT_NULL
        least = self._core.profile.max_priority or 0
        return least, 0, RC.OK

    @parsed("acl.rt.get_device_utilization_rate")
    def get_device_utilization_rate(self, device_id: int, /) -> tuple[dict[str, Any], int]:
        """Return ``(info, 0)``: cube/vector busy now (0 or 100), AI CPU 0.

        As ``aclrtGetDeviceUtilizationRateImpl``: memory utilization is always -1 (not
        supported), and a query that fails (an unknown device) makes its field -1 while
        ``ret`` stays 0.
        """
        device = self._core.device(device_id)
        busy = aicpu = _UTILIZATION_UNKNOWN
        if device is not None:
            with self._core.lock:
                running = any(
                    s.running is not None and s.running.name == "kernel"
                    for s in device.all_streams()
                )
            busy = 100 if running else 0
            aicpu = 0
        info = {
            "cube_utilization": busy,
            "vector_utilization": busy,
            "aicpu_utilization": aicpu,
            "memory_utilization": _UTILIZATION_UNKNOWN,
            "utilization_extend": 0,
        }
        return info, RC.OK

    @parsed("acl.rt.query_device_status")
    def query_device_status(self, device_id: int, /) -> tuple[int, int]:
        """Return ``(status, ret)``; simulated devices are always NORMAL (0)."""
        device, ret = self._device_or_code(device_id)
        return (_STATUS_NORMAL if device is not None else 0xFFFF), ret

    @parsed("acl.rt.device_task_abort")
    def device_task_abort(self, device_id: int, timeout: int, /) -> int:
        """Drop the tasks queued on every stream of the device; running ones finish.

        Each stream that lost tasks reports 107022 from its next synchronisation.
        """
        device, ret = self._device_or_code(device_id)
        if device is None:
            return ret
        with self._core.lock:
            engine = device.engine
            if engine is not None:
                for stream in device.all_streams():
                    if stream.queue:
                        engine.drop_queued_locked(stream)
                        stream.pending_error = stream.pending_error or RC.DEVICE_TASK_ABORT
        return RC.OK

    @parsed("acl.rt.get_device_res_limit")
    def get_device_res_limit(self, device_id: int, kind: int, /) -> tuple[int, int]:
        """Return ``(cores, ret)`` the device may use of a kind (0 cube, 1 vector)."""
        device, ret = self._device_or_code(device_id)
        if device is None:
            return 0, ret
        if kind not in _RES_TYPES:
            return 0, RC.PARAM_INVALID
        return device.res_limits[kind], RC.OK

    @parsed("acl.rt.set_device_res_limit")
    def set_device_res_limit(self, device_id: int, kind: int, value: int, /) -> int:
        """Limit the cores of a kind; 107000 above what the chip has or for kind > 1."""
        device, ret = self._device_or_code(device_id)
        if device is None:
            return ret
        if kind not in _RES_TYPES:
            return RC.PARAM_INVALID
        most = (device.profile.cube_cores, device.profile.vector_cores)[kind]
        if not 0 < value <= most:
            return RC.PARAM_INVALID
        device.res_limits[kind] = value
        return RC.OK

    @parsed("acl.rt.reset_device_res_limit")
    def reset_device_res_limit(self, device_id: int, /) -> int:
        device, ret = self._device_or_code(device_id)
        if device is not None:
            device.res_limits = [device.profile.cube_cores, device.profile.vector_cores]
        return ret

    @parsed("acl.rt.get_devices_topo")
    def get_devices_topo(self, device_id: int, other_id: int, /) -> tuple[int, int]:
        """Return ``(topology, ret)``: simulated devices are linked by HCCS (0x01)."""
        for candidate in (device_id, other_id):
            if self._core.device(candidate) is None:
                return 0, RC.INVALID_DEVICEID
        return (0 if device_id == other_id else _TOPOLOGY_HCCS), RC.OK

    @parsed("acl.rt.device_get_uuid")
    def device_get_uuid(self, device_id: int, /) -> tuple[dict[str, list[int]], int]:
        """Return ``({"bytes": [16 ints]}, ret)``: a stable id per physical device."""
        device, ret = self._device_or_code(device_id)
        if device is None:
            return {"bytes": [0] * 16}, ret
        value = uuid.uuid5(_UUID_NAMESPACE, f"aclasync-sim-{device.physical_id}")
        return {"bytes": list(value.bytes)}, RC.OK

    @parsed("acl.rt.get_primary_ctx_state")
    def get_primary_ctx_state(self, device_id: int, /) -> tuple[int, int, int]:
        """Return ``(active, flags, ret)``: whether the device's default context exists."""
        device, ret = self._device_or_code(device_id)
        if device is None:
            return 0, 0, ret
        return int(device.default_context is not None), 0, RC.OK

    @parsed("acl.rt.device_get_bare_tgid")
    def device_get_bare_tgid(self) -> tuple[int, int]:
        """Return ``(pid, ret)``: the process id as the device knows it."""
        return os.getpid(), RC.OK

    # -- logical and physical ids -----------------------------------------------------

    @parsed("acl.rt.get_logic_dev_id_by_user_dev_id")
    def get_logic_dev_id_by_user_dev_id(self, user_id: int, /) -> tuple[int, int]:
        """User ids are the logical ids ``set_device`` takes: the same number."""
        device, ret = self._device_or_code(user_id)
        return (device.id if device is not None else 0), ret

    @parsed("acl.rt.get_user_dev_id_by_logic_dev_id")
    def get_user_dev_id_by_logic_dev_id(self, logic_id: int, /) -> tuple[int, int]:
        device, ret = self._device_or_code(logic_id)
        return (device.id if device is not None else 0), ret

    @parsed("acl.rt.get_logic_dev_id_by_phy_dev_id")
    def get_logic_dev_id_by_phy_dev_id(self, physical_id: int, /) -> tuple[int, int]:
        """The logical id of a physical device; 107001 if it is not visible."""
        for device in self._core.devices:
            if device.physical_id == physical_id:
                return device.id, RC.OK
        return 0, RC.INVALID_DEVICEID

    @parsed("acl.rt.get_phy_dev_id_by_logic_dev_id")
    def get_phy_dev_id_by_logic_dev_id(self, logic_id: int, /) -> tuple[int, int]:
        device, ret = self._device_or_code(logic_id)
        return (device.physical_id if device is not None else 0), ret

    # -- peer access ------------------------------------------------------------------

    @parsed("acl.rt.device_can_access_peer")
    def device_can_access_peer(self, device_id: int, peer_id: int, /) -> tuple[int, int]:
        """Return ``(1, 0)`` for two distinct valid devices; one device twice gives
        ``(0, 100000)`` (``aclrtDeviceCanAccessPeerImpl``, before the ids are looked at)."""
        if device_id == peer_id:
            return 0, RC.INVALID_PARAM
        for candidate in (device_id, peer_id):
            if self._core.device(candidate) is None:
                return 0, RC.INVALID_DEVICEID
        return 1, RC.OK

    @parsed("acl.rt.device_enable_peer_access")
    def device_enable_peer_access(self, peer_id: int, flags: int, /) -> int:
        """Let the current device and *peer_id* copy to each other.

        As ``aclrtDeviceEnablePeerAccessImpl``: non-zero ``flags`` give 200006 (a
        reserved parameter, checked first), the current device itself 100000.
        """
        if flags != 0:
            return RC.FEATURE_UNSUPPORTED
        ctx = self._core.context
        if ctx is None:
            return RC.CONTEXT_NULL
        if peer_id == ctx.device.id:
            return RC.INVALID_PARAM
        if self._core.device(peer_id) is None:
            return RC.INVALID_DEVICEID
        with self._core.lock:
            self._core.peers.add((ctx.device.id, peer_id))
        return RC.OK

    @parsed("acl.rt.device_disable_peer_access")
    def device_disable_peer_access(self, peer_id: int, /) -> int:
        """Undo ``device_enable_peer_access``; the current device itself gives 100000, a
        peer not enabled 107000."""
        ctx = self._core.context
        if ctx is None:
            return RC.CONTEXT_NULL
        if peer_id == ctx.device.id:
            return RC.INVALID_PARAM
        if self._core.device(peer_id) is None:
            return RC.INVALID_DEVICEID
        with self._core.lock:
            pair = (ctx.device.id, peer_id)
            if pair not in self._core.peers:
                return RC.PARAM_INVALID
            self._core.peers.discard(pair)
        return RC.OK

    @parsed("acl.rt.device_peer_access_status")
    def device_peer_access_status(self, device_id: int, peer_id: int, /) -> tuple[int, int]:
        """Return ``(enabled, ret)`` for access from *device_id* to *peer_id*."""
        for candidate in (device_id, peer_id):
            if self._core.device(candidate) is None:
                return 0, RC.INVALID_DEVICEID
        return int((device_id, peer_id) in self._core.peers), RC.OK
