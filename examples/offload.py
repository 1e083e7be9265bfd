"""Offload numpy work to a device from async code, using only aclasync's public API.

Each request copies its input to the (simulated) device, runs a kernel on it, copies
the result home and prints two times: the kernel's, from two timing events recorded
right before and right after it on the device, and the round trip the host sees, from
queueing the kernel to having the result home. The requests share one device and run
concurrently, each on a stream of its own; every wait is bounded by ``--timeout``.
With ``--fail N``, request N's kernel fails on the device (ACL error 507015): its
stream reports it as an ``aclasync.AclError`` on the next await, and the other requests
carry on.

For many devices and double buffering, see ``aclasync demo``.
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio
import numpy as np

import aclasync
from aclasync.sim import Kernel, SimAcl

#: ACL_ERROR_RT_AICORE_EXCEPTION: what a kernel that faults on the device reports.
_AICORE_EXCEPTION = 507015


async def offload(dev: aclasync.Device[SimAcl], request: int, args: argparse.Namespace) -> str:
    """Run one request on its own stream; return a line describing the outcome."""
    data = np.random.default_rng(request).standard_normal(args.size, dtype=np.float32)
    acl = dev.acl

    def square_in_place() -> None:
        device_data = acl.sim.device_array(device_buffer.ptr, (args.size,), np.float32)
        np.square(device_data, out=device_data)

    async with (
        dev.create_stream() as stream,
        await dev.alloc(data.nbytes) as device_buffer,
        await dev.alloc_host(data.nbytes) as host_buffer,
    ):
        host_buffer.view(np.float32, (args.size,))[...] = data
        stream.memcpy(device_buffer, host_buffer)
        # The start event must be queued right before the kernel: awaiting
        # record_event() in between would let the stream idle meanwhile, and that wait
        # would count as kernel time.
        start = await record_right_away(stream)
        error = _AICORE_EXCEPTION if request == args.fail else 0
        launched = time.perf_counter()
        stream.launch(acl.sim.launch_kernel, Kernel(args.kernel_us, square_in_place, error=error))
        # Queued at the call, right behind the kernel; the await only waits for the
        # answer, so it may take its time.
        end = await stream.record_event(timing=True)
        stream.memcpy(host_buffer, device_buffer)
        try:
            await stream.synchronize(timeout=args.timeout)
        except aclasync.AclError as exc:
            return f"request {request}: failed as asked ({exc.name} from {exc.api})"
        round_trip_ms = (time.perf_counter() - launched) * 1e3
        kernel_ms = await start.elapsed_time(end)
        result = host_buffer.view(np.float32, (args.size,))
        ok = np.array_equal(result, np.square(data))
        return (
            f"request {request}: kernel {kernel_ms:.2f} ms (timing events), "
            f"round trip {round_trip_ms:.2f} ms (launch to result home), "
            f"{'correct' if ok else 'WRONG'}"
        )


async def record_right_away(stream: aclasync.Stream) -> aclasync.Event:
    """Record a timing event after the work queued so far, queued before this returns.

    ``record_event_nowait`` queues the record at once (no round trip to the worker);
    when the device has no event ready yet it makes more, and we try again shortly.
    """
    while True:
        try:
            return stream.record_event_nowait(timing=True)
        except anyio.WouldBlock:
            await anyio.sleep(0.001)


async def main(args: argparse.Namespace) -> int:
    """Run every request concurrently on device 0 of a fresh simulator."""
    lines: dict[int, str] = {}

    async def run(dev: aclasync.Device[SimAcl], request: int) -> None:
        lines[request] = await offload(dev, request, args)

    async with aclasync.open_device(0, backend="sim") as dev:
        with anyio.fail_after(args.timeout * 2):  # the whole run, set-up included
            async with anyio.create_task_group() as tg:
                for request in range(args.requests):
                    tg.start_soon(run, dev, request)
    for request in sorted(lines):
        print(lines[request])
    return 1 if any("WRONG" in line for line in lines.values()) else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8, help="requests (default 8)")
    parser.add_argument("--size", type=int, default=1024, help="floats per request")
    parser.add_argument("--kernel-us", type=float, default=2000.0, help="kernel time (us)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per wait")
    parser.add_argument("--fail", type=int, default=-1, help="the request whose kernel fails")
    parser.add_argument("--loop", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args(argv)
    if not 1 <= args.requests <= 1000 or not 1 <= args.size <= 1 << 24:
        parser.error("--requests must be 1 to 1000 and --size 1 to 16777216")
    if not (0 <= args.kernel_us <= 1e7 and 0 < args.timeout < 3600):
        parser.error("--kernel-us must be 0 to 1e7 and --timeout above 0 and below 3600")
    return args


if __name__ == "__main__":
    options = parse_args()
    sys.exit(anyio.run(main, options, backend=options.loop))
