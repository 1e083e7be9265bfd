"""The ACL status-code table and the pyACL constants carry the documented numbers."""

from __future__ import annotations

import enum

import pytest

from aclasync._pyacl.codes import TIMEOUT_CODES, ErrorCode, code_name
from aclasync._pyacl.constants import (
    CallbackBlockType,
    EventFlag,
    EventRecordedStatus,
    EventStatus,
    FailureMode,
    MallocPolicy,
    MemAttr,
    MemcpyKind,
    OverflowMode,
    RunMode,
    StreamFlag,
    StreamStatus,
)

# Every code that the reference tables (acl_base_rt.h, rt_error_codes.h, ge_error_codes.h)
# write out with an explicit number, with its macro name.
DOCUMENTED: dict[int, str] = {
    0: "ACL_SUCCESS",
    100000: "ACL_ERROR_INVALID_PARAM",
    100001: "ACL_ERROR_UNINITIALIZE",
    100002: "ACL_ERROR_REPEAT_INITIALIZE",
    100003: "ACL_ERROR_INVALID_FILE",
    100004: "ACL_ERROR_WRITE_FILE",
    100005: "ACL_ERROR_INVALID_FILE_SIZE",
    100006: "ACL_ERROR_PARSE_FILE",
    100007: "ACL_ERROR_FILE_MISSING_ATTR",
    100008: "ACL_ERROR_FILE_ATTR_INVALID",
    100009: "ACL_ERROR_INVALID_DUMP_CONFIG",
    100010: "ACL_ERROR_INVALID_PROFILING_CONFIG",
    100011: "ACL_ERROR_INVALID_MODEL_ID",
    100032: "ACL_ERROR_INVALID_QUEUE_ID",
    100033: "ACL_ERROR_REPEAT_SUBSCRIBE",
    100034: "ACL_ERROR_STREAM_NOT_SUBSCRIBE",
    100035: "ACL_ERROR_THREAD_NOT_SUBSCRIBE",
    100036: "ACL_ERROR_WAIT_CALLBACK_TIMEOUT",
    100037: "ACL_ERROR_REPEAT_FINALIZE",
    100038: "ACL_ERROR_NOT_STATIC_AIPP",
    100045: "ACL_ERROR_DUMP_NOT_RUN",
    200000: "ACL_ERROR_BAD_ALLOC",
    200001: "ACL_ERROR_API_NOT_SUPPORT",
    200002: "ACL_ERROR_INVALID_DEVICE",
    200003: "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED",
    200004: "ACL_ERROR_RESOURCE_NOT_MATCH",
    200005: "ACL_ERROR_INVALID_RESOURCE_HANDLE",
    200006: "ACL_ERROR_FEATURE_UNSUPPORTED",
    200007: "ACL_ERROR_PROF_MODULES_UNSUPPORTED",
    300000: "ACL_ERROR_STORAGE_OVER_LIMIT",
    500000: "ACL_ERROR_INTERNAL_ERROR",
    500001: "ACL_ERROR_FAILURE",
    500002: "ACL_ERROR_GE_FAILURE",
    500003: "ACL_ERROR_RT_FAILURE",
    500004: "ACL_ERROR_DRV_FAILURE",
    500005: "ACL_ERROR_PROFILING_FAILURE",
    145000: "ACL_ERROR_GE_PARAM_INVALID",
    245000: "ACL_ERROR_GE_MEMORY_ALLOCATION",
    545000: "ACL_ERROR_GE_INTERNAL_ERROR",
    107000: "ACL_ERROR_RT_PARAM_INVALID",
    107001: "ACL_ERROR_RT_INVALID_DEVICEID",
    107002: "ACL_ERROR_RT_CONTEXT_NULL",
    107003: "ACL_ERROR_RT_STREAM_CONTEXT",
    107004: "ACL_ERROR_RT_MODEL_CONTEXT",
    107005: "ACL_ERROR_RT_STREAM_MODEL",
    107006: "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID",
    107007: "ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL",
    107008: "ACL_ERROR_RT_ADDR_UNALIGNED",
    107009: "ACL_ERROR_RT_FILE_OPEN",
    107010: "ACL_ERROR_RT_FILE_WRITE",
    107011: "ACL_ERROR_RT_STREAM_SUBSCRIBE",
    107012: "ACL_ERROR_RT_THREAD_SUBSCRIBE",
    107013: "ACL_ERROR_RT_GROUP_NOT_SET",
    107014: "ACL_ERROR_RT_GROUP_NOT_CREATE",
    107015: "ACL_ERROR_RT_STREAM_NO_CB_REG",
    107016: "ACL_ERROR_RT_INVALID_MEMORY_TYPE",
    107017: "ACL_ERROR_RT_INVALID_HANDLE",
    107018: "ACL_ERROR_RT_INVALID_MALLOC_TYPE",
    107019: "ACL_ERROR_RT_WAIT_TIMEOUT",
    107020: "ACL_ERROR_RT_TASK_TIMEOUT",
    107021: "ACL_ERROR_RT_SYSPARAMOPT_NOT_SET",
    107022: "ACL_ERROR_RT_DEVICE_TASK_ABORT",
    107023: "ACL_ERROR_RT_STREAM_ABORT",
    207000: "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
    207001: "ACL_ERROR_RT_MEMORY_ALLOCATION",
    207002: "ACL_ERROR_RT_MEMORY_FREE",
    207003: "ACL_ERROR_RT_AICORE_OVER_FLOW",
    207004: "ACL_ERROR_RT_NO_DEVICE",
    207005: "ACL_ERROR_RT_RESOURCE_ALLOC_FAIL",
    207006: "ACL_ERROR_RT_NO_PERMISSION",
    207007: "ACL_ERROR_RT_NO_EVENT_RESOURCE",
    207008: "ACL_ERROR_RT_NO_STREAM_RESOURCE",
    207009: "ACL_ERROR_RT_NO_NOTIFY_RESOURCE",
    207010: "ACL_ERROR_RT_NO_MODEL_RESOURCE",
    207011: "ACL_ERROR_RT_NO_CDQ_RESOURCE",
    207012: "ACL_ERROR_RT_OVER_LIMIT",
    207013: "ACL_ERROR_RT_QUEUE_EMPTY",
    207014: "ACL_ERROR_RT_QUEUE_FULL",
    207015: "ACL_ERROR_RT_REPEATED_INIT",
    207016: "ACL_ERROR_RT_AIVEC_OVER_FLOW",
    207017: "ACL_ERROR_RT_OVER_FLOW",
    207018: "ACL_ERROR_RT_DEVICE_OOM",
    207019: "ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP",
    207020: "ACL_ERROR_RT_TIMEOUT",
    207021: "ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED",
    507000: "ACL_ERROR_RT_INTERNAL_ERROR",
    507001: "ACL_ERROR_RT_TS_ERROR",
    507002: "ACL_ERROR_RT_STREAM_TASK_FULL",
    507003: "ACL_ERROR_RT_STREAM_TASK_EMPTY",
    507004: "ACL_ERROR_RT_STREAM_NOT_COMPLETE",
    507005: "ACL_ERROR_RT_END_OF_SEQUENCE",
    507006: "ACL_ERROR_RT_EVENT_NOT_COMPLETE",
    507007: "ACL_ERROR_RT_CONTEXT_RELEASE_ERROR",
    507008: "ACL_ERROR_RT_SOC_VERSION",
    507009: "ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT",
    507010: "ACL_ERROR_RT_LOST_HEARTBEAT",
    507011: "ACL_ERROR_RT_MODEL_EXECUTE",
    507012: "ACL_ERROR_RT_REPORT_TIMEOUT",
    507013: "ACL_ERROR_RT_SYS_DMA",
    507014: "ACL_ERROR_RT_AICORE_TIMEOUT",
    507015: "ACL_ERROR_RT_AICORE_EXCEPTION",
    507016: "ACL_ERROR_RT_AICORE_TRAP_EXCEPTION",
    507017: "ACL_ERROR_RT_AICPU_TIMEOUT",
    507018: "ACL_ERROR_RT_AICPU_EXCEPTION",
    507019: "ACL_ERROR_RT_AICPU_DATADUMP_RSP_ERR",
    507020: "ACL_ERROR_RT_AICPU_MODEL_RSP_ERR",
    507021: "ACL_ERROR_RT_PROFILING_ERROR",
    507022: "ACL_ERROR_RT_IPC_ERROR",
    507023: "ACL_ERROR_RT_MODEL_ABORT_NORMAL",
    507024: "ACL_ERROR_RT_KERNEL_UNREGISTERING",
    507025: "ACL_ERROR_RT_RINGBUFFER_NOT_INIT",
    507026: "ACL_ERROR_RT_RINGBUFFER_NO_DATA",
    507027: "ACL_ERROR_RT_KERNEL_LOOKUP",
    507028: "ACL_ERROR_RT_KERNEL_DUPLICATE",
    507029: "ACL_ERROR_RT_DEBUG_REGISTER_FAIL",
    507030: "ACL_ERROR_RT_DEBUG_UNREGISTER_FAIL",
    507031: "ACL_ERROR_RT_LABEL_CONTEXT",
    507032: "ACL_ERROR_RT_PROGRAM_USE_OUT",
    507033: "ACL_ERROR_RT_DEV_SETUP_ERROR",
    507034: "ACL_ERROR_RT_VECTOR_CORE_TIMEOUT",
    507035: "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION",
    507036: "ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION",
    507037: "ACL_ERROR_RT_CDQ_BATCH_ABNORMAL",
    507046: "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT",
    507047: "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT",
    507048: "ACL_ERROR_RT_FFTS_PLUS_TIMEOUT",
    507049: "ACL_ERROR_RT_FFTS_PLUS_EXCEPTION",
    507050: "ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION",
    507051: "ACL_ERROR_RT_SEND_MSG",
    507052: "ACL_ERROR_RT_COPY_DATA",
    507053: "ACL_ERROR_RT_DEVICE_MEM_ERROR",
    507054: "ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR",
    507055: "ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR",
    507056: "ACL_ERROR_RT_LINK_ERROR",
    507057: "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR",
    507899: "ACL_ERROR_RT_DRV_INTERNAL_ERROR",
    507900: "ACL_ERROR_RT_AICPU_INTERNAL_ERROR",
    507901: "ACL_ERROR_RT_SOCKET_CLOSE",
    507902: "ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR",
    507903: "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED",
    507904: "ACL_ERROR_RT_COMM_OP_RETRY_FAIL",
}

