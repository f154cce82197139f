#!/usr/bin/env bash
# Regenerates docs/images/profile-flamegraph.png, the README's energy flame graph:
# a real `quietwatt profile` of the lab's ep kernel on the built-in emulator (its
# title says EMULATED RAPL: this project's machines have no RAPL), the SVG
# rendered by headless Chromium (Debian: apt-get install chromium).
#   scripts/readme-flamegraph.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v chromium >/dev/null || { echo "readme-flamegraph.sh: needs chromium (apt-get install chromium)" >&2; exit 1; }
# The debug build: unoptimised, its functions keep their frames and frame
# pointers, so the graph shows ep_block's callees (the release build inlines
# them and its chains are cut: `profile` says so).
cargo build --locked -p quietwatt-cli
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# `quietwatt` on PATH, so that the title names the command as a user types it.
ln -s "$PWD/target/debug/quietwatt" "$tmp/quietwatt"
PATH="$tmp:$PATH" quietwatt --emulate on profile -o "$tmp/ep.svg" -- \
  quietwatt bench workload ep --size 4000000 --threads 2
# The whole graph: the window as tall as the SVG says it is.
height=$(grep -o 'height="[0-9]*"' "$tmp/ep.svg" | head -1 | tr -dc 0-9)
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="1200,${height:-600}" --screenshot="$PWD/docs/images/profile-flamegraph.png" \
  "file://$tmp/ep.svg" 2>/dev/null
echo "wrote docs/images/profile-flamegraph.png" >&2
