"""The benchmark registry and ``run``, which the CLI and ``benchmarks/run.py`` call."""

from __future__ import annotations

import dataclasses
import datetime
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from .._common import CliError
from .._loops import LOOPS, loop_unavailable
from . import (
    _launch,
    _model,
    _overhead,
    _pipeline,
    _ray,
    _ray_serve,
    _request,
    _scale,
    _serve,
    _soak,
    _sync_modes,
)
from ._common import BenchConfig, Progress, Skip, Target
from ._plot import has_charts, plot
from ._report import describe_backend, describe_machine, write_json

__all__ = ["BENCHMARKS", "Benchmark", "run", "runs_native", "stderr_progress"]


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A registered benchmark: its name, a one-line summary and its entry point.

    ``quick=False``: ``bench --quick`` without names leaves it out (name it to run it);
    ``workload``: its timed device work is the workload module's (``--workload``).
    """

    name: str
    summary: str
    fn: Callable[[BenchConfig], dict[str, Any]]
    quick: bool = True
    workload: bool = False


#: Every benchmark, in the order a full run takes them.
BENCHMARKS: dict[str, Benchmark] = {
    bench.name: bench
    for bench in (
        Benchmark("overhead", "idle-stream sync round trip vs raw and to_thread", _overhead.run),
        Benchmark(
            "launch",
            "queued launch rate vs raw and one to_thread per launch",
            _launch.run,
            workload=True,
        ),
        Benchmark(
            "sync-modes",
            "default vs FAST_SYNC: wake-up latency and CPU",
            _sync_modes.run,
            workload=True,
        ),
        Benchmark(
            "request",
            "launch then await, back to back, vs a dedicated thread",
            _request.run,
            workload=True,
        ),
        Benchmark(
            "scale",
            "thousands of waiters over up to 8 devices: threads, memory",
            _scale.run,
            workload=True,
        ),
        Benchmark(
            "pipeline",
            "the demo pipeline on 1, 2, 4 and 8 devices (those the runtime has)",
            _pipeline.run,
            workload=True,
        ),
        Benchmark("model", "Model.run requests vs blocking execute in to_thread", _model.run),
        Benchmark("ray", "items/s on 1, 2 and 4 Ray NPU actors vs one device", _ray.run),
        Benchmark("serve", "an ASGI service: aclasync vs naive to_thread handler", _serve.run),
        Benchmark(
            "serve-ray",
            "Ray Serve on an NPU: k batches awaited vs 1 vs to_thread (not in --quick)",
            _ray_serve.run,
            quick=False,
        ),
        Benchmark("soak", "mixed load on 4 devices: RSS, threads, stalls, errors", _soak.run),
    )
}


def stderr_progress(line: str) -> None:
    """Print one progress line to standard error, flushed at once."""
    print(line, file=sys.stderr, flush=True)


def run(
    names: Iterable[str] | None = None,
    *,
    quick: bool = False,
    loops: Iterable[str] | str | None = None,
    json_path: str | os.PathLike[str] | None = None,
    plot_path: str | os.PathLike[str] | None = None,
    progress: Progress = stderr_progress,
    scale: float = 1.0,
    seconds: float | None = None,
    backend: str = "sim",
    workload: str | None = None,
    model: str | None = None,
    on_results: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run benchmarks and return their results; blocks for seconds to minutes.

    Ctrl-C (SIGINT) cancels the benchmark running, which unwinds (devices closed,
    threads joined) and raises ``KeyboardInterrupt``; nothing is written then.

    Parameters
    ----------
    names:
        Benchmarks from ``BENCHMARKS``, in the order to run them; ``None`` or empty
        runs them all (with *quick*, all but those registered ``quick=False``).
    quick:
        Small sizes: the whole suite on all loops takes about a minute and a half.
    loops:
        ``"asyncio"``, ``"uvloop"``, ``"trio"``, a list of them, or ``"all"`` / ``None``
        for all three. Loops whose library is missing are skipped with a progress line.
    json_path:
        Write the results as JSON here; ``"-"`` writes them to stdout.
    plot_path:
        Draw a PNG here (needs matplotlib; checked before anything runs). Refused up
        front on ``native`` if every benchmark is simulator-only; if the run has nothing
        to draw all the same (every benchmark skipped), a progress line says so.
    progress:
        Called with one line per step; by default printed to stderr and flushed.
    scale:
        Multiplies every sample count and size (for smoke tests: e.g. ``0.05``).
    seconds:
        Run time per loop of timed benchmarks (``soak``); ``None``: their default.
    backend:
        ``"sim"`` (a fresh simulator per measurement) or ``"native"`` (the ``acl``
        module); benchmarks that need the simulator are skipped on ``native``.
    workload:
        The device work (``"sim-kernel"`` or ``"memset"``; ``None``: the runtime's
        default); each result's ``workload`` says what ran.
    model:
        An offline model's file for ``model`` (``None``: a registered simulated one).
    on_results:
        Called with the results before any file is written (the command line prints
        its table there), so that a write failing at the end loses nothing shown.

    Raises
    ------
    CliError
        Naming the file, if the JSON or the plot cannot be written (a full disk): after
        ``on_results``, and after the other file was written.

    Returns
    -------
    dict
        ``machine`` (where it ran), ``config`` (what ran, total seconds),
        ``benchmarks`` (name to result: ``title``, ``columns``, ``rows``, ``checks``,
        ``notes``, ``params``, ``seconds``) and ``skipped`` (name to reason).
    """
    selected = _select_benchmarks(names, quick)
    if plot_path is not None and backend == "native":
        _check_something_runs_native(selected)
    wanted, unavailable = _select_loops(loops)
    if plot_path is not None and importlib.util.find_spec("matplotlib") is None:
        raise RuntimeError("--plot needs matplotlib: pip install matplotlib (or 'aclasync[plot]')")
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number above 0, got {scale!r}")
    for loop, reason in unavailable.items():
        progress(f"loop {loop} skipped: {reason}")
    if not wanted:
        raise RuntimeError("none of the requested event loops is available")
    if seconds is not None and not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds!r}")
    if backend not in ("sim", "native"):
        raise ValueError(f"backend must be 'sim' or 'native', got {backend!r}")
    target = Target(backend=backend, workload=workload, model=model)
    cfg = BenchConfig(
        quick=quick,
        loops=wanted,
        progress=progress,
        scale=scale,
        seconds=seconds,
        target=target,
    )
    started = time.perf_counter()
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    machine = describe_machine()
    benchmarks: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for name in selected:
        progress(f"{name}: {BENCHMARKS[name].summary}")
        if target.native and not runs_native(BENCHMARKS[name]):
            reason = "needs the simulator (acl.sim); not run on the native backend"
            progress(f"{name}: {reason}")
            skipped[name] = reason
            continue
        begun = time.perf_counter()
        try:
            result = BENCHMARKS[name].fn(cfg)
        except Skip as exc:
            progress(f"{name}: {exc}")
            skipped[name] = str(exc)
            continue
        result["seconds"] = time.perf_counter() - begun
        benchmarks[name] = result
        progress(f"{name}: done in {result['seconds']:.1f} s")
    results: dict[str, Any] = {
        "machine": machine,
        "config": {
            "benchmarks": list(selected),
            "quick": quick,
            "loops": list(wanted),
            "unavailable_loops": unavailable,
            "scale": scale,
            "backend": describe_backend(backend),
            "workload": workload,
            "model": model,
            "started": stamp,
            "seconds": time.perf_counter() - started,
        },
        "benchmarks": benchmarks,
        "skipped": skipped,
    }
    if on_results is not None:
        on_results(results)
    _write_files(results, json_path, plot_path, progress)
    return results


