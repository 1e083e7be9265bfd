"""``python -m aclasync``: the same command line as the ``aclasync`` console script."""

from __future__ import annotations

import sys

from ._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
