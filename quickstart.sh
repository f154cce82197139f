#!/usr/bin/env bash
# Sets up quietwatt on a fresh Debian machine and measures the energy of a command.
#   ./quickstart.sh                 # measures a built-in 2-second busy loop
#   ./quickstart.sh make -j2        # measures your command
# It also installs the Python package (`import quietwatt`) into .venv.
# Where this machine has no RAPL (a VM, CI), it measures against quietwatt's built-in
# emulator and says so in a banner.
set -euo pipefail
cd "$(dirname "$0")"

# A C compiler, and clang, libelf, zlib headers and pkg-config for the BPF sampler
# (--mechanism ebpf); nothing when they are there.
./scripts/setup-deps.sh
if ! command -v cargo >/dev/null; then
  echo "quickstart: Rust is missing: install it with rustup (https://rustup.rs), then re-run" >&2
  exit 1
fi

cargo build --release --locked -p quietwatt-cli
# The Python package (import quietwatt) in .venv; the CLI does not need it.
if ./scripts/setup-python.sh >/dev/null; then
  echo "quickstart: the Python package is installed in .venv: .venv/bin/python -c 'import quietwatt'" >&2
else
  echo "quickstart: the Python package was not installed (see above); the command-line tool works without it" >&2
fi
if [ $# -eq 0 ]; then
  set -- sh -c 'end=$(($(date +%s) + 2)); while [ "$(date +%s)" -lt "$end" ]; do :; done'
fi
exec target/release/quietwatt --emulate auto run -- "$@"
