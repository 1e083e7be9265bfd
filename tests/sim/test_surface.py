"""The whole pyACL surface: every name of the table, process-level calls, visible devices."""

from __future__ import annotations

import logging
import math
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aclasync._pyacl import surface
from aclasync._pyacl.codes import ErrorCode
from aclasync.sim import SimAcl, UnmodelledWarning, create
from aclasync.sim._args import PASS_THROUGH

NAMES_FILE = Path(__file__).with_name("pyacl_rt_names.txt")
NAMES = [
    line.strip()
    for line in NAMES_FILE.read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
NOT_SUPPORTED = ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT
FUNCTIONS = [f for f in surface.functions() if f.condition is None]
# acl.util's functions take real objects and threads; tests/sim/test_host_pointers.py and
# test_callbacks.py call them. Every other function is called here with harmless values.
CALLED = [f for f in FUNCTIONS if f.namespace != "acl.util"]
NO_PARSE = [f for f in FUNCTIONS if f.format is None]

# Harmless arguments for each PyArg_ParseTuple unit, and for the "O" units that need more.
DUMMY: dict[str, Any] = {"s": "x", "O": {}, "f": 0.0}
OBJECT_ARGS: dict[str, list[Any]] = {
    "acl.rt.launch_callback": [lambda _: None, None],
    "acl.rt.notify_batch_reset": [[]],
    "acl.create_tensor_desc": [[]],
    "acl.set_tensor_storage_shape": [[]],
    "acl.set_tensor_shape": [[]],
    "acl.set_tensor_origin_shape": [[]],
    "acl.set_tensor_shape_range": [[]],
    "acl.set_tensor_value_range": [[]],
    "acl.mdl.set_input_dynamic_dims": [{"dimCount": 0, "dims": []}],
}


def dummy_args(function: surface.PyFunction) -> list[Any]:
    objects = list(OBJECT_ARGS.get(function.api, []))
    units, required = surface.format_units(function.format or "")
    return [
        objects.pop(0) if unit == "O" and objects else DUMMY.get(unit, 0)
        for unit in units[:required]
    ]


def ret_of(result: Any) -> Any:
    return result[-1] if isinstance(result, tuple) else result


def namespace(runtime: Any, name: str) -> Any:
    return runtime if name == "acl" else getattr(runtime, name.partition(".")[2])


def test_the_names_file_lists_182():
    assert len(NAMES) == 182
    assert len(set(NAMES)) == 182
    assert [f.name for f in FUNCTIONS if f.namespace == "acl.rt"] == NAMES


@pytest.mark.parametrize("function", CALLED, ids=[f.api for f in CALLED])
def test_every_name_is_modelled_or_answers_207000(dev0, function):
    fn = getattr(namespace(dev0, function.namespace), function.name)
    assert fn.__pyacl_api__ == function.api
    assert fn.__pyacl_fmt__ == function.format
    args = dummy_args(function)
    has_ret = "ret" in surface.split_shape(function.returns or "")
    if getattr(fn, "__pyacl_unsupported__", False):
        with pytest.warns(UnmodelledWarning, match=rf"^{function.api} is not modelled"):
            result = fn(*args)
        if has_ret:
            assert ret_of(result) == NOT_SUPPORTED
    else:
        result = fn(*args)  # an UnmodelledWarning would fail the test (filterwarnings)
        if has_ret:
            assert ret_of(result) != NOT_SUPPORTED, f"{function.api} is modelled"
    if function.format is not None:
        units = len(surface.format_units(function.format)[0])
        message = (
            rf"^function takes (exactly|at most) {units} arguments? \(2\d given\)$"
            if function.api in PASS_THROUGH  # the wrapper keeps CPython's own error
            else rf"^{function.api} args parse failed$"
        )
        with pytest.raises(TypeError, match=message):
            fn(*args, *[object()] * 20)


@pytest.mark.parametrize("function", NO_PARSE, ids=[f.api for f in NO_PARSE])
def test_a_wrapper_that_parses_nothing_ignores_its_arguments(make_rt, function):
    # Each call on a fresh runtime: some of these calls change state (a second
    # ``acl.finalize`` returns 100037).
    fn, twin = (getattr(namespace(make_rt(), function.namespace), function.name) for _ in "ab")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnmodelledWarning)
        plain = fn()
        ignored = twin(0, "device id", None, object())
    assert type(ignored) is type(plain)
    if "ret" in surface.split_shape(function.returns or ""):
        assert ret_of(ignored) == ret_of(plain)
    with pytest.raises(TypeError, match=rf"^{function.name}\(\) takes no keyword arguments$"):
        fn(device_id=0)


def test_synchronize_device_takes_a_device_id_as_multi_npu_code_passes_it(dev0, check):
    stream = check(dev0.rt.create_stream())
    check(dev0.sim.launch_kernel(__import__("aclasync.sim").sim.Kernel(duration_us=1), stream))
    check(dev0.rt.synchronize_device(0))
    assert dev0.rt.stream_query(stream) == (0, 0), "the device was synchronized"
    check(dev0.rt.destroy_stream(stream))


