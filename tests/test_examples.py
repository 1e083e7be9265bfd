"""The examples, run as examples/README.md documents them, with every option they offer.

The ASGI service is served and loaded under each server and loop in ``tests/serve/``
and the Ray pipeline on a local cluster in ``tests/ray/``; here are the rest, and the
ASGI service's refusals of combinations it does not run.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

import aclasync
import aclasync.sim

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TIMEOUT_S = 60
#: offload.py's line for a request that succeeded.
OFFLOAD_LINE = re.compile(
    r"^request (\d+): kernel (\d+\.\d+) ms \(timing events\), "
    r"round trip (\d+\.\d+) ms \(launch to result home\), correct$"
)


def run_example(name: str, *args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``python examples/NAME ARGS`` from the repository root, as the README says.

    *prelude* is Python run first in the same process (to hide a package, say).
    """
    command = [sys.executable, str(EXAMPLES / name), *args]
    if prelude:
        runner = f"{prelude}; import runpy, sys; sys.argv = {[name, *args]!r}; "
        runner += f"runpy.run_path({str(EXAMPLES / name)!r}, run_name='__main__')"
        command = [sys.executable, "-c", runner]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT, check=False
    )


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}", EXAMPLES / name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


# -- offload.py ------------------------------------------------------------------------


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_offload_reports_each_request_and_the_one_that_failed(loop: str) -> None:
    done = run_example("offload.py", "--requests", "4", "--fail", "2", "--loop", loop)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"request {i}" for i in range(4)]
    assert lines[2] == (
        "request 2: failed as asked (ACL_ERROR_RT_AICORE_EXCEPTION from acl.rt.synchronize_stream)"
    )
    for line in lines[:2] + lines[3:]:
        found = OFFLOAD_LINE.match(line)
        assert found, line
        kernel_ms, round_trip_ms = float(found.group(2)), float(found.group(3))
        assert kernel_ms >= 2.0  # the modelled 2000 us, measured by timing events
        assert round_trip_ms >= kernel_ms  # the host waits for the kernel and the copies


def test_offload_documented_larger_run_is_correct() -> None:
    done = run_example("offload.py", "--requests", "100", "--size", "4096", "--kernel-us", "500")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 100
    assert all(OFFLOAD_LINE.match(line) for line in lines), done.stdout