# Families the reference writes as "first … last": every number in between is a code.
RANGES: dict[str, tuple[int, int]] = {
    "model/op": (100011, 100032),
    "aipp/profiling/dump": (100038, 100045),
    "profiling/opp/jpeg": (148046, 148053),
    "capture/task group": (107024, 107045),
    "die/trap overflow": (507038, 507045),
    "snapshot/host memory/ccu": (507905, 507916),
    "aclnn (torch_npu only)": (574006, 574009),
}


@pytest.mark.parametrize(("code", "name"), sorted(DOCUMENTED.items()))
def test_documented_code_has_its_macro_name(code: int, name: str) -> None:
    assert ErrorCode(code).name == name
    assert code_name(code) == name
    assert ErrorCode[name] == code


@pytest.mark.parametrize("family", sorted(RANGES))
def test_every_member_of_a_documented_range_is_named(family: str) -> None:
    first, last = RANGES[family]
    for code in range(first, last + 1):
        assert not code_name(code).startswith("ACL_ERROR_UNKNOWN"), code


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (100039, "ACL_ERROR_COMPILING_STUB_MODE"),
        (148046, "ACL_ERROR_PROF_REPEAT_SUBSCRIBE"),
        (148053, "ACL_ERROR_INVALID_BUNDLE_MODEL_ID"),
        (107032, "ACL_ERROR_STREAM_CAPTURE_CONFLICT"),
        (107035, "ACL_ERROR_RT_TASK_ABORT_STOP"),
        (107042, "ACL_ERROR_RT_SYMBOL_NOT_FOUND"),
        (107045, "ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING"),
        (507042, "ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW"),
        (507905, "ACL_ERROR_SNAPSHOT_LOCK_TIMEOUT"),
        (507914, "ACL_ERROR_RT_L3_PORT_ERROR"),
        (507916, "ACL_ERROR_RT_CCU_EXCEPTION"),
        (574007, "ACLNN_CLEAR_DEVICE_STATE_FAIL"),
    ],
)
def test_range_members_use_header_names(code: int, name: str) -> None:
    assert code_name(code) == name


