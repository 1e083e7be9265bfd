"""A thousand concurrent ``model.run`` calls over four streams, every output checked."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest
from model_support import scale_shift

import aclasync

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RUNS = 1000
STREAMS = 4


async def test_thousand_concurrent_runs_over_four_streams(rt: Any, model_path: str) -> None:
    bias = np.linspace(-1, 1, 8, dtype=np.float32)
    failures: list[int] = []
    done = 0

    async def one(model: aclasync.Model, stream: aclasync.Stream, index: int) -> None:
        nonlocal done
        x = np.full((4, 8), index, dtype=np.float32) + np.arange(8, dtype=np.float32)
        y, total = await model.run(stream, x, bias)
        expected_y, expected_total = scale_shift(x, bias)
        if not (np.array_equal(y, expected_y) and np.array_equal(total, expected_total)):
            failures.append(index)
        done += 1

    with anyio.fail_after(50):
        async with aclasync.open_device(0, backend=rt) as dev:
            free_before = await dev.call(lambda: dev.acl.rt.get_mem_info(0)[0])
            async with dev.load_model(model_path) as model:
                streams = [await dev.create_stream() for _ in range(STREAMS)]
                async with anyio.create_task_group() as tg:
                    for index in range(RUNS):
                        tg.start_soon(one, model, streams[index % STREAMS], index)
                for stream in streams:
                    await stream.aclose()
            assert rt.sim.model_objects() == {
                "models": 0,
                "model_descs": 0,
                "datasets": 0,
                "data_buffers": 0,
            }
            # the pooled device buffers went back too
            assert await dev.call(lambda: dev.acl.rt.get_mem_info(0)[0]) == free_before
    assert done == RUNS
    assert failures == []


async def test_workers_reusing_pooled_buffers(rt: Any, model_path: str) -> None:
    """Sixteen workers start on a pool of one slot and reuse slots as they come back."""
    bias = np.zeros(8, dtype=np.float32)
    results: dict[int, bool] = {}

    async def worker(model: aclasync.Model, stream: aclasync.Stream, index: int) -> None:
        for round_ in range(20):
            x = np.full((4, 8), index * 100 + round_, dtype=np.float32)
            y, total = await model.run(stream, x, bias)
            expected = scale_shift(x, bias)
            ok = np.array_equal(y, expected[0]) and np.array_equal(total, expected[1])
            results[index * 100 + round_] = ok

    with anyio.fail_after(50):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(model_path) as model,
        ):
            streams = [await dev.create_stream() for _ in range(STREAMS)]
            await model.run(streams[0], np.zeros((4, 8), np.float32), bias)  # one pooled slot
            async with anyio.create_task_group() as tg:
                for index in range(16):
                    tg.start_soon(worker, model, streams[index % STREAMS], index)
            assert rt.sim.model_objects()["datasets"] <= 2 * 16
            for stream in streams:
                await stream.aclose()
    assert len(results) == 16 * 20
    assert all(results.values())


async def test_pool_size_caps_the_buffer_sets(rt: Any, model_path: str) -> None:
    bias = np.ones(8, dtype=np.float32)
    outputs: dict[int, Any] = {}

    async def one(model: aclasync.Model, stream: aclasync.Stream, index: int) -> None:
        x = np.full((4, 8), index, dtype=np.float32)
        outputs[index] = (x, await model.run(stream, x, bias))

    with anyio.fail_after(30):
        async with (
            aclasync.open_device(0, backend=rt) as dev,
            dev.load_model(model_path, pool_size=2) as model,
            dev.create_stream() as stream,
        ):
            async with anyio.create_task_group() as tg:
                for index in range(40):
                    tg.start_soon(one, model, stream, index)
            assert rt.sim.model_objects()["datasets"] == 2 * 2  # two sets: input + output
            with pytest.raises(ValueError, match="pool_size"):
                dev.load_model(model_path, pool_size=0)
    assert len(outputs) == 40
    for x, (y, total) in outputs.values():
        expected = scale_shift(x, bias)
        np.testing.assert_array_equal(y, expected[0])
        np.testing.assert_array_equal(total, expected[1])
