#!/usr/bin/env bash
# record's three formats side by side: the built-in emulator (4 domains), the same
# rate and length for each, ROUNDS interleaved rounds (csv, jsonl, parquet, csv, ...).
# Per format: bytes per sample (the file's size over the samples written, the
# metadata included) and the writer thread's CPU per sample (`--json`'s
# overhead.writer.cpu_ns over the samples), the median over the rounds.
#   benches/record_formats.sh [SECONDS] [HZ] [ROUNDS]   # default 20 s at 1000 Hz, 3 rounds
# Needs root (FUSE) and a release build (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
hz=${2:-1000}
rounds=${3:-3}
cargo build -q --release --locked -p quietwatt-cli
q=target/release/quietwatt
dir=$(mktemp -d /tmp/qw-formats-XXXXXX)
trap 'rm -rf "$dir"' EXIT
for r in $(seq "$rounds"); do
  for f in csv jsonl parquet; do
    "$q" --emulate on record -m powercap --freq "$hz" --duration "$secs" --json \
      -o "$dir/r.$f" >"$dir/$f.$r.json" 2>/dev/null
    stat -c %s "$dir/r.$f" >"$dir/$f.$r.size"
  done
done
python3 - "$dir" "$rounds" "$secs" "$hz" <<'EOF'
import json, statistics, sys
d, rounds, secs, hz = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"{rounds} rounds of {secs} s at {hz} Hz each, 4 domains (emulated powercap)\n")
print("| format | samples (median) | bytes / sample | writer CPU / sample (µs) | per round (µs) |")
print("|---|---:|---:|---:|---|")
for f in ("csv", "jsonl", "parquet"):
    bps, cpu, n = [], [], []
    for r in range(1, rounds + 1):
        j = json.load(open(f"{d}/{f}.{r}.json"))
        size = int(open(f"{d}/{f}.{r}.size").read())
        s = j["samples"]
        n.append(s)
        bps.append(size / s)
        cpu.append(j["overhead"]["writer"]["cpu_ns"] / s / 1000)
    each = " ".join(f"{c:.2f}" for c in cpu)
    print(f"| {f} | {statistics.median(n):.0f} | {statistics.median(bps):.1f} | {statistics.median(cpu):.2f} | {each} |")
EOF
