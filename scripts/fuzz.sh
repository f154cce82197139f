#!/usr/bin/env bash
# Fuzzes the parsers that read untrusted bytes, each for a set time (not in CI's:
# cargo-fuzz needs a nightly toolchain and the runs take minutes):
#   ./scripts/fuzz.sh            # every target, 60 s each
#   ./scripts/fuzz.sh 300 http_head
# Targets (fuzz/fuzz_targets): http_head (serve's request heads and basic auth),
# recording (trace's and read_recording's CSV, JSON Lines, Parquet and events
# readers), kernel_text (sysfs and perf text, frequencies). The corpus is seeded
# with real inputs: a recording in each format from the emulator, HTTP requests.
# Prints each target's executions and whether it found a crash (saved under
# fuzz/artifacts/TARGET/); exits 1 if any did.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(http_head recording kernel_text)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal

# Seeds.
mkdir -p fuzz/corpus/http_head fuzz/corpus/recording fuzz/corpus/kernel_text
printf 'GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\nAuthorization: Basic dTpw\r\n\r\n' > fuzz/corpus/http_head/get
printf 'HEAD / HTTP/1.0\n\n' > fuzz/corpus/http_head/head
for t in "power/events/energy-pkg.scale:2.3283064365386962890625e-10" "event=0x02" "config:0-7" "0-3,8,10-11" "2kHz"; do
  printf '%s' "${t#*:}" > "fuzz/corpus/kernel_text/$(echo "$t" | tr -c 'a-z0-9' _)"
done
if [ -x target/debug/quietwatt ] || cargo build -q -p quietwatt-cli; then
  for ext in csv jsonl parquet; do
    target/debug/quietwatt --emulate on record -o "fuzz/corpus/recording/seed.$ext" --duration 0.2 2>/dev/null || true
  done
  target/debug/quietwatt --emulate on record -o fuzz/corpus/recording/ev.csv --events faults --duration 0.2 2>/dev/null || true
fi

failed=0
for t in "${targets[@]}"; do
  log=$(mktemp)
  if cargo +nightly fuzz run -O "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1; then
    verdict="no crash"
  else
    verdict="CRASH (see fuzz/artifacts/$t/)"; failed=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  echo "fuzz: $t: $execs executions in ${secs} s, $verdict"
  [ "$verdict" = "no crash" ] || tail -30 "$log"
  rm -f "$log"
done
exit $failed
