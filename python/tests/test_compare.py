"""quietwatt.compare() and compare_runs(): the command-line tool's comparison
statistics from Python, against the emulator (constant power: a call twice as
long draws twice the energy)."""

from __future__ import annotations

import csv
import json
import subprocess
import time

import pytest

import quietwatt as qw


def busy(s: float) -> None:
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass


def busy20() -> None:
    busy(0.02)


def busy40() -> None:
    busy(0.04)


def test_twice_as_long_is_twice_the_energy_significantly_more(emu):
    order = []
    c = qw.compare(lambda: (order.append("a"), busy20()), lambda: (order.append("b"), busy40()),
                   runs=8, warmup=1, root=emu.root)
    # The warm-up calls are not measured; the runs are interleaved, shuffled.
    assert order[:2] == ["a", "b"] and order.count("a") == order.count("b") == 9
    rounds = [tuple(order[i:i + 2]) for i in range(2, len(order), 2)]
    assert set(rounds) == {("a", "b"), ("b", "a")}, rounds
    assert c.a.n == c.b.n == 8 and len(c.runs_a) == len(c.runs_b) == 8
    # The emulator's power is constant, so the true ratio of the energies is the
    # ratio of the runs' lengths: 2 on a quiet machine, less when a loaded one
    # stretches the short runs (a late stop read adds the same to both). The
    # interval holds the truth, and leaves out 1.
    span = lambda ms: sum(m.duration_s for m in ms) / len(ms)  # noqa: E731
    truth = span(c.runs_b) / span(c.runs_a)
    assert c.ci[0] <= truth <= c.ci[1] and c.ci[0] > 1, (truth, str(c))
    assert 1.5 < c.ratio < 2.2, c
    assert c.ratio == pytest.approx(c.b.mean / c.a.mean)
    assert c.verdict == "significantly more" and c.significant and c.p_value < 0.05
    assert c.shift_j > 0 and c.shift_ci[0] > 0
    assert c.emulated and c.passed is None and c.gate is None
    # Each run is the emulator's 24 W over the call: its values are the runs'.
    assert list(c.a.values) == [m.total_j for m in c.runs_a]
    assert all(m.emulated and m.total_rule == "package + dram" for m in c.runs_a + c.runs_b)
    text = str(c)
    assert text.startswith("b (<lambda>) is ") and "× a (<lambda>)" in text and "significantly more" in text
    assert "EMULATED" in text and "<b>" in c._repr_html_() and "significantly more" in c._repr_html_()


def test_identical_calls_show_no_significant_difference(emu):
    c = qw.compare(busy20, busy20, runs=8, root=emu.root)
    assert c.verdict == "no significant difference" or c.ci[0] <= 1 <= c.ci[1], c
    assert c.ci[0] < 1.3 and c.ci[1] > 0.77, c
    assert c.a.label != c.b.label  # two sides told apart even when the names match


def test_a_gate_of_50_percent_on_twice_the_energy_is_a_regression(emu):
    c = qw.compare(busy20, busy40, runs=8, root=emu.root, gate_pct=50)
    # The true ratio (2) is above the gate, so it never passes. A loaded host
    # stretches the short runs more (1.70 [1.46, 1.99] once, under stress-ng):
    # then the interval may straddle 1.5 and the gate says it cannot tell.
    assert c.passed is False and c.gate in ("regression", "inconclusive"), c
    expected = "regression" if c.ci[0] > 1.5 and c.verdict == "significantly more" else "inconclusive"
    assert c.gate == expected, c
    assert c.gate.upper() in str(c) and "busy40 is " in str(c)
    # The same runs, reversed: half the energy passes the gate.
    r = qw.compare_runs(c.runs_b, c.runs_a, gate_pct=50)
    assert r.verdict == "significantly less" and r.gate == "pass" and r.passed is True, r
    assert r.ratio == pytest.approx(1 / c.ratio)


def test_compare_runs_gives_the_same_statistics_as_the_command_line_tool(tmp_path):
    a = [1.00, 1.10, 0.90, 1.05, 0.98]
    b = [2.00, 2.10, 1.90, 2.05, 2.02]
    c = qw.compare_runs(a, b)
    assert (c.a.label, c.b.label) == ("a", "b") and c.a.bounds == (0.0,) * 5
    assert c.a.mean == pytest.approx(sum(a) / 5) and c.b.max == 2.10
    assert c.verdict == "significantly more" and c.ratio == pytest.approx(sum(b) / sum(a))
    assert c.ci[0] < c.ratio < c.ci[1]
    same = qw.compare_runs(a, list(a))
    assert same.verdict == "no significant difference" and same.ratio == 1.0
    assert same.ci[0] < 1 < same.ci[1] and same.p_value == pytest.approx(1.0)
    # Hyperfine's summary line, as `quietwatt compare` prints it.
    assert c.summary.startswith(f"'b' used {c.ratio:.2f}"), c.summary
    assert "× the energy of 'a' [" in c.summary and c.summary.endswith("(95 % CI)")


