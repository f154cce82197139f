"""`quietwatt.Emulator` from Python: its ground truth, what it served, faults,
and a clean unmount."""

from __future__ import annotations

import os
import time

import pytest

import quietwatt as qw
from conftest import threads


def test_the_truth_grows_at_the_configured_watts_and_measurements_match_it():
    with qw.Emulator(layout="amd", watts="package=30", sockets=2) as emu:
        assert os.path.isdir(os.path.join(emu.root, "sys/class/powercap"))
        assert emu.config["sockets"] == 2 and emu.watts("package", 1) == 30
        t0, e0 = emu.config, emu.truth("package", 1)
        time.sleep(0.05)
        assert emu.truth("package", 1) > e0
        with qw.measure(root=emu.root, mechanism="msr") as m:
            time.sleep(0.05)
        assert {(d.socket, d.domain) for d in m.domains} >= {(0, "package"), (1, "package")}
        assert m.total_rule == "package"  # AMD: per-core counters are inside the package
        for s in (0, 1):
            d = m.domain("package", s)
            detail = emu.served_detail("package", s, "msr")
            served = detail["last_j"] - detail["second_j"]
            assert abs(d.energy_j - served) <= d.uncertainty_j, (d, served)
    assert not emu.mounted


def test_a_model_with_a_quirk_and_psys_is_served_as_the_kernel_sees_it():
    # Sapphire Rapids counts psys in whole joules: up for a minute, it reads > 0.
    with qw.Emulator(layout="intel:0x8F", psys=True, start_offset_s=60) as emu:
        names = {d["domain"] for d in qw.domains(root=emu.root, mechanism="msr")}
        assert "psys" in names and "package" in names
    with pytest.raises(qw.BadArgument, match="model"):
        qw.Emulator(layout="intel:kabylake")
    with pytest.raises(qw.BadArgument, match="vendor"):
        qw.Emulator(layout="arm")


def test_a_counter_reset_is_reported_not_counted_as_a_wrap():
    # Up for ten minutes: the restarted counter reads far below where it was.
    with qw.Emulator(watts={"package": 20}, start_offset_s=600) as emu:
        with qw.measure(root=emu.root, mechanism="powercap", domains="package") as m:
            time.sleep(0.02)
            emu.inject("reset:0/package")
            time.sleep(0.02)
        d = m.domain("package")
        # A wrap would have added the counter's whole range, 262 kJ; what is
        # counted is the energy since the restart, no more than the block's (its
        # time, plus the 30 ms a loaded host may serve a read late).
        assert 0 < d.energy_j <= 20 * (m.duration_s + 0.03) + d.uncertainty_j, d
        assert m.report["counter_events"], m.report
        assert any("restarted" in w or "reset" in w for w in m.warnings), m.warnings


def test_unmount_joins_its_threads_and_removes_its_directory():
    before = [t for t in threads()]
    emu = qw.Emulator()
    root = emu.root
    with qw.measure(root=root, mechanism="powercap"):
        pass
    emu.unmount()
    emu.unmount()  # twice is fine
    assert not os.path.exists(root)
    assert threads() == before
    with pytest.raises(qw.BadArgument, match="unmounted"):
        emu.truth("package")


def test_doctor_and_domains_take_the_common_arguments(emu):
    [v] = qw.doctor(root=emu.root, mechanism="powercap")
    assert v["mechanism"] == "powercap" and v["works"] is True, v
    rows = qw.domains(root=emu.root, mechanism="msr", domains="package,dram")
    assert {(r["mechanism"], r["domain"]) for r in rows} == {("msr", "package"), ("msr", "dram")}
    assert all(r["moves"] for r in rows)
    with pytest.raises(qw.BadArgument, match="unknown mechanism"):
        qw.doctor(mechanism="nvml")
