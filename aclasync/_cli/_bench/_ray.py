"""``ray``: items/s with 1, 2 and 4 NPU actors against one in-process device.

Every item is one 20 ms kernel. The in-process baseline runs the items on one device
and one stream through aclasync, as one actor does; the Ray rows spread them over
async actors that own one simulated NPU each (``aclasync.ray.NpuActor``), two items
in flight per actor. The Ray cluster is local (2 CPUs, 4 NPUs as a resource) and its
start-up and the actors' start-up are not timed. Skipped when Ray is not installed.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import aclasync
from aclasync.sim import Kernel

from .._common import sim_runtime
from ._common import BenchConfig, Skip, check, column, run_on_loop
from ._stats import ratio

__all__ = ["run"]

TITLE = "Ray: NPU actors vs one in-process device"
ACTOR_COUNTS = (1, 2, 4)
KERNEL_US = 20_000.0
TARGET = 3.0


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "group": ["variant"],
        "group_format": "{variant}",
        "value": "speedup",
        "value_format": "{:.2f}x",
        "axis": "items per second relative to one NPU actor",
        "unit": "x; higher is better",
        "target": TARGET,
        "target_label": f"target on {max(ACTOR_COUNTS)} actors: >= {TARGET:g}x",
        "annotate": "items_per_s",
        "annotate_format": "{:,.0f} items/s",
    }
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Run the in-process baseline and 1, 2, 4 actors; return the result.

    Raises
    ------
    Skip
        If Ray is not installed (``pip install 'aclasync[ray]'``).
    """
    if importlib.util.find_spec("ray") is None:
        raise Skip("Ray is not installed (pip install 'aclasync[ray]')")
    items = cfg.size(25 * max(ACTOR_COUNTS), 8 * max(ACTOR_COUNTS), minimum=max(ACTOR_COUNTS))
    loop = cfg.loops[0]
    cfg.progress(f"ray: {items} items of {KERNEL_US / 1000:g} ms on one in-process device [{loop}]")
    rows: list[dict[str, Any]] = [
        _row("in-process device", loop, items, run_on_loop(loop, _in_process, items), None)
    ]
    cfg.progress(f"ray: {items} items on {', '.join(map(str, ACTOR_COUNTS))} NPU actors")
    timings = _on_actors(items)
    single = items / timings[1]
    rows[0]["speedup"] = ratio(rows[0]["items_per_s"], single)
    for actors, seconds in timings.items():
        speedup = ratio(items / seconds, single)
        rows.append(_row(f"{actors} actor(s)", "asyncio (Ray)", items, seconds, speedup))
    scaling = rows[-1]["speedup"]
    return {
        "title": TITLE,
        "columns": [
            column("variant", "variant"),
            column("loop", "loop"),
            column("items", "items", "d"),
            column("seconds", "seconds", ".3f"),
            column("items_per_s", "items/s", ",.1f"),
            column("speedup", "vs 1 actor", ".2f"),
        ],
        "rows": rows,
        "checks": [
            check(
                f"items/s, {max(ACTOR_COUNTS)} actors vs 1",
                scaling,
                f">= {TARGET:g}x",
                None if scaling is None else scaling >= TARGET,
            )
        ],
        "charts": CHARTS,
        "notes": [
            "Each actor runs its items on one stream: an item holds the NPU for its kernel.",
            "Ray's and the actors' start-up are not timed.",
        ],
        "params": {"items": items, "kernel_us": KERNEL_US, "actor_counts": list(ACTOR_COUNTS)},
    }


def _row(
    variant: str, loop: str, items: int, seconds: float, speedup: float | None
) -> dict[str, Any]:
    return {
        "variant": variant,
        "loop": loop,
        "items": items,
        "seconds": seconds,
        "items_per_s": items / seconds,
        "speedup": speedup,
    }


async def _in_process(items: int) -> float:
    backend = sim_runtime(1)
    try:
        async with aclasync.open_device(0, backend=backend) as dev, dev.create_stream() as stream:
            kernel = Kernel(duration_us=KERNEL_US)
            start = time.perf_counter()
            for _ in range(items):
                stream.launch(dev.acl.sim.launch_kernel, kernel)
                done = await stream.record_event()
                await done.synchronize()
                await done.aclose()
            return time.perf_counter() - start
    finally:
        backend.sim.close()


def _on_actors(items: int) -> dict[int, float]:
    """Seconds for *items* on each count of actors, all in one local Ray cluster."""
    import logging

    import ray

    from aclasync.ray import dispatch

    from ._ray_actor import ItemActor

    # Ray tries `import acl` to name the NPU type and logs a traceback when that fails,
    # as it does wherever the NPUs are simulated: not this benchmark's news.
    logging.getLogger("ray._private.accelerators.npu").setLevel(logging.CRITICAL)
    ray.init(
        num_cpus=2,
        resources={"NPU": max(ACTOR_COUNTS)},
        include_dashboard=False,
        configure_logging=False,
        log_to_driver=False,
    )
    try:
        remote: Any = ray.remote(resources={"NPU": 1}, num_cpus=0)(ItemActor)
        timings: dict[int, float] = {}
        for count in ACTOR_COUNTS:
            actors = [remote.remote(kernel_us=KERNEL_US) for _ in range(count)]
            ray.get([actor.describe.remote() for actor in actors])  # started, device open
            start = time.perf_counter()
            done = sum(1 for _ in dispatch(actors, "item", range(items), in_flight=2))
            timings[count] = time.perf_counter() - start
            if done != items:
                raise RuntimeError(f"bench ray: {done} of {items} items came back")
            ray.get([actor.close.remote() for actor in actors])
            for actor in actors:
                ray.kill(actor)
        return timings
    finally:
        ray.shutdown()
