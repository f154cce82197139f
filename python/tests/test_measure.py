"""`with quietwatt.measure()` and `@quietwatt.measure_energy` against the
emulator's ground truth: what it served between the first and last read."""

from __future__ import annotations

import logging
import os
import time

import pytest

import quietwatt as qw
from conftest import threads


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def assert_matches_served(m: qw.Measurement, emu: qw.Emulator, mechanism: str) -> None:
    """Each domain within its stated uncertainty of what the emulator served it."""
    assert m.domains, m.report
    for d in m.domains:
        detail = emu.served_detail(d.domain, d.socket, mechanism)
        assert detail is not None, f"the emulator served no {mechanism} read of {d.socket}/{d.domain}"
        # msr probes each register once while opening; it counts from the second read.
        first = detail["second_j"] if mechanism == "msr" else detail["first_j"]
        served = detail["last_j"] - first
        assert abs(d.energy_j - served) <= d.uncertainty_j, (
            f"{d}: the emulator served {served} J"
        )
        assert d.energy_j > 0


@pytest.mark.parametrize("mechanism", ["powercap", "msr"])
def test_a_block_measures_what_the_emulator_served_within_the_uncertainty(emu, mechanism):
    with qw.measure(root=emu.root, mechanism=mechanism) as m:
        assert not m.done
        # One thread at most, the wrap guard that reads the counters between the
        # block's two reads (twice per safe period), so that a block of any
        # length is exact; it ends with the block.
        started = [t for t in threads() if t.startswith("quietwatt")]
        assert started in ([], ["quietwatt-guard"]), f"measure() started: {threads()}"
        busy(0.1)
    assert not [t for t in threads() if t.startswith("quietwatt")], f"left running: {threads()}"
    assert m.done and m.mechanism == mechanism and m.emulated
    assert_matches_served(m, emu, mechanism)
    # The total counts package and dram, core and uncore being inside package.
    pkg, dram = m.domain("package"), m.domain("dram")
    assert m.total_rule == "package + dram"
    assert m.total_j == pytest.approx(pkg.energy_j + dram.energy_j, abs=1e-9)
    assert m.uncertainty_j == pytest.approx(pkg.uncertainty_j + dram.uncertainty_j, abs=1e-9)
    assert m.duration_s > 0.09
    assert m.power_w == pytest.approx(m.total_j / m.duration_s, rel=1e-6)


def test_root_from_the_environment_and_domains_as_text_or_list(emu, monkeypatch):
    monkeypatch.setenv(qw.ROOT_ENV, emu.root)
    with qw.measure(mechanism="powercap", domains="package,dram") as a:
        busy(0.02)
    with qw.measure(mechanism="powercap", domains=["dram"]) as b:
        busy(0.02)
    assert [d.domain for d in a.domains] == ["package", "dram"]
    assert [d.domain for d in b.domains] == ["dram"]
    assert b.total_rule == "dram" and b.total_j == b.domains[0].energy_j
    assert a.emulated and b.emulated


def test_an_exception_in_the_block_still_stops_the_measurement_and_propagates(emu):
    block = qw.measure(root=emu.root, mechanism="powercap")
    with pytest.raises(ZeroDivisionError):
        with block as m:
            busy(0.02)
            1 / 0
    assert m.done and m.total_j > 0
    assert_matches_served(m, emu, "powercap")


def test_the_decorator_measures_each_call_and_hands_it_to_the_handler(emu):
    got = []

    @qw.measure_energy(handler=got.append, root=emu.root, mechanism="powercap", domains="package")
    def work(n):
        busy(0.01 * n)
        return n * 2

    assert work(1) == 2
    emu.reset_served()
    assert work(2) == 4
    assert len(got) == 2 and work.last_measurement is got[1]
    assert got[0].label.endswith("work")
    assert all(m.domain("package").energy_j > 0 for m in got)
    # The second call did twice the work: more energy (each ± its uncertainty).
    a, b = (m.domain("package") for m in got)
    assert b.energy_j + b.uncertainty_j > a.energy_j - a.uncertainty_j
    assert_matches_served(got[1], emu, "powercap")


def test_the_bare_decorator_logs_and_a_raising_call_is_measured_too(emu, monkeypatch, caplog):
    monkeypatch.setenv(qw.ROOT_ENV, emu.root)

    @qw.measure_energy
    def fails():
        busy(0.01)
        raise KeyError("boom")

    with caplog.at_level(logging.INFO, logger="quietwatt"):
        with pytest.raises(KeyError):
            fails()
    assert fails.last_measurement is not None and fails.last_measurement.done
    logged = [r.getMessage() for r in caplog.records if r.name == "quietwatt"]
    assert any("fails" in line and " J " in line and "EMULATED" in line for line in logged), logged


def emulator_mounts() -> int:
    with open("/proc/self/mounts") as f:
        return sum(line.startswith("quietwatt-emulator ") for line in f)


def test_emulate_on_mounts_the_builtin_emulator_for_the_block_and_says_so():
    before = emulator_mounts()
    with pytest.warns(UserWarning, match="EMULATED RAPL"):
        with qw.measure(emulate="on") as m:
            assert emulator_mounts() == before + 1
            busy(0.02)
    assert m.emulated and m.total_j > 0
    # The emulator is gone with the block.
    assert emulator_mounts() == before


def open_counters(root: str) -> int:
    """Files of this process open under `root` (the emulator's counters)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith(root)
        except OSError:
            pass  # closed while listed
    return n


def test_repeated_blocks_reuse_the_opened_counters_and_stay_exact(emu):
    with qw.measure(root=emu.root, mechanism="powercap"):
        pass  # opens the counters, which are kept
    # The 4 counters stay open between blocks, ready for the next one...
    assert open_counters(emu.root) == 4
    for _ in range(3):
        emu.reset_served()
        with qw.measure(root=emu.root, mechanism="powercap") as m:
            busy(0.02)
        # ...which reads them again instead of opening new ones (none leak), and
        # its two readings are all that reached the counters.
        assert open_counters(emu.root) == 4
        assert emu.served_detail("package", 0, "powercap")["reads"] == 2
        assert_matches_served(m, emu, "powercap")
