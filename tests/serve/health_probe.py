"""Time ``GET /health`` from a process of its own; print the latencies as JSON.

``python health_probe.py URL COUNT``: probe every 5 ms until COUNT samples are taken,
or (with COUNT 0) until standard input closes. A process of its own, so that what is
measured is the server, not the GIL of a client busy with 64 connections.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import httpx


def main(url: str, count: int) -> None:
    stop = threading.Event()
    if count == 0:
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    samples: list[float] = []
    with httpx.Client(timeout=20.0) as http:
        while not stop.is_set() and (count == 0 or len(samples) < count):
            began = time.perf_counter()
            response = http.get(f"{url}/health")
            samples.append(time.perf_counter() - began)
            if response.status_code != 200:
                raise SystemExit(f"/health answered {response.status_code}")
            stop.wait(0.005)
    print(json.dumps(samples), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
