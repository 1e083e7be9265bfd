"""The ``aclasync`` command line: ``info``, ``demo``, ``bench`` and ``trace``.

``main(argv)`` parses, dispatches and turns expected failures into one
``aclasync: error: ...`` line on stderr and a non-zero exit status. With
``ACLASYNC_DEBUG=1`` in the environment they propagate with their traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from .._errors import AclasyncError
from .._version import __version__
from ._common import LOOP_CHOICES, CliError

__all__ = ["build_parser", "main"]

#: Exceptions that are the user's or the environment's, not aclasync bugs.
_EXPECTED = (CliError, AclasyncError, OSError, RuntimeError, ValueError)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with *argv* (default: ``sys.argv[1:]``); return the exit status.

    Blocks until the subcommand has finished.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except KeyboardInterrupt:
        print("aclasync: interrupted", file=sys.stderr)
        return 130
    except _EXPECTED as exc:
        if os.environ.get("ACLASYNC_DEBUG"):
            raise  # the whole traceback, for telling a bug from a usage error
        print(f"aclasync: error: {_one_line(exc)}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, CliError) else 1
    return status


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser, each subcommand's handler set as ``handler``."""
    parser = argparse.ArgumentParser(
        prog="aclasync",
        description="Huawei Ascend pyACL with an async/await face, and its simulator.",
    )
    parser.add_argument("--version", action="version", version=f"aclasync {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = commands.add_parser("info", help="show the backend, devices, SoC and run mode")
    info.add_argument(
        "--backend",
        choices=("sim", "native"),
        default=None,
        help="default: $ACLASYNC_BACKEND, else native if `import acl` works, else sim",
    )
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    info.set_defaults(handler=_cmd_info)

    demo = commands.add_parser("demo", help="run a concurrent multi-device pipeline (simulator)")
    demo.add_argument("--devices", type=int, default=4, help="simulated devices (default 4)")
    demo.add_argument("--items", type=int, default=256, help="items to process (default 256)")
    _add_loop(demo)
    demo.add_argument(
        "--kernel-us", type=float, default=5000.0, help="modelled kernel time (default 5000)"
    )
    demo.add_argument("--size", type=int, default=64, help="matrix side length (default 64)")
    demo.set_defaults(handler=_cmd_demo)

    bench = commands.add_parser("bench", help="run the benchmark suite")
    bench.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default all)")
    bench.add_argument("--quick", action="store_true", help="small sizes, well under a minute")
    bench.add_argument("--loop", choices=(*LOOP_CHOICES, "all"), default="all", help="default: all")
    bench.add_argument("--json", metavar="FILE", help="write the results as JSON")
    bench.add_argument("--plot", metavar="FILE", help="draw a PNG (needs matplotlib)")
    bench.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply sample counts and sizes (e.g. 0.05 for a smoke run; default 1)",
    )
    bench.add_argument("--seconds", type=float, help="run time per loop of timed benchmarks (soak)")
    bench.set_defaults(handler=_cmd_bench)

    trace = commands.add_parser("trace", help="write a Chrome/Perfetto timeline of a demo run")
    trace.add_argument("--devices", type=int, default=2, help="simulated devices (default 2)")
    trace.add_argument("--items", type=int, default=16, help="items to process (default 16)")
    trace.add_argument("--out", default="aclasync-trace.json", help="default: aclasync-trace.json")
    _add_loop(trace)
    trace.set_defaults(handler=_cmd_trace)
    return parser


def _add_loop(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loop", choices=LOOP_CHOICES, default="asyncio", help="event loop (default asyncio)"
    )


def _cmd_info(args: argparse.Namespace) -> int:
    from ._info import run_info

    return run_info(args.backend, args.json)


def _cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    return run_demo(
        devices=args.devices,
        items=args.items,
        loop=args.loop,
        kernel_us=args.kernel_us,
        size=args.size,
        out=sys.stdout,
    )


def _cmd_bench(args: argparse.Namespace) -> int:
    from ._bench import BENCHMARKS, format_table, run

    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        raise CliError(
            f"unknown benchmark(s): {', '.join(unknown)}; valid names: {', '.join(BENCHMARKS)}",
            exit_code=2,
        )
    if not args.scale > 0:
        raise CliError(f"--scale must be > 0, got {args.scale}", exit_code=2)
    if args.seconds is not None and not args.seconds > 0:
        raise CliError(f"--seconds must be > 0, got {args.seconds}", exit_code=2)
    results: dict[str, Any] = run(
        args.names,
        quick=args.quick,
        loops=args.loop,
        json_path=args.json,
        plot_path=args.plot,
        scale=args.scale,
        seconds=args.seconds,
    )
    print(format_table(results))
    return 0


def _cmd_trace(args: argparse.Namespace) -> int:
    from ._trace import run_trace

    return run_trace(
        devices=args.devices, items=args.items, out_path=args.out, loop=args.loop, out=sys.stdout
    )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
