#!/bin/bash
# The estimate against the load-following emulator's truth (docs/estimate.md): calibrate on
# `follow=10:5`, then estimate a 3 s spinning shell on an empty root, against that emulator and
# against one drawing 8 W per busy CPU, which the model does not describe. Root (FUSE). Idle host.
#   sudo scripts/estimate-truth.sh target/debug/quietwatt
set -e
Q=${1:?usage: scripts/estimate-truth.sh QUIETWATT_BINARY}
W=$(mktemp -d)
mkdir -p $W/e5 $W/e8 $W/empty
$Q emulate $W/e5 --cpus-per-socket 2 --power follow=10:5 >/dev/null 2>&1 & P5=$!
$Q emulate $W/e8 --cpus-per-socket 2 --power follow=10:8 >/dev/null 2>&1 & P8=$!
sleep 2
$Q --root $W/e5 calibrate -o $W/model.json 2>&1 | tail -6
run() { # emulator
  F=$1/sys/class/powercap/intel-rapl:0/energy_uj
  $Q --root $W/empty run --json --power-model $W/model.json -- sh -c 'a=$(cat "$1"); ta=$(date +%s%N); i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done; b=$(cat "$1"); tb=$(date +%s%N); echo "$a $b $ta $tb" > "$2"' sh $F $W/truth > $W/run.json 2>/dev/null
  python3 - $W/run.json $W/truth <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); a,b,ta,tb=map(float,open(sys.argv[2]).read().split())
p=[x for x in d["domains"] if x["domain"]=="package"][0]
t=(b-a)/1e6; span=(tb-ta)/1e9
print(f"estimate {p['energy_j']:.3f} ± {p['uncertainty_j']:.3f} J over {d['duration_s']:.3f} s; truth {t:.3f} J over the shell's {span:.3f} s; error {p['energy_j']-t:+.3f} J ({(p['energy_j']-t)/t*100:+.2f} %)")
PY
}
echo "--- 5 W per CPU (described):"; run $W/e5
echo "--- 8 W per CPU (not described):"; run $W/e8
kill $P5 $P8; sleep 1; umount $W/e5 $W/e8 2>/dev/null || true
