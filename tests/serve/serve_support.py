"""Helpers for the service tests: start ``examples/asgi_service.py`` as a user would."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx  # noqa: F401 - the test extra installs the serve extra: fail, never skip
import pytest
import starlette  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "asgi_service.py"
START_LIMIT_S = 20.0
EXIT_LIMIT_S = 20.0

#: (server, event loop) pairs the service is documented to run on.
SERVERS = [
    pytest.param(("uvicorn", "asyncio"), id="uvicorn-asyncio"),
    pytest.param(("uvicorn", "uvloop"), id="uvicorn-uvloop"),
    pytest.param(("hypercorn", "trio"), id="hypercorn-trio"),
]


@dataclasses.dataclass
class Server:
    """A running service: its process, base URL and log file."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        return self.process.wait(timeout=EXIT_LIMIT_S)


@contextlib.contextmanager
def run_server(server: str, loop: str, tmp_path: Path, *args: str) -> Iterator[Server]:
    """Start the example on 127.0.0.1, port 0, and yield once it is serving.

    The port is the one the server bound, read from its first stdout line, so there is
    no race for a free port. The process is killed at exit if it is still alive.
    """
    log_path = tmp_path / f"{server}-{loop}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(EXAMPLE), "--server", server, "--loop", loop]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", "0", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            found = re.search(r"serving on (http://127\.0\.0\.1:\d+)", log_path.read_text())
            if found:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the server did not start:\n{log_path.read_text()}")
            time.sleep(0.05)
        yield Server(process, found.group(1), log_path)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
