#!/usr/bin/env bash
# quietwatt serve's own cost, polling against sampling in the kernel, side by side:
# the exporter on the same counters (the in-kernel stand-ins of CPU 0: cpu-clock as
# "package", task-clock as "core"; `--stand-in-events`, since perf_event_open cannot
# reach the emulator's PMU) through -m perf (one polled session per domain), -m
# perf-ring and -m ebpf (one session drained once a second), at each --freq.
#   benches/serve_cpu.sh [SECONDS] [ROUNDS] [FREQ...]   # default 30 s, 3 rounds, 10 and 1000 Hz
# Each window: the exporter started, 3 s to settle, one scrape, then SECONDS with
# no scrape at all, measured from /proc (every thread's CPU time from schedstat, in
# ns, and voluntary context switches: its wake-ups), then one scrape; the readings
# a second come from quietwatt_samples_total. Variants are interleaved, their
# order rotated each round. Needs root (system-wide perf events, BPF) and builds
# the release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
freqs=("$@")
[ ${#freqs[@]} -gt 0 ] || freqs=(10 1000)
cargo build -q --release --locked -p quietwatt-cli
q=$PWD/target/release/quietwatt
work=$(mktemp -d /tmp/qw-serve-cpu-XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# CPU ns and voluntary switches of every thread of $1.
usage() {
  local cpu=0 vol=0 t
  for t in /proc/"$1"/task/*; do
    cpu=$((cpu + $(cut -d' ' -f1 "$t/schedstat")))
    vol=$((vol + $(awk '/^voluntary_ctxt_switches/{print $2}' "$t/status")))
  done
  echo "$cpu $vol"
}

samples() { curl -s "$1/metrics" | awk '/^quietwatt_samples_total /{print $2}'; }

# Starts serve -m $1 at $2 Hz into $log and sets pid and addr; false (and says
# why on stderr) when it did not start serving within a minute.
start() {
  "$q" serve --listen 127.0.0.1:0 -m "$1" --stand-in-events -f "$2" 2>"$log" &
  pid=$!
  # A loaded machine can take seconds to load and verify the BPF program.
  for _ in $(seq 600); do
    # The whole address: stderr is written in pieces.
    grep -q "serving http.*/metrics" "$log" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  addr=$(grep -o "http://[0-9.:]*" "$log" | head -1)
  [ -n "$addr" ] && return 0
  if kill -0 "$pid" 2>/dev/null; then
    echo "serve -m $1 at $2 Hz: no address after 60 s: $(cat "$log")" >&2
    kill -KILL "$pid"; wait "$pid" 2>/dev/null || true
  else
    wait "$pid"; echo "serve -m $1 at $2 Hz exited with status $? before serving: $(cat "$log")" >&2
  fi
  pid=""
  return 1
}

# One window of variant $1 (perf, perf-ring, ebpf) at $2 Hz: "cpu_ns vol readings secs".
window() {
  local m=$1 f=$2 log=$work/serve.log addr
  # One retry, said on stderr: the figures are of a serve that started.
  start "$m" "$f" || start "$m" "$f" || exit 1
  sleep 3
  local n0 n1 u0 u1 t0 t1
  n0=$(samples "$addr")
  u0=$(usage "$pid"); t0=$(date +%s%N)
  sleep "$secs"
  u1=$(usage "$pid"); t1=$(date +%s%N)
  n1=$(samples "$addr")
  kill -TERM "$pid"; wait "$pid" || true; pid=""
  set -- $u0 $u1
  echo "$(( $3 - $1 )) $(( $4 - $2 )) $(( ${n1%.*} - ${n0%.*} )) $(( t1 - t0 ))"
}

variants=(perf perf-ring ebpf)
echo "serve_cpu: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); ${secs} s windows, $rounds rounds, --freq ${freqs[*]}; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); $(uname -r)" >&2
results=$work/results
: >"$results"
for r in $(seq "$rounds"); do
  for f in "${freqs[@]}"; do
    for k in 0 1 2; do
      m=${variants[$(( (k + r) % 3 ))]}
      echo "$m $f $(window "$m" "$f")" >>"$results"
      echo "round $r: $m at $f Hz done" >&2
    done
  done
done
echo "| --freq | mechanism | sessions | CPU % of one core (mean, min - max) | wake-ups/s (mean, min - max) | readings/s | CPU µs per reading |"
echo "|---:|---|---|---:|---:|---:|---:|"
for f in "${freqs[@]}"; do
  for m in "${variants[@]}"; do
    awk -v m="$m" -v f="$f" '
      $1 == m && $2 == f {
        s = $6 / 1e9; c = $3 / 1e9 / s * 100; w = $4 / s; n += 1
        cs += c; ws += w; rs += $5 / s; us += ($5 > 0 ? $3 / 1e3 / $5 : 0)
        if (n == 1 || c < cmin) cmin = c; if (n == 1 || c > cmax) cmax = c
        if (n == 1 || w < wmin) wmin = w; if (n == 1 || w > wmax) wmax = w
      }
      END {
        if (n == 0) exit
        sessions = (m == "perf") ? "2 polled (one per domain)" : "1, drained at 1 Hz"
        printf "| %s | %s | %s | **%.3f** (%.3f - %.3f) | **%.2f** (%.2f - %.2f) | %.1f | %.2f |\n",
          f, m, sessions, cs / n, cmin, cmax, ws / n, wmin, wmax, rs / n, us / n
      }' "$results"
  done
done
