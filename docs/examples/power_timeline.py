"""A power timeline from Python: quietwatt's Monitor at 1 kHz around a workload
in three phases, each phase a window, drawn with matplotlib.

    .venv/bin/python docs/examples/power_timeline.py [OUT.png]

On a machine with RAPL it measures the machine (run as root, or grant read
access to energy_uj). Where nothing can measure (a VM, CI), it mounts quietwatt's
emulator with a power trace that follows the phases, and the title says
EMULATED. Written for notebooks too: paste the body into a cell and call
`mon.plot()`; nothing is forked or spawned, and `stop()` joins the sampler.
"""

from __future__ import annotations

import sys
import time

import matplotlib

matplotlib.use("Agg")  # no display needed; in a notebook, leave this out
import matplotlib.pyplot as plt

import quietwatt as qw


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main(out: str) -> None:
    emu = None
    root = None
    if not any(d["works"] for d in qw.doctor()):
        # The emulator's power follows the phases below: 1x, 2.5x, then 0.4x.
        emu = qw.Emulator(watts={"package": 18, "core": 10, "uncore": 1, "dram": 3},
                          trace=[(0.0, 1.0), (0.35, 2.5), (0.75, 0.4)])
        root = emu.root
    try:
        with qw.Monitor(freq=1000, root=root) as mon:
            for name, work in (("idle-ish", lambda: time.sleep(0.3)),
                               ("busy", lambda: busy(0.4)),
                               ("sleep", lambda: time.sleep(0.3))):
                mon.begin_window(name)
                work()
                w = mon.end_window(name)
                print(f"{name:>9}: {w}")
        run = mon.result
        print(f"      run: {run}")
        print(f"  sampler: {run.report['overhead']['cpu_percent']:.2f} % of one CPU"
              if run.report.get("overhead") and "cpu_percent" in run.report["overhead"] else "")
        ax = mon.plot()
        ax.figure.tight_layout()
        ax.figure.savefig(out, dpi=120)
        print(f"wrote {out} ({len(mon.to_pandas())} rows)")
    finally:
        if emu is not None:
            emu.unmount()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "power-timeline.png")
