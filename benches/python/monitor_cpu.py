"""What a background ``quietwatt.Monitor`` costs, for two installs of quietwatt side by
side (a before and an after), on one emulator served by another process.

Run as root (FUSE):

    python3 benches/python/monitor_cpu.py PYTHON_A PYTHON_B [--rounds 6] [--window 3] [--freq 1000]

``PYTHON_A`` and ``PYTHON_B`` are interpreters whose ``import quietwatt`` gives the two
versions. The script mounts ``quietwatt emulate`` (the CLI found through
``QUIETWATT_BIN``, else ``target/release/quietwatt``) in a temporary directory, in its
own process, so that the emulator's FUSE work is not counted; then, round after
round with the order alternated, runs one fresh child per install: a ``Monitor`` at
``--freq`` on the emulator's powercap counters (all four, then the package alone),
and the child's CPU time (``time.process_time()``: every thread) over ``--window``
seconds of its main thread sleeping, with the samples taken. It prints a Markdown
table: CPU % of one core (mean, min - max), samples a second, CPU µs per sample.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
import quietwatt as qw
root, domains, freq, window = sys.argv[1], sys.argv[2] or None, float(sys.argv[3]), float(sys.argv[4])
with qw.Monitor(root=root, mechanism="powercap", domains=domains, freq=freq) as mon:
    time.sleep(0.5)
    mon.snapshot()
    rows = lambda: len(set(mon.samples()["timestamp_ns"]))  # one row per counter
    n0 = rows()
    c0, t0 = time.process_time(), time.monotonic()
    time.sleep(window)
    c1, t1 = time.process_time(), time.monotonic()
    n1 = rows()
print(json.dumps({"cpu": c1 - c0, "secs": t1 - t0, "samples": n1 - n0}))
"""


def run(python: str, root: str, domains: str, freq: float, window: float) -> dict:
    out = subprocess.run(
        [python, "-c", CHILD, root, domains, str(freq), str(window)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--freq", type=float, default=1000.0)
    args = ap.parse_args()
    q = os.environ.get("QUIETWATT_BIN", "target/release/quietwatt")
    root = tempfile.mkdtemp(prefix="qw-monitor-cpu-")
    emu = subprocess.Popen([q, "emulate", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(os.path.join(root, ".quietwatt-emulator")):
                break
            time.sleep(0.1)
        load = open("/proc/loadavg").read().split()[:3]
        print(
            f"monitor_cpu: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; {args.rounds} rounds of "
            f"{args.window} s at {args.freq} Hz; load {' '.join(load)}; A = {args.a}, B = {args.b}",
            file=sys.stderr,
        )
        res: dict = {}
        for r in range(args.rounds):
            pair = [("A", args.a), ("B", args.b)]
            if r % 2:
                pair.reverse()
            for domains in ("", "package"):
                for name, python in pair:
                    res.setdefault((name, domains), []).append(run(python, root, domains, args.freq, args.window))
        print("| install | counters | CPU % of one core (mean, min - max) | samples/s | CPU µs per sample |")
        print("|---|---|---:|---:|---:|")
        for (name, domains), runs in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            pct = [100 * x["cpu"] / x["secs"] for x in runs]
            rate = statistics.mean(x["samples"] / x["secs"] for x in runs)
            per = statistics.mean(1e6 * x["cpu"] / max(x["samples"], 1) for x in runs)
            print(
                f"| {name} | {domains or 'all four'} | **{statistics.mean(pct):.2f}** ({min(pct):.2f} - {max(pct):.2f}) "
                f"| {rate:.0f} | {per:.1f} |"
            )
    finally:
        emu.terminate()
        emu.wait()
        os.rmdir(root)


if __name__ == "__main__":
    main()