@pytest.mark.anyio
async def test_offload_times_the_kernel_and_not_a_slow_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host that is slow to hear back from the worker does not lengthen "kernel".

    Every awaited ``record_event`` answers 50 ms late here. Were the start event
    awaited before the kernel is queued (as offload.py once did), the stream would sit
    idle for those 50 ms between the start event and the kernel, and they would count
    as kernel time.
    """
    offload = load_example("offload.py")
    record_event = aclasync.Stream.record_event

    async def late_answer(self: aclasync.Stream, **kwargs: Any) -> aclasync.Event:
        event = await record_event(self, **kwargs)
        await anyio.sleep(0.05)
        return event

    monkeypatch.setattr(aclasync.Stream, "record_event", late_answer)
    args = offload.parse_args(["--requests", "1", "--kernel-us", "2000"])
    runtime = aclasync.sim.create(device_count=1)
    try:
        async with aclasync.open_device(0, backend=runtime) as dev:
            line = await offload.offload(dev, 0, args)
    finally:
        runtime.sim.close()
    found = OFFLOAD_LINE.match(line)
    assert found, line
    kernel_ms, round_trip_ms = float(found.group(2)), float(found.group(3))
    assert 2.0 <= kernel_ms < 40.0  # the kernel, without the 50 ms the host lost
    assert round_trip_ms >= 50.0  # which the round trip does include


# -- inference.py ----------------------------------------------------------------------


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_inference_serves_verifies_and_leaves_nothing(loop: str) -> None:
    argv = ["--requests", "48", "--streams", "3", "--model-us", "200", "--loop", loop]
    done = run_example("inference.py", *argv)
    assert done.returncode == 0, done.stdout + done.stderr
    served, verified, left = done.stdout.splitlines()
    assert served.startswith(f"served 48 requests over 3 streams on {loop}: ")
    figures = served.split(": ", 1)[1].replace(",", "").split()
    requests_per_s, p50, p99 = float(figures[0]), float(figures[4]), float(figures[7])
    assert requests_per_s > 0
    assert 0.2 <= p50 <= p99  # each request holds the device for 200 us at least
    assert verified == "verified 48/48 outputs against the host"
    assert left == "left behind after close: nothing"


# -- asgi_service.py: what it refuses, clearly --------------------------------------------


@pytest.mark.parametrize(
    ("server", "loop"),
    [("hypercorn", "asyncio"), ("hypercorn", "uvloop"), ("uvicorn", "trio")],
)
def test_asgi_service_refuses_a_loop_its_server_does_not_run_on(server: str, loop: str) -> None:
    done = run_example("asgi_service.py", "--server", server, "--loop", loop, "--port", "0")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("usage: asgi_service.py ")
    assert done.stderr.splitlines()[-1] == (
        f"asgi_service.py: error: --server {server} --loop {loop}: uvicorn runs on asyncio "
        "or uvloop, hypercorn (served here with hypercorn.trio) runs on trio only"
    )


def test_asgi_service_without_uvloop_names_the_extra_to_install() -> None:
    hide_uvloop = "sys.modules['uvloop'] = None"
    done = run_example(
        "asgi_service.py", "--loop", "uvloop", "--port", "0", prelude=f"import sys; {hide_uvloop}"
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "asgi_service.py: error: --server uvicorn --loop uvloop needs uvloop: "
        "pip install -e '.[serve,uvloop]'"
    )


def test_asgi_service_without_the_serve_extra_says_so() -> None:
    done = run_example(
        "asgi_service.py", "--port", "0", prelude="import sys; sys.modules['starlette'] = None"
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "asgi_service.py needs the serve extra: pip install -e '.[serve]'" in done.stderr


@pytest.mark.parametrize("option", [("--devices", "65"), ("--streams", "3000")])
def test_asgi_service_refuses_more_than_the_simulator_has_in_one_line(
    option: tuple[str, str],
) -> None:
    # It started, and the lifespan failed with a traceback (hypercorn after printing
    # that it was serving).
    done = run_example("asgi_service.py", *option, "--port", "0")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"asgi_service.py: error: {option[0]} ")


def test_asgi_service_names_a_bad_environment_variable_and_its_help_ignores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A bad ACLASYNC_SERVE_* broke even --help (the module built its app on import), and
    # a bad kernel length made every request a bare 500.
    monkeypatch.setenv("ACLASYNC_SERVE_DEVICES", "two")
    assert run_example("asgi_service.py", "--help").returncode == 0
    with pytest.raises(ValueError, match=r"^ACLASYNC_SERVE_DEVICES='two': "):
        load_example("asgi_service.py")  # what `uvicorn asgi_service:app` does
    monkeypatch.setenv("ACLASYNC_SERVE_DEVICES", "1")
    example = load_example("asgi_service.py")
    assert callable(example.app)  # a module global: hypercorn reads those directly
    for bad in ("nan", "-5"):
        monkeypatch.setenv("ACLASYNC_SERVE_KERNEL_MS", bad)
        with pytest.raises(ValueError, match=r"kernel_ms must be finite and >= 0"):
            example.ServiceConfig.from_env()
    monkeypatch.setenv("ACLASYNC_SERVE_KERNEL_MS", "1e300")  # (it killed the simulator)
    with pytest.raises(ValueError, match=r"kernel_ms must be at most 60000"):
        example.ServiceConfig.from_env()
    monkeypatch.setenv("ACLASYNC_SERVE_KERNEL_MS", "2")
    assert example.ServiceConfig.from_env().kernel_ms == 2.0


@pytest.mark.parametrize("server", ["uvicorn", "hypercorn"])
def test_the_plain_server_commands_load_the_service(server: str) -> None:
    # Built on first access through a module __getattr__, the app was invisible to
    # hypercorn, which reads the module's globals ("application not found").
    loader = {
        "uvicorn": "from uvicorn.importer import import_from_string as load; "
        "app = load('asgi_service:app')",
        "hypercorn": "from hypercorn.utils import load_application; "
        "app = load_application('asgi_service:app', 2**20)",
    }[server]
    done = subprocess.run(
        [sys.executable, "-c", f"{loader}; print(type(app).__name__)"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=EXAMPLES,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in {"Starlette", "ASGIWrapper"}
