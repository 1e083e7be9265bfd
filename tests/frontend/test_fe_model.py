"""A stateful model test of failure delivery over the public API (issue 8).

Hypothesis drives random sequences of launches (succeeding, failing at launch,
failing kernels), completed and abandoned waits on streams, events and the device,
and finally the closes, on a real device of the simulator. An independent model,
written from the rule in the README ("Errors") and pyACL's documented behaviour
(a kernel failure is reported by the next ``synchronize_stream``), says for every
await what may and what must be raised:

- a failure is raised at most once, by an await of its own stream or of the device,
  and every failure has been raised once the device is closed;
- failures of launches on one stream come out in launch order; an await raises the
  oldest failure it may see (an abandoned wait may have let the worker see a kernel
  failure early, so such a failure may come out of order);
- an abandoned wait raises nothing but its timeout or cancellation;
- a completed await raises when the model knows the worker has seen an unreported
  failure, and never when there is none it could have seen.

Stream-pool borrowers join in, with failing bodies, raising bodies and cancelled
bodies (whose failures go to the device), and the pool is closed by two concurrent
``aclose`` calls at the end. ``Model.run`` calls join in too, on the shared streams and
on a stream only runs use: succeeding, failing and cancelled runs. A run that completes
returns its own result or raises its own failure, never a stream's; a cancelled run's
failure is raised by the model's close; and none of it changes what the streams'
awaits raise.

Each example runs the event loop in a blocking portal, on asyncio and on trio.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

import aclasync
import aclasync.sim
from aclasync import StreamFlag
from aclasync.sim import Kernel

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup

KERNEL_CODE_BASE = 600_000
STREAMS = 3  # the default stream and two created ones
MODEL_EXECUTE = 507011  # ACL_ERROR_RT_MODEL_EXECUTE: a failing model body
#: The device's own queue of failures (a cancelled borrower's): device awaits see it.
ORPHANS = STREAMS
DEVICE_WIDE = [*range(STREAMS), ORPHANS]


class Executions:
    """Counts the model's executions on the device, failing (negative input) or not."""

    def __init__(self) -> None:
        self.failed = 0

    def body(self, x: Any) -> Any:
        if x[0] < 0:
            self.failed += 1  # one device thread runs bodies at a time per stream
            raise ValueError("negative input")
        return x * 2.0


class Boom(Exception):
    """What a failing launch raises on the worker: it names its failure."""

    def __init__(self, ident: int) -> None:
        super().__init__(f"launch failure {ident}")
        self.ident = ident


@dataclasses.dataclass
class Failure:
    ident: int
    stream: int
    kind: str  # "launch" or "kernel"
    #: The worker has certainly seen it (launch failures: at once; kernels: once a
    #: sync of their stream completed).
    seen: bool = False
    #: It may have been seen (a wait on its stream was abandoned after it).
    maybe_seen: bool = False
    #: When it was seen, in the device's order; None while unknown.
    order: float | None = None


class Model:
    """What the documented rule says, kept apart from the implementation."""

    def __init__(self) -> None:
        self.unreported: list[Failure] = []
        self.reported: set[int] = set()
        self._clock = itertools.count()
        #: Streams an abandoned wait may still be waiting on: the runtime's stream sync
        #: behind it returns when the stream is idle, with the failure of any kernel
        #: queued meanwhile, until a completed sync shows the stream went idle.
        self._in_flight: set[int] = set()

    def launch_failed(self, ident: int, stream: int) -> None:
        self.unreported.append(Failure(ident, stream, "launch", seen=True, order=next(self._clock)))

    def kernel_failed(self, ident: int, stream: int) -> None:
        maybe = stream in self._in_flight
        self.unreported.append(Failure(ident, stream, "kernel", maybe_seen=maybe))

    def pending_kernel(self, stream: int) -> bool:
        return any(f.kind == "kernel" and f.stream == stream for f in self.unreported)

    def abandoned(self, streams: list[int]) -> None:
        self._in_flight.update(streams)
        for f in self.unreported:
            if f.stream in streams and not f.seen:
                f.maybe_seen = True

    def synced(self, streams: list[int]) -> None:
        self._in_flight.difference_update(streams)
        order = next(self._clock)  # kernels seen by one device sync tie
        for f in self.unreported:
            if f.stream in streams and not f.seen:
                f.seen = True
                f.order = order

    def check_await(self, streams: list[int], raised: BaseException | None) -> None:
        mine = [f for f in self.unreported if f.stream in streams]
        must = [f for f in mine if f.seen]
        if raised is None:
            assert not must, f"an await completed without raising {must}"
            return
        ident = identify(raised)
        ordered = [f for f in must if not f.maybe_seen]
        oldest = min((f.order for f in ordered if f.order is not None), default=None)
        candidates = {f.ident for f in ordered if f.order == oldest}
        candidates |= {f.ident for f in mine if f.maybe_seen}
        assert ident in candidates, f"raised {ident}, expected one of {candidates}"
        self.report(ident)

    def report(self, ident: int) -> None:
        assert ident not in self.reported, f"failure {ident} raised twice"
        for f in self.unreported:
            if f.ident == ident:
                self.unreported.remove(f)
                self.reported.add(ident)
                return
        raise AssertionError(f"raised {ident}, which is no failure of this device")

    def launch_order_holds(self) -> bool:
        return True


