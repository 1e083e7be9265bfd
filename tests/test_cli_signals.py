"""Ctrl-C and closed pipes: the command line ends quietly, with the documented status.

Subprocess tests send a real SIGINT once the run has shown a progress line (no sleeps);
in-process tests send one to this process once the devices' threads exist, then check
that every aclasync thread has gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from aclasync._cli import main
from aclasync.testing import assert_no_leaked_threads

ROOT = Path(__file__).resolve().parents[1]
#: Generous: a run that ignores Ctrl-C would take minutes; the CLI's own limit is 4 s.
EXIT_TIMEOUT_S = 30

pytestmark = pytest.mark.slow


def cli_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ACLASYNC_BACKEND", None)
    env.pop("ACLASYNC_DEBUG", None)
    return env


def interrupt_after(
    marker: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Start ``python -m aclasync ARGS``, SIGINT it once stderr shows *marker*.

    *env* adds to (or overrides) the environment ``cli_env()`` gives.

    Returns the exit status, the stderr after the marker line and the stdout.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "aclasync", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**cli_env(), **(env or {})},
    )
    try:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:
            seen.append(line)
            if marker in line:
                break
        else:
            pytest.fail(f"the run ended before showing {marker!r}: {''.join(seen)}")
        process.send_signal(signal.SIGINT)
        out, rest = process.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()  # also closes the pipes when the run ended early
    return process.returncode, rest, out


def assert_interrupted(status: int, err: str) -> None:
    # Only this line: no traceback, no "still running" thread, no watchdog exit.
    assert status == 130, err
    assert err.splitlines()[-1:] == ["aclasync: interrupted"], err
    assert "Traceback" not in err
    assert "still running" not in err


@pytest.mark.parametrize("loop", ["asyncio", "uvloop", "trio"])
def test_ctrl_c_ends_the_demo(loop: str) -> None:
    status, err, _ = interrupt_after("items/s", "demo", "--items", "4000", "--loop", loop)
    assert_interrupted(status, err)


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_ctrl_c_ends_the_model_demo_and_removes_its_spec_file(loop: str, tmp_path: Path) -> None:
    status, err, _ = interrupt_after(
        "items/s",
        "demo",
        "--model",
        "--items",
        "4000",
        "--loop",
        loop,
        env={"TMPDIR": str(tmp_path)},
    )
    assert_interrupted(status, err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_ctrl_c_ends_bench_scale_with_its_gate_shut(loop: str) -> None:
    # The progress line comes right after the gate kernels are queued: the waiters'
    # streams are still blocked behind them when the signal arrives.
    status, err, out = interrupt_after(
        "the gate is shut", "bench", "scale", "--quick", "--loop", loop
    )
    assert_interrupted(status, err)
    assert out == ""  # no table for an interrupted run


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_ctrl_c_ends_sync_modes_while_a_raw_thread_waits(loop: str) -> None:
    # Each round starts with the raw level: a plain thread blocked in the runtime's
    # synchronize_stream, outside the event loop.
    status, err, _ = interrupt_after("on a raw thread", "bench", "sync-modes", "--loop", loop)
    assert_interrupted(status, err)


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_ctrl_c_ends_trace_and_writes_nothing(loop: str, tmp_path: Path) -> None:
    out_file = tmp_path / "trace.json"
    status, err, _ = interrupt_after(
        "items/s", "trace", "--items", "4000", "--loop", loop, "--out", str(out_file)
    )
    assert_interrupted(status, err)
    assert not out_file.exists()


def test_ctrl_c_during_info_is_reported_as_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # info has no loop and returns at once on the simulator: the signal is sent from
    # inside its query, where Python's own handler turns it into KeyboardInterrupt.
    from aclasync._cli import _info

    def interrupted_query(requested: str | None) -> dict[str, object]:
        os.kill(os.getpid(), signal.SIGINT)
        raise AssertionError("SIGINT did not interrupt")  # pragma: no cover

    monkeypatch.setattr(_info, "collect_info", interrupted_query)
    assert main(["info", "--backend", "sim"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "aclasync: interrupted\n"
    assert captured.out == ""


def test_ctrl_c_inside_a_threads_start_is_reported_as_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ctrl-C caught a simulator thread inside Thread.start(), before it ran: the clean
    # up joined a thread never started and the run ended with a traceback, status 1.
    from aclasync._cli import _info

    never_started = threading.Thread(target=lambda: None, name="aclasync-sim-dev9")

    def interrupted_start(*args: object) -> int:
        raise KeyboardInterrupt  # where a real signal lands: inside start()

    def query_starting_a_thread(requested: str | None) -> dict[str, object]:
        with monkeypatch.context() as patched:
            patched.setattr(threading, "_start_new_thread", interrupted_start)
            never_started.start()
        raise AssertionError("start() was not interrupted")  # pragma: no cover

    monkeypatch.setattr(_info, "collect_info", query_starting_a_thread)
    try:
        assert main(["info", "--backend", "sim"]) == 130
    finally:
        threading._limbo.pop(never_started, None)  # type: ignore[attr-defined]
    captured = capsys.readouterr()
    assert captured.err == "aclasync: interrupted\n"


@pytest.fixture
def sigint_guard() -> Iterator[None]:
    """Restore this process's SIGINT handler, whatever the test did with it."""
    previous = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def aclasync_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(("aclasync", "acl-"))]


