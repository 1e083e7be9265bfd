"""``model``: inference requests through ``Model.run`` vs a blocking ``execute`` per thread.

The same request, side by side in one run, at concurrency 1, 16 and 64:

- ``aclasync``: ``await model.run(stream, x)`` (pooled buffers; copy in,
  ``execute_async``, copy out, await the stream), requests spread over four streams;
- ``to_thread + execute``: ``await anyio.to_thread.run_sync(...)`` of what a synchronous
  service does per request: ``set_context``, ``memcpy`` in, ``acl.mdl.execute``,
  ``memcpy`` out, on buffers and datasets set up once per concurrent worker.

Each of *concurrency* workers takes requests until *n* are done; a sample is one
request's latency, and the rate is *n* over the wall time.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

import aclasync
from aclasync import sim

from ._common import BenchConfig, check, column, expect, run_on_loop
from ._stats import ratio, summarize

__all__ = ["run"]

TITLE = "Model inference requests"
ACLASYNC, BLOCKING = "aclasync", "to_thread + execute"
CONCURRENCY = (1, 16, 64)
STREAMS = 4
SHAPE = (16, 64)
DEVICE_US = 200.0  # simulated device time of one execution
H2D, D2H = 1, 2


def body(x: Any) -> Any:
    """The benchmark model: a cheap elementwise function (device time is modelled)."""
    return x * 0.5 + 1.0


#: The charts ``aclasync bench --plot`` draws (see ``_plot``).
CHARTS: list[dict[str, Any]] = [
    {
        "group": ["loop", "concurrency"],
        "group_format": "{loop}, {concurrency} concurrent",
        "series": "variant",
        "value": "per_s",
        "value_format": "{:,.0f} req/s",
        "axis": "requests served per second",
        "unit": "req/s; higher is better",
        "annotate": "p99_ms",
        "annotate_format": "p99 {:.1f} ms",
    }
]


def run(cfg: BenchConfig) -> dict[str, Any]:
    """Measure request rate and latency on every loop of *cfg*; return the result."""
    n = cfg.size(2000, 400, minimum=4)
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    for loop in cfg.loops:
        cfg.progress(f"model [{loop}]: {n} requests per variant at concurrency {CONCURRENCY}")
        results = run_on_loop(loop, _measure, n)
        for concurrency, variants in results.items():
            rates = {name: n / wall for name, (wall, _) in variants.items()}
            for name, (_, latencies) in variants.items():
                stats = summarize(latencies, scale=1e-6)
                rows.append(
                    {
                        "loop": loop,
                        "concurrency": concurrency,
                        "variant": name,
                        "n": n,
                        "per_s": rates[name],
                        "p50_ms": stats["median"],
                        "p99_ms": stats["p99"],
                        "vs_blocking": ratio(rates[name], rates[BLOCKING]),
                    }
                )
            if concurrency == max(CONCURRENCY):
                value = ratio(rates[ACLASYNC], rates[BLOCKING])
                ok = None if value is None else value >= 1.0
                checks.append(
                    check(
                        f"aclasync / blocking requests/s at {concurrency} [{loop}]",
                        value,
                        ">= 1",
                        ok,
                    )
                )
    return {
        "title": TITLE,
        "columns": [
            column("loop", "loop"),
            column("concurrency", "conc", "d"),
            column("variant", "variant"),
            column("n", "n", "d"),
            column("per_s", "req/s", ".0f"),
            column("p50_ms", "p50 ms", ".2f"),
            column("p99_ms", "p99 ms", ".2f"),
            column("vs_blocking", "/blocking", ".2f"),
        ],
        "rows": rows,
        "checks": checks,
        "charts": CHARTS,
        "notes": [
            f"One request: a {SHAPE} float32 input copied in, a model of {DEVICE_US:.0f} us "
            "device time, one output copied out.",
            "aclasync spreads requests over four streams; the simulator's blocking "
            "execute runs on the context's default stream, so blocking requests share it.",
            "to_thread runs in anyio's default thread limiter (40 threads).",
        ],
        "params": {"n": n, "concurrency": list(CONCURRENCY), "streams": STREAMS},
    }


async def _measure(n: int) -> dict[int, dict[str, tuple[float, list[int]]]]:
    acl = sim.create(device_count=1)
    with tempfile.TemporaryDirectory(prefix="aclasync-bench-") as folder:
        path = acl.sim.register_model(
            Path(folder) / "bench.om",
            inputs=[("x", SHAPE, "float32")],
            outputs=[("y", SHAPE, "float32")],
            fn=body,
            duration_us=DEVICE_US,
        )
        results: dict[int, dict[str, tuple[float, list[int]]]] = {}
        async with aclasync.open_device(0, backend=acl) as dev, dev.load_model(path) as model:
            streams = [await dev.create_stream() for _ in range(STREAMS)]
            raw = await anyio.to_thread.run_sync(_RawModel, acl, path, max(CONCURRENCY))
            x = np.ones(SHAPE, dtype=np.float32)
            expected = body(x)

            async def via_aclasync(worker: int) -> None:
                (y,) = await model.run(streams[worker % STREAMS], x)
                if not np.array_equal(y, expected):
                    raise RuntimeError("aclasync: wrong model output")

            async def via_thread(worker: int) -> None:
                y = await anyio.to_thread.run_sync(raw.infer, worker, x)
                if not np.array_equal(y, expected):
                    raise RuntimeError("to_thread: wrong model output")

            for concurrency in CONCURRENCY:
                await _drive(via_aclasync, concurrency, max(1, n // 10))  # warm the pool
                await _drive(via_thread, concurrency, max(1, n // 10))
                results[concurrency] = {
                    ACLASYNC: await _drive(via_aclasync, concurrency, n),
                    BLOCKING: await _drive(via_thread, concurrency, n),
                }
            await anyio.to_thread.run_sync(raw.close)
            for stream in streams:
                await stream.aclose()
    acl.sim.close()
    return results


async def _drive(
    request: Callable[[int], Awaitable[None]], concurrency: int, n: int
) -> tuple[float, list[int]]:
    """Run *n* requests on *concurrency* workers; return (wall seconds, latencies ns)."""
    latencies: list[int] = []
    remaining = n

    async def worker(index: int) -> None:
        nonlocal remaining
        clock = time.perf_counter_ns
        while remaining > 0:
            remaining -= 1
            start = clock()
            await request(index)
            latencies.append(clock() - start)

    begun = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(concurrency):
            tg.start_soon(worker, index)
    return time.perf_counter() - begun, latencies


class _RawModel:
    """The synchronous service's side: per-worker buffers and datasets; plain pyACL."""

    def __init__(self, acl: Any, path: str, workers: int) -> None:
        rt, mdl = acl.rt, acl.mdl
        self.acl = acl
        expect(rt.set_device(0), "acl.rt.set_device")
        self.context, ret = rt.get_context()
        expect(ret, "acl.rt.get_context")
        self.model_id, ret = mdl.load_from_file(path)
        expect(ret, "acl.mdl.load_from_file")
        self.nbytes = int(np.prod(SHAPE)) * 4
        self.workers = []
        for _ in range(workers):
            pointers = []
            datasets = []
            for _side in range(2):
                ptr, ret = rt.malloc(self.nbytes, 0)
                expect(ret, "acl.rt.malloc")
                dataset = mdl.create_dataset()
                buffer = acl.create_data_buffer(ptr, self.nbytes)
                expect(mdl.add_dataset_buffer(dataset, buffer)[1], "acl.mdl.add_dataset_buffer")
                pointers.append(ptr)
                datasets.append((dataset, buffer))
            self.workers.append((pointers, datasets))

    def infer(self, worker: int, x: Any) -> Any:
        acl, rt = self.acl, self.acl.rt
        (dev_in, dev_out), ((ds_in, _), (ds_out, _)) = self.workers[worker]
        expect(rt.set_context(self.context), "acl.rt.set_context")
        host_in = np.ascontiguousarray(x)
        expect(
            rt.memcpy(dev_in, self.nbytes, acl.util.numpy_to_ptr(host_in), self.nbytes, H2D),
            "acl.rt.memcpy",
        )
        expect(acl.mdl.execute(self.model_id, ds_in, ds_out), "acl.mdl.execute")
        y = np.empty(SHAPE, dtype=np.float32)
        expect(
            rt.memcpy(acl.util.numpy_to_ptr(y), self.nbytes, dev_out, self.nbytes, D2H),
            "acl.rt.memcpy",
        )
        return y

    def close(self) -> None:
        acl, rt = self.acl, self.acl.rt
        expect(rt.set_context(self.context), "acl.rt.set_context")
        for pointers, datasets in self.workers:
            for dataset, buffer in datasets:
                expect(acl.mdl.destroy_dataset(dataset), "acl.mdl.destroy_dataset")
                expect(acl.destroy_data_buffer(buffer), "acl.destroy_data_buffer")
            for ptr in pointers:
                expect(rt.free(ptr), "acl.rt.free")
        expect(acl.mdl.unload(self.model_id), "acl.mdl.unload")
        expect(rt.reset_device(0), "acl.rt.reset_device")