def test_measurement_bounds_widen_the_interval(emu):
    with pytest.warns(UserWarning):
        runs = [qw.measure_calls(busy20, min_duration=None, root=emu.root) for _ in range(6)]
    values = [m.total_j for m in runs]
    plain = qw.compare_runs(values, [v * 1.5 for v in values])
    bounded = qw.compare_runs(runs, [v * 1.5 for v in values])
    assert bounded.a.measurement_bound > 0 and plain.a.measurement_bound == 0
    assert bounded.a.ci[0] < plain.a.ci[0] and bounded.a.ci[1] > plain.a.ci[1]
    assert bounded.ci[1] - bounded.ci[0] > plain.ci[1] - plain.ci[0]


@pytest.mark.parametrize(
    "call, fix",
    [
        (lambda: qw.compare(busy20, busy40, runs=1, emulate="on"), "at least 2 runs"),
        (lambda: qw.compare(busy20(), busy40, emulate="on"), "pass the function itself"),
        (lambda: qw.compare(busy20, "busy40", emulate="on"), "not callable"),
        (lambda: qw.compare(busy20, busy40, warmup=-1, emulate="on"), "0 or more"),
        (lambda: qw.compare(busy20, busy40, gate_pct="5%", emulate="on"), "gate_pct=5 fails"),
        (lambda: qw.compare(busy20, busy40, gate_pct=-5, emulate="on"), "≥ 0"),
        (lambda: qw.compare_runs([1.0], [1.0, 2.0]), "at least 2 runs"),
        (lambda: qw.compare_runs([1.0, "x"], [1.0, 2.0]), "a number of joules"),
        (lambda: qw.compare_runs([qw.Measurement(), qw.Measurement()], [1.0, 2.0]), "finished measurements"),
    ],
)
def test_bad_input_is_refused_with_the_fix(call, fix):
    with pytest.raises(qw.BadArgument, match=fix) as e:
        call()
    assert isinstance(e.value, ValueError)


def test_an_exception_in_a_call_propagates_and_leaves_no_mount(emu):
    def fails() -> None:
        raise KeyError("boom")

    before = open("/proc/self/mounts").read().count("quietwatt")
    with pytest.raises(KeyError, match="boom"), pytest.warns(UserWarning, match="EMULATED"):
        qw.compare(busy20, fails, runs=3, warmup=0, emulate="on")
    assert open("/proc/self/mounts").read().count("quietwatt") == before


def test_emulate_on_warns_once_and_labels_the_result():
    with pytest.warns(UserWarning, match="EMULATED RAPL") as w:
        c = qw.compare(busy20, busy40, runs=3, warmup=0, emulate="on")
    assert len([x for x in w if "EMULATED" in str(x.message)]) == 1
    assert w[0].filename == __file__  # the user's line, not quietwatt's
    assert c.emulated and c.b.mean > c.a.mean


def test_the_statistics_are_those_of_quietwatt_compare(cli, emu, tmp_path):
    # The command-line tool's runs (its CSV: each run's total and bound),
    # compared here, give its JSON's ratio, interval and Welch's test.
    out = tmp_path / "c.csv"
    r = subprocess.run(
        [cli, "--root", emu.root, "compare", "-r", "4", "-m", "powercap", "--json",
         "--export-csv", str(out), "sleep 0.05", "sleep 0.1"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    cmp_ = json.loads(r.stdout)["comparisons"][0]
    rows = list(csv.DictReader(out.read_text().splitlines()))
    runs = {}
    for row in rows:
        runs.setdefault(row["command"], []).append(
            qw.Measurement(report={"total_energy_j": float(row["total_energy_j"]),
                                   "total_uncertainty_j": float(row["total_uncertainty_j"])})
        )
    c = qw.compare_runs(runs["sleep 0.05"], runs["sleep 0.1"])
    assert c.ratio == pytest.approx(cmp_["energy_ratio"]["estimate"], rel=1e-6)
    assert c.ci == pytest.approx(tuple(cmp_["energy_ratio"]["ci"]), rel=1e-6)
    assert c.p_value == pytest.approx(cmp_["welch"]["p_value"], rel=1e-3)
    assert c.df == pytest.approx(cmp_["welch"]["df"], rel=1e-4)
    assert c.verdict == "significantly more" and cmp_["verdict"] == "more"
