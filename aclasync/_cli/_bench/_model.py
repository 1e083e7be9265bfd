"""``model``: inference requests through ``Model.run`` vs a blocking ``execute`` per thread.

The same request, side by side in one run, at concurrency 1, 16 and 64:

- ``aclasync``: ``await model.run(stream, x)`` (pooled buffers; copy in,
  ``execute_async``, copy out, await the stream), requests spread over four streams;
- ``to_thread + execute``: ``await anyio.to_thread.run_sync(...)`` of what a synchronous
  service does per request: ``set_context``, ``memcpy`` in, ``acl.mdl.execute``,
  ``memcpy`` out, on buffers and datasets set up once per concurrent worker.

The two variants alternate in rounds at each concurrency (``ROUNDS``, 2 with
``--quick``; the order alternating too), *n* / rounds requests each per round: each of
*concurrency* workers takes requests until the round's are done. A sample is one
request's latency (pooled over the rounds), and the rate is the median over the rounds
of the round's requests over its wall time.

The model is a registered simulated one, or with ``--model PATH`` the offline model in
that file (a real ``.om`` on the native backend, which has no other: there, without
``--model``, the benchmark is skipped). A model of the user's gets inputs of its
declared shapes; its answers are unknown, so both variants are checked to agree with
the first answer aclasync got.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

import aclasync
from aclasync._model_calls import TensorInfo

from .._loops import temporary_directory
from .._pipeline import describe_tensor, model_inputs
from .._workload import time_model
from ._common import BenchConfig, Skip, Target, check, column, expect, run_on_loop
from ._stats import ratio, summarize

__all__ = ["RUNS_NATIVE", "alternate", "run"]

#: Runs on the native backend too: its device work is pyACL alone there (``_runner``).
RUNS_NATIVE = True

TITLE = "Model inference requests"
ACLASYNC, BLOCKING = "aclasync", "to_thread + execute"
CONCURRENCY = (1, 16, 64)
STREAMS = 4
SHAPE = (16, 64)
DEVICE_US = 200.0  # simulated device time of one execution
#: Rounds per concurrency in a full run, each variant once per round (order alternating).
ROUNDS = 4
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
    if cfg.target.native and cfg.target.model is None:
        raise Skip(
            "on the native backend this benchmark needs --model PATH (an offline model): "
            "without it, it registers a simulated model (acl.sim)"
        )
    rounds = 2 if cfg.quick else ROUNDS
    n = cfg.size(2000, 400, minimum=4 * rounds)
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    described: dict[str, Any] = {}
    for loop in cfg.loops:
        cfg.progress(
            f"model [{loop}]: {n} requests per variant at concurrency {CONCURRENCY}, "
            f"in {rounds} alternating rounds"
        )
        results, described = run_on_loop(loop, _measure, cfg.target, n, rounds)
        for concurrency, variants in results.items():
            rates = {name: rate for name, (rate, _) in variants.items()}
            for name, (_, latencies) in variants.items():
                stats = summarize(latencies, scale=1e-6)
                rows.append(
                    {
                        "loop": loop,
                        "concurrency": concurrency,
                        "variant": name,
                        "n": len(latencies),
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
        "workload": described,
        "notes": [
            f"One request: a {SHAPE} float32 input copied in, a model of {DEVICE_US:.0f} us "
            "device time, one output copied out."
            if cfg.target.model is None
            else f"One request: the inputs of {cfg.target.model} copied in, one execution, "
            "its outputs copied out.",
            "aclasync spreads requests over four streams; the simulator's blocking "
            "execute runs on the context's default stream, so blocking requests share it."
            if cfg.target.simulated
            else "aclasync spreads requests over four streams.",
            "to_thread runs in anyio's default thread limiter (40 threads).",
            f"The variants alternate in {rounds} rounds of {n // rounds} requests each "
            "(order alternating); req/s is the median of the rounds' rates, p50/p99 pool "
            "the rounds' requests.",
        ],
        "params": {
            "n": n,
            "rounds": rounds,
            "concurrency": list(CONCURRENCY),
            "streams": STREAMS,
        },
    }


async def _measure(
    target: Target, n: int, rounds: int
) -> tuple[dict[int, dict[str, tuple[float, list[int]]]], dict[str, Any]]:
    with target.opened(1) as acl:
        if target.model is not None:
            return await _measure_model(acl, target.model, n, rounds, None)
        with temporary_directory(prefix="aclasync-bench-") as folder:
            path = acl.sim.register_model(
                Path(folder) / "bench.om",
                inputs=[("x", SHAPE, "float32")],
                outputs=[("y", SHAPE, "float32")],
                fn=body,
                duration_us=DEVICE_US,
            )
            return await _measure_model(acl, path, n, rounds, body)


async def _measure_model(
    acl: Any, path: str, n: int, rounds: int, known: Callable[..., Any] | None
) -> tuple[dict[int, dict[str, tuple[float, list[int]]]], dict[str, Any]]:
    """Both variants on the model at *path*, alternating in *rounds*; *known* computes
    its answer, if known. Per concurrency and variant: (median req/s, latencies ns)."""
    results: dict[int, dict[str, tuple[float, list[int]]]] = {}
    async with aclasync.open_device(0, backend=acl) as dev, dev.load_model(path) as model:
        tensors = (*model.inputs, *model.outputs)
        if any(d < 0 for t in tensors for d in t.shape):
            raise ValueError(f"{path}: this benchmark runs models of static shapes only")
        if any(t.dtype is None for t in tensors):
            raise ValueError(
                f"{path}: this benchmark times Model.run, which carries numpy arrays: "
                f"it cannot run a model with a tensor numpy has no dtype for ({_types(tensors)})"
            )
        streams = [await dev.create_stream() for _ in range(STREAMS)]
        raw = await anyio.to_thread.run_sync(_RawModel, acl, path, model, max(CONCURRENCY))
        if known is not None:
            xs: list[Any] = [np.ones(SHAPE, dtype=np.float32)]
        else:
            xs = model_inputs(0, model.inputs)
        expected = [known(*xs)] if known is not None else await model.run(streams[0], *xs)
        if known is None:
            ins = [await dev.alloc(t.nbytes) for t in model.inputs]
            outs = [await dev.alloc(t.nbytes) for t in model.outputs]
            took = await time_model(model, streams[0], ins, outs)
        described = {
            "kind": "model",
            "path": path if known is None else None,
            "execute_us": DEVICE_US if known is not None else took,
            "inputs": [describe_tensor(t) for t in model.inputs],
            "outputs": [describe_tensor(t) for t in model.outputs],
        }

        def agrees(ys: list[Any]) -> bool:
            if known is not None:
                return all(np.array_equal(y, e) for y, e in zip(ys, expected, strict=True))
            return all(
                np.allclose(y, e, rtol=1e-3, atol=1e-5, equal_nan=True)
                for y, e in zip(ys, expected, strict=True)
            )

        async def via_aclasync(worker: int) -> None:
            ys = await model.run(streams[worker % STREAMS], *xs)
            if not agrees(ys):
                raise RuntimeError("aclasync: wrong model output")

        async def via_thread(worker: int) -> None:
            ys = await anyio.to_thread.run_sync(raw.infer, worker, xs)
            if not agrees(ys):
                raise RuntimeError("to_thread: wrong model output")

        for concurrency in CONCURRENCY:
            await _drive(via_aclasync, concurrency, max(1, n // 10))  # warm the pool
            await _drive(via_thread, concurrency, max(1, n // 10))
            results[concurrency] = await alternate(
                {ACLASYNC: via_aclasync, BLOCKING: via_thread}, concurrency, n, rounds
            )
        await anyio.to_thread.run_sync(raw.close)
        for stream in streams:
            await stream.aclose()
    return results, described


async def alternate(
    variants: Mapping[str, Callable[[int], Awaitable[None]]], concurrency: int, n: int, rounds: int
) -> dict[str, tuple[float, list[int]]]:
    """*n* requests of each variant in *rounds* that alternate between the variants (the
    order reversed every other round), so that drift of the machine falls on all alike.
    Per variant: the median over the rounds of requests/s, and every latency (ns)."""
    per_round = max(1, n // rounds)
    rates: dict[str, list[float]] = {name: [] for name in variants}
    latencies: dict[str, list[int]] = {name: [] for name in variants}
    names = list(variants)
    for turn in range(rounds):
        for name in names if turn % 2 == 0 else names[::-1]:
            wall, taken = await _drive(variants[name], concurrency, per_round)
            rates[name].append(per_round / wall)
            latencies[name].extend(taken)
    return {name: (statistics.median(rates[name]), latencies[name]) for name in names}


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

    def __init__(self, acl: Any, path: str, model: aclasync.Model, workers: int) -> None:
        rt, mdl = acl.rt, acl.mdl
        self.acl = acl
        expect(rt.set_device(0), "acl.rt.set_device")
        self.context, ret = rt.get_context()
        expect(ret, "acl.rt.get_context")
        self.model_id, ret = mdl.load_from_file(path)
        expect(ret, "acl.mdl.load_from_file")
        self.inputs, self.outputs = model.inputs, model.outputs
        # Per worker: (device pointers of the inputs, of the outputs, the two datasets
        # with their data buffers).
        self.workers: list[tuple[list[int], list[int], list[tuple[int, list[int]]]]] = []
        for _ in range(workers):
            sides = []
            pointers: list[list[int]] = []
            for tensors in (self.inputs, self.outputs):
                dataset = mdl.create_dataset()
                buffers, ptrs = [], []
                for tensor in tensors:
                    ptr, ret = rt.malloc(tensor.nbytes, 0)
                    expect(ret, "acl.rt.malloc")
                    buffer = acl.create_data_buffer(ptr, tensor.nbytes)
                    expect(mdl.add_dataset_buffer(dataset, buffer)[1], "acl.mdl.add_dataset_buffer")
                    buffers.append(buffer)
                    ptrs.append(ptr)
                sides.append((dataset, buffers))
                pointers.append(ptrs)
            self.workers.append((pointers[0], pointers[1], sides))

    def infer(self, worker: int, xs: list[Any]) -> list[Any]:
        acl, rt = self.acl, self.acl.rt
        dev_in, dev_out, ((ds_in, _), (ds_out, _)) = self.workers[worker]
        expect(rt.set_context(self.context), "acl.rt.set_context")
        for ptr, x, tensor in zip(dev_in, xs, self.inputs, strict=True):
            host = np.ascontiguousarray(x)
            src = acl.util.numpy_to_ptr(host)
            expect(rt.memcpy(ptr, tensor.nbytes, src, tensor.nbytes, H2D), "acl.rt.memcpy")
        expect(acl.mdl.execute(self.model_id, ds_in, ds_out), "acl.mdl.execute")
        ys = []
        for ptr, tensor in zip(dev_out, self.outputs, strict=True):
            y = np.empty(tensor.shape, dtype=tensor.dtype)
            dst = acl.util.numpy_to_ptr(y)
            expect(rt.memcpy(dst, tensor.nbytes, ptr, tensor.nbytes, D2H), "acl.rt.memcpy")
            ys.append(y)
        return ys

    def close(self) -> None:
        acl, rt = self.acl, self.acl.rt
        expect(rt.set_context(self.context), "acl.rt.set_context")
        for dev_in, dev_out, sides in self.workers:
            for dataset, buffers in sides:
                expect(acl.mdl.destroy_dataset(dataset), "acl.mdl.destroy_dataset")
                for buffer in buffers:
                    expect(acl.destroy_data_buffer(buffer), "acl.destroy_data_buffer")
            for ptr in (*dev_in, *dev_out):
                expect(rt.free(ptr), "acl.rt.free")
        expect(acl.mdl.unload(self.model_id), "acl.mdl.unload")
        expect(rt.reset_device(0), "acl.rt.reset_device")


def _types(tensors: tuple[TensorInfo, ...]) -> str:
    return ", ".join(describe_tensor(t) for t in tensors if t.dtype is None)