def test_success_has_three_spellings_with_acl_success_canonical() -> None:
    assert ErrorCode(0) is ErrorCode.ACL_SUCCESS
    assert ErrorCode["ACL_ERROR_NONE"] is ErrorCode.ACL_SUCCESS
    assert ErrorCode["ACL_RT_SUCCESS"] is ErrorCode.ACL_SUCCESS
    assert code_name(0) == "ACL_SUCCESS"


def test_values_are_unique_apart_from_the_success_aliases() -> None:
    aliases = {name for name, member in ErrorCode.__members__.items() if member.name != name}
    assert aliases == {"ACL_ERROR_NONE", "ACL_RT_SUCCESS"}
    values = [member.value for member in ErrorCode]
    assert len(values) == len(set(values))


def test_names_look_like_acl_macros() -> None:
    for name in ErrorCode.__members__:
        assert name.startswith(("ACL_", "ACLNN_")), name
        assert name == name.upper(), name


def test_codes_are_plain_ints() -> None:
    assert isinstance(ErrorCode.ACL_ERROR_RT_PARAM_INVALID, int)
    assert int(ErrorCode.ACL_ERROR_RT_PARAM_INVALID) == 107000
    assert code_name(ErrorCode.ACL_ERROR_RT_STREAM_NO_CB_REG) == "ACL_ERROR_RT_STREAM_NO_CB_REG"


