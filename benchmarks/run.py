"""Run the aclasync benchmark suite: ``python benchmarks/run.py [NAMES] [--quick] ...``.

A thin wrapper over ``aclasync._cli._bench.run`` (the same runner as ``aclasync bench``):
progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import sys

from aclasync._cli._bench import BENCHMARKS, format_table, run


def main(argv: list[str] | None = None) -> int:
    """Parse *argv*, run the chosen benchmarks and print the table; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run: {', '.join(BENCHMARKS)}"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (under a minute)")
    parser.add_argument(
        "--loop",
        default="all",
        choices=["asyncio", "uvloop", "trio", "all"],
        help="event loop to run on (default: all)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw a PNG (needs matplotlib)")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply every size (default 1.0)"
    )
    args = parser.parse_args(argv)
    try:
        results = run(
            args.names,
            quick=args.quick,
            loops=args.loop,
            json_path=args.json,
            plot_path=args.plot,
            scale=args.scale,
        )
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
