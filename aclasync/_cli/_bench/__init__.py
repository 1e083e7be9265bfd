"""The aclasync benchmark suite, behind ``aclasync bench`` and ``benchmarks/run.py``.

``run()`` runs benchmarks from ``BENCHMARKS`` and returns a JSON-ready dict;
``format_table()`` renders it. See ``benchmarks/README.md`` for what each one measures.
"""

from __future__ import annotations

from ._report import format_table as format_table
from ._runner import BENCHMARKS as BENCHMARKS
from ._runner import Benchmark as Benchmark
from ._runner import run as run
from ._runner import stderr_progress as stderr_progress

__all__ = ["BENCHMARKS", "Benchmark", "format_table", "run", "stderr_progress"]