def fails_with(code: int) -> Callable[..., int]:
    """A stream-last call that returns the status *code*."""

    def call(*_: Any) -> int:
        return code

    return call


def identify(exc: BaseException) -> int:
    if isinstance(exc, Boom):
        return exc.ident
    if isinstance(exc, aclasync.AclError) and exc.code >= KERNEL_CODE_BASE:
        return exc.code - KERNEL_CODE_BASE
    raise AssertionError(f"unexpected exception {exc!r}") from exc


def flatten(exc: BaseException | None) -> list[BaseException]:
    if exc is None:
        return []
    if isinstance(exc, ExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in flatten(inner)]
    return [exc]


async def attempt(fn: Callable[[], Awaitable[Any]]) -> BaseException | None:
    try:
        await fn()
    except (Boom, aclasync.AclError, ExceptionGroup) as exc:
        if isinstance(exc, aclasync.AclTimeoutError):
            raise
        return exc
    return None


class FrontEnd(RuleBasedStateMachine):
    backend: tuple[str, dict[str, Any]] = ("asyncio", {})

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.idents = itertools.count(1)
        self.launch_log: dict[int, list[int]] = {i: [] for i in range(STREAMS)}
        self.raised_log: dict[int, list[int]] = {i: [] for i in range(STREAMS)}
        self._portal_cm = start_blocking_portal(self.backend[0], self.backend[1])
        self.portal = self._portal_cm.__enter__()
        self.rt = aclasync.sim.create(device_count=1)
        self._device_cm = self.portal.wrap_async_context_manager(
            aclasync.open_device(0, backend=self.rt)
        )
        self.dev = self._device_cm.__enter__()
        # The last stream is FAST_SYNC: its lone waits are the worker's own (inline).
        flags = [StreamFlag.DEFAULT] * (STREAMS - 2) + [StreamFlag.FAST_SYNC]
        created = [self.portal.call(self._create_stream, f) for f in flags]
        self.streams = [self.dev.default_stream, *created]
        self.runs_only = self.portal.call(self._create_stream, StreamFlag.DEFAULT)
        self.executions = Executions()
        self._model_dir = tempfile.TemporaryDirectory()
        path = self.rt.sim.register_model(
            f"{self._model_dir.name}/double.om",
            inputs=[("x", (2,), "float64")],
            outputs=[("y", (2,), "float64")],
            fn=self.executions.body,
        )
        self.net = self.portal.call(self._load, path)
        self.pool = self.portal.call(self._open_pool)
        #: Failures the runs raised themselves.
        self.run_failures = 0
        self.closed = False

    async def _load(self, path: str) -> Any:
        return await self.dev.load_model(path)

    async def _open_pool(self) -> Any:
        return await self.dev.stream_pool(2)

    async def _create_stream(self, flags: StreamFlag) -> Any:
        return await self.dev.create_stream(flags=flags)

    # -- queueing ---------------------------------------------------------------------

    @rule(s=st.integers(0, STREAMS - 1))
    def launch_ok(self, s: int) -> None:
        self.streams[s].launch(self.dev.acl.sim.launch_kernel, Kernel())

    @rule(s=st.integers(0, STREAMS - 1))
    def launch_fails(self, s: int) -> None:
        ident = next(self.idents)

        def fail(*_: Any) -> int:
            raise Boom(ident)

        self.streams[s].launch(fail)
        self.model.launch_failed(ident, s)
        self.launch_log[s].append(ident)

    @rule(s=st.integers(0, STREAMS - 1))
    def kernel_fails(self, s: int) -> None:
        if self.model.pending_kernel(s):
            return  # pyACL keeps one kernel failure per sync: keep them apart
        ident = next(self.idents)
        self.streams[s].launch(
            self.dev.acl.sim.launch_kernel, Kernel(error=KERNEL_CODE_BASE + ident)
        )
        self.model.kernel_failed(ident, s)

    # -- completed awaits -------------------------------------------------------------

    def _completed(self, streams: list[int], raised: BaseException | None) -> None:
        self.model.check_await(streams, raised)
        if raised is not None and isinstance(raised, Boom):
            owner = next(s for s in streams if raised.ident in self.launch_log[s])
            self.raised_log[owner].append(raised.ident)

    @rule(s=st.integers(0, STREAMS - 1))
    def synchronize(self, s: int) -> None:
        raised = self.portal.call(attempt, self.streams[s].synchronize)
        self.model.synced([s])
        self._completed([s], raised)

    @rule(s=st.integers(0, STREAMS - 1))
    def query(self, s: int) -> None:
        self._completed([s], self.portal.call(attempt, self.streams[s].query))

    @rule(s=st.integers(0, STREAMS - 1))
    def record_and_wait(self, s: int) -> None:
        events: list[Any] = []

        async def record() -> None:
            events.append(await self.streams[s].record_event())

        self._completed([s], self.portal.call(attempt, record))
        if events:
            self._completed([s], self.portal.call(attempt, events[0].synchronize))
            self.portal.call(events[0].aclose)

    @rule(s=st.integers(0, STREAMS - 1))
    def record_nowait_and_wait(self, s: int) -> None:
        """A nowait record queues like a launch and reports nothing itself; waiting on
        its event is an await on the stream. (No stream here is stopped, so the
        record itself never fails.)"""

        async def record() -> Any:
            try:
                return self.streams[s].record_event_nowait()
            except anyio.WouldBlock:  # none ready yet: the device makes more
                return None

        event = self.portal.call(record)
        if event is not None:
            self._completed([s], self.portal.call(attempt, event.synchronize))
            self.portal.call(event.aclose)

    @rule()
    def device_synchronize(self) -> None:
        raised = self.portal.call(attempt, self.dev.synchronize)
        self.model.synced(DEVICE_WIDE)
        self._completed(DEVICE_WIDE, raised)

    # -- abandoned awaits -------------------------------------------------------------

    @rule(s=st.integers(0, STREAMS - 1))
    def cancelled_synchronize(self, s: int) -> None:
        async def cancelled() -> None:
            with anyio.CancelScope() as scope:
                scope.cancel()
                await self.streams[s].synchronize()

        self.model.abandoned([s])
        self.portal.call(cancelled)

    @rule(s=st.integers(0, STREAMS - 1))
    def synchronize_timeout_zero(self, s: int) -> None:
        async def poll() -> BaseException | str | None:
            try:
                return await attempt(lambda: self.streams[s].synchronize(timeout=0))
            except aclasync.AclTimeoutError:
                return "timed out"

        result = self.portal.call(poll)
        if result == "timed out":
            self.model.abandoned([s])
        else:
            assert not isinstance(result, str)
            self.model.synced([s])
            self._completed([s], result)

    @rule()
    def cancelled_device_synchronize(self) -> None:
        async def cancelled() -> None:
            with anyio.CancelScope() as scope:
                scope.cancel()
                await self.dev.synchronize()

        self.model.abandoned(DEVICE_WIDE)
        self.portal.call(cancelled)

    # -- model runs -------------------------------------------------------------------

    def _run_stream(self, s: int) -> Any:
        return self.runs_only if s == STREAMS else self.streams[s]

    @rule(s=st.integers(0, STREAMS), fail=st.booleans())
    def model_run(self, s: int, fail: bool) -> None:
        """A completed run returns its own output or raises its own failure; it is no
        await on the stream, so the stream's failures stay where they are."""
        x = np.array([-1.0 if fail else 1.0, 2.0])

        async def run() -> Any:
            try:
                return await self.net.run(self._run_stream(s), x)
            except aclasync.AclError as exc:
                return exc

        result = self.portal.call(run)
        if fail:
            assert isinstance(result, aclasync.AclError), result
            assert result.code == MODEL_EXECUTE
            self.run_failures += 1
        else:
            assert not isinstance(result, BaseException), result
            assert result[0].tolist() == [2.0, 4.0]

    @rule(s=st.integers(0, STREAMS), fail=st.booleans(), checkpoints=st.integers(0, 3))
    def cancelled_model_run(self, s: int, fail: bool, checkpoints: int) -> None:
        """Cancelled after a few checkpoints: before or after its work was queued."""
        x = np.array([-1.0 if fail else 1.0, 2.0])

        async def cancelled() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.net.run, self._run_stream(s), x)
                for _ in range(checkpoints):
                    await anyio.lowlevel.checkpoint()
                tg.cancel_scope.cancel()

        self.portal.call(cancelled)

    # -- pool borrowers ---------------------------------------------------------------

    @rule(failures=st.integers(0, 2), body_raises=st.booleans())
    def pool_borrow(self, failures: int, body_raises: bool) -> None:
        """The borrow's exit reports its stream's failures, each once: raised, or as
        notes on the body's own exception."""
        idents = [next(self.idents) for _ in range(failures)]

        async def borrow() -> BaseException | None:
            try:
                async with self.pool.stream() as s:
                    for ident in idents:
                        s.launch(fails_with(KERNEL_CODE_BASE + ident))
                    if body_raises:
                        raise KeyError("the body's own error")
            except (KeyError, aclasync.AclError, ExceptionGroup) as exc:
                return exc
            return None

        raised = self.portal.call(borrow)
        if body_raises:
            assert isinstance(raised, KeyError), raised
            notes = getattr(raised, "__notes__", [])
            assert len(notes) == len(idents), notes
            for ident in idents:
                assert sum(str(KERNEL_CODE_BASE + ident) in n for n in notes) == 1, notes
        else:
            assert sorted(identify(e) for e in flatten(raised)) == idents

    @rule(fail=st.booleans())
    def pool_borrow_cancelled(self, fail: bool) -> None:
        """A cancelled body's failures go to the device: a device await reports them."""
        ident = next(self.idents)

        async def borrow() -> None:
            with anyio.CancelScope() as scope:
                async with self.pool.stream() as s:
                    if fail:
                        s.launch(fails_with(KERNEL_CODE_BASE + ident))
                    scope.cancel()
                    await anyio.sleep(5)

        self.portal.call(borrow)
        if fail:
            self.model.launch_failed(ident, ORPHANS)

    @invariant()
    def launch_failures_come_out_in_launch_order(self) -> None:
        for s in range(STREAMS):
            order = {ident: i for i, ident in enumerate(self.launch_log[s])}
            positions = [order[i] for i in self.raised_log[s]]
            assert positions == sorted(positions), (s, self.raised_log[s])

    # -- the end ----------------------------------------------------------------------

    def teardown(self) -> None:
        try:
            if not self.closed:
                self.closed = True
                # Two concurrent closes: both return once the pool is closed.
                closed: list[bool] = []

                async def close_twice() -> None:
                    async def close() -> None:
                        await self.pool.aclose()
                        closed.append(self.pool.closed)

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(close)
                        tg.start_soon(close)

                self.portal.call(close_twice)
                assert closed == [True, True]
                # The runs' failures: each raised once, by its run or by the close.
                raised = self.portal.call(attempt, self.net.aclose)
                from_close = flatten(raised)
                assert all(
                    isinstance(e, aclasync.AclError) and e.code == MODEL_EXECUTE for e in from_close
                ), from_close
                assert self.run_failures + len(from_close) == self.executions.failed
                for s in range(1, STREAMS):
                    raised = self.portal.call(attempt, self.streams[s].aclose)
                    expected = {f.ident for f in self.model.unreported if f.stream == s}
                    got = [identify(e) for e in flatten(raised)]
                    assert sorted(got) == sorted(expected), (s, got, expected)
                    for ident in got:
                        self.model.report(ident)
                raised = self.portal.call(attempt, self.dev.aclose)
                got = [identify(e) for e in flatten(raised)]
                expected = {f.ident for f in self.model.unreported}
                assert sorted(got) == sorted(expected), (got, expected)
        finally:
            # Each step even if an earlier one raised: a failing example must not leave
            # its portal thread behind (dozens of them starve the next examples).
            try:
                self._device_cm.__exit__(None, None, None)
            finally:
                try:
                    self._portal_cm.__exit__(None, None, None)
                finally:
                    self.rt.sim.close()
                    self._model_dir.cleanup()


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        pytest.param(("trio", {}), id="trio"),
    ],
)
def test_failure_delivery_matches_the_model(backend: tuple[str, dict[str, Any]]) -> None:
    machine = type("FrontEndOn", (FrontEnd,), {"backend": backend})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
