"""``pipeline``: the demo's multi-device pipeline on 1, 2, 4 and 8 devices.

Runs the demo's ``run_pipeline(devices=d, items=n, backend=...)`` on a fresh
eight-device simulator for each device count and reports items per second and the
scaling efficiency, ``(rate on d devices / rate on 1) / d``. On the native backend the
device counts stop at what it has, and the compute step is the demo's pyACL-only one
(``memset`` work and a device-to-device copy).
"""

from __future__ import annotations

from typing import Any

from .._pipeline import run_pipeline
from ._common import BenchConfig, Target, check, column, run_on_loop
from ._stats import ratio

__all__ = ["RUNS_NATIVE", "run"]

#: Runs on the native backend too: its device work is pyACL alone there (``_runner``).
RUNS_NATIVE = True

TITLE = "Demo pipeline scaling"
DEVICE_COUNTS = (1, 2, 4, 8)
#: Scaling efficiency the pipeline must reach on 4 devices (a speedup of 3.2).
EFFICIENCY_TARGET = 0.8


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "group": ["devices"],
        "group_format": "{devices} device(s)",
        "series": "loop",
        "value": "efficiency",
        "value_format": "{:.2f}",
        "axis": "scaling efficiency: speedup over one device / devices",
        "unit": "1 = ideal; higher is better",
        "target": EFFICIENCY_TARGET,
        "target_label": f"target on 4 devices: ≥ {EFFICIENCY_TARGET:g} "
        f"(speedup ≥ {EFFICIENCY_TARGET * 4:g})",
        "annotate": "items_per_s",
        "annotate_format": "{:,.0f} items/s",
    }
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Run the pipeline at every device count on every loop of *cfg*; return the result."""
    items = cfg.size(256, 64, minimum=max(DEVICE_COUNTS))
    available = cfg.target.devices(max(DEVICE_COUNTS))
    counts = [devices for devices in DEVICE_COUNTS if devices <= available]
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    workload: dict[str, Any] = {}
    for loop in cfg.loops:
        single: float | None = None
        for devices in counts:
            cfg.progress(f"pipeline [{loop}]: {items} items on {devices} device(s)")
            figures = run_on_loop(loop, _one, cfg.target, devices, items)
            workload = figures["workloads"]["0"]
            rate = float(figures["items_per_s"])
            if devices == 1:
                single = rate
            speedup = None if single is None else ratio(rate, single)
            rows.append(
                {
                    "loop": loop,
                    "devices": devices,
                    "items": int(figures["items"]),
                    "seconds": float(figures["seconds"]),
                    "items_per_s": rate,
                    "speedup": speedup,
                    "efficiency": None if speedup is None else speedup / devices,
                }
            )
            if devices == 4:
                value = rows[-1]["efficiency"]
                ok = None if value is None else value >= EFFICIENCY_TARGET
                checks.append(
                    check(f"efficiency on 4 devices [{loop}]", value, f">= {EFFICIENCY_TARGET}", ok)
                )
    return {
        "title": TITLE,
        "columns": [
            column("loop", "loop"),
            column("devices", "devices", "d"),
            column("items", "items", "d"),
            column("seconds", "seconds", ".3f"),
            column("items_per_s", "items/s", ",.1f"),
            column("speedup", "speedup", ".2f"),
            column("efficiency", "efficiency", ".2f"),
        ],
        "rows": rows,
        "checks": checks,
        "charts": CHARTS,
        "notes": ["efficiency = (items/s on d devices / items/s on 1 device) / d."],
        "params": {"items": items, "device_counts": counts},
        "workload": workload,
    }


async def _one(target: Target, devices: int, items: int) -> dict[str, Any]:
    with target.opened(max(DEVICE_COUNTS)) as backend:
        return await run_pipeline(
            devices=devices, items=items, backend=backend, workload=target.workload
        )
