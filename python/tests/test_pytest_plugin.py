"""`pytest --energy` on a small suite (pytester), against the emulator."""

from __future__ import annotations

import json

import pytest

SUITE = """
import time

def busy(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass

def test_light():
    busy(0.01)

def test_heavy():
    busy(0.15)

def test_fails():
    busy(0.01)
    assert False
"""


def args(emu, *more):
    return ["-p", "no:cacheprovider", "--energy", f"--energy-root={emu.root}", "--energy-mechanism=powercap", *more]


def test_each_test_is_measured_ranked_in_the_summary_and_written_as_json(pytester, emu):
    pytester.makepyfile(SUITE)
    out = pytester.path / "energy.json"
    r = pytester.runpytest(*args(emu, f"--energy-json={out}"))
    r.assert_outcomes(passed=2, failed=1)
    text = r.stdout.str()
    assert "energy of the tests (powercap, EMULATED RAPL" in text
    # The emulation is said at the top of the run, not as a warning that names
    # pluggy's frame (before: "pluggy/_execution.py:147: UserWarning: ...").
    header = text.split("collected")[0]
    assert "EMULATED RAPL" in header and "quietwatt emulator's mount" in header, header
    assert "_execution.py" not in text, text
    rows = [line for line in r.stdout.lines if "::test_" in line and line.strip()[0].isdigit()]
    assert rows and "test_heavy" in rows[0], text
    doc = json.loads(out.read_text())
    assert doc["schema"] == "quietwatt.pytest/1" and doc["emulated"] is True
    tests = {t["nodeid"].split("::")[1]: t for t in doc["tests"]}
    assert set(tests) == {"test_light", "test_heavy", "test_fails"}
    heavy, light = tests["test_heavy"], tests["test_light"]
    assert heavy["energy_j"] - heavy["uncertainty_j"] > light["energy_j"] + light["uncertainty_j"]
    assert doc["total_energy_j"] == pytest.approx(sum(t["energy_j"] for t in doc["tests"]))
    # Each test's energy is package + dram, and power no more than the emulator's
    # 24 W over its time: the time is between the timestamps of the reads, which a
    # loaded host may serve up to tens of milliseconds late (30 ms allowed).
    for t in doc["tests"]:
        assert t["total_rule"] == "package + dram"
        assert t["energy_j"] <= 24 * (t["duration_s"] + 0.03) + t["uncertainty_j"], t


def test_a_budget_fails_a_run_whose_tests_pass(pytester, emu):
    pytester.makepyfile(SUITE.replace("    assert False\n", ""))
    r = pytester.runpytest(*args(emu, "--energy-budget=0.000001"))
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.assert_outcomes(passed=3)
    r.stdout.fnmatch_lines(["*ENERGY BUDGET EXCEEDED*over the budget of 1e-06 J*"])
    r = pytester.runpytest(*args(emu, "--energy-test-budget=1000"))
    assert r.ret == pytest.ExitCode.OK


def test_without_the_option_the_plugin_measures_nothing(pytester):
    pytester.makepyfile(SUITE)
    r = pytester.runpytest("-p", "no:cacheprovider")
    r.assert_outcomes(passed=2, failed=1)
    assert "energy of the tests" not in r.stdout.str()
    assert "--energy" in pytester.runpytest("--help").stdout.str()


def test_energy_where_nothing_can_measure_is_a_usage_error_with_the_fix(pytester, tmp_path):
    pytester.makepyfile(SUITE)
    r = pytester.runpytest("--energy", f"--energy-root={tmp_path}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "quietwatt.doctor()" in r.stderr.str()


OUTCOMES = """
import time
import pytest

def busy(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

def test_passes():
    busy(0.01)

def test_fails():
    assert False

def test_skips_inside():
    pytest.skip("not here")

@pytest.mark.skip(reason="never")
def test_skipped_by_marker():
    pass

def test_errors(broken):
    pass

@pytest.mark.xfail(reason="known")
def test_xfails():
    assert False
"""


def test_the_json_has_each_tests_outcome_the_host_and_the_start_time(pytester, emu):
    import datetime
    import socket

    pytester.makepyfile(OUTCOMES)
    out = pytester.path / "energy.json"
    before = datetime.datetime.now(datetime.timezone.utc)
    r = pytester.runpytest(*args(emu, f"--energy-json={out}"))
    r.assert_outcomes(passed=1, failed=1, skipped=2, errors=1, xfailed=1)
    doc = json.loads(out.read_text())
    assert doc["host"] == socket.gethostname()
    started = datetime.datetime.fromisoformat(doc["timestamp"])
    assert started.utcoffset() == datetime.timedelta(0)
    assert before - datetime.timedelta(seconds=1) <= started <= datetime.datetime.now(datetime.timezone.utc)
    measured = {t["nodeid"].split("::")[1]: t["outcome"] for t in doc["tests"]}
    assert measured == {"test_passes": "passed", "test_fails": "failed", "test_skips_inside": "skipped",
                        "test_xfails": "xfailed"}
    others = {t["nodeid"].split("::")[1]: t["outcome"] for t in doc["not_measured"]}
    assert others == {"test_skipped_by_marker": "skipped", "test_errors": "error"}
    from test_schemas import validate

    validate("pytest", doc)


def test_a_test_over_its_budget_is_reported_failed_with_its_energy_and_the_fix(pytester, emu):
    pytester.makepyfile(SUITE.replace("    assert False\n", ""))
    out = pytester.path / "energy.json"
    # The emulator draws 24 W: test_heavy (150 ms) uses about 3.6 J, the others 0.25 J.
    r = pytester.runpytest(*args(emu, "--energy-test-budget=2", f"--energy-json={out}"))
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.assert_outcomes(passed=2, failed=1)
    r.stdout.fnmatch_lines([
        "*ENERGY BUDGET EXCEEDED: *::test_heavy used * ± * J in * s, over its budget of 2 J (--energy-test-budget)*",
        "*raise the budget: --energy-test-budget *",
        "FAILED *::test_heavy*",
    ])
    doc = json.loads(out.read_text())
    heavy = next(t for t in doc["tests"] if t["nodeid"].endswith("test_heavy"))
    assert heavy["outcome"] == "failed" and heavy["over_budget"] is True and heavy["budget_j"] == 2
    assert heavy["energy_j"] > 2
    assert all(t["outcome"] == "passed" and not t["over_budget"] for t in doc["tests"] if t is not heavy)
    from test_schemas import validate

    validate("pytest", doc)


def test_a_marker_sets_one_tests_budget(pytester, emu):
    pytester.makepyfile(
        SUITE.replace("    assert False\n", "")
        .replace("def test_light", "import pytest\n\n@pytest.mark.energy_budget(0.000001)\ndef test_light")
    )
    r = pytester.runpytest(*args(emu, "--energy-test-budget=1000"))
    r.assert_outcomes(passed=2, failed=1)
    r.stdout.fnmatch_lines(["*test_light used * J in * s, over its budget of 1e-06 J (@pytest.mark.energy_budget)*",
                            "*raise the budget: @pytest.mark.energy_budget(*)*"])
    # Without --energy the marker is known (no warning under --strict-markers) and inert.
    r = pytester.runpytest("-p", "no:cacheprovider", "--strict-markers")
    r.assert_outcomes(passed=3)
