"""The ``aclasync`` command line: ``info``, ``demo``, ``bench``, ``trace`` and ``doctor``.

``main(argv)`` parses, dispatches and turns expected failures into one
``aclasync: error: ...`` line on stderr and a non-zero exit status. With
``ACLASYNC_DEBUG=1`` in the environment they propagate with their traceback instead.

Exit statuses: 0 done, 1 failed (including a command this machine cannot run: a
``--loop`` or ``--plot`` whose package is missing, a simulator-only option on
``ACLASYNC_BACKEND=native``; found before any work starts; ``doctor`` also when a
check or a runtime query fails), 2 usage error (the
subcommand's usage and one ``error:`` line), 130 interrupted (Ctrl-C: ``aclasync:
interrupted`` on stderr, every device closed and every aclasync thread joined), 141
standard output closed by its reader (``aclasync info --json | head -3``; nothing is
printed, as when a shell tool is ended by SIGPIPE).

Importing this package (the console script's first step) loads nothing of anyio's:
``aclasync._errors`` and ``aclasync._backend``, which import it, are imported inside
``main`` and the subcommands, so that a Ctrl-C while they load (the first ~70 ms of a
run) is reported by ``main`` as above rather than as a ``KeyboardInterrupt`` traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

if sys.version_info < (3, 11):  # anyio depends on the backport there
    from exceptiongroup import BaseExceptionGroup

from .._version import __version__
from ._common import STDOUT, CliError, message_stream
from ._loops import (
    GRACE_S,
    LOOP_CHOICES,
    arm_watchdog,
    disarm_watchdog,
    exit_now,
    require_loop,
)
from ._options import (
    MAX_COUNT,
    check_backend_variable,
    check_fits_in_memory,
    command_backend,
    device_count_option,
    float_option,
    int_option,
    native_runtime,
    output_option,
)

__all__ = ["build_parser", "main"]


#: The devices a demo or trace may use: those of the default simulator.
MAX_DEVICES = 8
#: The choices of ``--workload`` (``_workload.KINDS``, without importing it).
WORKLOADS = ("sim-kernel", "memset")
#: Longest modelled kernel ``demo --kernel-us`` accepts: one minute.
MAX_KERNEL_US = 60e6
#: Memory per item a trace holds until it writes the file (measured: about 8 KB of
#: peak RSS per item at 2,000 items).
TRACE_BYTES_PER_ITEM = 12_000
#: Memory a benchmark run may need per unit of ``--scale``: a full run of all five on
#: all loops peaked at 0.24 GB of RSS (``scale``'s 10,000 waiters under tracemalloc).
BENCH_BYTES_PER_SCALE = 400_000_000
#: Upper bound of ``bench --scale`` before the memory check.
MAX_SCALE = 1e6
#: Upper bound of ``bench --seconds`` (a day).
MAX_SOAK_SECONDS = 86_400.0

_SIGPIPE_STATUS = 141
_INTERRUPTED_STATUS = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with *argv* (default: ``sys.argv[1:]``); return the exit status.

    Blocks until the subcommand has finished, or until Ctrl-C has unwound it.
    """
    before = set(threading.enumerate())
    if sys.stdout is None:  # started with its standard output closed: nowhere to answer
        _say("aclasync: error: standard output is closed")
        return 1
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if args.command is None and extra == ["--"]:  # only the end of options: no COMMAND
            extra = []
        if extra:  # before a missing COMMAND: `aclasync --bogus` names --bogus
            getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
        if args.command is None:
            parser.error("the following arguments are required: COMMAND")
        status: int = args.handler(args)
        sys.stdout.flush()  # a reader that went away is found here, not at exit
        return status
    except SystemExit:
        raise
    except BaseException as exc:  # sorted below; a bug re-raises with its traceback
        return _failure_status(exc, before)
    finally:
        disarm_watchdog()


