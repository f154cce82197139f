#!/usr/bin/env python3
"""What Python blocks leave behind and how honest short ones are, against the
built-in emulator: descriptors, threads and time of N emulated blocks, and how many
of 200 blocks of 50 µs give an interval that excludes the energy the emulator
served between their two reads. Run with the package installed:
    .venv/bin/python scripts/python-blocks.py [N]"""

import os
import sys
import time
import warnings

import quietwatt as qw

warnings.simplefilter("ignore")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 20


def count(path: str) -> int:
    return len(os.listdir(path))


f0, t0 = count("/proc/self/fd"), count("/proc/self/task")
times = []
for _ in range(n):
    start = time.perf_counter()
    with qw.measure(emulate="on"):
        pass
    times.append(time.perf_counter() - start)
times.sort()
print(f"{n} emulated blocks: descriptors {f0} -> {count('/proc/self/fd')}, threads {t0} -> "
      f"{count('/proc/self/task')}, median {times[n // 2] * 1e3:.1f} ms, slowest {times[-1] * 1e3:.1f} ms")

excluded = 0
with qw.Emulator(watts={"package": 20, "core": 12, "uncore": 2, "dram": 4}) as emu:
    for _ in range(200):
        emu.reset_served()
        with qw.measure(root=emu.root, mechanism="powercap", domains="package") as m:
            end = time.perf_counter() + 50e-6
            while time.perf_counter() < end:
                pass
        d = emu.served_detail("package", 0, "powercap")
        truth = emu.watts("package") * (d["last_t_s"] - d["first_t_s"])
        pkg = m.domain("package")
        if abs(pkg.energy_j - truth) > pkg.uncertainty_j:
            excluded += 1
print(f"200 blocks of 50 us: {excluded} intervals exclude the energy served")
