"""Each format unit converts as CPython's ``PyArg_ParseTuple`` does: checked against it.

The simulator converts arguments in Python; these tests call the real C function
(through ``ctypes.pythonapi``) with the same values and compare what each gives: the
converted value, or the exception class and message.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aclasync._pyacl.codes import ErrorCode
from aclasync.sim._args import convert_args

# unit -> ctypes type of the C variable PyArg_ParseTuple writes
C_TYPES: dict[str, Any] = {
    "b": ctypes.c_ubyte,
    "B": ctypes.c_ubyte,
    "h": ctypes.c_short,
    "H": ctypes.c_ushort,
    "i": ctypes.c_int,
    "I": ctypes.c_uint,
    "l": ctypes.c_long,
    "k": ctypes.c_ulong,
    "L": ctypes.c_longlong,
    "K": ctypes.c_ulonglong,
    "n": ctypes.c_ssize_t,
    "f": ctypes.c_float,
    "d": ctypes.c_double,
}


def cpython(fmt: str, args: tuple[Any, ...]) -> Any:
    """What ``PyArg_ParseTuple(args, fmt, ...)`` gives: the values, or (exception, message)."""
    cells = [C_TYPES[unit]() for unit in fmt.replace("|", "")]
    parse = ctypes.pythonapi.PyArg_ParseTuple
    parse.restype = ctypes.c_int
    try:
        parse(ctypes.py_object(args), fmt.encode(), *[ctypes.byref(c) for c in cells])
    except Exception as exc:  # ctypes.pythonapi raises the error the call set
        return type(exc), str(exc)
    return tuple(cell.value for cell in cells[: len(args)])


def simulated(fmt: str, args: tuple[Any, ...]) -> Any:
    try:
        return convert_args(fmt, args)
    except Exception as exc:
        return type(exc), str(exc)


class Indexable:
    """Not an int, but usable as one (``__index__``)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


EDGES = [0, 1, -1, 127, 128, 255, 256, 2**15, -(2**15) - 1, 2**16, 2**31 - 1, 2**31, -(2**31)]
EDGES += [-(2**31) - 1, 2**32, 2**32 + 5, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**70]
VALUES = st.one_of(
    st.sampled_from(EDGES),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.sampled_from([None, "7", b"7", 1.5, np.int64(3), np.uint32(9), np.float32(2.5)]),
    st.integers(-(2**70), 2**70).map(Indexable),
)


@settings(max_examples=400, deadline=None)
@given(unit=st.sampled_from(sorted(C_TYPES)), value=VALUES)
def test_every_numeric_unit_converts_as_cpython(unit: str, value: Any) -> None:
    assert simulated(unit, (value,)) == cpython(unit, (value,))


@pytest.mark.parametrize(
    ("fmt", "args"),
    [
        ("ii", (1,)),
        ("ii", (1, 2, 3)),
        ("|i", (1, 2)),
        ("k|i", ()),
        ("", (1,)),
        ("kk", (1, "a")),
        ("kk", (None, 1)),
        ("Ik", (2**40, -1)),
    ],
)
def test_counts_and_positions_are_reported_as_cpython_does(fmt: str, args: tuple[Any, ...]) -> None:
    assert simulated(fmt, args) == cpython(fmt, args)


def test_strings_refuse_nul_and_non_str() -> None:
    assert simulated("s", ("a\0b",)) == (ValueError, "embedded null character")
    assert simulated("s", (b"x",)) == (TypeError, "argument 1 must be str, not bytes")
    assert simulated("s", ("ok",)) == ("ok",)
    assert simulated("s", ("\udc80",))[0] is UnicodeEncodeError


def test_the_wrapper_raises_pyacl_message_with_cpython_error_as_cause(rt: Any) -> None:
    with pytest.raises(TypeError, match=r"^acl\.rt\.set_device args parse failed$") as caught:
        rt.rt.set_device(2**31)
    assert isinstance(caught.value.__cause__, OverflowError)
    assert str(caught.value.__cause__) == "signed integer is greater than maximum"
    with pytest.raises(TypeError, match=r"^acl\.mdl\.unload args parse failed$"):
        rt.mdl.unload("1")


def test_wrapping_units_hand_the_call_the_low_bits(dev0: Any, check: Any) -> None:
    assert dev0.float16_to_float(0x1_3E00) == 1.5  # "H" keeps 16 bits
    event = check(dev0.rt.create_event_with_flag(2**32 + 8))  # "I": TIME_LINE
    check(dev0.rt.destroy_event(event))
    check(dev0.rt.synchronize_stream(2**64))  # "k": 2**64 wraps to 0, the default stream
    assert dev0.rt.synchronize_stream(2**64 + 3) == ErrorCode.ACL_ERROR_RT_PARAM_INVALID
