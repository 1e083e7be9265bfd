"""How many streams and events a device lets a process create: asked, then reached."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from .._pyacl.codes import code_name
from ._support import CheckFailed, bare_status, code_text, values

__all__ = ["EVENT_CAP", "STREAM_CAP", "probe_limits"]

#: Most streams the probe creates: above every documented limit (1984 on A2/A3).
STREAM_CAP = 4096
#: Most events the probe creates: above every documented limit (65536).
EVENT_CAP = 70_000


def probe_limits(
    acl: Any, device: int, *, stream_cap: int = STREAM_CAP, event_cap: int = EVENT_CAP
) -> dict[str, Any]:
    """Create streams, then events, on *device* until the runtime refuses (or a cap).

    Reports for each what the runtime says is left (``get_stream_available_num`` /
    ``get_event_avail_num``), how many were created and the code of the refusal; then
    destroys them all and resets the device. Blocks for as long as that takes (under a
    second on the simulator; each create is one runtime call).

    A runtime that answers otherwise than pyACL does (a call missing, one that raises,
    a result of another shape) does not raise: the part it spoils says so in an
    ``error`` (``available_error`` for the count) naming the call and what it gave.
    """
    rt = acl.rt
    call = f"acl.rt.set_device({device})"
    try:
        ret = bare_status(_call(rt, "set_device", device), call)
    except CheckFailed as failed:
        return {"error": str(failed)}
    if ret:
        return {"error": f"{call} gave {code_text(ret)}"}
    try:
        return {
            "streams": _probe(
                rt, ("create_stream", "destroy_stream", "get_stream_available_num"), stream_cap
            ),
            "events": _probe(
                rt, ("create_event", "destroy_event", "get_event_avail_num"), event_cap
            ),
        }
    finally:
        # A reset that fails or raises: the checks that follow find such a runtime out.
        with contextlib.suppress(CheckFailed):
            _call(rt, "reset_device", device)


def _call(rt: Any, name: str, *args: Any) -> Any:
    """``acl.rt.<name>(*args)``; ``CheckFailed`` naming the call if it is missing or raises."""
    function = getattr(rt, name, None)
    shown = f"acl.rt.{name}({', '.join(str(a) for a in args)})"
    if not callable(function):
        raise CheckFailed(f"the runtime has no {shown.split('(')[0]}")
    try:
        return function(*args)
    except Exception as exc:  # pyACL answers with codes: an exception is a difference
        raise CheckFailed(f"{shown} raised {type(exc).__name__}: {exc}") from exc


def _probe(rt: Any, names: tuple[str, str, str], cap: int) -> dict[str, Any]:
    create, destroy, count = names
    began = time.perf_counter()
    probe: dict[str, Any] = {"available": None, "cap": cap}
    if hasattr(rt, count):  # a runtime without the count still has its limit probed
        try:
            left, ret = values(_call(rt, count), f"acl.rt.{count}()", "(count, ret)")
            probe["available"] = int(left) if ret == 0 and isinstance(left, int) else None
        except CheckFailed as failed:
            probe["available_error"] = str(failed)
    made: list[Any] = []
    refused: int | None = None
    try:
        while len(made) < cap:
            handle, ret = values(_call(rt, create), f"acl.rt.{create}()", "(handle, ret)")
            if ret:
                refused = int(ret)
                break
            made.append(handle)
    except CheckFailed as failed:
        probe["error"] = str(failed)
    finally:
        for handle in made:
            try:
                _call(rt, destroy, handle)
            except CheckFailed as failed:
                probe.setdefault("error", str(failed))
                break
    probe.update(
        created=len(made),
        refused_with=refused,
        refused_with_name=None if refused is None else code_name(refused),
        seconds=time.perf_counter() - began,
    )
    return probe
