"""Ctrl-C on trio while an open, a close or an exit waits for the worker or for work:
run as a script by test_fe_ctrl_c.py (a KeyboardInterrupt must not reach pytest's run).

``python ctrl_c_on_trio.py open|close|borrow|exit|exit-on-error PRESSES``. trio
delivers Ctrl-C into the parked main task, shield or not. The presses come from inside
the runtime call the task waits for (``set_device``, a close's ``synchronize_stream``
of a stream whose kernel fails with 507015, a sync's timed wait), as a real one would:
``signal.raise_signal`` runs trio's handler on the loop's thread; two round trips
through the loop see it delivered before the call returns (and one before the press,
for the task to be parked: in running code trio raises it where it lands). A second
press leaves the call held until it came out of the run.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Any

import trio
from frontend_support import ProxyAcl, aclasync_threads

import aclasync
from aclasync.sim import Kernel


class CtrlC(ProxyAcl):
    """Presses Ctrl-C *presses* times when ``rt.<at>`` is next called, then opens *gate*."""

    def __init__(self, inner: Any, at: str) -> None:
        super().__init__(inner)
        self.at, self.presses = at, 0
        self.gate = threading.Event()
        self.hold_gate = False  # the gate opens after the run (the work outlives it)
        self.out = threading.Event()  # the KeyboardInterrupt came out of trio.run
        self.token: trio.lowlevel.TrioToken | None = None

    def on_rt_call(self, name: str, args: tuple[Any, ...]) -> None:
        if name != self.at or not self.presses or self.token is None:
            return
        trio.from_thread.run_sync(lambda: None, trio_token=self.token)  # it is parked
        signal.raise_signal(signal.SIGINT)
        with contextlib.suppress(trio.RunFinishedError):  # (out of the run at once)
            for _ in range(2):
                trio.from_thread.run_sync(lambda: None, trio_token=self.token)
        if self.presses == 2:
            signal.raise_signal(signal.SIGINT)
            assert self.out.wait(30), "the second press did not come out"
        self.presses = 0
        if not self.hold_gate:
            self.gate.set()


def run(backend: CtrlC, fn: Any) -> None:
    async def main() -> None:
        backend.token = trio.lowlevel.current_trio_token()
        await fn()

    try:
        trio.run(main)
        print("returned")
    except KeyboardInterrupt as exc:
        backend.out.set()
        print_interrupted(exc)
    except aclasync.AclError as exc:
        print("raised", exc.code)


def print_interrupted(exc: KeyboardInterrupt) -> None:
    """``interrupted``, then ``507015`` if the kernel's failure is a note on *exc*, then
    ``after ValueError`` if that was the exception it came in place of."""
    told = any("507015" in note for note in getattr(exc, "__notes__", []))
    after = " after ValueError" if isinstance(exc.__context__, ValueError) else ""
    print("interrupted", ("507015" if told else "") + after)


def main(case: str, presses: int) -> None:
    acl = aclasync.sim.create()
    if case == "borrow":  # the exit of a pool's borrow waits for the stream's work
        backend = CtrlC(acl, "synchronize_stream_with_timeout")

        async def borrow() -> None:
            async with aclasync.open_device(0, backend=backend) as dev:
                pool = await dev.stream_pool(1)
                try:
                    async with pool.stream() as s:
                        s.launch(acl.sim.launch_kernel, Kernel(fn=backend.gate.wait, error=507015))
                        backend.presses = presses
                except KeyboardInterrupt as exc:
                    print_interrupted(exc)
                async with pool.stream():  # still its one stream
                    print("pool", pool.statistics().size)
                await pool.aclose()

        run(backend, borrow)
    elif case in ("exit", "exit-on-error"):  # Ctrl-C in a block, or in its exit
        at = "synchronize_stream_with_timeout" if case == "exit" else "synchronize_stream"
        backend = CtrlC(acl, at)
        box: dict[str, Any] = {}

        async def block() -> None:
            async with aclasync.open_device(0, backend=backend) as dev:
                box["dev"] = dev
                stream = await dev.create_stream()
                stream.launch(acl.sim.launch_kernel, Kernel(fn=backend.gate.wait, error=507015))
                backend.presses = presses
                if case == "exit":  # pressed in this sync: the exits do not wait
                    await stream.synchronize()
                raise ValueError("the block's own")  # pressed in the device's exit

        backend.hold_gate = case == "exit"
        run(backend, block)
        backend.gate.set()
        run(backend, box["dev"].aclose)  # finishes what an exit left
    elif case == "open":
        backend = CtrlC(acl, "set_device")
        backend.presses = presses
        run(backend, lambda: aclasync.open_device(0, backend=backend))
    else:
        backend = CtrlC(acl, "synchronize_stream")

        async def start() -> aclasync.Device[Any]:
            dev = await aclasync.open_device(0, backend=backend)
            stream = await dev.create_stream()
            stream.launch(acl.sim.launch_kernel, Kernel(fn=backend.gate.wait, error=507015))
            return dev

        dev = trio.run(start)
        backend.presses = presses
        run(backend, dev.aclose)
        run(backend, dev.aclose)  # a later close: finishes what the first left
    for thread in aclasync_threads():  # a device left by Ctrl-C twice closes by itself
        thread.join(20)
    print("devices", acl.sim.live_objects()["device_refs"])
    print("threads", len(aclasync_threads()))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
