"""A multi-device pipeline on the simulator, using only aclasync's public API.

Every item goes host -> device copy, kernel, device -> host copy. Each device gets three
streams (uploads, kernels, downloads) ordered by events, and two buffer slots, so that
the upload of one item and the download of another overlap the running kernel. One
event loop drives every device at once; the results are checked against the host.

Run ``python examples/pipeline.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import time
from collections import deque
from typing import Any

import anyio
import numpy as np

import aclasync
import aclasync.sim
from aclasync.sim import Kernel

SLOTS = 2


@dataclasses.dataclass
class Slot:
    """Buffers for one item in flight, and the event saying its result is home."""

    host_in: aclasync.HostBuffer
    host_out: aclasync.HostBuffer
    dev_in: aclasync.DeviceBuffer
    dev_out: aclasync.DeviceBuffer
    item: int = -1
    downloaded: aclasync.Event | None = None


def make_input(item: int, size: int) -> np.ndarray[Any, Any]:
    """The input matrix of *item*: deterministic, so the host can recompute it."""
    return np.random.default_rng(item).standard_normal((size, size), dtype=np.float32)


def compute(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], out: np.ndarray[Any, Any]) -> None:
    """What the kernel does, on the device and (for checking) on the host."""
    np.tanh(x @ w, out=out)


async def run_device(
    device_id: int,
    items: list[int],
    *,
    backend: object,
    w: np.ndarray[Any, Any],
    kernel_us: float,
    results: dict[str, int],
) -> None:
    """Process *items* on one device; count matches and mismatches in *results*."""
    size = w.shape[0]
    nbytes = w.nbytes
    async with (
        aclasync.open_device(device_id, backend=backend) as dev,
        dev.create_stream() as uploads,
        dev.create_stream() as kernels,
        dev.create_stream() as downloads,
    ):
        slots = [
            Slot(
                await dev.alloc_host(nbytes),
                await dev.alloc_host(nbytes),
                await dev.alloc(nbytes),
                await dev.alloc(nbytes),
            )
            for _ in range(SLOTS)
        ]
        in_flight: deque[Slot] = deque()
        for k, item in enumerate(items):
            slot = slots[k % SLOTS]
            if slot.downloaded is not None:
                # The slot's previous item must be home before its buffers are reused.
                await check(in_flight.popleft(), w, results)
            slot.item = item
            slot.host_in.view(np.float32, (size, size))[...] = make_input(item, size)

            uploads.memcpy(slot.dev_in, slot.host_in)
            uploaded = await uploads.record_event()

            kernels.wait_event(uploaded)
            kernels.launch(
                dev.acl.sim.launch_kernel,
                Kernel(duration_us=kernel_us, fn=kernel_body(dev, slot, w)),
            )
            computed = await kernels.record_event()

            downloads.wait_event(computed)
            downloads.memcpy(slot.host_out, slot.dev_out)
            slot.downloaded = await downloads.record_event()
            in_flight.append(slot)
            await uploaded.aclose()
            await computed.aclose()
        while in_flight:
            await check(in_flight.popleft(), w, results)


def kernel_body(dev: aclasync.Device, slot: Slot, w: np.ndarray[Any, Any]) -> Any:
    """The kernel's work on the simulated device, reading and writing device memory."""
    size = w.shape[0]
    src, dst = slot.dev_in.ptr, slot.dev_out.ptr

    def body() -> None:
        x = dev.acl.sim.device_array(src, (size, size), np.float32)
        out = dev.acl.sim.device_array(dst, (size, size), np.float32)
        compute(x, w, out)

    return body


async def check(slot: Slot, w: np.ndarray[Any, Any], results: dict[str, int]) -> None:
    """Wait for the slot's result to be home and compare it with the host's."""
    assert slot.downloaded is not None
    await slot.downloaded.synchronize()
    await slot.downloaded.aclose()
    slot.downloaded = None
    size = w.shape[0]
    expected = np.empty((size, size), dtype=np.float32)
    compute(make_input(slot.item, size), w, expected)
    got = slot.host_out.view(np.float32, (size, size))
    results["ok" if np.allclose(got, expected, rtol=1e-5, atol=1e-6) else "bad"] += 1


async def main(devices: int, items: int, kernel_us: float, size: int) -> bool:
    """Run the pipeline over *devices* simulated devices; return whether all matched."""
    backend = aclasync.sim.create(device_count=devices)
    w = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)
    w /= np.float32(np.sqrt(size))
    per_device = [{"ok": 0, "bad": 0} for _ in range(devices)]
    started = time.perf_counter()
    try:
        async with anyio.create_task_group() as tg:
            for device_id in range(devices):
                share = list(range(device_id, items, devices))
                work = functools.partial(
                    run_device,
                    backend=backend,
                    w=w,
                    kernel_us=kernel_us,
                    results=per_device[device_id],
                )
                tg.start_soon(work, device_id, share)
    finally:
        backend.sim.close()
    seconds = time.perf_counter() - started
    ok = sum(r["ok"] for r in per_device)
    for device_id, counts in enumerate(per_device):
        done = counts["ok"] + counts["bad"]
        busy = done * kernel_us / 1e6 / seconds
        print(f"device {device_id}: {done} items, kernels busy {busy:.0%} of the time")
    print(f"{items} items in {seconds:.3f} s ({items / seconds:.0f} items/s)")
    print(f"{ok}/{items} results match the host reference")
    return ok == items


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=4, help="simulated devices (default 4)")
    parser.add_argument("--items", type=int, default=64, help="items (default 64)")
    parser.add_argument(
        "--kernel-us", type=float, default=5000.0, help="modelled kernel time (default 5000)"
    )
    parser.add_argument("--size", type=int, default=64, help="matrix side length (default 64)")
    parser.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args(argv)
    if args.devices < 1 or args.items < 1 or args.size < 1 or args.kernel_us < 0:
        parser.error("--devices, --items and --size must be >= 1, --kernel-us >= 0")
    return args


if __name__ == "__main__":
    args = parse_args()
    all_ok = anyio.run(main, args.devices, args.items, args.kernel_us, args.size, backend=args.loop)
    sys.exit(0 if all_ok else 1)
