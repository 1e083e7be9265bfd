"""Spread a stream of items over NPU actors with Ray, and check every result.

Each actor is an async Ray actor that owns one NPU (``resources={"NPU": 1}``; Ray sets
``ASCEND_RT_VISIBLE_DEVICES`` so that the NPU is device 0 inside it). An item is a small
matrix: the actor uploads it, runs one kernel on its stream (``--kernel-ms`` of device
time on the simulator) and downloads the result. The driver keeps at most
``--in-flight`` items outstanding per actor, checks each result against NumPy on the
host, and prints the throughput of each actor.

On one machine (a local Ray cluster with N simulated NPUs)::

    python examples/ray_pipeline.py --actors 4 --items 200

Across hosts: start Ray with the NPUs each host has, then point the driver at it::

    ray start --head --resources='{"NPU": 8}'                 # on the first host
    ray start --address=HEAD_IP:6379 --resources='{"NPU": 8}' # on each other host
    python examples/ray_pipeline.py --address auto --actors 16 --backend native
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from typing import Any

import numpy as np
import ray

from aclasync.ray import NpuActor, dispatch
from aclasync.sim import Kernel

SIZE = 32


def item_input(index: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The input matrix of item *index* (deterministic, so the host can check it)."""
    rng = np.random.default_rng(index)
    return rng.standard_normal((SIZE, SIZE), dtype=np.float32)


def host_reference(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """What the device computes for input *x*."""
    return np.tanh(x @ x.T)


@ray.remote(resources={"NPU": 1}, num_cpus=0)
class MatrixWorker(NpuActor):
    """Runs items on its NPU, one stream, so items never overlap on the device."""

    def __init__(self, *, backend: str | None, kernel_ms: float) -> None:
        super().__init__(backend=backend)
        self.kernel_us = kernel_ms * 1000.0
        self.stream: Any = None

    async def run(self, index: int) -> tuple[int, np.ndarray[Any, Any]]:
        dev = await self.device()
        if self.stream is None:
            self.stream = await dev.create_stream()
        x = item_input(index)
        host_in = await dev.alloc_host(x.nbytes)
        host_out = await dev.alloc_host(x.nbytes)
        dev_in = await dev.alloc(x.nbytes)
        dev_out = await dev.alloc(x.nbytes)
        try:
            host_in.view(np.float32, x.shape)[...] = x
            self.stream.memcpy(dev_in, host_in)
            acl, src, dst = dev.acl, dev_in.ptr, dev_out.ptr

            def body() -> None:
                a = acl.sim.device_array(src, x.shape, np.float32)
                acl.sim.device_array(dst, x.shape, np.float32)[...] = host_reference(a)

            self.stream.launch(acl.sim.launch_kernel, Kernel(duration_us=self.kernel_us, fn=body))
            self.stream.memcpy(host_out, dev_out)
            done = await self.stream.record_event()
            await done.synchronize()
            await done.aclose()
            return index, host_out.view(np.float32, x.shape).copy()
        finally:
            for buffer in (host_in, host_out, dev_in, dev_out):
                await buffer.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actors", type=int, default=4, help="NPU actors (default 4)")
    parser.add_argument("--items", type=int, default=200, help="items to process (default 200)")
    parser.add_argument("--in-flight", type=int, default=2, help="items in flight per actor")
    parser.add_argument("--kernel-ms", type=float, default=20.0, help="device time per item")
    parser.add_argument("--backend", choices=("sim", "native"), default="sim")
    parser.add_argument("--address", default=None, help="an existing Ray cluster ('auto')")
    args = parser.parse_args(argv)
    for name in ("actors", "items", "in_flight"):  # checked before Ray starts
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not (math.isfinite(args.kernel_ms * 1000) and args.kernel_ms >= 0):  # (in µs)
        parser.error(f"--kernel-ms must be finite and >= 0, got {args.kernel_ms}")
    if args.backend == "native":
        parser.error("this example's kernel body runs on the simulator; use --backend sim")
    if args.address is None:
        ray.init(num_cpus=2, resources={"NPU": args.actors}, include_dashboard=False)
    else:
        ray.init(address=args.address)
    try:
        workers = [
            MatrixWorker.remote(backend=args.backend, kernel_ms=args.kernel_ms)
            for _ in range(args.actors)
        ]
        infos = ray.get([w.describe.remote() for w in workers])  # devices open, warm
        for k, info in enumerate(infos):
            print(f"actor {k}: pid {info.pid}, NPU {info.physical_device} as device 0")
        lost: list[int] = []
        per_actor: Counter[int] = Counter()
        wrong = 0
        start = time.perf_counter()
        for done in dispatch(
            workers, "run", range(args.items), in_flight=args.in_flight, lost=lost
        ):
            index, result = done.value
            expected = host_reference(item_input(index))
            wrong += not np.allclose(result, expected, rtol=1e-5, atol=1e-5)
            per_actor[done.actor] += 1
        seconds = time.perf_counter() - start
    finally:
        ray.shutdown()
    for k in range(args.actors):
        note = " (lost)" if k in lost else ""
        print(f"actor {k}: {per_actor[k]} items, {per_actor[k] / seconds:,.1f} items/s{note}")
    print(f"total: {args.items} items in {seconds:.2f} s, {args.items / seconds:,.1f} items/s")
    print(f"verified {args.items - wrong}/{args.items} results against the host")
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
