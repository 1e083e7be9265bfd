"""Offline models: ``async with dev.load_model(path) as model`` and ``await model.run``.

``Model`` drives ``acl.mdl`` and ``acl.*`` data-buffer calls through the public
``Device``/``Stream``/buffer API only, so the simulator and a real ``.om`` on CANN take
the same path; it never touches ``acl.sim``.

Each ``run`` works on a buffer set of its own, and each buffer set has a stream of its
own: pyACL reports a kernel's failure only through ``synchronize_stream``, which speaks
for everything queued on the stream, so a run can know that *its* execution failed only
on a stream nobody else queues work on. The run is still queued on the caller's stream,
through events: it starts after the work queued there so far, and work queued there
afterwards starts after it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import numpy as np

from ._buffers import DeviceBuffer, HostBuffer
from ._errors import AclError, raise_closing, raise_for_status
from ._event import Event, release_events
from ._factory import AsyncResource, Creation
from ._loop import current_delivery, failure, raise_if_cancelled, to_completion, unwrap
from ._model_calls import Loaded, TensorInfo, datasets, execute_on, load, release
from ._pyacl.codes import ErrorCode
from ._stream import Stream

if TYPE_CHECKING:
    from ._device import Device
    from ._lanes import Lane

__all__ = ["Model", "ModelLoading", "TensorInfo"]

#: Runs chained on a stream before one records an event on it, so that the stream is
#: known to have passed the earlier runs' events and they can be given back.
_HELD = 8


class ModelLoading(Creation["Model"]):
    """What ``Device.load_model()`` returns: await it, or use it with ``async with``."""

    def __init__(
        self, device: Device, path: str | os.PathLike[str], pool_size: int | None = None
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        if pool_size is not None and (
            isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1
        ):
            raise ValueError(f"pool_size must be None or an int >= 1, got {pool_size!r}")
        self._device = device
        self._path = os.fspath(path)
        self._pool_size = pool_size

    async def _create(self) -> Model:
        device, pool_size = self._device, self._pool_size
        handles = device._state.worker.handles

        async def unload(loaded: Loaded) -> None:  # the load's caller was cancelled
            if not loaded.ret:
                await Model._create(device, loaded, pool_size).aclose()

        # Never leaked to a cancellation (asyncio's own included): see DeviceState.create.
        loaded = await device._state.create(lambda: load(device.acl, handles, self._path), unload)
        raise_for_status(loaded.ret, loaded.api, device=device.id)
        return Model._create(device, loaded, pool_size)


class Model(AsyncResource):
    """A loaded model. Get one from ``dev.load_model(path)``.

    Input and output buffers (device memory, pinned host staging, their datasets and a
    stream) are pooled: ``run`` takes a set and gives it back when it ends, however it
    ends, and a new set is made only when all are busy. Without ``pool_size`` the pool
    grows to the peak number of concurrent ``run`` calls; with it, at most
    ``pool_size`` runs hold a set and the others wait (each set holds one of the
    device's limited streams: bound bursts with ``pool_size``). Unlike its ``Device``,
    a model belongs to the event loop that loaded it: load one per loop.
    """

    def __init__(self, device: Device, loaded: Loaded, pool_size: int | None = None) -> None:
        self._device = device
        self._limit = None if pool_size is None else anyio.Semaphore(pool_size)
        #: The loop that loaded it, whose library ``_limit`` is of (held weakly).
        self._owner = current_delivery()
        self._pool_size = pool_size
        self._id = loaded.model_id
        self._inputs = loaded.inputs
        self._outputs = loaded.outputs
        self._free: list[_Slot] = []
        self._slots: list[_Slot] = []  # every set made: the close releases them
        self._making = 0  # sets being made: they count towards pool_size too
        self._keys = itertools.count()
        #: Streams ``launch`` queued work on, while they live: the close reports their
        #: failures (a stream per request, closed and dropped, is not kept).
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        #: And their lanes: one whose ``Stream`` was collected unclosed still has the
        #: model's work queued, which the close waits for too.
        self._lanes: weakref.WeakSet[Lane] = weakref.WeakSet()
        #: Per stream: the event its last run recorded, which the stream waits for.
        self._chained: dict[Stream, _Chain] = {}
        #: Failures of runs whose caller went away (found when their set is reused).
        self._orphans: list[BaseException] = []
        self._active = 0
        self._idle: anyio.Event | None = None
        self._closed = False
        self._close_done: anyio.Event | None = None
        device._state.holders.add(self)  # a device closed first reports the orphans
        #: Why ``run`` cannot carry one of the tensors as an array, if it cannot.
        refusals = [why for t in (*self._inputs, *self._outputs) if (why := _size_refusal(t))]
        self._unsized = refusals[0] if refusals else None

    def take_failures(self) -> list[BaseException]:
        """The failures of runs nobody waited for, for whoever closes first (this model
        or its device) to report."""
        orphans, self._orphans = self._orphans, []
        return orphans

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<aclasync.Model {self._id} device={self._device.id}{state}>"

    @property
    def id(self) -> int:
        """The model id ``acl.mdl.load_from_file`` gave."""
        return self._id

    @property
    def inputs(self) -> tuple[TensorInfo, ...]:
        """Name, shape, dtype and byte size of each input, in order."""
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorInfo, ...]:
        """Name, shape, dtype and byte size of each output, in order."""
        return self._outputs

    @property
    def closed(self) -> bool:
        """Whether ``aclose`` was called."""
        return self._closed

    async def run(self, stream: Stream, *arrays: Any) -> list[np.ndarray[Any, Any]]:
        """Run the model on *arrays* and return its outputs as new numpy arrays.

        Checks the count, shape and dtype of *arrays* before anything is queued
        (``ValueError``/``TypeError``). The run is queued on *stream*: it starts after
        the work queued there so far, and work queued there later starts after it. It
        copies the arrays in, executes and copies the outputs out on the stream of its
        buffer set, which nothing else uses, and awaits that stream: so an ``AclError``
        raised here is this run's own failure, and a run whose execution failed never
        returns output. Failures of other work on *stream* stay with *stream*.

        Cancellation abandons the wait; the device work carries on, and its buffer set
        is reused once that work is done. A failure of a run nobody waited for is
        raised by ``aclose`` (or by the device's close, if that comes first). Raises
        ``anyio.ClosedResourceError`` once the model is closed (runs that hold a buffer
        set finish first; runs still without one are refused), or *stream*. With
        ``pool_size``, a ``RuntimeError`` on another event loop than the one that
        loaded the model.
        """
        self._check_stream(stream)
        inputs = self._check_arrays(arrays)
        if self._limit is None:
            return await self._run(stream, inputs)
        if current_delivery() is not self._owner:  # its waiters would wake another loop
            raise RuntimeError(
                f"{self!r} belongs to the event loop that loaded it (its pool_size "
                "queue is that loop's): load one per loop"
            )
        async with self._limit:
            return await self._run(stream, inputs)

    def launch(
        self, stream: Stream, inputs: Sequence[DeviceBuffer], outputs: Sequence[DeviceBuffer]
    ) -> None:
        """Queue the model on *stream* over device buffers; return at once.

        Synchronous and non-blocking, for pipelines that keep data on the device: the
        datasets are built, used and destroyed on the device worker in stream order.
        Buffer counts and sizes are checked here (``ValueError``); an ACL failure is
        raised by the next awaited operation on *stream*.
        """
        self._check_stream(stream)
        ins = _buffer_args("inputs", inputs, self._inputs, self._device)
        outs = _buffer_args("outputs", outputs, self._outputs, self._device)
        self._streams.add(stream)
        self._lanes.add(stream._lane)
        stream.launch(execute_on(self._device.acl), self._id, ins, outs)

    async def aclose(self) -> None:
        """Release the pooled buffers and unload the model. Idempotent; survives cancellation.

        New runs, and runs still without a buffer set, raise
        ``anyio.ClosedResourceError``; runs that hold one finish first. Then waits for
        the work queued so far on the streams the model was used on, releases
        everything and unloads the model. Raises what is left to report: an ACL error
        pending on each stream ``launch`` queued on, and failures of runs nobody waited
        for (one as itself, several as an ``ExceptionGroup``; as notes on an exception
        ``async with`` exits on). Cancelled while it waits, it still completes, the
        cancellation goes on and those failures go to the device (docs/errors.md, rule
        6). A second concurrent call waits for the first. A model whose device is
        closed or broken only marks itself closed (the device released it, and its
        close reports those failures).
        """
        await self._close(None)

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        await self._close(exc)

    # -- runs --------------------------------------------------------------------------

    async def _run(self, stream: Stream, inputs: list[np.ndarray[Any, Any]]) -> list[Any]:
        if self._closed:  # closed while this run waited for the pool
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        self._active += 1
        try:
            slot = await self._take_slot(stream)
            try:
                if self._closed:  # closed while this run waited for a set: refused
                    raise anyio.ClosedResourceError(f"{self!r} is closed")
                return await self._run_on(slot, stream, inputs)
            finally:
                self._give_back(slot)
        finally:
            self._active -= 1
            if self._idle is not None and not self._active:
                self._idle.set()

    async def _run_on(
        self, slot: _Slot, stream: Stream, inputs: list[np.ndarray[Any, Any]]
    ) -> list[Any]:
        own = slot.stream
        assert own is not None  # made with the set
        stream._check_open()
        self._prune(slot)
        chain = self._chained.pop(stream, None)
        # Where the caller's stream stood when this run was ordered after its work:
        # `done` stands for all of it only if nothing else comes before the wait for it.
        since: tuple[int, int] | None = _mark(stream)
        # (Not on a stream others queue work on too: its marks count aclasync's only.)
        shared = stream._lane.shared
        if chain is not None and chain.tail == since and len(chain.held) < _HELD and not shared:
            # The caller's stream ends with its wait for the last run: wait for that run.
            # The stream may not have passed its own wait yet, so the events stay held.
            own.wait_event(chain.done)
            held = [*chain.held, chain.done]
        else:
            held = []
            if chain is not None:  # the stream has passed them once `ready` has
                slot.later += [*chain.held, chain.done]
            if not stream._settled():  # start after what is queued on the caller's stream
                queued, calls = _mark(stream)
                try:
                    ready = await stream._record_quietly()
                except AclError as exc:  # stopped (FailureMode.STOP): nothing will run there
                    if exc.code != ErrorCode.ACL_ERROR_RT_STREAM_ABORT:
                        raise
                else:  # a record refused later is skipped too: the refusal is the stream's
                    own._wait_event(ready, quiet=True)
                    slot.later.append(ready)
                # One more launch (the record) or call (its slow path), or others came.
                since = _mark(stream)
                if since not in ((queued + 1, calls), (queued, calls + 1)):
                    since = None
        for array, host, target in zip(inputs, slot.host_in, slot.dev_in, strict=True):
            host.view(array.dtype, array.shape)[...] = array
            own.memcpy(target, host)
        own.launch(self._device.acl.mdl.execute_async, self._id, slot.inputs, slot.outputs)
        for source, host in zip(slot.dev_out, slot.host_out, strict=True):
            own.memcpy(host, source)
        slot.dirty = True
        try:
            done = await own._record_quietly()
        except BaseException:
            if chain is not None and held:  # the caller's stream still waits for them
                self._keep_chain(stream, chain, slot)
            raise
        if stream.closed:
            slot.later += [*held, done]
        else:  # later work on the caller's stream starts after this run
            # Only if nothing came between this run's start and its wait does `done`
            # stand for all that precedes the wait: else the next run records `ready`.
            alone = since == _mark(stream)
            stream.wait_event(done)
            other = self._chained.pop(stream, None)  # a run that overlapped this one
            if other is not None:
                held = [*other.held, other.done, *held]
            self._chained[stream] = _Chain(done, _mark(stream) if alone else None, held)
        try:
            await own.synchronize()
        except AclError as exc:
            slot.dirty = False
            _note_further(exc, own._state.take_failures(own._lane))
            raise
        slot.dirty = False
        return [
            host.view(t.dtype, t.shape).copy()
            for t, host in zip(self._outputs, slot.host_out, strict=True)
        ]

    def _keep_chain(self, stream: Stream, chain: _Chain, slot: _Slot) -> None:
        """A run that chained on *chain* was cancelled before its own event: the events
        stay held for the caller's stream (with a chain that came meanwhile, if any)."""
        if stream.closed:
            slot.later += [*chain.held, chain.done]
        elif (other := self._chained.get(stream)) is not None:
            other.held[:0] = [*chain.held, chain.done]
        else:
            self._chained[stream] = chain

    def _prune(self, slot: _Slot) -> None:
        """Forget the chains of streams already destroyed: their events go with *slot*."""
        for stream in [s for s in self._chained if s._lane.closed]:
            chain = self._chained.pop(stream)
            slot.later += [*chain.held, chain.done]

    async def _take_slot(self, stream: Stream) -> _Slot:
        """A free buffer set: a clean one, else one whose abandoned run has ended, else
        a new one; at ``pool_size`` sets, the oldest free one once its run has ended (a
        set whose run was abandoned is busy until then: no run waits for another's
        work while the pool may grow)."""
        clean = [i for i, slot in enumerate(self._free) if not slot.dirty]
        if clean:
            slot = self._free.pop(clean[-1])
            try:
                await anyio.lowlevel.checkpoint()
            except BaseException:
                self._free.append(slot)
                raise
            return slot
        for slot in list(self._free):  # every one dirty: ask whether its run ended
            if await self._ended(slot) and slot in self._free:
                self._free.remove(slot)
                await self._settle_dirty(slot)
                return slot
        made_or_making = len(self._slots) + self._making
        if self._free and self._pool_size is not None and made_or_making >= self._pool_size:
            slot = self._free.pop(0)
            await self._settle_dirty(slot)
            return slot
        self._making += 1  # (runs cancelled with their sets busy let others past the limit)
        try:
            made, cancelled = await to_completion(functools.partial(self._make_slot, stream.flags))
        finally:
            self._making -= 1
        slot = unwrap(made, cancelled)
        try:
            await raise_if_cancelled(cancelled)
        except BaseException:
            self._free.append(slot)  # made but never used: ready for the next run
            raise
        return slot

    async def _ended(self, slot: _Slot) -> bool:
        """Whether the run abandoned on *slot* has ended (a round trip, and one more per
        failure it left, which is kept for ``aclose``)."""
        assert slot.stream is not None
        while True:
            try:
                return await slot.stream.query()
            except AclError as exc:  # a failure was reported instead of the answer
                self._orphans.append(exc)
                if exc.api == "acl.rt.stream_query":  # the look itself failed: busy
                    return False

    async def _settle_dirty(self, slot: _Slot) -> None:
        """Wait for a taken set's abandoned run (see ``_clean``); put it back if cancelled."""
        try:
            await self._clean(slot)
        except BaseException:
            self._free.append(slot)
            raise

    async def _make_slot(self, flags: int) -> _Slot:
        """Allocate a buffer set, its datasets and its stream (run to completion by
        ``_take_slot``: what the worker makes is never left to a cancellation)."""
        device = self._device
        slot = _Slot(self._id, next(self._keys))
        try:
            slot.stream = await device._create_private_stream(flags)
            for tensor in self._inputs:
                slot.dev_in.append(await device.alloc(tensor.nbytes))
                slot.host_in.append(await device.alloc_host(tensor.nbytes))
            for tensor in self._outputs:
                slot.dev_out.append(await device.alloc(tensor.nbytes))
                slot.host_out.append(await device.alloc_host(tensor.nbytes))
            ins = tuple((b.ptr, b.nbytes) for b in slot.dev_in)
            outs = tuple((b.ptr, b.nbytes) for b in slot.dev_out)
            handles = device._state.worker.handles
            made = await device.call(datasets, device.acl, handles, slot.key, ins, outs)
            raise_for_status(made.ret, made.api, device=device.id)
        except BaseException as exc:  # give back what was made (the datasets undo themselves)
            await _discard(slot, exc)
            raise
        slot.inputs, slot.outputs = made.inputs, made.outputs
        self._slots.append(slot)
        return slot

    async def _clean(self, slot: _Slot) -> None:
        """Wait for the work an abandoned run left on *slot*; keep its failures."""
        own = slot.stream
        assert own is not None  # a set with work has its stream
        try:
            await own.synchronize()
        except AclError as exc:
            self._orphans.append(exc)
        self._orphans.extend(own._state.take_failures(own._lane))
        slot.dirty = False
        slot.release_later()

    def _give_back(self, slot: _Slot) -> None:
        if not slot.dirty:
            slot.release_later()
        if not self._closed:
            self._free.append(slot)

    # -- closing -----------------------------------------------------------------------

    async def _close(self, propagating: BaseException | None) -> None:
        if self._close_done is not None:
            await self._close_done.wait()
            return
        self._closed = True
        done = self._close_done = anyio.Event()
        try:  # (cancelled: asyncio's own, raised once closed)
            shut, cancelled = await to_completion(self._shut_down)
        finally:
            done.set()
        errors = self.take_failures()
        state = self._device._state
        error = failure(shut)  # (cancelled, by one cancelling every task: the device's
        # close releases the rest)
        gone = isinstance(error, (anyio.BrokenResourceError, anyio.ClosedResourceError))
        if error is not None and not (gone and state.gone()):
            # (gone: the device released everything; what the release took off the
            # streams before that is still this close's to report)
            errors.insert(0, error)
        await raise_closing(errors, cancelled, propagating, state.hand_over)

    async def _shut_down(self) -> None:
        """Wait for the runs under way, then release everything (``_release``)."""
        if self._active:
            self._idle = anyio.Event()
            await self._idle.wait()
        if not self._device._state.gone():
            await self._release()

    async def _release(self) -> None:
        """Wait for the model's work, release everything; the failures found are kept
        (``take_failures``) as soon as they are taken off a stream."""
        device = self._device
        slots, self._slots, self._free = self._slots, [], []
        for stream in list(self._streams):
            if not stream.closed:
                try:
                    await stream.synchronize()
                except AclError as exc:  # one per stream: each consumed is reported
                    self._orphans.append(exc)
                except anyio.ClosedResourceError:  # force-closed meanwhile: nothing to wait
                    pass
        live = {stream._lane for stream in self._streams}
        for lane in [lane for lane in self._lanes if lane not in live and not lane.closed]:
            with contextlib.suppress(anyio.ClosedResourceError):  # (its failures: the device's)
                await device._state.wait_for(lane, timed=False).wait()
        for stream in self._chained:  # past its waits for the runs' events
            if not stream.closed and stream not in self._streams:
                with contextlib.suppress(anyio.ClosedResourceError):  # (as above)
                    await stream._drain()
        for slot in slots:
            if slot.dirty:
                await self._clean(slot)
            slot.release_later()
        release_events([e for chain in self._chained.values() for e in (*chain.held, chain.done)])
        self._chained.clear()
        keys = [slot.key for slot in slots]
        api, ret = await device.call(
            release, device._state.worker.handles, [*keys, ("model", self._id)]
        )
        for slot in slots:
            if slot.stream is not None:
                try:
                    await slot.stream.aclose()
                except AclError as exc:
                    self._orphans.append(exc)
            for buffer in slot.buffers():
                await buffer.aclose()
        if ret:
            self._orphans.append(AclError.from_status(ret, api, device=device.id))

    # -- checks ------------------------------------------------------------------------

    def _check_stream(self, stream: Stream) -> None:
        if self._closed:
            raise anyio.ClosedResourceError(f"{self!r} is closed")
        if not isinstance(stream, Stream):
            raise TypeError(f"stream must be an aclasync.Stream, got {type(stream).__name__}")
        if stream.closed:  # before a set is taken (or waited for, or made) for nothing
            raise anyio.ClosedResourceError(f"{stream!r} is closed")
        if stream.device is not self._device:
            raise ValueError(f"{stream!r} belongs to another device than {self!r}")

    def _check_arrays(self, arrays: Sequence[Any]) -> list[np.ndarray[Any, Any]]:
        for tensor in self._outputs:  # its size is known only after the run
            if -1 in tensor.shape:
                raise ValueError(
                    f"output {tensor.name!r} has a dynamic shape {tensor.shape}; "
                    "Model.run takes static shapes only"
                )
        if self._unsized is not None:
            raise ValueError(self._unsized)
        if len(arrays) != len(self._inputs):
            raise ValueError(f"the model takes {len(self._inputs)} inputs, got {len(arrays)}")
        checked = []
        for tensor, value in zip(self._inputs, arrays, strict=True):
            if -1 in tensor.shape:
                raise ValueError(
                    f"input {tensor.name!r} has a dynamic shape {tensor.shape}; "
                    "Model.run takes static shapes only"
                )
            array = np.asarray(value)
            if array.dtype != tensor.dtype:
                raise TypeError(
                    f"input {tensor.name!r} must have dtype {tensor.dtype}, got {array.dtype}"
                )
            if array.shape != tensor.shape:
                raise ValueError(
                    f"input {tensor.name!r} must have shape {tensor.shape}, got {array.shape}"
                )
            checked.append(array)
        return checked


def _size_refusal(tensor: TensorInfo) -> str | None:
    """Why ``run`` cannot carry *tensor* as an array, if it cannot: it has no bytes, or
    its buffer is not its shape's (an AIPP image input, an aligned size)."""
    if -1 in tensor.shape:
        return None  # (refused as dynamic)
    if tensor.dtype is None:
        return (
            f"tensor {tensor.name!r} has ACL data type {tensor.data_type}, which numpy has "
            "no dtype for: Model.run cannot carry it as an array; use Model.launch with "
            "buffers of your own"
        )
    if tensor.nbytes <= 0:
        return f"tensor {tensor.name!r} has no bytes (shape {tensor.shape})"
    shaped = int(np.prod(tensor.shape, dtype=np.int64)) * tensor.dtype.itemsize
    if shaped != tensor.nbytes:
        return (
            f"tensor {tensor.name!r} takes a {tensor.nbytes}-byte buffer, not its shape's "
            f"{tensor.shape} x {tensor.dtype} ({shaped} bytes): Model.run cannot carry it "
            "as an array; use Model.launch with buffers of your own"
        )
    return None


class _Chain:
    """The last run queued on a stream: its event, which the stream waits for, the
    stream's ``_mark`` right after that wait (``None`` if other work came between the
    run's start and its wait: then the event does not stand for all that precedes the
    wait), and events of earlier runs the stream may not have passed yet."""

    __slots__ = ("done", "held", "tail")

    def __init__(self, done: Event, tail: tuple[int, int] | None, held: list[Event]) -> None:
        self.done = done
        self.tail = tail
        self.held = held


class _Slot:
    """One buffer set: device and host memory per tensor, two datasets and a stream."""

    __slots__ = (
        "dev_in",
        "dev_out",
        "dirty",
        "host_in",
        "host_out",
        "inputs",
        "key",
        "later",
        "outputs",
        "stream",
    )

    def __init__(self, model_id: int, number: int) -> None:
        #: What the worker keeps the datasets as: unique among the device's loaded models.
        self.key = ("model buffer set", model_id, number)
        self.stream: Stream | None = None
        self.dev_in: list[DeviceBuffer] = []
        self.host_in: list[HostBuffer] = []
        self.dev_out: list[DeviceBuffer] = []
        self.host_out: list[HostBuffer] = []
        self.inputs = 0
        self.outputs = 0
        #: Work of a run may still be queued on the stream (its caller went away).
        self.dirty = False
        #: Events to give back once the stream's work is done (a wait may name them).
        self.later: list[Event] = []

    def buffers(self) -> list[DeviceBuffer | HostBuffer]:
        return [*self.dev_in, *self.host_in, *self.dev_out, *self.host_out]

    def release_later(self) -> None:
        release_events(self.later)
        self.later.clear()


def _mark(stream: Stream) -> tuple[int, int]:
    """Launches queued on *stream* and calls made on its device so far (a call may
    queue work on any stream): it changes whenever work may have been queued there."""
    return stream._queued(), stream._state.calls


async def _discard(slot: _Slot, cause: BaseException) -> None:
    """Release a buffer set whose making failed with *cause*; their failures become
    notes on it (it is what the caller is told)."""
    further: list[BaseException] = []
    closers = [*([] if slot.stream is None else [slot.stream]), *slot.buffers()]
    for resource in closers:
        try:
            await resource.aclose()
        except (AclError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            further.append(exc)
    if further:
        notes = cause.__dict__.setdefault("__notes__", [])
        notes.extend(f"aclasync: releasing the half-made buffer set failed: {e!r}" for e in further)


def _note_further(error: BaseException, further: list[BaseException]) -> None:
    """Name the run's further failures on its first one (each is reported once)."""
    notes = error.__dict__.setdefault("__notes__", [])  # BaseException.add_note, 3.10 too
    notes.extend(f"aclasync: a further failure of this run: {other!r}" for other in further)


def _buffer_args(
    what: str, buffers: Sequence[DeviceBuffer], tensors: Sequence[TensorInfo], device: Device
) -> tuple[tuple[int, int], ...]:
    if isinstance(buffers, (DeviceBuffer, HostBuffer)) or len(buffers) != len(tensors):
        raise ValueError(f"{what}: the model takes {len(tensors)} buffers")
    pairs = []
    for tensor, buffer in zip(tensors, buffers, strict=True):
        if not isinstance(buffer, DeviceBuffer):
            raise TypeError(f"{what}: expected DeviceBuffer, got {type(buffer).__name__}")
        if buffer.device is not device:
            raise ValueError(f"{what}: {buffer!r} is memory of another device")
        if buffer.nbytes < tensor.nbytes:
            raise ValueError(
                f"{what}: {tensor.name!r} needs {tensor.nbytes} bytes, {buffer!r} has fewer"
            )
        pairs.append((buffer.ptr, tensor.nbytes))
    return tuple(pairs)
