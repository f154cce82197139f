#!/usr/bin/env python3
"""What `quietwatt profile` costs the program it profiles, beside `perf record`.

Each round runs, in a shuffled order, the same CPU-bound workload (the lab's `ep`
kernel on one thread: `quietwatt bench workload ep --threads 1 --size N --json`,
which reports its own solve time, set-up excluded) three ways:

- `none`: alone;
- `perf`: under `perf record -F HZ -g` (frame-pointer call graphs, the default);
- `quietwatt`: under `quietwatt profile -F HZ -o X.folded` (frame-pointer call
  graphs, user and kernel, plus its 1 kHz energy session), reading an emulated
  powercap tree (`quietwatt emulate DIR`, started here as its own process).

Both profilers sample at the same rate with the same call-graph mode. A run's
slowdown is its solve time over the same round's `none`; the figures are the
median over rounds with a 95 % bootstrap interval of the median (seeded), and the
profilers' own CPU (utime + stime of the whole tree, wait4) per second of solve.

    scripts/profile-cost.py [--rounds 10] [--size 16000000] [--freq 997] QUIETWATT_BINARY

Needs root (or perf_event_paranoid <= 1) and `perf` (Debian's linux-perf)."""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _stats import median_ci


def run(argv):
    """(solve seconds, tree CPU seconds) of one run; exits on a failure."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv[:4])} ... failed: {err.decode(errors='replace').strip()[-800:]}")
    doc = None
    for line in out.decode().splitlines():
        if line.startswith("{") and "solve" in line:
            doc = json.loads(line)
    if doc is None:
        sys.exit(f"no workload JSON from {' '.join(argv[:4])}: {out[-400:]!r}")
    return doc["solve_s"], usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--size", type=int, default=16_000_000, help="ep pairs per run")
    ap.add_argument("--freq", type=int, default=997, help="stack samples a second")
    ap.add_argument("quietwatt")
    a = ap.parse_args()
    qw = os.path.abspath(a.quietwatt)
    if shutil.which("perf") is None:
        sys.exit("perf is not installed: apt-get install linux-perf")
    work = tempfile.mkdtemp(prefix="qw-profile-cost-")
    root = os.path.join(work, "emu")
    os.mkdir(root)
    emu = subprocess.Popen([qw, "emulate", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(os.path.join(root, "sys/class/powercap/intel-rapl:0/energy_uj")):
                break
            time.sleep(0.05)
        else:
            sys.exit("the emulator did not come up")
        workload = [qw, "bench", "workload", "ep", "--threads", "1", "--size", str(a.size), "--json"]
        variants = {
            "none": workload,
            "perf": ["perf", "record", "-q", "-F", str(a.freq), "-g", "-o", os.path.join(work, "perf.data"), "--"]
            + workload,
            "quietwatt": [qw, "--root", root, "profile", "-F", str(a.freq), "-o", os.path.join(work, "q.folded"), "--"]
            + workload,
        }
        rng = random.Random(1)
        slow = {k: [] for k in variants if k != "none"}
        cpu = {k: [] for k in variants}
        print(f"ep, {a.size} pairs on 1 thread; {a.rounds} rounds, shuffled; {a.freq} Hz stacks, frame pointers")
        for r in range(a.rounds):
            order = list(variants)
            rng.shuffle(order)
            got = {}
            for k in order:
                got[k] = run(variants[k])
            base = got["none"][0]
            for k in slow:
                slow[k].append(got[k][0] / base)
            for k in variants:
                cpu[k].append(got[k][1] / got[k][0])
            print(
                f"round {r + 1}: "
                + "; ".join(f"{k} {got[k][0]:.4f} s" + (f" ({got[k][0] / base:.3f}x)" if k != "none" else "") for k in order)
            )
        print()
        print("| run | slowdown of the workload: median [95 % CI] | each round | tree CPU per solve second, median |")
        print("|---|---:|---|---:|")
        print(f"| none | 1.000 | | {statistics.median(cpu['none']):.3f} |")
        for k in slow:
            m, lo, hi = median_ci(slow[k], rng)
            each = " ".join(f"{x:.3f}" for x in slow[k])
            print(f"| {k} | **{m:.3f}x** [{lo:.3f}, {hi:.3f}] | {each} | {statistics.median(cpu[k]):.3f} |")
    finally:
        emu.terminate()
        emu.wait()
        for umount in (["fusermount3", "-u"], ["fusermount", "-u"], ["umount", "-l"]):
            if shutil.which(umount[0]):
                subprocess.run(umount + [root], stderr=subprocess.DEVNULL, check=False)
                break
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
