"""quietwatt's Python API against pyJoules and CodeCarbon, side by side in one run,
on the same emulated powercap tree.

Run (as root: it mounts a FUSE emulator and enters a private mount namespace):

    python3 -m venv /work/bench-venv
    /work/bench-venv/bin/pip install /work/main pyJoules codecarbon pandas
    cd /work/main && /work/bench-venv/bin/python benches/python/bench_peers.py

One command does everything. The parent process mounts quietwatt's RAPL emulator
(``quietwatt.Emulator``, Kaby Lake desktop layout, package 20 W, dram 4 W) in a
temporary directory and re-runs this script under the emulator's
``.quietwatt-emulator/enter.sh``: in a private mount namespace where the emulator sits
at the standard paths (``/sys/class/powercap``, ``/proc/cpuinfo``, ``/dev/cpu``), so
quietwatt (``root="/"``), pyJoules and CodeCarbon all read ``/sys/class/powercap`` as
they would on a RAPL machine. The namespace and its mounts vanish with the child; the
parent unmounts the emulator at the end.

It measures, interleaving the tools round by round so that they share the noise:

1. correctness: what each tool reports for a ``time.sleep(1)`` block, against what
   the emulator served on each counter between that tool's first and last read of
   it (the parent, which holds the emulator, answers the child through a pipe);
2. the cost of one measured empty block (entry plus exit, construction included
   where the tool's idiom constructs per block), in microseconds of wall time, in
   two passes: on the emulator, then on a frozen copy of its files on tmpfs bound
   over the same paths (what a kernel filesystem costs per file operation; the
   counters do not move there, so quietwatt's auto-pick refuses them), plus the file
   syscalls per block that ``strace`` counts (when installed);
3. the cost of background sampling: CPU % of one core of the whole process
   (``time.process_time()``: every thread) over a fixed wall window while the main
   thread sleeps, for quietwatt's ``Monitor`` at 1 kHz (all counters; package only),
   CodeCarbon's tracker at ``measure_power_secs=0.001`` (it accepts any positive
   float: there is no minimum in the code) and at its default 15 s, against a
   baseline with no tool. pyJoules has no background sampler.

It prints Markdown tables. Options: ``--rounds N`` (cost rounds per pass, default
75: short rounds, so that the tools share the noise), ``--cpu-rounds N`` (default 4),
``--window S`` (CPU window, default 3 s), ``--cc-trials N`` (1-s blocks of CodeCarbon
at 1 ms, default 3). About two and a half minutes on a 2-vCPU VM.

Not like a real machine, and said in the output: every operation on an emulated file
is a FUSE round trip to the emulator's daemon (the parent process, whose CPU is not
counted here), about ten times a sysfs operation (the output measures both); and the
emulator serves no ``subsystem`` link in ``/sys/devices/virtual/powercap/intel-rapl``
(the kernel does), which CodeCarbon's RAPL backend requires (``IntelRAPL`` raises
FileNotFoundError for ``/sys/class/powercap/intel-rapl/subsystem``; ``start()``
swallows it and the tracker measures nothing; the output says so): the child adds that link in its own namespace (a tmpfs over
``/sys/devices/virtual/powercap`` with the emulator's entries bound back), the same
for every tool.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import subprocess
import sys
import time

WATTS = {"package": 20.0, "dram": 4.0}
CHILD_ENV = "QW_BENCH_PEERS_EMU"
PIPE_ENV = "QW_BENCH_PEERS_PIPE"


# --------------------------------------------------------------------------------
# parent: mount the emulator, run the child at the standard paths


def parent(argv: list) -> int:
    import json

    import quietwatt as qw

    if os.geteuid() != 0:
        print("needs root: the emulator goes to the standard paths in a private mount namespace", file=sys.stderr)
        return 2
    with qw.Emulator(watts=WATTS) as emu:
        enter = os.path.join(emu.root, ".quietwatt-emulator", "enter.sh")
        req_r, req_w = os.pipe()  # child -> parent: "reset" / "served"
        ans_r, ans_w = os.pipe()  # parent -> child: one line of JSON
        env = dict(os.environ, **{CHILD_ENV: emu.root, PIPE_ENV: f"{req_w},{ans_r}"})
        env.pop("QUIETWATT_ROOT", None)
        child = subprocess.Popen(
            ["sh", enter, sys.executable, os.path.abspath(__file__)] + argv, env=env, pass_fds=(req_w, ans_r)
        )
        os.close(req_w)
        os.close(ans_r)
        with os.fdopen(req_r, "r") as req, os.fdopen(ans_w, "w") as ans:
            for line in req:
                if line.strip() == "reset":
                    emu.reset_served()
                    out = {}
                else:  # what a correct reader of the powercap reads since the reset measured
                    out = {d: emu.served(d, mechanism="powercap") for d in ("package", "dram")}
                ans.write(json.dumps(out) + "\n")
                ans.flush()
        rc = child.wait()
    return rc


class Truth:
    """Asks the parent (which holds the emulator) what it served since a reset."""

    def __init__(self):
        import json

        self.json = json
        w, r = (int(x) for x in os.environ[PIPE_ENV].split(","))
        self.w, self.r = os.fdopen(w, "w"), os.fdopen(r, "r")

    def _ask(self, what: str) -> dict:
        self.w.write(what + "\n")
        self.w.flush()
        return self.json.loads(self.r.readline())

    def reset(self) -> None:
        self._ask("reset")

    def served(self) -> dict:
        return self._ask("served")


# --------------------------------------------------------------------------------
# child: helpers


def add_subsystem_link(emu_root: str) -> str:
    """Makes /sys/class/powercap/intel-rapl/subsystem exist, as on a real kernel.

    The emulator's intel-rapl directory is FUSE and refuses writes, so a tmpfs goes
    over /sys/devices/virtual/powercap (in this private namespace only), with an
    intel-rapl directory whose entries are the emulator's, bound back, plus the link.
    """
    link = "/sys/class/powercap/intel-rapl/subsystem"
    if os.path.exists(link):
        return "present"
    top = "/sys/devices/virtual/powercap"
    src_top = emu_root + top
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "qwbench", top], check=True)
    for entry in sorted(os.listdir(src_top)):
        src, dst = os.path.join(src_top, entry), os.path.join(top, entry)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
            continue
        if entry == "intel-rapl":
            os.mkdir(dst)
            for sub in sorted(os.listdir(src)):
                s, d = os.path.join(src, sub), os.path.join(dst, sub)
                if os.path.islink(s):
                    os.symlink(os.readlink(s), d)
                    continue
                if os.path.isdir(s):
                    os.mkdir(d)
                else:
                    open(d, "w").close()
                subprocess.run(["mount", "--bind", s, d], check=True)
            os.symlink("../../../../class/powercap", os.path.join(dst, "subsystem"))
            continue
        if os.path.isdir(src):
            os.mkdir(dst)
        else:
            open(dst, "w").close()
        subprocess.run(["mount", "--bind", src, dst], check=True)
    if not os.path.exists(link):
        raise RuntimeError(f"{link} still missing")
    return "added"


def pct(xs: list, p: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def version(dist: str) -> str:
    try:
        from importlib.metadata import version as v

        return v(dist)
    except Exception:
        return "not installed"


class Peer:
    """A variant of the block-cost benchmark: ``once()`` is one measured empty block."""

    def __init__(self, name: str, make, iters: int, note: str = ""):
        self.name, self.make, self.iters, self.note = name, make, iters, note
        self.once = None
        self.error = None
        self.samples_us: list = []  # every iteration
        self.round_medians: list = []


# --------------------------------------------------------------------------------
# child: the tools


def setup_quietwatt():
    import quietwatt as qw

    return qw


def setup_pyjoules():
    from pyJoules.device.rapl_device import RaplDramDomain, RaplPackageDomain
    from pyJoules.energy_meter import EnergyContext, measure_energy
    from pyJoules.handler import EnergyHandler

    return EnergyContext, measure_energy, EnergyHandler, RaplPackageDomain, RaplDramDomain


def setup_codecarbon():
    logging.getLogger("codecarbon").setLevel(logging.CRITICAL)
    import codecarbon
    from codecarbon import OfflineEmissionsTracker

    logging.getLogger("codecarbon").setLevel(logging.CRITICAL)
    return codecarbon, OfflineEmissionsTracker


def cc_tracker(OfflineEmissionsTracker, measure_power_secs: float = 15.0):
    return OfflineEmissionsTracker(
        country_iso_code="FRA",
        save_to_file=False,
        log_level="critical",
        measure_power_secs=measure_power_secs,
        rapl_include_dram=True,
        project_name="bench",
    )


def cc_cpu_mode(tracker) -> str:
    for h in getattr(tracker, "_hardware", []):
        mode = getattr(h, "_mode", None)
        if mode is not None:
            return str(mode)
    return "?"


# --------------------------------------------------------------------------------
# child: the benchmarks


CORRECT = (  # key, row label, tool
    ("qw-measure", "quietwatt `with qw.measure()`", "quietwatt"),
    ("qw-monitor", "quietwatt `Monitor` 1 kHz", "quietwatt"),
    ("pyjoules", "pyJoules `EnergyContext`", "pyjoules"),
    ("cc-15s", "CodeCarbon tracker, `measure_power_secs=15`", "codecarbon"),
    ("cc-1ms", "CodeCarbon tracker, `measure_power_secs=0.001`", "codecarbon"),
)


def correct_one(key: str) -> dict:
    """``--correct KEY``: one 1-s block of one tool (in a fresh process), against
    what the emulator served between the tool's first and last read."""
    truth = Truth()
    tool = {k: t for k, _, t in CORRECT}[key]
    setup = {"quietwatt": setup_quietwatt, "pyjoules": setup_pyjoules, "codecarbon": setup_codecarbon}[tool]
    mod = setup()
    if key == "qw-measure":
        truth.reset()
        t0 = time.perf_counter()
        with mod.measure(mechanism="powercap") as m:
            time.sleep(1.0)
        wall = time.perf_counter() - t0
        got = {"what": f"`measure`: package, dram (`total_j` = {m.total_rule})",
               "package": m.domain("package").energy_j, "dram": m.domain("dram").energy_j, "dur": m.duration_s}
    elif key == "qw-monitor":
        mon = mod.Monitor(freq=1000, mechanism="powercap")
        truth.reset()
        t0 = time.perf_counter()
        mon.start()
        time.sleep(1.0)
        m = mon.stop()
        wall = time.perf_counter() - t0
        got = {"what": "`Monitor(freq=1000)`: package, dram",
               "package": m.domain("package").energy_j, "dram": m.domain("dram").energy_j, "dur": m.duration_s}
    elif key == "pyjoules":
        EnergyContext, _, EnergyHandler, Pkg, Dram = mod
        h = EnergyHandler()
        ctx = EnergyContext(handler=h, domains=[Pkg(0), Dram(0)], start_tag="sleep")
        truth.reset()
        t0 = time.perf_counter()
        with ctx:
            time.sleep(1.0)
        wall = time.perf_counter() - t0
        smp = h.traces[-1][0]
        got = {"what": "`EnergyContext`: `package_0`, `dram_0` (µJ)",
               "package": smp.energy["package_0"] / 1e6, "dram": smp.energy["dram_0"] / 1e6, "dur": smp.duration}
    else:
        _, Off = mod
        t = cc_tracker(Off, 15.0 if key == "cc-15s" else 0.001)
        t._ensure_hardware_ready()
        truth.reset()
        t0 = time.perf_counter()
        t.start()
        t1 = time.perf_counter()
        time.sleep(1.0)
        t2 = time.perf_counter()
        t.stop()
        t3 = time.perf_counter()
        wall = t3 - t0
        d = t.final_emissions_data
        # cpu_energy: the RAPL package counter (dram is a package subzone here, which
        # CodeCarbon skips); ram_energy: its RAM power model, not a counter.
        got = {"what": f"`cpu_energy` (RAPL), `ram_energy` (model) (kWh); start() {t1 - t0:.3f} s, stop() {t3 - t2:.3f} s",
               "package": d.cpu_energy * 3.6e6, "ram": d.ram_energy * 3.6e6, "dur": d.duration}
    got["wall"] = wall
    got["served"] = truth.served()
    return got


