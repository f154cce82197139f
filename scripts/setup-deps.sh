#!/usr/bin/env bash
# Installs the system packages quietwatt's build needs on Debian/Ubuntu, and nothing
# when they are all there (so it is cheap to run before every build):
#   clang        compiles the BPF program (src/bpf/sampler.bpf.c) for the ebpf mechanism
#   libelf-dev   libbpf (built from source by libbpf-sys) parses ELF objects with it
#   zlib1g-dev   libelf's compressed sections
#   pkg-config   how libbpf-sys finds libelf and zlib
#   make         libbpf-sys builds its vendored libbpf with it (build-essential has it)
#   fonts-dejavu-core  the text of the PNG plots (quietwatt_lab::png draws sans-serif with
#                DejaVu Sans; without any font the PNGs have no labels, and the
#                test that checks their title cannot check it)
#   prometheus   not for the build: the serve tests (tests/serve.rs) scrape
#                `quietwatt serve` with a real Prometheus and query its HTTP API
#   systemd      not for the build, and not run as init: the reader service's unit
#                test (tests/cli/reader_systemd.rs) uses systemd-analyze verify,
#                systemd-socket-activate and systemd-sysusers; installed only if missing
# Idempotent: `apt-get update` runs only when something is missing.
set -euo pipefail

missing=()
command -v clang >/dev/null 2>&1 || missing+=(clang)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
# The headers, not just the runtime libraries, are what the build needs.
[ -e /usr/include/libelf.h ] || [ -e /usr/include/libelf/libelf.h ] || missing+=(libelf-dev)
[ -e /usr/include/zlib.h ] || missing+=(zlib1g-dev)
# linux/bpf.h (the BPF program's only kernel header) comes from linux-libc-dev,
# which build-essential pulls in; a C compiler is needed by the Rust build anyway.
command -v cc >/dev/null 2>&1 || missing+=(build-essential)
# libbpf-sys builds its vendored libbpf with make.
command -v make >/dev/null 2>&1 || missing+=(make)
# Not for the build itself: the PNG plots' labels. Checked by file, as fontconfig's
# fc-list may be absent where the font is not.
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
# Not for the build either: the exporter's test against a real Prometheus.
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
# Nor this: the tools the reader service's unit test runs.
command -v systemd-socket-activate >/dev/null 2>&1 || missing+=(systemd)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup-deps: missing ${missing[*]} and not root, and sudo is not installed: install them as root" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-deps: missing ${missing[*]}: install them with your package manager (this script knows apt only)" >&2
  exit 1
fi
echo "setup-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
pkgs=(clang libelf-dev zlib1g-dev pkg-config fonts-dejavu-core prometheus)
for extra in build-essential make systemd; do
  if [[ " ${missing[*]} " == *" $extra "* ]]; then pkgs+=("$extra"); fi
done
# Always the full set: apt skips what is there, and a half-done earlier run is completed.
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
