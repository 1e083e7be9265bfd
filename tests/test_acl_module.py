"""``aclasync.sim.acl_module_path()``: the simulator importable as ``acl``, in new processes.

With that directory on ``PYTHONPATH``, an unmodified pyACL program runs on the
process-wide simulated runtime (strict with ``ACLASYNC_SIM_STRICT=1``), aclasync's own
backend detection takes it for the native backend, and ``aclasync info`` says that the
``acl`` it found is aclasync's simulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aclasync.sim

pytestmark = pytest.mark.slow

PROGRAM = textwrap.dedent(
    """
    import acl
    import acl.rt
    from acl import mdl, rt, util

    assert acl.rt is rt
    assert not hasattr(acl, "sim"), "a strict runtime has no simulator extensions"
    assert not hasattr(util, "live_threads")
    assert callable(mdl.load_from_file)

    assert acl.init() == 0
    count, ret = rt.get_device_count()
    assert ret == 0
    print("devices", count, "soc", acl.get_soc_name())
    assert rt.set_device(count - 1) == 0
    stream, ret = rt.create_stream()
    assert ret == 0
    dev_ptr, ret = rt.malloc(1024, 0)
    assert ret == 0
    host_ptr, ret = rt.malloc_host(1024)
    assert ret == 0
    assert rt.memset(dev_ptr, 1024, 0x5A, 1024) == 0
    assert rt.memcpy_async(host_ptr, 1024, dev_ptr, 1024, 2, stream) == 0
    assert rt.synchronize_stream(stream) == 0
    assert util.ptr_to_bytes(host_ptr, 1024) == b"Z" * 1024
    for ret in (rt.free_host(host_ptr), rt.free(dev_ptr), rt.destroy_stream(stream)):
        assert ret == 0
    assert rt.reset_device(count - 1) == 0
    assert acl.finalize() == 0
    print("program passed")
    """
)


def _run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ACLASYNC_", "ASCEND_RT_"))}
    paths = [aclasync.sim.acl_module_path(), environ.get("PYTHONPATH", "")]
    environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    environ.update(env)
    return subprocess.run(
        args, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120, check=False
    )


def _run_program(source: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the program *source* unchanged, ``import acl`` being the simulator."""
    program = tmp_path / "prog.py"
    program.write_text(source)
    return _run([sys.executable, str(program)], tmp_path, **env)


def test_the_directory_holds_an_acl_module() -> None:
    directory = Path(aclasync.sim.acl_module_path())
    assert (directory / "acl.py").is_file()
    assert directory.is_relative_to(Path(aclasync.sim.__file__).parent)


def test_an_unmodified_pyacl_program_runs_on_the_strict_simulator(tmp_path: Path) -> None:
    done = _run_program(
        PROGRAM,
        tmp_path,
        ACLASYNC_SIM_STRICT="1",
        ACLASYNC_SIM_DEVICE_COUNT="3",
        ACLASYNC_SIM_SOC="Ascend310B4",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "devices 3 soc Ascend310B4" in done.stdout
    assert "program passed" in done.stdout


SYNC_EVENTS = textwrap.dedent(
    """
    import acl

    SYNC, TIME_LINE = 0x1, 0x8
    assert acl.rt.set_device(0) == 0
    (first, ret), (second, ret2) = acl.rt.create_stream(), acl.rt.create_stream()
    assert ret == ret2 == 0
    event, ret = acl.rt.create_event_with_flag(SYNC | TIME_LINE)
    print("create", ret)
    if ret == 0:
        assert acl.rt.record_event(event, first) == 0
        assert acl.rt.stream_wait_event(second, event) == 0
        assert acl.rt.reset_event(event, second) == 0
        assert acl.rt.synchronize_stream(second) == 0
        assert acl.rt.destroy_event(event) == 0
    for stream in (first, second):
        assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.reset_device(0) == 0
    print("program passed")
    """
)


@pytest.mark.parametrize(("setting", "created"), [("", 107000), ("runtime", 0)])
def test_the_event_flags_a_program_may_use_follow_the_environment(
    tmp_path: Path, setting: str, created: int
) -> None:
    # pyACL's reference page takes TIME_LINE alone; CANN's runtime takes SYNC too, and
    # a program written for it waits on such an event across streams, then resets it.
    done = _run_program(
        SYNC_EVENTS, tmp_path, ACLASYNC_SIM_STRICT="1", ACLASYNC_SIM_EVENT_FLAGS=setting
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == ["create", str(created), "program", "passed"]


def test_import_acl_is_the_process_wide_runtime(tmp_path: Path) -> None:
    code = (
        "import acl, aclasync.sim\n"
        "assert acl is aclasync.sim.acl\n"
        "print(type(acl).__name__, hasattr(acl, 'sim'))\n"
    )
    done = _run([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SimAcl", "True"]  # not strict: the extensions are there


def test_backend_detection_takes_it_for_the_native_backend(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import anyio, aclasync
        from aclasync._backend import is_aclasync_simulator

        async def main():
            async with aclasync.open_device(0) as dev:
                stream = await dev.create_stream()
                await stream.synchronize()
                await stream.aclose()
                print(dev.backend_name, is_aclasync_simulator(dev.acl))

        anyio.run(main)
        """
    )
    done = _run([sys.executable, "-c", code], tmp_path, ACLASYNC_SIM_STRICT="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["native", "True"]


def test_info_reports_the_native_backend_on_aclasyncs_simulator(tmp_path: Path) -> None:
    info = [sys.executable, "-m", "aclasync", "info"]
    text = _run(info, tmp_path, ACLASYNC_SIM_STRICT="1")
    assert text.returncode == 0, text.stderr
    assert "backend   native (`import acl` works)" in text.stdout
    assert "acl       aclasync's simulator (strict: pyACL's surface only), from " in text.stdout
    assert str(Path(aclasync.sim.acl_module_path()) / "acl.py") in text.stdout

    done = _run([*info, "--json"], tmp_path, ACLASYNC_SIM_STRICT="1")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["backend"] == "native"
    assert report["acl_is_simulator"] is True
    assert report["simulator_strict"] is True
    assert report["acl_module"] == str(Path(aclasync.sim.acl_module_path()) / "acl.py")
    assert report["profile"] is None  # a strict runtime has no acl.sim to ask


def test_a_bad_setting_fails_the_import_naming_the_variable(tmp_path: Path) -> None:
    done = _run([sys.executable, "-c", "import acl"], tmp_path, ACLASYNC_SIM_DEVICE_COUNT="-1")
    assert done.returncode == 1
    assert "ACLASYNC_SIM_DEVICE_COUNT='-1': expected a whole number from 1 to 64" in done.stderr