@pytest.mark.parametrize("code", [1, 99999, 107999, 123456, 999999, -2])
def test_code_name_of_an_unknown_code(code: int) -> None:
    assert code_name(code) == f"ACL_ERROR_UNKNOWN({code})"


def test_timeout_codes_are_the_stream_and_event_sync_timeouts() -> None:
    assert isinstance(TIMEOUT_CODES, frozenset)
    assert sorted(TIMEOUT_CODES) == [507046, 507047]
    assert ErrorCode.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT in TIMEOUT_CODES
    assert ErrorCode.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT in TIMEOUT_CODES
    # The generic runtime wait timeout and the callback report timeout are not sync timeouts.
    assert ErrorCode.ACL_ERROR_RT_WAIT_TIMEOUT not in TIMEOUT_CODES
    assert ErrorCode.ACL_ERROR_RT_REPORT_TIMEOUT not in TIMEOUT_CODES


# -- constants --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "value"),
    [
        (StreamFlag.DEFAULT, 0),
        (StreamFlag.FAST_LAUNCH, 1),
        (StreamFlag.FAST_SYNC, 2),
        (FailureMode.CONTINUE, 0),
        (FailureMode.STOP, 1),
        (RunMode.DEVICE, 0),
        (RunMode.HOST, 1),
        (EventFlag.SYNC, 0x1),
        (EventFlag.CAPTURE_STREAM_PROGRESS, 0x2),
        (EventFlag.TIME_LINE, 0x8),
        (EventFlag.DEVICE_USE_ONLY, 0x10),
        (EventFlag.EXTERNAL, 0x20),
        (EventFlag.IPC, 0x40),
        (StreamStatus.COMPLETE, 0),
        (StreamStatus.NOT_READY, 1),
        (CallbackBlockType.NO_BLOCK, 0),
        (CallbackBlockType.BLOCK, 1),
        (OverflowMode.SATURATION, 0),
        (OverflowMode.INFNAN, 1),
        (OverflowMode.UNDEF, 2),
    ],
)
def test_constant_has_documented_value(member: int, value: int) -> None:
    assert isinstance(member, int)
    assert int(member) == value


