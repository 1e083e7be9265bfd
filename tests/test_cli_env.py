"""The command line and the environment: ``ASCEND_RT_VISIBLE_DEVICES``, ``ACLASYNC_DEBUG``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import aclasync
import aclasync.sim
from aclasync._cli import main

ROOT = Path(__file__).resolve().parents[1]
CLI_TIMEOUT_S = 120
#: What a host with cards 4 to 7 of eight sets: none of them is a device of a 4-device
#: simulator, so a simulator that read it would have no device at all.
HOST_DEVICES = {"ASCEND_RT_VISIBLE_DEVICES": "4,5,6,7"}


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``python -m aclasync ARGS`` with *env* added to a clean environment."""
    base = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("ACLASYNC_BACKEND", "ACLASYNC_DEBUG", "ASCEND_RT_VISIBLE_DEVICES"):
        base.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "aclasync", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env={**base, **env},
        check=False,
    )


# -- ASCEND_RT_VISIBLE_DEVICES: the simulators the CLI creates show every device --------


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("demo", "--items", "4", "--kernel-us", "100"),
        ("demo", "--items", "4", "--model"),
        ("trace", "--items", "4", "--out", "-"),
        # Between them, every helper that builds a simulator for a benchmark.
        (
            "bench",
            *("overhead", "request", "sync-modes", "soak", "model", "pipeline"),
            *("--quick", "--loop", "asyncio", "--scale", "0.02", "--seconds", "0.5"),
        ),
    ],
    ids=["demo", "demo-model", "trace", "bench"],
)
def test_the_host_s_visible_devices_do_not_hide_the_cli_s_simulated_ones(
    args: tuple[str, ...],
) -> None:
    done = run_cli(*args, env=HOST_DEVICES)
    assert done.returncode == 0, done.stderr
    assert "aclasync: error" not in done.stderr, done.stderr


def test_bench_ray_s_single_device_baseline_ignores_the_host_s_visible_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aclasync._cli._bench import _ray

    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "4")
    assert anyio.run(_ray._in_process, 2) > 0


def test_the_bench_serve_app_ignores_the_host_s_visible_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("starlette")
    httpx = pytest.importorskip("httpx")
    from aclasync._cli._bench._serve_app import build_app

    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "4")

    async def one_request(mode: str) -> object:
        app = build_app(mode, streams=1, kernel_us=10.0)
        async with app.router.lifespan_context(app):  # opens device 0
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                response = await client.post("/infer", json={"n": 4})
        return response.json()

    for mode in ("aclasync", "naive"):
        assert anyio.run(one_request, mode) == {"n": 4, "result": 14}


def test_the_native_backend_still_reads_the_visible_devices() -> None:
    # The simulator as `import acl` is the real runtime's stand-in: it keeps the rule.
    env = {
        **HOST_DEVICES,
        "PYTHONPATH": os.pathsep.join([aclasync.sim.acl_module_path(), str(ROOT)]),
        "ACLASYNC_SIM_STRICT": "1",
        "ACLASYNC_BACKEND": "native",
    }
    done = run_cli("info", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["device_count"] == 4
    done = run_cli("demo", "--devices", "5", "--items", "2", env=env)
    assert done.returncode == 1
    assert "aclasync: error: " in done.stderr


# -- ACLASYNC_DEBUG: read as ACLASYNC_SIM_STRICT is -------------------------------------


@pytest.fixture
def no_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "acl", None)
    monkeypatch.delenv("ACLASYNC_BACKEND", raising=False)


@pytest.mark.usefixtures("no_native")
@pytest.mark.parametrize("value", ["", "0", "false", "no", "off", "FALSE", " Off "])
def test_debug_switched_off_keeps_the_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv("ACLASYNC_DEBUG", value)
    assert main(["info", "--backend", "native"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("aclasync: error: backend='native' needs CANN"), err
    assert len(err.splitlines()) == 1


@pytest.mark.usefixtures("no_native")
@pytest.mark.parametrize("value", ["1", "true", "YES", "on", "2"])
def test_debug_switched_on_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("ACLASYNC_DEBUG", value)
    with pytest.raises(aclasync.BackendUnavailableError):
        main(["info", "--backend", "native"])