def run_json(argv: list, extra_fds: tuple = ()) -> dict:
    """Runs this script with ``argv`` in a fresh process; its last stdout line is JSON."""
    import json

    r = subprocess.run([sys.executable, os.path.abspath(__file__)] + argv, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, pass_fds=extra_fds, timeout=120)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return json.loads(lines[-1])


def correctness(trials_1ms: int, notes: list) -> list:
    fds = tuple(int(x) for x in os.environ[PIPE_ENV].split(","))
    rows = []
    for key, name, _ in CORRECT:
        for i in range(trials_1ms if key == "cc-1ms" else 1):
            label = name if key != "cc-1ms" else f"{name}, trial {i + 1}"
            try:
                rows.append((label, run_json(["--correct", key], fds)))
            except Exception as e:
                rows.append((label, {"what": f"failed: {e}"}))

    def cell(got, served):
        if served is None:
            return f"{got:.3f}", "n/a"
        return f"{got:.3f} / {served:.3f}", f"{got / served:.4f}"

    out = []
    for name, got in rows:
        if "package" not in got:
            out.append(f"| {name} | {got['what']} | | | | | | |")
            continue
        served = got["served"]
        pk, pr = cell(got["package"], served.get("package"))
        if "dram" in got:
            dk, dr = cell(got["dram"], served.get("dram"))
        else:
            dk = f"not read; its RAM model: {got['ram']:.3f} J" if served.get("dram") is None else "?"
            dr = f"({got['ram'] / got['dur']:.2f} W)"
        out.append(f"| {name} | {got['what']} | {pk} | {pr} | {dk} | {dr} | {got['dur']:.3f} | {got['wall']:.3f} |")
    return out


