"""``measure(share=...)``: this process's (or its cgroup's) part of the package
energy of a block, split by CPU time from the accounting program's context
switches, checked against the process's own CPU clock (a second, independent
count) and against the package energy it splits. Needs root and BTF, as the
suite does (the share's error names what is missing elsewhere)."""

from __future__ import annotations

import time
import warnings

import pytest

import quietwatt as qw


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.fixture(autouse=True)
def quiet_emulation_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def test_a_busy_blocks_share_follows_its_cpu_time_and_stays_within_the_package(emu):
    # Before: no share at all; the figure was the machine's, whoever ran.
    with qw.measure(root=emu.root, share="process") as m:
        c0 = time.process_time()
        busy(0.3)
        cpu = time.process_time() - c0
    s = m.share
    assert s is not None and s["scope"] == "process", m.report
    # The accounting program's CPU time of this process against its own clock
    # (the block's reads and the share's start add a little).
    assert cpu * 0.9 - 0.01 <= s["cpu_s"] <= cpu * 1.1 + 0.05, (s, cpu)
    # What is split is the package energy measured, and the share is part of it.
    pkg = m.domain("package")
    assert pkg is not None
    assert s["package_j"] == pytest.approx(pkg.energy_j, abs=1e-6)
    assert 0 < s["energy_j"] <= s["package_j"] + 1e-6
    assert s["energy_j"] == pytest.approx(s["dynamic_j"] + s["idle_j"], abs=2e-6)
    assert m.share_j == s["energy_j"]
    assert "process's share" in str(m)
    assert s["dram"].startswith("not split")


def test_a_sleeping_block_gets_almost_none_of_the_idle_package(emu):
    # The emulated package draws 20 W whatever runs: with that as its idle power,
    # a process that slept gets only its CPU time's share of it.
    with qw.measure(root=emu.root, share="process", idle_watts=20.0) as m:
        time.sleep(0.3)
    s = m.share
    assert s is not None
    assert s["cpu_s"] < 0.05, s
    assert s["energy_j"] < 0.1 * s["package_j"], s
    assert s["idle_power"].startswith("configured: 20")


def test_the_cgroups_share_holds_the_process(emu):
    with qw.measure(root=emu.root, share="cgroup") as m:
        busy(0.2)
    s = m.share
    assert s is not None and s["scope"] == "cgroup" and s["entity"].startswith("cgroup /"), s
    assert s["cpu_s"] >= 0.15, s
    assert 0 < s["energy_j"] <= s["package_j"] + 1e-6


def test_what_cannot_be_shared_is_refused_with_the_fix(emu):
    with pytest.raises(qw.BadArgument, match="share='process'"):
        qw.measure(root=emu.root, share="thread").start()  # type: ignore[arg-type]
    with pytest.raises(qw.BadArgument, match="expected 'process' or 'cgroup'"):
        qw.measure(root=emu.root, share="everyone").start()  # type: ignore[arg-type]
    with pytest.raises(qw.BadArgument, match="idle_watts"):
        qw.measure(root=emu.root, share="process", idle_watts=-1).start()
    # Without share, nothing of it is reported.
    with qw.measure(root=emu.root) as m:
        pass
    assert m.share is None and m.share_j is None
