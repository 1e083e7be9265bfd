"""pyACL's argument parsing, checked on every backend present.

The wrappers' formats come from pyACL's table (``aclasync._pyacl.surface``): a wrapper
that parses nothing accepts and ignores any positional arguments; one that parses
converts each unit as CPython does (``I``/``H``/``k`` keep the low bits, ``i`` refuses
what does not fit) and answers a failure with ``TypeError("acl.<group>.<name> args
parse failed")``. Only harmless calls are made, so this runs on real devices too.
"""

from __future__ import annotations

from typing import Any

import pytest


def test_wrappers_that_parse_nothing_ignore_their_arguments(acl: Any) -> None:
    assert acl.rt.synchronize_device(0) == 0  # as multi-NPU code calls it
    assert acl.rt.get_device(0) == (0, 0)
    count, ret = acl.rt.get_device_count("any", "thing")
    assert (ret, count >= 1) == (0, True)
    assert acl.rt.get_run_mode(None)[1] == 0
    assert acl.rt.get_context(1)[1] == 0
    stream, ret = acl.rt.create_stream(1, 2)
    assert ret == 0
    assert acl.rt.destroy_stream(stream) == 0
    event, ret = acl.rt.create_event("timing")
    assert ret == 0
    assert acl.rt.destroy_event(event) == 0
    assert isinstance(acl.get_soc_name(0), str)


def test_keyword_arguments_are_refused_by_cpython(acl: Any) -> None:
    with pytest.raises(TypeError, match=r"^synchronize_device\(\) takes no keyword arguments$"):
        acl.rt.synchronize_device(device_id=0)
    with pytest.raises(TypeError, match=r"^set_device\(\) takes no keyword arguments$"):
        acl.rt.set_device(device_id=0)


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("rt.set_device", (2**31,)),
        ("rt.set_device", ("0",)),
        ("rt.set_device", (None,)),
        ("rt.malloc", (64,)),
        ("rt.synchronize_stream", (None,)),
        ("rt.synchronize_stream", (1.0,)),
        ("mdl.get_num_inputs", ()),
        ("float16_to_float", ("1",)),
    ],
)
def test_a_parse_failure_is_pyacls_type_error(acl: Any, call: str, args: tuple[Any, ...]) -> None:
    target = acl
    for part in call.split("."):
        target = getattr(target, part)
    with pytest.raises(TypeError, match=rf"^acl\.{call} args parse failed$"):
        target(*args)


def test_bitfield_units_keep_the_low_bits(acl: Any) -> None:
    assert acl.float16_to_float(0x1_3E00) == 1.5  # "H"
    assert acl.rt.synchronize_stream(2**64) == 0  # "k": the default stream, 0
    event, ret = acl.rt.create_event_with_flag((1 << 32) | 0x8)  # "I": ACL_EVENT_TIME_LINE
    assert ret == 0
    assert acl.rt.destroy_event(event) == 0
