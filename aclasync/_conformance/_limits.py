"""How many streams and events a device lets a process create: asked, then reached."""

from __future__ import annotations

import time
from typing import Any

from .._pyacl.codes import code_name

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
    """
    rt = acl.rt
    ret = rt.set_device(device)
    if ret:
        return {"error": f"acl.rt.set_device({device}) gave {ret} ({code_name(ret)})"}
    try:
        return {
            "streams": _probe(
                rt.create_stream,
                rt.destroy_stream,
                stream_cap,
                _available(rt, "get_stream_available_num"),
            ),
            "events": _probe(
                rt.create_event, rt.destroy_event, event_cap, _available(rt, "get_event_avail_num")
            ),
        }
    finally:
        rt.reset_device(device)


def _available(rt: Any, name: str) -> int | None:
    query = getattr(rt, name, None)
    if query is None:
        return None
    count, ret = query()
    return int(count) if ret == 0 else None


def _probe(create: Any, destroy: Any, cap: int, available: int | None) -> dict[str, Any]:
    began = time.perf_counter()
    made: list[int] = []
    refused: int | None = None
    try:
        while len(made) < cap:
            handle, ret = create()
            if ret:
                refused = int(ret)
                break
            made.append(handle)
    finally:
        for handle in made:
            destroy(handle)
    return {
        "available": available,
        "created": len(made),
        "refused_with": refused,
        "refused_with_name": None if refused is None else code_name(refused),
        "cap": cap,
        "seconds": time.perf_counter() - began,
    }