@pytest.mark.usefixtures("sigint_guard")
@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_ctrl_c_leaves_no_aclasync_thread_behind(
    loop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_no_leaked_threads()
    sent = threading.Event()
    stop = threading.Event()

    def interrupt_once_devices_run() -> None:
        # The device workers exist only inside the run, after its SIGINT receiver is set.
        while not stop.is_set():
            if sum(name.startswith("aclasync-device") for name in aclasync_threads()) == 4:
                os.kill(os.getpid(), signal.SIGINT)
                sent.set()
                return
            stop.wait(0.001)

    watcher = threading.Thread(target=interrupt_once_devices_run)
    watcher.start()
    try:
        status = main(["demo", "--items", "1000000", "--kernel-us", "1000", "--loop", loop])
    finally:
        stop.set()
        watcher.join()
    assert sent.is_set()
    assert status == 130
    assert capsys.readouterr().err.splitlines()[-1] == "aclasync: interrupted"
    assert_no_leaked_threads(timeout=0)  # main joined them before it returned


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with a stdout whose reader has already gone away."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "aclasync", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
            timeout=EXIT_TIMEOUT_S,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ("info", "--json"),
        ("info",),
        ("demo", "--items", "4", "--kernel-us", "100"),
        ("trace", "--items", "2", "--out", "-"),
    ],
    ids=["info-json", "info", "demo", "trace-stdout"],
)
def test_a_closed_pipe_ends_the_run_quietly_with_141(args: tuple[str, ...]) -> None:
    done = run_into_closed_pipe(*args)
    assert done.returncode == 141
    lines = done.stderr.splitlines()
    assert not [line for line in lines if "rror" in line or "Traceback" in line], done.stderr


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_ctrl_c_ends_bench_soak_with_its_loops_thread(loop: str) -> None:
    # Half way, a thread keeps starting event loops of its own that use a device: the
    # interrupted run must end it (Python waits for it at exit) and close every device.
    status, err, _ = interrupt_after(
        "half way", "bench", "soak", "--quick", "--seconds", "4", "--loop", loop
    )
    assert_interrupted(status, err)


