"""Medians of ``over`` across ``sync-modes`` runs: ``python benchmarks/combine.py A.json ...``.

Each file is the ``--json`` output of ``aclasync bench`` with ``sync-modes`` in it.
Prints a Markdown table (median per loop, mode and kernel length, each run in brackets)
and the worst median per loop and mode against the target (no verdict for quick runs).
The files must be distinct runs of one configuration: the same run twice, or runs whose
workload, loops or backend differ, are refused. Exit status 2 on bad input.
"""

from __future__ import annotations

import sys

from aclasync._cli._bench._combine import combine, format_markdown, load_runs


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 0 if argv else 2
    try:
        combined = combine(load_runs(argv))
    except ValueError as exc:
        print(f"combine: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(format_markdown(combined))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
