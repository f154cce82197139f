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

1. the cost of one measured empty block (entry plus exit, construction included
   where the tool's idiom constructs per block), in microseconds of wall time;
2. the cost of background sampling: CPU % of one core of the whole process
   (``time.process_time()``: every thread) over a fixed wall window while the main
   thread sleeps, for quietwatt's ``Monitor`` at 1 kHz, CodeCarbon's tracker at
   ``measure_power_secs=0.001`` (it accepts any positive float; there is no minimum in
   the code) and at its default 15 s, against a baseline with no tool;
3. what each tool reports for a 1-s sleep, against the 24 W (20 W package + 4 W
   dram) the emulator serves.

It prints Markdown tables. Options: ``--rounds N`` (cost rounds, default 15),
``--cpu-rounds N`` (default 3), ``--window S`` (CPU window, default 3 s).

Two things are not like a real machine and are said in the output: every read of an
emulated file is a FUSE round trip to the emulator's daemon (the parent process, whose
CPU is not counted here), so the per-read cost differs from sysfs; and the emulator
serves no ``subsystem`` link in ``/sys/devices/virtual/powercap/intel-rapl`` (the
kernel does), which CodeCarbon's RAPL backend requires: the child adds that link in its
own namespace (a tmpfs over ``/sys/devices/virtual/powercap`` with the emulator's
entries bound back), the same for every tool.
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
import traceback

WATTS = {"package": 20.0, "dram": 4.0}
CHILD_ENV = "QW_BENCH_PEERS_EMU"


# --------------------------------------------------------------------------------
# parent: mount the emulator, run the child at the standard paths


def parent(argv: list) -> int:
    import quietwatt as qw

    if os.geteuid() != 0:
        print("needs root: the emulator goes to the standard paths in a private mount namespace", file=sys.stderr)
        return 2
    with qw.Emulator(watts=WATTS) as emu:
        enter = os.path.join(emu.root, ".quietwatt-emulator", "enter.sh")
        env = dict(os.environ, **{CHILD_ENV: emu.root})
        env.pop("QUIETWATT_ROOT", None)
        rc = subprocess.run(["sh", enter, sys.executable, os.path.abspath(__file__)] + argv, env=env).returncode
    return rc


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


def correctness(tools: dict, notes: list) -> list:
    """Each tool's joules for a 1-s sleep, against 24 W x the block's wall time."""
    rows = []
    expect_w = WATTS["package"] + WATTS["dram"]

    def run(name, fn):
        try:
            t0 = time.perf_counter()
            pkg, dram, dur, what = fn()
            wall = time.perf_counter() - t0
            tot = None if pkg is None else pkg + (dram or 0.0)
            rows.append((name, what, pkg, dram, tot, dur, wall))
        except Exception as e:
            rows.append((name, f"failed: {type(e).__name__}: {e}", None, None, None, None, None))

    qw = tools.get("quietwatt")
    if qw is not None:
        def q():
            with qw.measure(mechanism="powercap") as m:
                time.sleep(1.0)
            return m.domain("package").energy_j, m.domain("dram").energy_j, m.duration_s, f"`total_j` ({m.total_rule})"
        run("quietwatt `measure`", q)

        def qm():
            mon = qw.Monitor(freq=1000, mechanism="powercap")
            mon.start()
            time.sleep(1.0)
            m = mon.stop()
            return m.domain("package").energy_j, m.domain("dram").energy_j, m.duration_s, "`Monitor` 1 kHz, `total_j`"
        run("quietwatt `Monitor`", qm)

    pj = tools.get("pyjoules")
    if pj is not None:
        EnergyContext, _, EnergyHandler, Pkg, Dram = pj

        def p():
            h = EnergyHandler()
            with EnergyContext(handler=h, domains=[Pkg(0), Dram(0)], start_tag="sleep"):
                time.sleep(1.0)
            s = h.traces[-1][0]
            return s.energy["package_0"] / 1e6, s.energy["dram_0"] / 1e6, s.duration, "`package_0` + `dram_0` (µJ)"
        run("pyJoules `EnergyContext`", p)

    cc = tools.get("codecarbon")
    if cc is not None:
        _, Off = cc

        def c(secs):
            def f():
                t = cc_tracker(Off, secs)
                t.start()
                time.sleep(1.0)
                t.stop()
                d = t.final_emissions_data
                mode = cc_cpu_mode(t)
                # cpu_energy: RAPL package (dram is a package subzone here: CodeCarbon
                # skips it); ram_energy: its RAM power model, not RAPL.
                return (d.cpu_energy * 3.6e6, d.ram_energy * 3.6e6, d.duration,
                        f"`cpu_energy` ({mode}) + `ram_energy` (its RAM model) (kWh)")
            return f
        run("CodeCarbon tracker (15 s)", c(15.0))
        run("CodeCarbon tracker (1 ms)", c(0.001))

    out = []
    for name, what, pkg, dram, tot, dur, wall in rows:
        if tot is None:
            out.append(f"| {name} | {what} | | | | | |")
            continue
        exp = expect_w * dur
        out.append(
            f"| {name} | {what} | {pkg:.3f} | {dram:.3f} | {tot:.3f} | {dur:.3f} | {exp:.3f} | {tot / exp:.4f} |"
        )
    return out


