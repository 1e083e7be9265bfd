"""The whole pyACL surface: all 182 acl.rt names, process-level calls, visible devices."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from aclasync._pyacl.codes import ErrorCode
from aclasync.sim import SimAcl, create

NAMES_FILE = Path(__file__).with_name("pyacl_rt_names.txt")
NAMES = [
    line.strip()
    for line in NAMES_FILE.read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
SIM_DOC = Path(__file__).parents[2] / "docs" / "simulator.md"
NOT_SUPPORTED = ErrorCode.ACL_ERROR_RT_FEATURE_NOT_SUPPORT

# Harmless arguments for each PyArg_ParseTuple code.
DUMMY = {"i": 0, "I": 0, "k": 0, "K": 0, "l": 0, "L": 0, "s": "x", "O": {}, "f": 0.0, "H": 0}
OBJECT_ARGS = {
    "launch_callback": [lambda _: None, None],
    "notify_batch_reset": [[]],
    "set_stream_attribute": [{}],
}


def dummy_args(name, fmt):
    objects = list(OBJECT_ARGS.get(name, []))
    args = []
    for code in fmt.partition("|")[0]:
        args.append(objects.pop(0) if code == "O" and objects else DUMMY[code])
    return args


def ret_of(result):
    return result[-1] if isinstance(result, tuple) else result


def test_the_names_file_lists_182():
    assert len(NAMES) == 182
    assert len(set(NAMES)) == 182


@pytest.mark.parametrize("name", NAMES)
def test_every_name_is_modelled_or_answers_207000(dev0, caplog, name):
    fn = getattr(dev0.rt, name)
    assert fn.__pyacl_api__ == f"acl.rt.{name}"
    args = dummy_args(name, fn.__pyacl_fmt__)
    with caplog.at_level(logging.WARNING, logger="aclasync.sim"):
        result = fn(*args)
    if getattr(fn, "__pyacl_unsupported__", False):
        if isinstance(result, int) and name in ("create_binary", "allocator_create_desc"):
            assert result == 0  # these return a bare handle: NULL
        else:
            assert ret_of(result) == NOT_SUPPORTED
        assert f"acl.rt.{name} is not supported" in caplog.text
    else:
        assert ret_of(result) != NOT_SUPPORTED, f"{name} is modelled"
        assert "not supported" not in caplog.text
    with pytest.raises(TypeError):
        fn(*args, object(), object(), object(), object(), object(), object(), object(), object())


def test_the_simulator_doc_tables_every_name():
    text = SIM_DOC.read_text()
    rt = create()
    for name in NAMES:
        unsupported = getattr(getattr(rt.rt, name), "__pyacl_unsupported__", False)
        row = f"| `{name}` | {'not supported (207000)' if unsupported else 'modelled'}"
        assert row in text, f"docs/simulator.md lacks the row for {name}"


# -- process-level calls --------------------------------------------------------------


def test_init_reads_only_an_existing_config(rt, check, tmp_path):
    check(rt.init(str(tmp_path / "missing.json")), ErrorCode.ACL_ERROR_INVALID_FILE)
    config = tmp_path / "acl.json"
    config.write_text("{}")
    check(rt.init(str(config)))
    check(rt.init(), ErrorCode.ACL_ERROR_REPEAT_INITIALIZE)
    check(rt.finalize())
    check(rt.finalize(), ErrorCode.ACL_ERROR_REPEAT_FINALIZE)
    with pytest.raises(TypeError, match=r"acl\.init args parse failed"):
        rt.init(5)


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