def test_event_status_enums_have_opposite_meanings() -> None:
    # query_event (deprecated) and query_event_status encode "complete" differently.
    assert int(EventStatus.COMPLETE) == 0
    assert int(EventStatus.NOT_READY) == 1
    assert int(EventRecordedStatus.NOT_READY) == 0
    assert int(EventRecordedStatus.COMPLETE) == 1
    assert int(EventStatus.COMPLETE) != int(EventRecordedStatus.COMPLETE)


def test_stream_flags_combine_like_torch_npu_streams() -> None:
    documented = {
        "DEFAULT": 0,
        "FAST_LAUNCH": 0x1,
        "FAST_SYNC": 0x2,
        "PERSISTENT": 0x4,
        "HUGE": 0x8,
        "CPU_SCHEDULE": 0x10,
        "DEVICE_USE_ONLY": 0x20,
    }
    assert {name: int(flag) for name, flag in StreamFlag.__members__.items()} == documented
    both = StreamFlag.FAST_LAUNCH | StreamFlag.FAST_SYNC
    assert int(both) == 3
    assert StreamFlag.FAST_SYNC in both
    assert int(StreamFlag.DEFAULT) == 0


def test_event_flags_combine() -> None:
    assert int(EventFlag.SYNC | EventFlag.TIME_LINE) == 0x9


@pytest.mark.parametrize(
    ("enum_type", "names"),
    [
        (
            MemcpyKind,
            [
                "HOST_TO_HOST",
                "HOST_TO_DEVICE",
                "DEVICE_TO_HOST",
                "DEVICE_TO_DEVICE",
                "DEFAULT",
                "HOST_TO_BUF_TO_DEVICE",
                "INNER_DEVICE_TO_DEVICE",
                "INTER_DEVICE_TO_DEVICE",
            ],
        ),
        (
            MallocPolicy,
            [
                "HUGE_FIRST",
                "HUGE_ONLY",
                "NORMAL_ONLY",
                "HUGE_FIRST_P2P",
                "HUGE_ONLY_P2P",
                "NORMAL_ONLY_P2P",
                "HUGE1G_ONLY",
                "HUGE1G_ONLY_P2P",
            ],
        ),
        (
            MemAttr,
            [
                "DDR_MEM",
                "HBM_MEM",
                "DDR_MEM_HUGE",
                "DDR_MEM_NORMAL",
                "HBM_MEM_HUGE",
                "HBM_MEM_NORMAL",
                "DDR_MEM_P2P_HUGE",
                "DDR_MEM_P2P_NORMAL",
                "HBM_MEM_P2P_HUGE",
                "HBM_MEM_P2P_NORMAL",
                "HBM_MEM_HUGE1G",
                "HBM_MEM_P2P_HUGE1G",
                "MEM_NORMAL",
                "MEM_HUGE",
                "MEM_HUGE1G",
                "MEM_P2P_NORMAL",
                "MEM_P2P_HUGE",
                "MEM_P2P_HUGE1G",
            ],
        ),
    ],
)
def test_counted_enum_follows_declaration_order(
    enum_type: type[enum.IntEnum], names: list[str]
) -> None:
    # These C enums have implicit values, so position in the header is the value.
    assert [(m.name, m.value) for m in enum_type] == [(n, i) for i, n in enumerate(names)]