def block_costs(tools: dict, rounds: int, notes: list) -> list:
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

        peers.append(Peer('quietwatt `with qw.measure(mechanism="powercap")`', lambda: q_powercap, 200,
                          "4 counters (package, core, uncore, dram)"))
        peers.append(Peer("quietwatt `with qw.measure()` (auto)", lambda: q_auto, 200, "auto-picks"))
        peers.append(Peer('quietwatt `measure(mechanism="powercap", domains="package,dram")`', lambda: q_two, 200,
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

        peers.append(Peer("pyJoules `with EnergyContext(domains=[package, dram])`", make_ctx, 200,
                          "constructs its devices per block"))
        peers.append(Peer("pyJoules `@measure_energy` empty function", make_deco, 200,
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

        peers.append(Peer("CodeCarbon `OfflineEmissionsTracker(...)`, `.start()`, `.stop()`", make_full, 4,
                          "constructs per block (hardware plan cached after the first)"))
        peers.append(Peer("CodeCarbon `start_task()` / `stop_task()`", make_task, 20, "one tracker, never `start()`ed"))

    for p in peers:
        try:
            p.once = p.make()
            for _ in range(3 if p.iters < 10 else 20):  # warm-up (caches, imports)
                p.once()
        except Exception as e:
            p.error = f"{type(e).__name__}: {e}"
            notes.append(f"{p.name} failed: {p.error}\n{traceback.format_exc()}")
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

    ref = live[0] if live and live[0].name.startswith("quietwatt") else None
    out = []
    for p in peers:
        if p.error is not None:
            out.append(f"| {p.name} | failed: {p.error} | | | | |")
            continue
        med = statistics.median(p.samples_us)
        if ref is not None:
            ratios = [a / b for a, b in zip(p.round_medians, ref.round_medians)]
            ratio = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        else:
            ratio = ""
        out.append(
            f"| {p.name} | {len(p.samples_us)} | **{med:.1f}** | {pct(p.samples_us, 10):.1f} - {pct(p.samples_us, 90):.1f} "
            f"| {ratio} | {p.note} |"
        )
    return out


def cpu_cost(tools: dict, rounds: int, window: float, notes: list) -> list:
    variants = []

    def baseline():
        def start():
            return None

        def stop(h):
            return None, None
        return start, stop

    variants.append(("no tool (baseline)", baseline, "main thread sleeping"))
    qw = tools.get("quietwatt")
    if qw is not None:
        def qmon():
            def start():
                mon = qw.Monitor(freq=1000, mechanism="powercap")
                mon.start()
                return mon

            def stop(mon):
                m = mon.stop()
                ov = m.report["overhead"]
                return ov["samples"] / ov["duration_s"], m.domain("package").energy_j / m.duration_s
            return start, stop
        variants.append(("quietwatt `Monitor(freq=1000)`", qmon, "native thread, 4 counters a sample"))
    cc = tools.get("codecarbon")
    if cc is not None:
        _, Off = cc

        def cct(secs):
            def v():
                def start():
                    t = cc_tracker(Off, secs)
                    t._ensure_hardware_ready()
                    t.start()
                    return (t, t._power_measurement_count, time.perf_counter())

                def stop(h):
                    t, n0, t0 = h
                    n1, t1 = t._power_measurement_count, time.perf_counter()
                    t.stop()
                    d = t.final_emissions_data
                    return (n1 - n0) / (t1 - t0), d.cpu_energy * 3.6e6 / d.duration
                return start, stop
            return v
        variants.append(("CodeCarbon tracker, `measure_power_secs=0.001`", cct(0.001),
                         "threading.Timer per sample, + its 1-s power monitor"))
        variants.append(("CodeCarbon tracker, default `measure_power_secs=15`", cct(15.0),
                         "only its 1-s power monitor ticks in the window"))
    results = {name: [] for name, _, _ in variants}
    rates = {name: [] for name, _, _ in variants}
    watts = {name: [] for name, _, _ in variants}
    errors = {}
    for r in range(rounds):
        order = variants[r % len(variants):] + variants[: r % len(variants)]
        for name, make, _ in order:
            if name in errors:
                continue
            try:
                start, stop = make()
                h = start()
                time.sleep(0.2)  # let it settle
                c0, w0 = time.process_time(), time.perf_counter()
                time.sleep(window)
                c1, w1 = time.process_time(), time.perf_counter()
                rate, w = stop(h)
                results[name].append(100.0 * (c1 - c0) / (w1 - w0))
                if rate is not None:
                    rates[name].append(rate)
                    watts[name].append(w)
            except Exception as e:
                errors[name] = f"{type(e).__name__}: {e}"
                notes.append(f"{name} failed: {errors[name]}\n{traceback.format_exc()}")
    base = statistics.mean(results["no tool (baseline)"]) if results["no tool (baseline)"] else 0.0
    qname = "quietwatt `Monitor(freq=1000)`"
    qextra = statistics.mean(results[qname]) - base if results.get(qname) else None
    out = []
    for name, _, note in variants:
        if name in errors:
            out.append(f"| {name} | failed: {errors[name]} | | | | | |")
            continue
        xs = results[name]
        m = statistics.mean(xs)
        spread = f"{min(xs):.2f} - {max(xs):.2f}"
        extra = m - base
        rate = f"{statistics.mean(rates[name]):.0f}" if rates[name] else ""
        w = f"{statistics.mean(watts[name]):.2f}" if watts[name] else ""
        if name.startswith("no tool"):
            ratio = ""
        elif qextra and qextra > 0:
            ratio = f"{extra / qextra:.2f}x"
        else:
            ratio = ""
        out.append(f"| {name} | **{m:.2f}** | {spread} | {extra:+.2f} | {ratio} | {rate} | {w} | {note} |")
    out.append("| pyJoules | n/a | | | | | | no background sampler: it reads at the start and the end of a block only |")
    return out


def child(args) -> int:
    emu_root = os.environ[CHILD_ENV]
    notes: list = []
    try:
        sub = add_subsystem_link(emu_root)
    except Exception as e:
        sub = f"could not add it: {e}"
    tools: dict = {}
    for key, fn in (("quietwatt", setup_quietwatt), ("pyjoules", setup_pyjoules), ("codecarbon", setup_codecarbon)):
        try:
            tools[key] = fn()
        except Exception as e:
            notes.append(f"{key} could not be imported: {type(e).__name__}: {e}")
    cc_mode = "?"
    if "codecarbon" in tools:
        try:
            t = cc_tracker(tools["codecarbon"][1])
            t._ensure_hardware_ready()
            cc_mode = cc_cpu_mode(t)
            if cc_mode != "intel_rapl":
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
    corr = correctness(tools, notes)
    costs = block_costs(tools, args.rounds, notes)
    cpu = cpu_cost(tools, args.cpu_rounds, args.window, notes)
    took = time.perf_counter() - t_all
    load1 = os.getloadavg()[0]

    p = print
    p(f"Started {started}; {took:.0f} s; 1-min load average {load0:.2f} before, {load1:.2f} after; "
      f"{os.cpu_count()} CPUs; Linux {platform.release()}; Python {platform.python_version()}.")
    p(f"Versions: quietwatt {version('quietwatt')}, pyJoules {version('pyJoules')}, "
      f"CodeCarbon {version('codecarbon')} (CPU backend: {cc_mode}).")
    p(f"Emulator: intel layout, package {WATTS['package']:g} W, dram {WATTS['dram']:g} W, at the standard paths "
      f"(private mount namespace); `subsystem` link: {sub}; `qw.measure()` auto-picked: {auto}.")
    p()
    p("Joules for a 1-s `time.sleep(1)`, against 24 W x the duration each tool reports:")
    p()
    p("| tool | what is summed | package (J) | dram (J) | total (J) | duration (s) | 24 W x duration (J) | total / expected |")
    p("|---|---|---:|---:|---:|---:|---:|---:|")
    for line in corr:
        p(line)
    p()
    p(f"Cost of one measured empty block (entry + exit), µs of wall time; {args.rounds} interleaved rounds; "
      "ratio: median (min-max) over rounds of the round's median against the first quietwatt row's:")
    p()
    p("| variant | blocks | median (µs) | p10 - p90 (µs) | ratio to quietwatt | |")
    p("|---|---:|---:|---:|---:|---|")
    for line in costs:
        p(line)
    p()
    p(f"Background sampling: CPU % of one core of the whole process over {args.window:g}-s windows while the main "
      f"thread sleeps; {args.cpu_rounds} interleaved rounds (mean, min - max); 'added' is above the baseline's mean, "
      "'ratio' divides it by quietwatt's; the rate and package power are what the tool achieved and reported:")
    p()
    p("| variant | CPU % (mean) | min - max | added (points) | ratio | samples/s | package W | |")
    p("|---|---:|---:|---:|---:|---:|---:|---|")
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
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cpu-rounds", type=int, default=3)
    ap.add_argument("--window", type=float, default=3.0)
    args, _ = ap.parse_known_args()
    if os.environ.get(CHILD_ENV):
        return child(args)
    return parent(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