def test_an_unmodelled_name_warns_once_per_runtime(make_rt):
    first, second = make_rt(), make_rt()
    with pytest.warns(UnmodelledWarning) as record:
        answers = [first.rt.binary_unload(0) for _ in range(3)]
    assert answers == [NOT_SUPPORTED] * 3
    assert len(record) == 1
    assert record[0].filename == __file__, "the warning points at the caller"
    with pytest.warns(UnmodelledWarning):
        assert second.rt.binary_unload(0) == NOT_SUPPORTED
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnmodelledWarning)
        with pytest.raises(UnmodelledWarning):
            make_rt().rt.binary_unload(0)


# -- process-level calls --------------------------------------------------------------


def test_init_reads_only_an_existing_config(rt, check, tmp_path):
    check(rt.init(str(tmp_path / "missing.json")), ErrorCode.ACL_ERROR_INVALID_FILE)
    config = tmp_path / "acl.json"
    config.write_text("{}")
    check(rt.init(str(config)))
    check(rt.init(), ErrorCode.ACL_ERROR_REPEAT_INITIALIZE)
    # aclInit counts a repeat call before it reads the path: a missing one still counts
    check(rt.init(str(tmp_path / "missing.json")), ErrorCode.ACL_ERROR_REPEAT_INITIALIZE)
    assert rt.finalize_reference() == (2, 0)
    check(rt.finalize())
    check(rt.finalize(), ErrorCode.ACL_ERROR_REPEAT_FINALIZE)
    with pytest.raises(TypeError, match=r"acl\.init args parse failed"):
        rt.init(5)


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"", 0),  # an empty file: nothing to parse (CANN's json_parser)
        (b'{"dump": {"dump_path": "/tmp"}}', 0),
        (b"not json {", ErrorCode.ACL_ERROR_PARSE_FILE),
        (b'{"dump": {', ErrorCode.ACL_ERROR_PARSE_FILE),  # truncated
        (b" \n", ErrorCode.ACL_ERROR_PARSE_FILE),
        (b"[" * 10 + b"]" * 10, 0),
        (b"[" * 11 + b"]" * 11, ErrorCode.ACL_ERROR_PARSE_FILE),  # deeper than CANN reads
        (b'{"a": NaN}', ErrorCode.ACL_ERROR_PARSE_FILE),
        (b'\xef\xbb\xbf{"a": 1}', 0),  # a byte order mark: skipped, as nlohmann does
        (b'{"a": "\xff\xfe"}', ErrorCode.ACL_ERROR_PARSE_FILE),  # ill-formed UTF-8
        (b'{"a": "\\ud800"}', ErrorCode.ACL_ERROR_PARSE_FILE),  # a lone surrogate
    ],
)
def test_init_parses_its_config_as_aclinit_does(rt, check, tmp_path, content, code):
    config = tmp_path / "acl.json"
    config.write_bytes(content)
    check(rt.init(str(config)), code)
    if code:  # a failed first call does not count: the next one is first
        check(rt.init())
    check(rt.finalize())


def test_init_of_a_config_it_cannot_read_is_an_invalid_file(rt, check, tmp_path, monkeypatch):
    config = tmp_path / "acl.json"
    config.write_text("{}")

    def unreadable(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(config))

    monkeypatch.setattr("builtins.open", unreadable)
    check(rt.init(str(config)), ErrorCode.ACL_ERROR_INVALID_FILE)


def test_app_log_writes_through_logging(rt, caplog):
    with caplog.at_level(logging.DEBUG, logger="aclasync.sim.app"):
        assert rt.app_log(3, "an error from acllite") is None
        rt.app_log(1, "some info")
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.ERROR, "an error from acllite") in levels
    assert (logging.INFO, "some info") in levels
    with pytest.raises(TypeError, match=r"acl\.app_log args parse failed"):
        rt.app_log("error", 3)


def test_recent_error_message_describes_the_last_failure(dev0, check):
    assert dev0.get_recent_err_msg() is None
    check(dev0.rt.free(0), ErrorCode.ACL_ERROR_INVALID_PARAM)
    message = dev0.get_recent_err_msg()
    assert "acl.rt.free" in message
    assert "100000" in message
    assert dev0.get_recent_err_msg() is None, "reading it clears it"


# -- visible devices --------------------------------------------------------------------


def test_visible_devices_renumber_physical_devices(make_rt, check):
    rt = make_rt(device_count=4, visible_devices="2,3")
    assert check(rt.rt.get_device_count()) == 2
    assert check(rt.rt.get_phy_dev_id_by_logic_dev_id(0)) == 2
    assert check(rt.rt.get_logic_dev_id_by_phy_dev_id(3)) == 1
    check(rt.rt.get_logic_dev_id_by_phy_dev_id(0), ErrorCode.ACL_ERROR_RT_INVALID_DEVICEID)
    assert check(rt.rt.get_logic_dev_id_by_user_dev_id(1)) == 1
    assert check(rt.rt.get_user_dev_id_by_logic_dev_id(0)) == 0
    check(rt.rt.set_device(1))
    check(rt.rt.set_device(2), ErrorCode.ACL_ERROR_RT_INVALID_DEVICEID)
    assert check(rt.rt.get_device_info(0, 402)) == 2  # the physical chip id


