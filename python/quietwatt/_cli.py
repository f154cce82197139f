"""The ``quietwatt`` command installed with the package (and ``python -m
quietwatt``): the Rust CLI itself, compiled into the native module, so that
``record``, ``serve``, ``compare`` and attribution need no cargo."""

from __future__ import annotations

import os
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> None:
    """Runs ``quietwatt`` with ``argv`` (default: this process's arguments) and
    exits with its status."""
    from ._quietwatt import cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    # The name the CLI prints in its usage lines.
    program = os.path.basename(sys.argv[0]) if argv is None and sys.argv and sys.argv[0] else "quietwatt"
    if program in ("__main__.py", "-c", "-m", ""):
        program = "quietwatt"
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(cli_main([program, *args], [sys.executable, "-m", "quietwatt"]))
