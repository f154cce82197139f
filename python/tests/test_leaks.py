"""Blocks leave nothing behind: descriptors, threads and mounts return to their
count after any number of blocks, an emulated block closes in milliseconds, and a
process killed with its emulator mounted leaves no dead mount."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings

import quietwatt as qw


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def mounts() -> str:
    with open("/proc/self/mounts") as f:
        return f.read()


def test_300_emulated_blocks_leave_no_descriptor_thread_or_mount():
    # Before: each emulated block left 5 descriptors and 2 threads (the counters
    # kept for reuse held the mount busy, so that its FUSE thread never ended) and
    # took 2.0 s to close; at `ulimit -n 64` the 11th block failed.
    warnings.simplefilter("ignore", UserWarning)
    with qw.measure(emulate="on"):
        pass  # the first block loads what stays loaded (the module's own state)
    f0, t0, m0 = fds(), threads(), mounts().count("quietwatt-emulator-")
    slowest = 0.0
    for _ in range(300):
        start = time.perf_counter()
        with qw.measure(emulate="on") as m:
            pass
        slowest = max(slowest, time.perf_counter() - start)
        assert m.emulated and m.total_j is not None
    assert (fds(), threads()) == (f0, t0), f"descriptors {f0} -> {fds()}, threads {t0} -> {threads()}"
    assert mounts().count("quietwatt-emulator-") == m0
    print(f"slowest of 300 emulated blocks: {slowest:.3f} s")


def test_an_emulator_measured_with_root_and_unmounted_leaves_nothing():
    f0, t0 = fds(), threads()
    for _ in range(3):
        emu = qw.Emulator()
        for _ in range(5):
            with qw.measure(root=emu.root):
                pass
        emu.unmount()
    # Before: 6 -> 30 descriptors after 3 emulators.
    assert (fds(), threads()) == (f0, t0), f"descriptors {f0} -> {fds()}, threads {t0} -> {threads()}"


def test_a_process_killed_inside_an_emulated_block_leaves_no_dead_mount():
    script = """
import sys, warnings
warnings.simplefilter("ignore")
import quietwatt as qw
with qw.measure(emulate="on") as m:
    print("ROOT", [l.split()[1] for l in open("/proc/self/mounts") if "quietwatt-emulator-" in l][-1], flush=True)
    while True:
        pass
"""
    for sig in (signal.SIGKILL, signal.SIGTERM):
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        root = None
        assert p.stdout is not None
        for line in p.stdout:
            if line.startswith("ROOT "):
                root = line.split()[1]
                break
        assert root, "the child never measured"
        assert root in mounts()
        p.send_signal(sig)
        p.wait(timeout=30)
        deadline = time.monotonic() + 30
        while root in mounts() and time.monotonic() < deadline:
            time.sleep(0.01)
        # Before: "Transport endpoint is not connected" at root, for good.
        assert root not in mounts(), f"{sig!r} left {root} mounted"
        assert not os.path.ismount(root)
