"""`quietwatt.Monitor`: the samples add up to the run, each window is exactly the
samples between its ends (nested and overlapping), and nothing is left running."""

from __future__ import annotations

import random
import time
from typing import Dict, List, Tuple

import pytest

import quietwatt as qw
from conftest import threads


def rows_by_time(mon: qw.Monitor) -> Tuple[List[int], List[Dict[str, float]]]:
    """The readings in time order, the start's first: the time of each, and the
    energy per domain since the one before (none for the start)."""
    s = mon.samples()
    times: List[int] = []
    energy: List[Dict[str, float]] = [{}]
    for t, dt, dom, e in zip(s["timestamp_ns"], s["interval_ns"], s["domain"], s["energy_j"]):
        if not times:
            times.append(t - dt)  # the start's reading, which is no row
        if times[-1] != t:
            times.append(t)
            energy.append({})
        energy[-1][dom] = e
    return times, energy


def span_of(window: qw.Measurement, times: List[int], energy: List[Dict[str, float]]) -> Tuple[int, int]:
    """The readings (i, j] whose energies add up to the window's, every domain, and
    whose time span is its duration: there must be exactly one such run."""
    want = {d.domain: d.energy_j for d in window.domains}
    dur_ns = window.duration_s * 1e9
    found = []
    for i in range(len(times)):
        for j in range(i + 1, len(times)):
            if abs((times[j] - times[i]) - dur_ns) > 2_000:
                continue
            got = {k: sum(energy[r][k] for r in range(i + 1, j + 1)) for k in want}
            if all(abs(got[k] - want[k]) <= 1e-9 * max(1.0, want[k]) for k in want):
                found.append((i, j))
    assert len(found) == 1, f"{window}: readings matching it: {found} of {times}"
    return found[0]


def test_the_samples_add_up_to_the_run_and_to_what_the_emulator_served(emu):
    mon = qw.Monitor(freq=200, root=emu.root, mechanism="powercap")
    emu.reset_served()
    mon.start()
    assert mon.running and "quietwatt-sessi" in threads(), f"samples on a thread of its own: {threads()}"
    time.sleep(0.3)
    snap = mon.snapshot()
    run = mon.stop()
    assert "quietwatt-sessi" not in threads(), f"the sampler thread is joined by stop(): {threads()}"
    assert not mon.running and run.emulated and run.mechanism == "powercap"
    assert snap.duration_s <= run.duration_s
    df = mon.to_pandas()
    assert list(df.columns) == list(qw.SCHEMA)
    assert df.attrs["mechanism"] == "powercap" and df.attrs["emulated"] is True
    assert len(df) >= 4 * 10
    for d in run.domains:
        rows = df[df["domain"] == d.domain]
        # Conservation: the rows are the run, split.
        assert rows["energy_j"].sum() == pytest.approx(d.energy_j, abs=1e-9)
        # And the run is what the emulator served, within the uncertainty.
        served = emu.served(d.domain, d.socket, "powercap")
        assert abs(d.energy_j - served) <= d.uncertainty_j, f"{d} vs served {served}"
        # Power of a row is its energy over its interval.
        r = rows.iloc[len(rows) // 2]
        assert r["power_w"] == pytest.approx(r["energy_j"] / (r["interval_ns"] * 1e-9))
    assert (df.groupby("domain")["timestamp_ns"].apply(lambda t: t.is_monotonic_increasing)).all()


def test_nested_and_overlapping_windows_are_exactly_the_samples_between_their_ends():
    # Power that changes every 3 ms, pseudo-randomly: no two spans of readings
    # draw the same energy, so each window matches one span only.
    rnd = random.Random(7)
    trace = [(k * 0.003, rnd.uniform(0.5, 1.5)) for k in range(2000)]
    with qw.Emulator(trace=trace) as emu, qw.Monitor(freq=200, root=emu.root, mechanism="powercap") as mon:
        mon.begin_window("outer")
        time.sleep(0.03)
        mon.begin_window("a")
        time.sleep(0.03)
        mon.begin_window("inner")
        time.sleep(0.03)
        mon.begin_window("b")  # overlaps a: opened inside it, closed after it
        time.sleep(0.03)
        inner = mon.end_window("inner")
        a = mon.end_window("a")
        time.sleep(0.03)
        b = mon.end_window("b")
        time.sleep(0.03)
        outer = mon.end_window("outer")
        with pytest.raises(qw.BadArgument, match="no-such"):
            mon.end_window("no-such")
    times, energy = rows_by_time(mon)
    spans = {w.label: span_of(w, times, energy) for w in (outer, a, inner, b)}
    o, sa, si, sb = spans["outer"], spans["a"], spans["inner"], spans["b"]
    # Nesting: inner inside a inside outer; b inside outer.
    assert o[0] <= sa[0] <= si[0] and si[1] <= sa[1] <= o[1]
    assert o[0] <= sb[0] and sb[1] <= o[1]
    # Overlap: b opens inside a and closes after it.
    assert sa[0] <= sb[0] <= sa[1] <= sb[1]
    for w in (outer, a, inner, b):
        assert w.emulated and w.label in spans
        assert all(d.energy_j > 0 for d in w.domains)


def test_a_small_buffer_drops_old_samples_but_their_energy_still_counts(emu):
    mon = qw.Monitor(freq=500, root=emu.root, mechanism="powercap", keep_s=0.01)
    mon.start()
    time.sleep(0.2)
    run = mon.stop()
    dropped = run.report["samples"]["dropped"]
    assert dropped > 0, run.report["samples"]
    assert any("dropped" in w for w in mon.warnings)
    df = mon.to_pandas()
    kept = df[df["domain"] == "package"]["energy_j"].sum()
    lost = run.report["samples"]["dropped_energy_j"][0]
    assert kept + lost == pytest.approx(run.domain("package").energy_j, abs=1e-9)


def test_draining_while_running_loses_nothing(emu):
    with qw.Monitor(freq=500, root=emu.root, mechanism="powercap", keep_s=0.05) as mon:
        for _ in range(6):
            time.sleep(0.03)
            mon.samples()  # hands over what accumulated
    run = mon.result
    assert run.report["samples"]["dropped"] == 0, run.report["samples"]
    df = mon.to_pandas()
    assert df[df["domain"] == "dram"]["energy_j"].sum() == pytest.approx(run.domain("dram").energy_j, abs=1e-9)


def test_a_monitor_refuses_a_bad_rate_and_a_second_start(emu):
    with pytest.raises(qw.BadArgument, match="freq"):
        qw.Monitor(freq=0)
    with pytest.raises(ValueError):
        qw.Monitor(freq=-5)
    with qw.Monitor(freq=100, root=emu.root) as mon:
        with pytest.raises(qw.BadArgument, match="already running"):
            mon.start()
    with pytest.raises(qw.BadArgument, match="not running"):
        mon.begin_window("late")


def test_polars_has_the_same_rows_as_pandas(emu):
    import polars  # noqa: F401  (installed by the test set-up)
    with qw.Monitor(freq=100, root=emu.root, mechanism="powercap") as mon:
        time.sleep(0.05)
    assert mon.to_polars().height == len(mon.to_pandas())
