#!/usr/bin/env python3
"""The whole `quietwatt record` process against the floor, measured from outside.

Each round runs, one after the other, a minimal C loop (scripts/process-floor.c: a
timerfd at absolute deadlines and one pread per file, compiled here by `cc -O2`)
and `quietwatt record -m powercap -f HZ --duration S -o FILE.csv` for each
quietwatt binary given, all reading the same energy_uj files of one emulated
powercap tree at the same rate for the same window. What a run costs is the
utime + stime of its process tree: the kernel's per-task counters that
/proc/PID/stat shows, summed over the process and every child it waited for, as
wait4(2) returns them when the run ends (microseconds, not /proc's 10 ms ticks).
The emulator is a separate process (`quietwatt emulate DIR`, started here), so the
FUSE daemon's side of each read is not counted against either loop.

Each round also runs the floor as a second thread of its process (`-t`, the
"floor-t" column): what a thread costs apart from quietwatt's code. And each run
says how many inter-processor interrupts the machine took per sample (the RES and
CAL lines of /proc/interrupts, all CPUs): each emulated read is a round trip to
the FUSE daemon, which costs the reader ~38 us a sample when the scheduler keeps
both on one CPU and ~9 us more per interrupt when it puts them on two, so a run's
cost follows where the scheduler happened to place it. Compare rounds whose
interrupts per sample are alike (a low count does not prove one CPU: a wake-up of
a CPU still polling in idle, as haltpoll does in a VM, sends none); `--same-cpu`
pins the emulator and every run to one CPU, which takes placement out and leaves
the code's cost.

    scripts/process-floor.py [--rounds 6] [--seconds 10] [--freq 1000] [--same-cpu N]
        NAME=QUIETWATT_BINARY [NAME=QUIETWATT_BINARY ...]

e.g. `scripts/process-floor.py before=/tmp/quietwatt-a146fb7
after=target/release/quietwatt`. Prints each round's CPU per sample and ratio to
the floor of the same round, then the medians and the spread. Exit status 0."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


PIN = None


def pinned():
    """In the child before exec: onto the --same-cpu CPU, if one was given."""
    if PIN is not None:
        os.sched_setaffinity(0, {PIN})


def ipis():
    """Inter-processor interrupts the machine has taken (RES + CAL, all CPUs)."""
    n = 0
    with open("/proc/interrupts") as f:
        for line in f:
            head, _, rest = line.partition(":")
            if head.strip() in ("RES", "CAL"):
                n += sum(int(x) for x in rest.split() if x.isdigit())
    return n


def cpu_of(argv, stdout):
    """Runs argv with stdout to `stdout`; returns the user+system seconds of its tree
    and the machine's inter-processor interrupts during the run."""
    i0 = ipis()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, preexec_fn=pinned)
    _, status, usage = os.wait4(proc.pid, 0)
    i1 = ipis()
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} failed ({proc.returncode}): {err.strip()}")
    return usage.ru_utime + usage.ru_stime, i1 - i0


