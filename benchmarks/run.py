"""Run the aclasync benchmark suite: ``python benchmarks/run.py [NAMES] [--quick] ...``.

The same command as ``aclasync bench`` (same options, checks and exit statuses):
progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import sys

from aclasync._cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
