#!/usr/bin/env bash
# The Python package in a virtual environment at .venv: the test requirements, then
# `pip install .` (maturin builds the native module from crates/quietwatt-py).
#   ./scripts/setup-python.sh           # creates or updates .venv
# Prints the interpreter to use (.venv/bin/python) on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
  echo "setup-python: quietwatt's Python package needs CPython 3.9 or later (python3 is $(python3 --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv || {
    echo "setup-python: cannot create .venv: install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  }
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r python/requirements-test.txt
.venv/bin/python -m pip install --quiet --disable-pip-version-check .
echo .venv/bin/python
