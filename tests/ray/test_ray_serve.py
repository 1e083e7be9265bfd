"""examples/ray_serve_app.py's Serve application on a real local cluster of detected NPUs.

The cluster is ``ray start --head`` with the strict simulator as ``acl`` (four cards Ray
counts itself); the application is the example's ``Classifier`` deployment, two
replicas, deployed from here and reached over HTTP through Serve's proxy on 127.0.0.1.
What is checked is what a client and an operator see: every answer right, batches that
overlap on one replica (from the counters the deployment puts in its answers), tenants'
models loaded and closed, a replica killed mid-load replaced while a retrying client
gets every answer, and, at shutdown, each replica closing its NPU (its log says so)
with nothing left behind.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import pytest
from cluster_support import Cluster, detected_cluster, free_port

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))  # here, and (through PYTHONPATH) in the replicas

import ray_serve_app as app  # noqa: E402
from ray import serve  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

REPLICAS = 2
#: What a replica's ``__del__`` logs once it closed its models, its pool and its NPU.
CLOSED = re.compile(r"replica (?P<replica>\w+) closed its models and NPU (?P<npu>\d+)")


class Deployed:
    """The running application: its URL, the cluster, and every answer seen so far."""

    def __init__(self, cluster: Cluster, url: str) -> None:
        self.cluster = cluster
        self.url = url
        self.answers: list[dict[str, Any]] = []


@pytest.fixture(scope="module")
def deployed() -> Iterator[Deployed]:
    with (
        tempfile.TemporaryDirectory() as model_dir,
        detected_cluster(npus=4, soc="Ascend910B3", strict=True) as cluster,
    ):
        app.write_model_files(Path(model_dir), model_ms=20.0)
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        try:
            serve.run(app.Classifier.options(num_replicas=REPLICAS).bind(model_dir))
            yield Deployed(cluster, f"http://127.0.0.1:{port}/")
        finally:
            serve.shutdown()
        # Each replica that shut down gracefully closed its models and its NPU.
        closed = _closed_replicas(cluster.temp_dir, REPLICAS)
        assert len(closed) == REPLICAS, closed
        assert len(set(closed.values())) == REPLICAS  # each its own NPU
        for err in cluster.temp_dir.glob("session_*/logs/worker-*.err"):
            assert "never awaited" not in err.read_text(errors="replace"), err


def _closed_replicas(temp_dir: Path, count: int) -> dict[str, int]:
    """Replica to NPU, from the replicas' logs' "closed its models" lines (up to 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        closed = {
            found["replica"]: int(found["npu"])
            for log in temp_dir.glob("session_*/logs/serve/replica_*.log")
            for found in CLOSED.finditer(log.read_text(errors="replace"))
        }
        if len(closed) >= count or time.monotonic() > deadline:
            return closed
        time.sleep(0.2)


def _send(deployed: Deployed, work: list[tuple[int, str]], concurrency: int) -> app.Load:
    load = anyio.run(app.send, deployed.url, work, concurrency)
    deployed.answers += load.answers
    return load


def test_every_answer_is_right_and_batches_overlap_on_a_replica(deployed: Deployed) -> None:
    load = _send(deployed, [(i, "") for i in range(160)], concurrency=32)
    assert (load.wrong, len(load.answers)) == (0, 160)
    by_replica: dict[str, list[dict[str, Any]]] = {}
    for answer in load.answers:
        by_replica.setdefault(answer["replica"], []).append(answer)
    assert len(by_replica) == REPLICAS  # both replicas served
    assert len({answers[0]["npu"] for answers in by_replica.values()}) == REPLICAS
    # Requests were batched, and on some replica two batches ran on the NPU at once.
    assert max(answer["batch"] for answer in load.answers) > 1
    most = max(answer["in_flight"] for answer in load.answers)
    assert 2 <= most <= app.CONCURRENT_BATCHES


def test_tenants_models_are_loaded_on_demand_and_closed_on_eviction(deployed: Deployed) -> None:
    tenants = app.TENANTS
    work = [(1000 + i, tenants[i % len(tenants)]) for i in range(4 * len(tenants))]
    load = _send(deployed, work, concurrency=4)
    assert (load.wrong, len(load.answers)) == (0, len(work))
    last: dict[str, dict[str, Any]] = {}
    for answer in load.answers:
        seen = last.setdefault(answer["replica"], answer)
        if answer["loads"] + answer["closes"] > seen["loads"] + seen["closes"]:
            last[answer["replica"]] = answer
    for answer in last.values():
        assert answer["loads"] - answer["closes"] <= app.MODELS_PER_REPLICA
    # Five tenants, two models per replica on two replicas: some model was evicted.
    assert sum(answer["closes"] for answer in last.values()) >= 1


def test_unknown_tenants_and_bad_input_are_client_errors(deployed: Deployed) -> None:
    with httpx.Client(timeout=30) as client:
        x = app.request_input(0).tolist()
        tenant = {"serve_multiplexed_model_id": "nobody"}
        assert client.post(deployed.url, json={"x": x}, headers=tenant).status_code == 404
        assert client.post(deployed.url, json={"x": x[:3]}).status_code == 400
        assert client.post(deployed.url, content=b"not json").status_code == 400
        huge = ("[" + ", ".join(["1" + "0" * 400] + ["0"] * (len(x) - 1)) + "]").encode()
        for body in (b'{"x": ' + huge + b"}", b'{"x": [NaN' + b", 0" * (len(x) - 1) + b"]}"):
            assert client.post(deployed.url, content=body).status_code == 400, body[:40]


def test_a_replica_killed_mid_load_is_replaced_and_a_retrying_client_gets_all(
    deployed: Deployed,
) -> None:
    before = {answer["replica"] for answer in deployed.answers}
    victim = deployed.answers[-1]
    results: dict[int, list[float]] = {}
    failures: list[int] = []

    async def client() -> None:
        halfway = anyio.Event()
        async with (
            httpx.AsyncClient(timeout=30) as http,
            anyio.create_task_group() as tg,
        ):
            queue = iter(range(2000, 2200))

            async def sender() -> None:
                for index in queue:
                    results[index] = await _retrying(http, deployed.url, index, failures)
                    if len(results) == 40:
                        halfway.set()

            for _ in range(16):
                tg.start_soon(sender)
            # Mid-load: kill one replica's process outright, as a crash would.
            with anyio.fail_after(60):
                await halfway.wait()
            os.kill(victim["pid"], signal.SIGKILL)

    anyio.run(client)
    assert sorted(results) == list(range(2000, 2200))
    for index, scores in results.items():
        expected = app.scores("classifier", app.request_input(index))
        np.testing.assert_allclose(scores, expected, rtol=app.TOLERANCE, atol=app.TOLERANCE)
    # Serve notices the death and starts a replica in its place, which then answers.
    deadline = time.monotonic() + 90
    new: set[str] = set()
    while not new and time.monotonic() < deadline:
        load = _send(deployed, [(i, "") for i in range(3000, 3032)], concurrency=16)
        assert load.wrong == 0
        answered = {answer["replica"] for answer in load.answers}
        assert victim["replica"] not in answered
        new = answered - before
    assert new, f"no new replica answered within 90 s ({len(failures)} requests retried)"
    assert _wait_for_running(REPLICAS) == {"RUNNING": REPLICAS}


async def _retrying(
    http: httpx.AsyncClient, url: str, index: int, failures: list[int]
) -> list[float]:
    """POST request *index* until it is answered (within 60 s): what a careful client does."""
    x = app.request_input(index).tolist()
    with anyio.fail_after(60):
        while True:
            try:
                response = await http.post(url, json={"x": x})
            except httpx.TransportError:
                response = None
            if response is not None and response.status_code == 200:
                scores: list[float] = response.json()["scores"]
                return scores
            failures.append(index)
            await anyio.sleep(0.2)


def _wait_for_running(count: int) -> dict[str, int]:
    deadline = time.monotonic() + 60
    while True:
        deployment = serve.status().applications["default"].deployments["Classifier"]
        states = {str(state): n for state, n in deployment.replica_states.items()}
        if states == {"RUNNING": count} or time.monotonic() > deadline:
            return states
        time.sleep(0.2)
