#!/bin/bash
# The estimate against the load-following emulator's truth (docs/estimate.md). Root (FUSE). Idle host.
#   sudo scripts/estimate-truth.sh target/debug/quietwatt
# 1. Busy CPUs: calibrate on `follow=10:5`, then estimate a 3 s spinning shell on an empty root,
#    against that emulator and against one drawing 8 W per busy CPU, which the model does not describe.
# 2. Frequency: calibrate on `--cpufreq 3,2.2,1.5 follow=10:2:1` (each busy CPU 2 W + 1 W per GHz),
#    then estimate the shell with every CPU held at 1.5 GHz, on a root whose cpufreq is the
#    emulator's (the frequency fit) and on an empty root (the busy CPUs' fit).
set -e
Q=${1:?usage: scripts/estimate-truth.sh QUIETWATT_BINARY}
W=$(mktemp -d)
mkdir -p $W/e5 $W/e8 $W/ef $W/empty $W/froot/sys/devices/system
N=$(nproc)
$Q emulate $W/e5 --cpus-per-socket $N --power follow=10:5 >/dev/null 2>&1 & P5=$!
$Q emulate $W/e8 --cpus-per-socket $N --power follow=10:8 >/dev/null 2>&1 & P8=$!
$Q emulate $W/ef --cpus-per-socket $N --cpufreq 3,2.2,1.5 --power follow=10:2:1 >/dev/null 2>&1 & PF=$!
sleep 2
ln -s $W/ef/sys/devices/system/cpu $W/froot/sys/devices/system/cpu
run() { # emulator model root
  F=$1/sys/class/powercap/intel-rapl:0/energy_uj
  $Q --root $3 run --json --power-model $2 -- sh -c 'a=$(cat "$1"); ta=$(date +%s%N); i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done; b=$(cat "$1"); tb=$(date +%s%N); echo "$a $b $ta $tb" > "$2"' sh $F $W/truth > $W/run.json 2>/dev/null
  python3 - $W/run.json $W/truth <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); a,b,ta,tb=map(float,open(sys.argv[2]).read().split())
p=[x for x in d["domains"] if x["domain"]=="package"][0]
t=(b-a)/1e6; span=(tb-ta)/1e9
print(f"from {','.join(d['estimate']['inputs'])}: estimate {p['energy_j']:.3f} ± {p['uncertainty_j']:.3f} J over {d['duration_s']:.3f} s; truth {t:.3f} J over the shell's {span:.3f} s; error {p['energy_j']-t:+.3f} J ({(p['energy_j']-t)/t*100:+.2f} %)")
PY
}
echo "=== 1. busy CPUs (follow=10:5)"
$Q --root $W/e5 calibrate -o $W/model.json 2>&1 | tail -8
echo "--- 5 W per CPU (described):"; run $W/e5 $W/model.json $W/empty
echo "--- 8 W per CPU (not described):"; run $W/e8 $W/model.json $W/empty
echo "=== 2. frequency (follow=10:2:1, 3 / 2.2 / 1.5 GHz)"
$Q --root $W/ef calibrate -o $W/fmodel.json 2>&1 | tail -12
for c in $(seq 0 $((N-1))); do echo 1500000 > $W/ef/sys/devices/system/cpu/cpu$c/cpufreq/scaling_max_freq; done
echo "--- at 1.5 GHz, cpufreq readable (the frequency fit):"; run $W/ef $W/fmodel.json $W/froot
echo "--- at 1.5 GHz, no cpufreq (the busy CPUs' fit):"; run $W/ef $W/fmodel.json $W/empty
kill $P5 $P8 $PF; sleep 1; umount $W/e5 $W/e8 $W/ef 2>/dev/null || true
