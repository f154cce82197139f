#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run): the system packages the build needs
# (scripts/setup-deps.sh, a no-op when they are there), every Rust test, then the
# Python package built into .venv (scripts/setup-python.sh) and its tests (pytest).
#   ./scripts/test.sh                 # everything
#   ./scripts/test.sh -p quietwatt    # extra arguments go to `cargo test`
# Some tests need root (FUSE for the emulator, BPF and system-wide perf events for the
# in-kernel mechanisms); without it they fail and say why, they never pass silently.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh
rust=0
# --no-fail-fast: every test binary runs, so one failure does not hide others.
cargo test --workspace --locked --no-fail-fast "$@" || rust=$?
# The Python tests read recordings that the CLI writes: the debug build `cargo test`
# made for the CLI's own tests (built here only when a filter left it out).
[ -x target/debug/quietwatt ] || cargo build --locked -p quietwatt-cli
python=0
./scripts/setup-python.sh >/dev/null &&
  QUIETWATT_BIN="$PWD/target/debug/quietwatt" .venv/bin/python -m pytest python/tests -p no:cacheprovider || python=$?
if [ "$rust" -ne 0 ] || [ "$python" -ne 0 ]; then
  echo "test.sh: FAILED (cargo test: exit $rust; pytest: exit $python)" >&2
  exit 1
fi
echo "test.sh: every Rust and Python test passed" >&2
