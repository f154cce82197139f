#!/usr/bin/env bash
# Runs a command as if this machine had no cpuidle driver, as many cloud VMs have
# none: in a private mount namespace, /sys/devices/system/cpu/cpuidle/current_driver
# reads `none` and every cpuN/cpuidle/ is an empty directory. The kernel still idles
# its own way (power:cpu_idle still fires); only what sysfs tells is taken away.
# The suite must pass both ways:
#   ./scripts/without-cpuidle.sh ./scripts/test.sh
#   ./scripts/without-cpuidle.sh cargo test -p quietwatt-events --test events
# Needs root (unshare -m and mount).
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
exec unshare -m --propagation private bash -c '
  set -e
  none=$(mktemp); echo none > "$none"
  d=/sys/devices/system/cpu/cpuidle
  [ -e "$d/current_driver" ] && mount --bind "$none" "$d/current_driver"
  for c in /sys/devices/system/cpu/cpu[0-9]*/cpuidle; do
    [ -d "$c" ] && mount -t tmpfs -o size=4k,mode=0555 quietwatt-no-cpuidle "$c"
  done
  exec "$@"' bash "$@"
