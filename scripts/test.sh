#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run): the system packages the build needs
# (scripts/setup-deps.sh, a no-op when they are there), then every test.
#   ./scripts/test.sh                 # everything
#   ./scripts/test.sh -p quietwatt    # extra arguments go to `cargo test`
# Some tests need root (FUSE for the emulator, BPF and system-wide perf events for the
# in-kernel mechanisms); without it they fail and say why, they never pass silently.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh
exec cargo test --workspace --locked "$@"