def make_peers(tools: dict) -> list:
    peers = []
    qw = tools.get("quietwatt")
    if qw is not None:
        def q_powercap():
            with qw.measure(mechanism="powercap"):
                pass

        def q_auto():
            with qw.measure():
                pass

        def q_two():
            with qw.measure(mechanism="powercap", domains="package,dram"):
                pass

        peers.append(Peer('quietwatt `with qw.measure(mechanism="powercap")`', lambda: q_powercap, 6,
                          "4 counters (package, core, uncore, dram)"))
        peers.append(Peer("quietwatt `with qw.measure()` (auto)", lambda: q_auto, 6, "auto-picks"))
        peers.append(Peer('quietwatt `measure(mechanism="powercap", domains="package,dram")`', lambda: q_two, 6,
                          "2 counters, as pyJoules below"))
    pj = tools.get("pyjoules")
    if pj is not None:
        EnergyContext, measure_energy, EnergyHandler, Pkg, Dram = pj

        def make_ctx():
            h = EnergyHandler()

            def once():
                with EnergyContext(handler=h, domains=[Pkg(0), Dram(0)]):
                    pass
                h.traces.clear()
            return once

        def make_deco():
            h = EnergyHandler()

            @measure_energy(handler=h, domains=[Pkg(0), Dram(0)])
            def empty():
                pass

            def once():
                empty()
                h.traces.clear()
            return once

        peers.append(Peer("pyJoules `with EnergyContext(domains=[package, dram])`", make_ctx, 6,
                          "constructs its devices per block"))
        peers.append(Peer("pyJoules `@measure_energy` empty function", make_deco, 20,
                          "devices made once, at decoration"))
    cc = tools.get("codecarbon")
    if cc is not None:
        _, Off = cc

        def make_full():
            def once():
                t = cc_tracker(Off)
                t.start()
                t.stop()
            return once

        def make_task():
            t = cc_tracker(Off)
            state = {"t": t}

            def once():
                state["t"].start_task("b")
                state["t"].stop_task("b")
                state["t"]._tasks.clear()  # else they pile up (it keeps every task)
            return once

        peers.append(Peer("CodeCarbon `OfflineEmissionsTracker(...)`, `.start()`, `.stop()`", make_full, 1,
                          "constructs per block (hardware plan cached after the first)"))
        peers.append(Peer("CodeCarbon `start_task()` / `stop_task()`", make_task, 4, "one tracker, never `start()`ed"))
    return peers


