#!/usr/bin/env bash
# quietwatt serve's memory over a long run: the exporter against the emulator, scraped
# SCRAPE_HZ times a second for MINUTES minutes (with a wrap every few seconds: 16-bit
# counters), its resident set (VmRSS) and heap-ish (VmData) read every 10 s.
#   benches/serve_memory.sh [MINUTES] [SCRAPE_HZ]     # default 5 minutes, 20 Hz
#   SERVE_ARGS="--attribute process" CHURN=1 benches/serve_memory.sh 3
# SERVE_ARGS are added to serve's arguments; CHURN=1 starts a short-lived process
# with each scrape (a new pid each time: what per-process attribution must not
# remember forever). Prints a table (elapsed s, scrapes, VmRSS kB, VmData kB) and
# the growth from the first minute to the end. Needs root (FUSE; BPF for
# --attribute) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-5}
hz=${2:-20}
cargo build -q --release --locked -p quietwatt-cli
q=target/release/quietwatt
emu=$(mktemp -d /tmp/qw-serve-mem-XXXXXX)
"$q" emulate "$emu" --counter-bits 16 --esu 14 >/dev/null 2>&1 &
emu_pid=$!
# The emulator is up once its tree is mounted; serve once it has printed its
# address (a line written whole): up to 30 s each on a busy machine.
for _ in $(seq 300); do mountpoint -q "$emu" && break; sleep 0.1; done
# shellcheck disable=SC2086 # SERVE_ARGS is a list of arguments
"$q" --root "$emu" serve --listen 127.0.0.1:0 -m powercap --min-interval 0.1 ${SERVE_ARGS:-} 2>"$emu.log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; kill "$emu_pid" 2>/dev/null || true; wait 2>/dev/null || true; rmdir "$emu" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 300); do grep -q "serving http://.*/metrics" "$emu.log" 2>/dev/null && break; sleep 0.1; done
addr=$(grep -o "serving http://[0-9.:]*" "$emu.log" | head -1 | sed 's/^serving //')
[ -n "$addr" ] || { echo "serve did not start: $(cat "$emu.log")" >&2; exit 1; }
end=$(( $(date +%s) + minutes * 60 ))
scrapes=0
next=$(date +%s)
echo "| elapsed (s) | scrapes | VmRSS (kB) | VmData (kB) |"
echo "|---:|---:|---:|---:|"
start=$(date +%s)
first_rss=""
while [ "$(date +%s)" -lt "$end" ]; do
  curl -s -o /dev/null "$addr/metrics" && scrapes=$((scrapes + 1))
  if [ "${CHURN:-0}" = 1 ]; then sh -c 'i=0; while [ $i -lt 200 ]; do i=$((i+1)); done'; fi
  sleep "$(awk "BEGIN{print 1/$hz}")"
  now=$(date +%s)
  if [ "$now" -ge "$next" ]; then
    rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
    data=$(awk '/VmData/{print $2}' /proc/$pid/status)
    echo "| $((now - start)) | $scrapes | $rss | $data |"
    if [ -z "$first_rss" ] && [ $((now - start)) -ge 60 ]; then first_rss=$rss; fi
    next=$((now + 10))
  fi
done
rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
echo
echo "scrapes: $scrapes; VmRSS after the first minute: ${first_rss:-n/a} kB, at the end: $rss kB"