def _failure_status(exc: BaseException, before: set[threading.Thread]) -> int:
    leaves = _leaves(exc)
    if _interrupted(exc):
        arm_watchdog()
        _say("aclasync: interrupted")
        if not _join_new_threads(before, time.monotonic() + GRACE_S - 0.5):
            # Python would wait for them at exit, past the promised bound: leave now.
            exit_now(why="clean-up timed out")
        return _INTERRUPTED_STATUS
    if any(isinstance(leaf, BrokenPipeError) for leaf in leaves):
        # The reader went away: send what is still buffered nowhere, say nothing.
        with contextlib.suppress(OSError, ValueError):  # no file descriptor: nothing to do
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return _SIGPIPE_STATUS
    from .._errors import AclasyncError

    # Exceptions that are the user's or the environment's, not aclasync bugs.
    expected = (CliError, AclasyncError, OSError, RuntimeError, ValueError)
    if not all(isinstance(leaf, expected) for leaf in leaves) or _debug():
        raise exc  # a bug, or asked for: the whole traceback
    for line in dict.fromkeys(_one_line(leaf) for leaf in leaves):  # each device's alike
        _say(f"aclasync: error: {line}")
    codes = [leaf.exit_code for leaf in leaves if isinstance(leaf, CliError)]
    return max(codes, default=1)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or *exc* itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _interrupted(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is *exc*, in its groups, or in their causes or
    contexts (an import that Ctrl-C stopped may raise ``RuntimeError`` from it)."""
    pending, seen = [exc], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt):
            return True
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


def _debug() -> bool:
    """Whether ``ACLASYNC_DEBUG`` asks for tracebacks: set to anything but empty, ``0``,
    ``false``, ``no`` or ``off`` (any case). Lenient, unlike ``ACLASYNC_SIM_STRICT``:
    it only chooses how an error already met is shown, so it never adds one."""
    flag = os.environ.get("ACLASYNC_DEBUG", "").strip().lower()
    return flag not in ("", "0", "false", "no", "off")


@contextlib.contextmanager
def _lazy_imports() -> Iterator[None]:
    """Around a subcommand's imports: after Ctrl-C, raise ``KeyboardInterrupt`` even if an
    import turned it into an error that does not name it (numpy's ``ImportError``)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield  # not Python's own handler to stand in for: leave it be
        return
    pressed = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        pressed.set()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    except Exception as exc:
        if pressed.is_set():
            raise KeyboardInterrupt from exc
        raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _join_new_threads(before: set[threading.Thread], deadline: float) -> bool:
    """Wait until *deadline* for the aclasync threads started since *before* to end;
    whether every one that the interpreter would wait for at exit did."""
    ended = True
    for thread in threading.enumerate():
        if thread in before or thread is threading.current_thread():
            continue
        if thread.daemon and not thread.name.startswith("aclasync"):
            continue  # an idle pool thread of anyio or trio: it ends on its own
        _join(thread, deadline)
        if thread.is_alive():
            _say(f"aclasync: thread {thread.name!r} is still running")
            ended = ended and thread.daemon
    return ended


def _join(thread: threading.Thread, deadline: float) -> None:
    """``thread.join`` until *deadline*; a thread the interrupt caught inside its
    ``start()`` may not have started yet (or never will): give it a moment."""
    for _ in range(20):
        try:
            thread.join(max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:  # "cannot join thread before it is started"
            time.sleep(0.01)


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr gone too: nothing more to do
        print(line, file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser; each subcommand sets ``handler`` and ``parser``.

    ``command`` is ``None`` when none is given: ``main`` makes that a usage error.
    """
    parser = argparse.ArgumentParser(
        prog="aclasync",
        description="Huawei Ascend pyACL with an async/await face, and its simulator.",
        epilog="ACLASYNC_BACKEND=sim|native chooses the backend for every subcommand.",
    )
    parser.add_argument("--version", action="version", version=f"aclasync {__version__}")
    # Not required=True: argparse would report a missing COMMAND before an unknown
    # option; main() checks both, in the other order.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    info = commands.add_parser("info", help="show the backend, devices, SoC and run mode")
    info.add_argument(
        "--backend",
        choices=("sim", "native"),
        default=None,
        help="default: $ACLASYNC_BACKEND, else native if `import acl` works, else sim",
    )
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    info.set_defaults(handler=_cmd_info, parser=info)

    demo = commands.add_parser("demo", help="run a concurrent multi-device pipeline")
    _add_devices(demo, default=4)
    demo.add_argument(
        "--items", type=int_option(1, MAX_COUNT), default=256, help="items (default 256)"
    )
    _add_loop(demo)
    demo.add_argument(
        "--kernel-us",
        type=float_option(high=MAX_KERNEL_US, zero_ok=True),
        default=5000.0,
        help="modelled kernel time in microseconds, 0 to 60e6 (default 5000)",
    )
    demo.add_argument(
        "--size",
        type=int_option(1, MAX_COUNT),
        default=64,
        help="matrix side length; memory-checked (default 64)",
    )
    _add_model(demo)
    _add_workload(demo)
    demo.set_defaults(handler=_cmd_demo, parser=demo)

    bench = commands.add_parser(
        "bench",
        help="run the benchmark suite",
        add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_argument(
        "-h", "--help", action=_BenchHelp, help="show this help, with the benchmarks, and exit"
    )
    bench.add_argument(
        "names", nargs="*", metavar="NAME", help="benchmarks to run (listed below; default all)"
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="small sizes, about 80 s for all; a smoke run: the targets are for full runs",
    )
    bench.add_argument("--loop", choices=(*LOOP_CHOICES, "all"), default="all", help="default: all")
    bench.add_argument(
        "--json",
        metavar="FILE",
        type=output_option(stdout_ok=True),
        help="write the results as JSON ('-': stdout, the table then goes to stderr)",
    )
    bench.add_argument(
        "--plot",
        metavar="FILE",
        type=output_option(stdout_ok=False),
        help="draw a PNG (needs matplotlib)",
    )
    bench.add_argument(
        "--scale",
        type=float_option(high=MAX_SCALE),
        default=1.0,
        help="multiply sample counts and sizes (e.g. 0.05 for a smoke run; default 1)",
    )
    bench.add_argument(
        "--seconds",
        type=float_option(high=MAX_SOAK_SECONDS),
        help="run time per loop of timed benchmarks (soak; default: 30, or 3 with --quick)",
    )
    _add_workload(bench)
    bench.add_argument(
        "--model",
        metavar="PATH",
        type=_model_file,
        help="bench model: run this offline model (.om) instead of a registered simulated one",
    )
    bench.set_defaults(handler=_cmd_bench, parser=bench)

    trace = commands.add_parser("trace", help="write a Chrome/Perfetto timeline of a demo run")
    _add_devices(trace, default=2)
    trace.add_argument(
        "--items",
        type=int_option(1, MAX_COUNT),
        default=16,
        help="items; memory-checked (default 16)",
    )
    trace.add_argument(
        "--out",
        type=output_option(stdout_ok=True),
        default="aclasync-trace.json",
        help="trace file, '-' for stdout (default aclasync-trace.json)",
    )
    _add_loop(trace)
    _add_model(trace)
    _add_workload(trace)
    trace.set_defaults(handler=_cmd_trace, parser=trace)

    doctor = commands.add_parser(
        "doctor",
        help="check the runtime this host has against what aclasync relies on; report",
    )
    doctor.add_argument(
        "--backend",
        choices=("sim", "native"),
        default=None,
        help="default: $ACLASYNC_BACKEND, else native if `import acl` works, else sim",
    )
    doctor.add_argument(
        "--json",
        metavar="FILE",
        type=output_option(stdout_ok=True),
        help="write the report as JSON ('-': stdout, the text then goes to stderr)",
    )
    doctor.add_argument(
        "--device",
        type=int_option(0, MAX_COUNT),
        default=0,
        help="the device to check (default 0)",
    )
    doctor.set_defaults(handler=_cmd_doctor, parser=doctor)
    return parser


class _BenchHelp(argparse.Action):
    """``bench --help``: the usual help, then every benchmark with its one-line summary.

    The list is built only when asked for, so that other commands need not import the
    benchmark suite.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from ._bench import BENCHMARKS

        width = max(len(name) for name in BENCHMARKS)
        parser.epilog = "benchmarks (a full run takes them all, in this order):\n" + "\n".join(
            f"  {name:<{width}}  {bench.summary}" for name, bench in BENCHMARKS.items()
        )
        parser.print_help()
        parser.exit()


def _add_devices(parser: argparse.ArgumentParser, *, default: int) -> None:
    parser.add_argument(
        "--devices",
        type=int_option(1, MAX_DEVICES),
        default=None,
        help=f"devices, 1 to {MAX_DEVICES} (default {default}; native: at most what it has)",
    )
    parser.set_defaults(default_devices=default)


def _add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        type=_model_file,
        help="compute with an offline model: PATH's (a .om), or without PATH a "
        "simulated model registered for the run (simulator only)",
    )


def _add_workload(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        default=None,
        help="device work: simulated kernels (default where acl.sim exists) or "
        "acl.rt.memset_async, pyACL alone (default on other native backends)",
    )


def _model_file(text: str) -> str:
    """An argparse type: an existing file (or ``""``, --model without PATH)."""
    if text and not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{text} is not a file")
    return text


def _add_loop(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loop", choices=LOOP_CHOICES, default="asyncio", help="event loop (default asyncio)"
    )


def _cmd_info(args: argparse.Namespace) -> int:
    with _lazy_imports():
        from ._info import run_info

    if args.backend is None:
        check_backend_variable(args.parser)
    return run_info(args.backend, args.json)


def _cmd_demo(args: argparse.Namespace) -> int:
    with _lazy_imports():
        from ._demo import demo_bytes, run_demo

    _check_compute_options(args)
    backend = command_backend(args.parser)
    _check_workload(args, backend)
    devices = device_count_option(args.devices, args.default_devices, backend)
    check_fits_in_memory(
        f"--size {args.size} on {devices} device(s)",
        demo_bytes(devices, args.size),
        args.parser,
    )
    require_loop(args.loop)
    return run_demo(
        devices=devices,
        items=args.items,
        loop=args.loop,
        kernel_us=args.kernel_us,
        size=args.size,
        out=sys.stdout,
        model=args.model == "",
        model_path=args.model or None,
        workload=args.workload,
        backend=backend,
    )


def _check_compute_options(args: argparse.Namespace) -> None:
    """Refuse ``--model`` with ``--workload``: each chooses the compute step (usage error)."""
    if args.model is not None and args.workload is not None:
        args.parser.error("--model and --workload both choose the compute step: give one")


def _check_workload(args: argparse.Namespace, backend: str) -> None:
    """Refuse, before any work, what needs the simulator on the native backend."""
    if backend != "native":
        return
    if getattr(args, "workload", None) == "sim-kernel" and not _native_has_sim():
        raise CliError(
            "--workload sim-kernel runs simulated kernels (acl.sim.launch_kernel), which "
            "CANN's acl does not have; on the native backend the work is memset"
        )
    if getattr(args, "model", None) == "":
        raise CliError(
            f"aclasync {args.command} --model without PATH registers a simulated model "
            "(acl.sim.register_model), which CANN's acl does not have: give --model PATH "
            "to an offline model (.om)"
        )


def _native_has_sim() -> bool:
    """Whether the native ``acl`` is aclasync's non-strict simulator (it has ``acl.sim``:
    simulated kernels run there); False if it is missing, which a later step reports."""
    from .._backend import native_acl
    from .._errors import BackendUnavailableError

    try:
        return hasattr(native_acl(), "sim")
    except BackendUnavailableError:
        return False


def _cmd_bench(args: argparse.Namespace) -> int:
    with _lazy_imports():
        from ._bench import BENCHMARKS, format_table, run

    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        args.parser.error(
            f"unknown benchmark(s): {', '.join(unknown)}; valid names: {', '.join(BENCHMARKS)}"
        )
    if args.model is not None and args.names and "model" not in args.names:
        args.parser.error("--model is for bench model, which is not among the benchmarks named")
    uses_workload = [name for name in BENCHMARKS if BENCHMARKS[name].workload]
    if args.workload is not None and args.names and not set(args.names) & set(uses_workload):
        args.parser.error(
            "--workload is for the benchmarks that time device work "
            f"({', '.join(uses_workload)}), none of which is named"
        )
    if (
        args.json not in (None, STDOUT)
        and args.plot is not None
        and os.path.realpath(args.json) == os.path.realpath(args.plot)
    ):
        args.parser.error("--json and --plot name the same file")
    check_fits_in_memory(f"--scale {args.scale:g}", args.scale * BENCH_BYTES_PER_SCALE, args.parser)
    backend = command_backend(args.parser)
    _check_workload(args, backend)
    if backend == "native":
        native_runtime()  # no CANN here: one error line before any benchmark starts
    if args.loop != "all":
        require_loop(args.loop)
    if args.plot is not None:
        if importlib.util.find_spec("matplotlib") is None:
            raise CliError("--plot needs matplotlib: pip install 'aclasync[plot]'")
        from ._bench._plot import check_format

        try:
            check_format(args.plot)
        except RuntimeError as exc:
            args.parser.error(str(exc))
    run(
        args.names,
        quick=args.quick,
        loops=args.loop,
        json_path=args.json,
        plot_path=args.plot,
        scale=args.scale,
        seconds=args.seconds,
        backend=backend,
        workload=args.workload,
        model=args.model,
        # Before the files are written: a write that fails at the end loses no result.
        on_results=lambda results: print(
            format_table(results), file=message_stream(args.json), flush=True
        ),
    )
    return 0


def _cmd_trace(args: argparse.Namespace) -> int:
    with _lazy_imports():
        from ._trace import run_trace

    _check_compute_options(args)
    check_fits_in_memory(f"--items {args.items}", args.items * TRACE_BYTES_PER_ITEM, args.parser)
    backend = command_backend(args.parser)
    _check_workload(args, backend)
    devices = device_count_option(args.devices, args.default_devices, backend)
    require_loop(args.loop)
    return run_trace(
        devices=devices,
        items=args.items,
        out_path=args.out,
        loop=args.loop,
        out=message_stream(args.out),
        backend=backend,
        model=args.model == "",
        model_path=args.model or None,
        workload=args.workload,
    )


def _cmd_doctor(args: argparse.Namespace) -> int:
    with _lazy_imports():
        from ._doctor import run_doctor, stderr

    if args.backend is None:
        check_backend_variable(args.parser)
    return run_doctor(args.backend, args.json, args.device, message_stream(args.json), stderr)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
