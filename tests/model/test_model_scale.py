"""A thousand concurrent ``model.run`` calls over four streams, every output checked."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest
from conftest import scale_shift

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
    assert done == RUNS
    assert failures == []