#: Ctrl-C at a fixed point of ``demo``'s first imports, in a child: ``setname`` raises
#: KeyboardInterrupt inside a dataclass's ``__set_name__`` (Python wraps it in a
#: RuntimeError); ``numpy`` sends SIGINT while numpy imports ``datetime`` (numpy turns it
#: into an ImportError that does not name it).
_INTERRUPTED_IMPORT = r"""
import os, signal, sys
from aclasync._cli import main

where = sys.argv[1]
fired = []

def tracer(frame, event, arg):
    if fired or event != "call":
        return None
    name = frame.f_code.co_filename
    if where == "setname" and frame.f_code.co_name == "__set_name__" and name.endswith(
        "dataclasses.py"
    ):
        fired.append(where)
        raise KeyboardInterrupt  # as Python's SIGINT handler raises it
    if where == "numpy" and name.endswith("/datetime.py") and "numpy" in sys.modules:
        fired.append(where)
        os.kill(os.getpid(), signal.SIGINT)
    return None

sys.settrace(tracer)
status = main(["demo", "--items", "4"])
sys.settrace(None)
print("fired" if fired else "not fired", file=sys.stderr)
sys.exit(status)
"""


@pytest.mark.parametrize("where", ["setname", "numpy"])
def test_ctrl_c_during_a_subcommand_s_imports_is_an_interrupt(where: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT, where],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )
    lines = done.stderr.splitlines()
    assert lines[-1:] == ["fired"], done.stderr  # the import was where the test expects
    assert_interrupted(done.returncode, "\n".join(lines[:-1]) + "\n")


#: ``demo --model`` whose first model execution (a minute long) sends SIGINT once
#: queued: closing the device waits for it, so the clean-up limit ends the process.
_INTERRUPTED_MODEL = r"""
import os, signal, sys
from aclasync import _model
from aclasync._cli import main

launch = _model.Model.launch

def launch_then_interrupt(self, *args, **kwargs):
    result = launch(self, *args, **kwargs)
    _model.Model.launch = launch
    os.kill(os.getpid(), signal.SIGINT)
    return result

_model.Model.launch = launch_then_interrupt
sys.exit(main(["demo", "--model", "--kernel-us", "60e6", "--items", "8"]))
"""


def test_the_clean_up_limit_still_removes_the_model_s_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_MODEL],
        capture_output=True,
        text=True,
        env={**cli_env(), "TMPDIR": str(tmp_path)},
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines()[-1] == "aclasync: interrupted (clean-up timed out)"
    assert list(tmp_path.iterdir()) == []


#: ``doctor`` with a Ctrl-C that arrives inside the simulator's ``set_device``, once
#: the device's scheduler thread has started (where a real one lands when sent as the
#: doctor starts on the device: the main thread is in ``Thread.start()``).
_INTERRUPTED_DOCTOR = r"""
import os, signal, sys
from aclasync.sim import _engine
from aclasync._cli import main

start = _engine.Engine.start

def start_then_interrupt(self):
    start(self)
    _engine.Engine.start = start
    os.kill(os.getpid(), signal.SIGINT)

_engine.Engine.start = start_then_interrupt
sys.exit(main(["doctor", "--backend", "sim"]))
"""


def test_ctrl_c_inside_the_doctor_s_set_device_closes_the_device() -> None:
    # Python's handler raised inside set_device: the device stayed set, its thread
    # running, and the exit waited for it ("thread 'aclasync-sim-dev0' is still running").
    done = _interrupted_script(_INTERRUPTED_DOCTOR)
    assert done.stdout == ""  # no report for an interrupted run


def _interrupted_script(code: str) -> subprocess.CompletedProcess[str]:
    """Run *code* with the CLI's environment; it must end as an interrupted command."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )
    assert_interrupted(done.returncode, done.stderr)
    return done


#: ``python -m aclasync demo`` with a Ctrl-C as the command line starts importing
#: anyio (sent from an import hook: where one lands in the first ~70 ms).
_INTERRUPTED_START_UP = r"""
import os, runpy, signal, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "anyio":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["aclasync", "demo"]
runpy.run_module("aclasync", run_name="__main__")
"""


def test_ctrl_c_while_the_command_line_imports_is_an_interrupt() -> None:
    # aclasync._cli imported anyio at module level, before main() could handle it: a
    # KeyboardInterrupt traceback and death by SIGINT instead of status 130.
    done = _interrupted_script(_INTERRUPTED_START_UP)
    assert done.stderr == "aclasync: interrupted\n"