def block_costs(tools: dict, rounds: int, notes: list, phase: str) -> list:
    """Runs every peer's block ``rounds`` times, interleaved; returns the peers."""
    peers = make_peers(tools)
    for p in peers:
        try:
            p.once = p.make()
            for _ in range(3 if p.iters < 4 else 20):  # warm-up (caches, imports)
                p.once()
        except Exception as e:
            p.error = f"{type(e).__name__}: {e}"
            notes.append(f"{phase}: {p.name} failed: {p.error}")
    live = [p for p in peers if p.error is None]
    for r in range(rounds):
        order = live[r % len(live):] + live[: r % len(live)] if live else []
        for p in order:
            xs = []
            for _ in range(p.iters):
                t0 = time.perf_counter_ns()
                p.once()
                xs.append((time.perf_counter_ns() - t0) / 1000.0)
            p.samples_us.extend(xs)
            p.round_medians.append(statistics.median(xs))
    return peers


def cost_cells(p: Peer, ref: "Peer | None") -> str:
    if p.error is not None:
        return f"failed: {p.error} | | "
    med = statistics.median(p.samples_us)
    ratio = ""
    if ref is not None and ref.error is None:
        ratios = [a / b for a, b in zip(p.round_medians, ref.round_medians)]
        ratio = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
    return f"**{med:.1f}** | {pct(p.samples_us, 10):.1f} - {pct(p.samples_us, 90):.1f} | {ratio}"