def test_visible_devices_stop_at_the_first_bad_entry(make_rt, check):
    assert check(make_rt(device_count=4, visible_devices=[1, 9, 2]).rt.get_device_count()) == 1
    assert check(make_rt(device_count=4, visible_devices="3,3,1").rt.get_device_count()) == 1
    assert check(make_rt(device_count=4, visible_devices="").rt.get_device_count()) == 0
    with pytest.raises(TypeError, match="visible_devices"):
        create(visible_devices=3)


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"notify_latency_us": math.inf}, ValueError, "notify_latency_us must be finite"),
        ({"notify_latency_us": math.nan}, ValueError, "notify_latency_us must be finite"),
        ({"notify_latency_us": 1e300}, ValueError, "notify_latency_us must be at most a day"),
        ({"notify_latency_us": "200"}, TypeError, "notify_latency_us must be float, got str"),
        ({"stream_limit": "3"}, TypeError, "stream_limit must be int, got str"),
        ({"stream_limit": 3.0}, TypeError, "stream_limit must be int, got float"),
        ({"max_priority": "7"}, TypeError, "max_priority must be int | None, got str"),
        ({"overflow_switch_supported": 1}, TypeError, "must be bool, got int"),
        ({"h2d_gbps": -1.0}, ValueError, "h2d_gbps must be finite and >= 0"),
    ],
)
def test_a_bad_model_parameter_is_refused_at_creation(params, error, message):
    # Before, inf or a str was taken, and the device worker died at its first wait.
    with pytest.raises(error, match=message):
        create(**params)


def test_model_parameters_take_numpy_scalars_and_none(make_rt, check):
    rt = make_rt(stream_limit=np.int64(64), notify_latency_us=np.float32(5), max_priority=None)
    assert rt.sim.profile.stream_limit == 64
    check(rt.rt.set_device(0))


def test_environment_is_read_when_a_runtime_is_created(monkeypatch, make_rt, check):
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "1")
    rt = make_rt(device_count=2)
    assert check(rt.rt.get_device_count()) == 1
    assert check(rt.rt.get_phy_dev_id_by_logic_dev_id(0)) == 1
    assert check(make_rt(device_count=2, visible_devices=[0, 1]).rt.get_device_count()) == 2


def test_the_default_runtime_reads_the_environment_on_first_use(monkeypatch):
    from aclasync.sim import PROFILES

    lazy = SimAcl(device_count=8, profile=PROFILES["Ascend910B3"])
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "4,5,6")
    try:
        assert lazy.rt.get_device_count() == (3, 0)
        monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "1")
        assert lazy.rt.get_device_count() == (3, 0), "read once, on first use"
    finally:
        lazy.sim.close()


# -- callbacks that raise SystemExit / KeyboardInterrupt --------------------------------


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_a_callback_raising_systemexit_loses_nothing(dev0, check, spawn, exc_type):
    worker = spawn()
    stream = check(dev0.rt.create_stream())
    check(dev0.rt.subscribe_report(worker.ident, stream))
    ran = []
    posted = threading.Event()

    def stop(_):
        raise exc_type

    def last(_):
        ran.append("last")

    check(dev0.rt.launch_callback(stop, None, 1, stream))
    check(dev0.rt.launch_callback(last, None, 1, stream))
    check(dev0.rt.launch_callback(lambda _: posted.set(), None, 0, stream))
    # The first blocking callback is reported alone (it holds the stream): its exception
    # comes out of process_report, after the stream was let go.
    with pytest.raises(exc_type):
        worker.call(dev0.rt.process_report, 1000)
    for _ in range(10):  # a serving loop goes on after catching it
        if posted.is_set():
            break
        worker.call(dev0.rt.process_report, 1000)
    assert ran == ["last"]
    check(dev0.rt.synchronize_stream(stream), what="the stream is not held")


def test_version_half_floats_and_finalize_reference(rt, check):
    assert rt.get_version() == (1, 17, 0, 0)
    assert rt.float_to_float16(1.5) == 0x3E00
    assert rt.float16_to_float(0x3E00) == 1.5
    assert rt.float_to_float16(1e9) == 0x7C00, "too large: infinity"
    check(rt.init())
    check(rt.init(), ErrorCode.ACL_ERROR_REPEAT_INITIALIZE)
    assert check(rt.finalize_reference()) == 1
    assert check(rt.finalize_reference()) == 0
    check(rt.finalize_reference(), ErrorCode.ACL_ERROR_REPEAT_FINALIZE)
