#!/usr/bin/env bash
# Installs quietwatt's local reader service on a shared server, so that users
# without root can measure energy (docs/reader.md):
#   sudo ./scripts/install-reader.sh           # after ./quickstart.sh built target/release/quietwatt
# It installs the binary (/usr/local/bin/quietwatt), the systemd units
# quietwatt-reader.socket and .service, and /etc/sysusers.d/quietwatt.conf, creates
# the group quietwatt-readers, and starts the socket. Then, for each user:
#   sudo usermod -aG quietwatt-readers USER
# Options: --binary PATH (another build), --root DIR (install into DIR, start
# nothing: for images and tests), --no-start.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=target/release/quietwatt
root=/
start=1
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) bin=${2:?--binary needs a path}; shift 2 ;;
    --root) root=${2:?--root needs a directory}; start=0; shift 2 ;;
    --no-start) start=0; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-reader: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ ! -x "$bin" ]; then
  echo "install-reader: no quietwatt binary at $bin: build it first (./quickstart.sh, or cargo build --release -p quietwatt-cli), or give --binary PATH" >&2
  exit 1
fi
if [ "$root" = / ] && [ "$(id -u)" != 0 ]; then
  echo "install-reader: this installs system files: run it with sudo" >&2
  exit 1
fi
for tool in install systemd-sysusers; do
  if ! command -v "$tool" >/dev/null; then
    echo "install-reader: $tool is missing (Debian: apt-get install systemd coreutils)" >&2
    exit 1
  fi
done

install -D -m 0755 "$bin" "$root/usr/local/bin/quietwatt"
install -D -m 0644 contrib/systemd/quietwatt-reader.socket "$root/etc/systemd/system/quietwatt-reader.socket"
install -D -m 0644 contrib/systemd/quietwatt-reader.service "$root/etc/systemd/system/quietwatt-reader.service"
install -D -m 0644 contrib/sysusers.d/quietwatt.conf "$root/etc/sysusers.d/quietwatt.conf"
mkdir -p "$root/etc"
# The group the default policy names (a system group; nothing if it exists).
systemd-sysusers --root "$root" - < contrib/sysusers.d/quietwatt.conf
echo "install-reader: installed $root/usr/local/bin/quietwatt ($("$root/usr/local/bin/quietwatt" --version)), the units quietwatt-reader.socket and .service, and the group quietwatt-readers" >&2

if [ "$start" = 0 ]; then
  echo "install-reader: not started; start it with: systemctl enable --now quietwatt-reader.socket" >&2
elif [ "$(ps -p 1 -o comm= 2>/dev/null)" != systemd ]; then
  echo "install-reader: systemd is not running here (PID 1 is $(ps -p 1 -o comm=)): start the service by hand, as root: quietwatt serve --socket --listen none &" >&2
else
  systemctl daemon-reload
  systemctl enable --now quietwatt-reader.socket
  echo "install-reader: listening on /run/quietwatt/reader.sock; add users with: sudo usermod -aG quietwatt-readers USER (effective at their next login)" >&2
fi