def cost_table(fuse: list, static: list, counts: dict) -> list:
    out = []
    rf, rs = fuse[0], static[0]  # the first quietwatt row is the reference
    for pf, ps in zip(fuse, static):
        c = counts.get(pf.name)
        calls = f"{c[0]:.0f} ({c[1]:.0f})" if c else "n/a"
        out.append(f"| {pf.name} | {len(pf.samples_us)} | {cost_cells(pf, rf)} | {cost_cells(ps, rs)} | {calls} | {pf.note} |")
    return out


class StaticTree:
    """For the second pass: a frozen copy of the emulated files on tmpfs, bound over
    the same standard paths, so that each file operation costs what a kernel
    filesystem costs instead of a FUSE round trip (the counters do not move)."""

    PATHS = ("sys/devices/system/cpu", "sys/devices/virtual/powercap", "sys/class/powercap", "proc/cpuinfo")

    def __init__(self, emu_root: str):
        self.emu_root = emu_root
        self.stage = None
        self.mounted: list = []

    def __enter__(self):
        import shutil
        import tempfile

        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.stage = tempfile.mkdtemp(prefix="qwbench-static-", dir=base)
        try:
            for rel in self.PATHS:
                src, dst = os.path.join(self.emu_root, rel), os.path.join(self.stage, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                if os.path.isdir(src):
                    shutil.copytree(src, dst, symlinks=True)
                else:
                    shutil.copyfile(src, dst)
            sub = os.path.join(self.stage, "sys/devices/virtual/powercap/intel-rapl/subsystem")
            if not os.path.lexists(sub):  # emulators before 2026-11-24 served none
                os.symlink("../../../../class/powercap", sub)
            for rel in self.PATHS:
                target = "/" + rel
                subprocess.run(["mount", "--bind", os.path.join(self.stage, rel), target], check=True)
                self.mounted.append(target)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        import shutil

        for target in reversed(self.mounted):
            subprocess.run(["umount", target], check=False)
        self.mounted = []
        if self.stage:
            shutil.rmtree(self.stage, ignore_errors=True)
            self.stage = None


EMULATED = ("/sys/class/powercap", "/sys/devices/virtual/powercap", "/proc/cpuinfo", "/dev/cpu/", "/sys/devices/system/cpu")
STRACE_BLOCKS = 5


def one(args) -> int:
    """``--one I``: peer I's block, STRACE_BLOCKS times between two markers (for strace)."""
    tools = load_tools([])
    p = make_peers(tools)[args.one]
    once = p.make()
    for _ in range(3):
        once()
    fd = os.open("/dev/null", os.O_WRONLY)
    n = 2 if p.iters < 4 else STRACE_BLOCKS
    os.write(fd, b"QWMARK0 %d" % n)
    for _ in range(n):
        once()
    os.write(fd, b"QWMARK1")
    return 0


def syscall_counts(tools: dict, notes: list) -> dict:
    """File syscalls (strace %file and %desc: open, stat, read, close, ...) per block,
    all of them and those on emulated files, per peer."""
    import re
    import shutil
    import tempfile

    out: dict = {}
    strace = shutil.which("strace")
    if strace is None:
        notes.append("strace is not installed: no syscall counts")
        return out
    call = re.compile(r"^\d+\s+(\w+)\(")
    for i, p in enumerate(make_peers(tools)):
        with tempfile.NamedTemporaryFile(prefix="qwbench-strace-", suffix=".txt") as f:
            rc = subprocess.run(
                [strace, "-f", "-y", "-qq", "-e", "trace=%file,%desc", "-o", f.name,
                 sys.executable, os.path.abspath(__file__), "--one", str(i)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )
            if rc.returncode != 0:
                notes.append(f"strace of {p.name} failed: {rc.stderr[-500:]}")
                continue
            inside, n, total, emu = False, 1, 0, 0
            for line in open(f.name, errors="replace"):
                if "QWMARK0" in line:
                    inside = True
                    n = int(re.search(r"QWMARK0 (\d+)", line).group(1))
                    continue
                if "QWMARK1" in line:
                    break
                if not inside or "resumed>" in line or not call.match(line):
                    continue
                total += 1
                if any(e in line for e in EMULATED):
                    emu += 1
            out[p.name] = (total / n, emu / n)
    return out


def op_costs() -> str:
    """What one file operation costs on the emulator (FUSE) and on the real sysfs."""
    def t(path: str):
        opens, preads = [], []
        for _ in range(300):
            t0 = time.perf_counter_ns()
            with open(path, "rb", buffering=0) as f:
                f.read(64)
            opens.append((time.perf_counter_ns() - t0) / 1000)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(300):
                t0 = time.perf_counter_ns()
                os.pread(fd, 64, 0)
                preads.append((time.perf_counter_ns() - t0) / 1000)
        finally:
            os.close(fd)
        return statistics.median(opens), statistics.median(preads)

    emu = t("/sys/class/powercap/intel-rapl:0/energy_uj")
    real = t("/sys/kernel/uevent_seqnum")
    return (f"one open + read + close of `/sys/class/powercap/intel-rapl:0/energy_uj` (the emulator, FUSE) "
            f"{emu[0]:.1f} µs, one `pread` of it {emu[1]:.1f} µs; of the real sysfs file `/sys/kernel/uevent_seqnum` "
            f"{real[0]:.1f} µs and {real[1]:.1f} µs (medians of 300)")


CPU_VARIANTS = (  # key, label, note
    ("baseline", "no tool (baseline)", "main thread sleeping"),
    ("qw-all", "quietwatt `Monitor(freq=1000)`", "native thread, 4 counters a sample"),
    ("qw-pkg", 'quietwatt `Monitor(freq=1000, domains="package")`', "1 counter a sample, as CodeCarbon"),
    ("cc-1ms", "CodeCarbon tracker, `measure_power_secs=0.001`", "a `threading.Timer` thread per sample, + its 1-s power monitor"),
    ("cc-15s", "CodeCarbon tracker, default `measure_power_secs=15`", "only its 1-s power monitor ticks in the window"),
)


def cpu_one(key: str, window: float) -> dict:
    """``--cpu KEY``: one window of one variant, in a fresh process (so that nothing
    one tool leaves running reaches the next), then what still runs after stop()."""
    import threading

    if key == "baseline":
        start, stop = (lambda: None), (lambda h: (None, None))
    elif key.startswith("qw-"):
        qw = setup_quietwatt()

        def start():
            mon = qw.Monitor(freq=1000, mechanism="powercap", domains=None if key == "qw-all" else "package")
            mon.start()
            return mon

        def stop(mon):
            m = mon.stop()
            ov = m.report["overhead"]
            return ov["samples"] / ov["duration_s"], m.domain("package").energy_j
    else:
        _, Off = setup_codecarbon()

        prep = cc_tracker(Off, 0.001 if key == "cc-1ms" else 15.0)
        prep._ensure_hardware_ready()  # its first reads: before the reset below

        def start():
            t = prep
            t.start()
            return t, t._power_measurement_count, time.perf_counter()

        def stop(h):
            t, n0, t0 = h
            n1, t1 = t._power_measurement_count, time.perf_counter()
            t.stop()
            d = t.final_emissions_data
            return (n1 - n0) / (t1 - t0), d.cpu_energy * 3.6e6
    truth = Truth() if os.environ.get(PIPE_ENV) else None
    threads0 = threading.active_count()
    if truth is not None:
        truth.reset()
    h = start()
    time.sleep(0.2)  # let it settle
    c0, w0 = time.process_time(), time.perf_counter()
    time.sleep(window)
    c1, w1 = time.process_time(), time.perf_counter()
    rate, joules = stop(h)
    served = truth.served().get("package") if truth is not None and joules is not None else None
    time.sleep(0.3)
    c2, w2 = time.process_time(), time.perf_counter()
    time.sleep(1.0)
    c3, w3 = time.process_time(), time.perf_counter()
    return {"cpu": 100.0 * (c1 - c0) / (w1 - w0), "rate": rate, "joules": joules, "served": served,
            "after_cpu": 100.0 * (c3 - c2) / (w3 - w2), "after_threads": threading.active_count() - threads0}


def cpu_cost(rounds: int, window: float, notes: list) -> list:
    fds = tuple(int(x) for x in os.environ[PIPE_ENV].split(","))
    res: dict = {k: [] for k, _, _ in CPU_VARIANTS}
    errors: dict = {}
    for r in range(rounds):
        order = CPU_VARIANTS[r % len(CPU_VARIANTS):] + CPU_VARIANTS[: r % len(CPU_VARIANTS)]
        for key, _, _ in order:
            if key in errors:
                continue
            try:
                res[key].append(run_json(["--cpu", key, "--window", str(window)], fds))
            except Exception as e:
                errors[key] = str(e)
    mean = statistics.mean
    base = mean(x["cpu"] for x in res["baseline"]) if res["baseline"] else 0.0
    qextra = mean(x["cpu"] for x in res["qw-all"]) - base if res["qw-all"] else None
    out = []
    for key, name, note in CPU_VARIANTS:
        if key in errors:
            out.append(f"| {name} | failed: {errors[key]} | | | | | | | | |")
            continue
        xs = [x["cpu"] for x in res[key]]
        m = mean(xs)
        extra = m - base
        rates = [x["rate"] for x in res[key] if x["rate"] is not None]
        got = [(x["joules"], x["served"]) for x in res[key] if x["joules"] is not None]
        rate = f"{mean(rates):.0f}" if rates else ""
        per = f"{extra * 1e4 / mean(rates):.0f}" if rates and mean(rates) > 5 else ""
        w = ", ".join(f"{j / sv:.4f}" if sv else f"{j:.3f} J" for j, sv in got)
        ratio = "" if key == "baseline" or not qextra or qextra <= 0 else f"{extra / qextra:.2f}x"
        after = ", ".join(f"{x['after_cpu']:.1f} % / {x['after_threads']}" for x in res[key])
        out.append(f"| {name} | **{m:.2f}** | {min(xs):.2f} - {max(xs):.2f} | {extra:+.2f} | {ratio} | {rate} | {per} "
                   f"| {w} | {after} | {note} |")
    out.append("| pyJoules | n/a | | | | | | | | no background sampler: it reads at the start and the end of a block only |")
    return out


def load_tools(notes: list) -> dict:
    tools: dict = {}
    for key, fn in (("quietwatt", setup_quietwatt), ("pyjoules", setup_pyjoules), ("codecarbon", setup_codecarbon)):
        try:
            tools[key] = fn()
        except Exception as e:
            notes.append(f"{key} could not be imported: {type(e).__name__}: {e}")
    return tools


def child(args) -> int:
    emu_root = os.environ[CHILD_ENV]
    notes: list = []
    tools = load_tools(notes)
    without = ""
    if "codecarbon" in tools and not os.path.exists("/sys/class/powercap/intel-rapl/subsystem"):
        try:  # what CodeCarbon does on the emulator as it is
            t = cc_tracker(tools["codecarbon"][1])
            t._ensure_hardware_ready()
            without = f"without it CodeCarbon set up {cc_cpu_mode(t)!r}"
        except Exception as e:
            without = f"without it CodeCarbon's setup raises {type(e).__name__}: {e}"
        from codecarbon.core import hardware_cache

        hardware_cache.clear_cache()
    try:
        sub = add_subsystem_link(emu_root)
    except Exception as e:
        sub = f"could not add it: {e}"
    if without:
        sub += f" ({without})"
    cc_mode = "?"
    if "codecarbon" in tools:
        try:
            t = cc_tracker(tools["codecarbon"][1])
            t._ensure_hardware_ready()
            cc_mode = cc_cpu_mode(t)
            for h in t._hardware:
                rf = getattr(getattr(h, "_intel_interface", None), "_rapl_files", None)
                if rf is not None:
                    cc_mode += " reading " + ", ".join(f"`{f.path}`" for f in rf)
            if not cc_mode.startswith("intel_rapl"):
                notes.append(f"CodeCarbon's CPU backend is {cc_mode!r}, not RAPL: its figures do not read the counters")
        except Exception as e:
            notes.append(f"CodeCarbon setup failed: {e}")
    auto = "?"
    if "quietwatt" in tools:
        with tools["quietwatt"].measure() as m:
            pass
        auto = m.mechanism

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load0 = os.getloadavg()[0]
    t_all = time.perf_counter()
    corr = correctness(args.cc_trials, notes)
    ops = op_costs()
    counts = syscall_counts(tools, notes)
    fuse = block_costs(tools, args.rounds, notes, "emulator")
    try:
        with StaticTree(emu_root):
            static = block_costs(tools, args.rounds, notes, "static copy")
    except Exception as e:
        notes.append(f"the static copy could not be set up: {e}")
        static = [Peer(p.name, None, 0) for p in fuse]
        for p in static:
            p.error = "not run"
    costs = cost_table(fuse, static, counts)
    cpu = cpu_cost(args.cpu_rounds, args.window, notes)
    took = time.perf_counter() - t_all
    load1 = os.getloadavg()[0]

    p = print
    p(f"Started {started}; {took:.0f} s; 1-min load average {load0:.2f} before, {load1:.2f} after; "
      f"{len(os.sched_getaffinity(0))} CPUs (sched_getaffinity: the emulator serves 4 in /sys); Linux {platform.release()}; Python {platform.python_version()}.")
    p(f"Versions: quietwatt {version('quietwatt')}, pyJoules {version('pyJoules')}, "
      f"CodeCarbon {version('codecarbon')} (CPU backend: {cc_mode}).")
    p("Per-operation cost here: " + ops + ".")
    p(f"Emulator: intel layout, package {WATTS['package']:g} W, dram {WATTS['dram']:g} W, at the standard paths "
      f"(private mount namespace); `subsystem` link: {sub}; `qw.measure()` auto-picked: {auto}.")
    p()
    p("Correctness: joules for a `time.sleep(1)` block against what the emulator served on that counter between "
      "the tool's first and last read of it (reported / served; the emulator draws 20 W package, 4 W dram):")
    p()
    p("| tool | what it reports | package J: reported / served | ratio | dram J: reported / served | ratio | duration it reports (s) | wall time of the block (s) |")
    p("|---|---|---:|---:|---:|---:|---:|---:|")
    for line in corr:
        p(line)
    p()
    p(f"Cost of one measured empty block (entry + exit), µs of wall time; {args.rounds} interleaved rounds on the "
      "emulator (FUSE), then as many on a frozen copy of its files on tmpfs bound over the same paths (kernel "
      "file costs; counters do not move); ratio: median (min-max) over rounds of the round's median against the "
      "first quietwatt row's; syscalls: strace's %file and %desc calls per block, those on emulated paths in "
      "parentheses:")
    p()
    p("| variant | blocks per pass | emulator: median (µs) | p10 - p90 | ratio | frozen tmpfs copy: median (µs) | p10 - p90 | ratio | file syscalls per block | |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for line in costs:
        p(line)
    p()
    p(f"Background sampling: CPU % of one core of the whole process over {args.window:g}-s windows while the main "
      f"thread sleeps, each window in a fresh process; {args.cpu_rounds} interleaved rounds (mean, min - max); "
      "'added' is above the baseline's mean, 'ratio' divides it by quietwatt's; the rate is what the tool achieved, the "
      "package energy it reported over the whole run is divided by what the emulator served between its first and last read; the last column is the process's CPU and its extra threads in the second "
      "after `stop()` returned:")
    p()
    p("| variant | CPU % (mean) | min - max | added (points) | ratio | samples/s | added CPU µs per sample | package J reported / served, per window | 1 s after `stop()`: CPU % / threads left, per window | |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for line in cpu:
        p(line)
    if notes:
        p()
        p("Notes:")
        for n in notes:
            p("- " + n.replace("\n", "\n  "))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=75)
    ap.add_argument("--cpu-rounds", type=int, default=4)
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--cc-trials", type=int, default=3)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--correct", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cpu", default=None, help=argparse.SUPPRESS)
    args, _ = ap.parse_known_args()
    if args.one is not None:
        return one(args)
    if args.correct is not None or args.cpu is not None:
        import json

        r = correct_one(args.correct) if args.correct is not None else cpu_one(args.cpu, args.window)
        sys.stdout.flush()
        print(json.dumps(r))
        return 0
    if os.environ.get(CHILD_ENV):
        return child(args)
    return parent(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
