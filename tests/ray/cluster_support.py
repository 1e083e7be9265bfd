"""Ray clusters whose NPUs Ray detects itself, on aclasync's simulator, and a process census.

``detected_cluster`` runs ``ray start --head --block`` with the simulator's ``acl`` module
on ``PYTHONPATH`` (``aclasync.sim.acl_module_path()``), as the README tells users to, and
connects this process to it. Ray counts the NPUs with ``acl.rt.get_device_count()`` and
names them with ``acl.get_soc_name()``; nothing is declared by hand.

``ProcessTree`` follows the processes a command starts (Ray's daemons, workers, Serve's
actors: all descendants of it), so that a test can check that none of *its* processes
outlived it, whatever other Ray clusters run on the machine meanwhile.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import ray

import aclasync.sim

#: The simulator's knobs for the process-wide runtime (``docs/simulator.md``).
DEVICE_COUNT_ENV = "ACLASYNC_SIM_DEVICE_COUNT"
SOC_ENV = "ACLASYNC_SIM_SOC"
START_TIMEOUT_S = 90.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def simulated_npu_env(
    *, npus: int, soc: str, visible: str | None = None, noset: bool = False, strict: bool = False
) -> dict[str, str]:
    """The environment of a process whose ``import acl`` is the simulator, *npus* cards.

    *strict*: the simulator exposes pyACL's surface only (``ACLASYNC_SIM_STRICT=1``).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([aclasync.sim.acl_module_path(), *sys.path])
    env[DEVICE_COUNT_ENV] = str(npus)
    env[SOC_ENV] = soc
    env.pop("ASCEND_RT_VISIBLE_DEVICES", None)
    env.pop("RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES", None)
    env.pop("ACLASYNC_BACKEND", None)
    env["ACLASYNC_SIM_STRICT"] = "1" if strict else "0"
    if visible is not None:
        env["ASCEND_RT_VISIBLE_DEVICES"] = visible
    if noset:
        env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] = "1"
    return env


def children_of(pids: set[int]) -> set[int]:
    """Every live process whose parent is in *pids*, and theirs, and so on."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found: set[int] = set()
    frontier = set(pids)
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    """The processes of *pids* that still exist (zombies count as gone)."""
    left = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.add(pid)
    return left


class ProcessTree:
    """Record, every 0.2 s while in use, the processes descended from a root process.

    Ray's workers are children of the raylet, the raylet of ``ray start`` or of the
    driver that started the cluster: the root. Use as a context manager around the
    life of the root; ``left()`` then says which recorded processes are still alive.
    """

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="process-tree", daemon=True)

    def __enter__(self) -> ProcessTree:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while True:
            self.seen |= children_of({self.root} | self.seen)
            if self._stop.wait(0.2):
                return

    def left(self, timeout: float = 30.0) -> set[int]:
        """The recorded processes still alive after up to *timeout* seconds."""
        self.seen |= children_of({self.root} | self.seen)
        deadline = time.monotonic() + timeout
        while (still := alive(self.seen)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return still


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A running ``ray start --head`` cluster this process is connected to."""

    address: str
    temp_dir: Path
    env: dict[str, str]


@contextlib.contextmanager
def detected_cluster(
    *, npus: int, soc: str, visible: str | None = None, noset: bool = False, strict: bool = False
) -> Iterator[Cluster]:
    """Start a cluster on simulated NPUs that Ray detects; connect to it; tear it down.

    At the end: disconnect, SIGTERM ``ray start --block`` (which stops what it started),
    check that no process of the cluster is left and remove its temporary directory
    (with the session directory in it).
    """
    # Short: Ray's socket paths under it must stay below 108 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="aclray"))
    env = simulated_npu_env(npus=npus, soc=soc, visible=visible, noset=noset, strict=strict)
    port = free_port()
    command = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        f"--ray-client-server-port={free_port()}",
        f"--dashboard-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
    ]
    log = temp_dir / "ray-start.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_terminate_with_parent,  # a test run killed mid-way stops it too
        )
    try:
        with ProcessTree(process.pid) as tree:
            _wait_started(process, log)
            address = f"127.0.0.1:{port}"
            # "auto" with the cluster's temp dir finds it, and its token, as `ray start` said.
            ray.init(
                address="auto",
                _temp_dir=str(temp_dir),
                configure_logging=False,
                log_to_driver=False,
            )
            try:
                yield Cluster(address, temp_dir, env)
            finally:
                ray.shutdown()
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)
            left = tree.left()
        assert not left, f"processes of the cluster left behind: {sorted(left)}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _terminate_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGTERM when the parent process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _wait_started(process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "Ray runtime started" in text:
            return
        if process.poll() is not None:
            raise RuntimeError(f"ray start exited with {process.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"ray start did not start in {START_TIMEOUT_S:g} s:\n{text[-3000:]}")