def _write_files(
    results: dict[str, Any],
    json_path: str | os.PathLike[str] | None,
    plot_path: str | os.PathLike[str] | None,
    progress: Progress,
) -> None:
    """Write the JSON, then draw the plot; one that fails does not stop the other, and
    is raised (``CliError`` naming the file) once both were tried."""
    failed: list[str] = []
    if json_path is not None:
        try:
            progress(f"wrote the results to {write_json(results, json_path)}")
        except CliError as exc:
            failed.append(str(exc))
    if plot_path is not None and not has_charts(results):  # all skipped: keep the table
        progress(f"nothing to plot: no benchmark produced chartable rows; {plot_path} not written")
    elif plot_path is not None:
        try:
            plot(results, plot_path)
        except OSError as exc:
            failed.append(f"cannot write {os.fspath(plot_path)}: {exc.strerror or exc}")
        else:
            progress(f"wrote {plot_path}")
    if failed:
        raise CliError("; ".join(failed))


def runs_native(bench: Benchmark) -> bool:
    """Whether *bench* runs on the native backend: its module says so (``RUNS_NATIVE``).

    A benchmark that drives ``acl.sim`` leaves it out, and is skipped there with one line.
    """
    return bool(getattr(sys.modules[bench.fn.__module__], "RUNS_NATIVE", False))


def _check_something_runs_native(selected: tuple[str, ...]) -> None:
    """Refuse ``--plot`` on the native backend when every benchmark in *selected* needs
    the simulator: each would be skipped, and nothing plotted."""
    if not any(runs_native(BENCHMARKS[name]) for name in selected):
        raise RuntimeError(
            f"--plot has nothing to plot: the native backend skips {', '.join(selected)} "
            "(simulator only)"
        )


def _select_benchmarks(names: Iterable[str] | None, quick: bool) -> tuple[str, ...]:
    if isinstance(names, str):
        names = [names]
    chosen = list(dict.fromkeys(names or ()))
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        raise ValueError(
            f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}"
        )
    return tuple(chosen) or tuple(name for name, b in BENCHMARKS.items() if b.quick or not quick)


def _select_loops(loops: Iterable[str] | str | None) -> tuple[tuple[str, ...], dict[str, str]]:
    if loops is None or loops == "all":
        names = list(LOOPS)
    elif isinstance(loops, str):
        names = [loops]
    else:
        names = list(dict.fromkeys(loops))
        if "all" in names:
            names = list(LOOPS)
    unknown = [name for name in names if name not in LOOPS]
    if unknown:
        raise ValueError(f"unknown loop(s) {', '.join(unknown)}; choose from {', '.join(LOOPS)}")
    unavailable = {name: why for name in names if (why := loop_unavailable(name)) is not None}
    return tuple(name for name in names if name not in unavailable), unavailable