def steal_and_busy():
    """Jiffies: (steal, busy, total) from /proc/stat, to show the host's load."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return v[7], sum(v) - idle, sum(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--freq", type=float, default=1000.0)
    ap.add_argument("--same-cpu", type=int, metavar="CPU",
                    help="pin the emulator and every run to this CPU (placement out)")
    ap.add_argument("binaries", nargs="+", metavar="NAME=QUIETWATT_BINARY")
    a = ap.parse_args()
    global PIN
    PIN = a.same_cpu
    variants = []
    for spec in a.binaries:
        name, _, path = spec.partition("=")
        if not path:
            name, path = os.path.basename(spec), spec
        variants.append((name, os.path.abspath(path)))

    work = tempfile.mkdtemp(prefix="qw-process-floor-")
    floor = os.path.join(work, "process-floor")
    subprocess.run(["cc", "-O2", "-pthread", "-o", floor, os.path.join(HERE, "process-floor.c")],
                   check=True)
    root = os.path.join(work, "emu")
    os.mkdir(root)
    emu = subprocess.Popen([variants[0][1], "emulate", root],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pinned)
    try:
        zones = os.path.join(root, "sys/class/powercap")
        for _ in range(200):
            if os.path.exists(os.path.join(zones, "intel-rapl:0/energy_uj")):
                break
            time.sleep(0.05)
        # The zones `record -m powercap` reads on the default emulated machine
        # (package, core, uncore, dram: the CSV's `# channel:` lines name them).
        files = sorted(os.path.join(zones, z, "energy_uj") for z in os.listdir(zones)
                       if z.startswith("intel-rapl:") and os.path.exists(os.path.join(zones, z, "energy_uj")))
        print(f"{len(files)} files: {', '.join(os.path.basename(os.path.dirname(f)) for f in files)}; "
              f"{a.rounds} rounds of {a.seconds:g} s at {a.freq:g} Hz; "
              f"order per round: floor, floor-t, {', '.join(n for n, _ in variants)}"
              f"{f'; all on CPU {PIN}' if PIN is not None else ''}; "
              f"ipi = inter-processor interrupts per sample")
        rows = {n: [] for n in ["floor", "floor-t"] + [n for n, _ in variants]}
        for r in range(a.rounds):
            s0, b0, t0 = steal_and_busy()
            cpu = cpu_of_floor(floor, a, files, [])
            rows["floor"].append(cpu)
            line = [f"round {r + 1}: floor {cpu[0] * 1e6 / cpu[1]:.2f} us/sample "
                    f"(ipi {cpu[2] / cpu[1]:.2f})"]
            ct = cpu_of_floor(floor, a, files, ["-t"])
            rows["floor-t"].append(ct)
            line.append(f"floor-t {ct[0] * 1e6 / ct[1]:.2f} ({(ct[0] / ct[1]) / (cpu[0] / cpu[1]):.3f}x, "
                        f"ipi {ct[2] / ct[1]:.2f})")
            for name, path in variants:
                csv = os.path.join(work, f"{name}.csv")
                summary = os.path.join(work, f"{name}.json")
                with open(summary, "w") as f:
                    c, irq = cpu_of([path, "--root", root, "record", "-m", "powercap",
                                     "-f", f"{a.freq:g}", "--duration", f"{a.seconds:g}",
                                     "-o", csv, "--json"], f)
                with open(summary) as f:
                    rec = json.load(f)
                ov = rec["overhead"]
                threads = {k: ov[k]["cpu_ns"] / 1e9 for k in ("sampler", "writer", "waiter")}
                rows[name].append((c, rec["samples"], threads, irq))
                line.append(f"{name} {c * 1e6 / rec['samples']:.2f} "
                            f"({(c * 1e6 / rec['samples']) / (cpu[0] * 1e6 / cpu[1]):.3f}x, "
                            f"ipi {irq / rec['samples']:.2f})")
            s1, b1, t1 = steal_and_busy()
            line.append(f"host busy {100 * (b1 - b0) / max(t1 - t0, 1):.0f} %, "
                        f"steal {100 * (s1 - s0) / max(t1 - t0, 1):.1f} %")
            print("; ".join(line), flush=True)
        report(rows, variants)
    finally:
        emu.terminate()
        emu.wait()


def cpu_of_floor(floor, a, files, flags):
    """The floor's CPU seconds, samples and the machine's interrupts meanwhile."""
    i0 = ipis()
    proc = subprocess.Popen([floor] + flags + [f"{a.freq:g}", f"{a.seconds:g}"] + files,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pinned)
    _, status, usage = os.wait4(proc.pid, 0)
    i1 = ipis()
    out = proc.stdout.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"the floor failed: {proc.stderr.read().decode().strip()}")
    samples = int(out.split()[0])
    return usage.ru_utime + usage.ru_stime, samples, i1 - i0


def report(rows, variants):
    floor = [c / n for c, n, _ in rows["floor"]]
    print()
    print("| run | CPU/sample median (us) | ratio to the floor: median | each round | IPIs/sample, median |")
    print("|---|---:|---:|---|---:|")
    print(f"| floor (C timerfd loop) | {statistics.median(floor) * 1e6:.2f} | 1.000 | | "
          f"{statistics.median(i / n for _, n, i in rows['floor']):.2f} |")
    per = [c / n for c, n, _ in rows["floor-t"]]
    ratios = [p / f for p, f in zip(per, floor)]
    print(f"| floor-t (the same loop on a second thread) | {statistics.median(per) * 1e6:.2f} | "
          f"{statistics.median(ratios):.3f} | {' '.join(f'{r:.2f}' for r in ratios)} | "
          f"{statistics.median(i / n for _, n, i in rows['floor-t']):.2f} |")
    for name, _ in variants:
        per = [c / n for c, n, _, _ in rows[name]]
        ratios = [p / f for p, f in zip(per, floor)]
        threads = {k: statistics.median(t[k] / n for _, n, t, _ in rows[name]) * 1e6
                   for k in ("sampler", "writer", "waiter")}
        print(f"| {name} | {statistics.median(per) * 1e6:.2f} | **{statistics.median(ratios):.3f}** | "
              f"{' '.join(f'{r:.2f}' for r in ratios)} | "
              f"{statistics.median(i / n for _, n, _, i in rows[name]):.2f} |")
        print(f"|   of which (us/sample) | sampler {threads['sampler']:.2f}, writer {threads['writer']:.2f}, "
              f"waiter {threads['waiter']:.3f}, rest of the process "
              f"{statistics.median(per) * 1e6 - sum(threads.values()):.2f} | | | |")


if __name__ == "__main__":
    main()
