"""``pytest --energy``: the energy of each test, the hungriest in the summary, a
JSON report, and a budget that fails the run.

Registered through the package's ``pytest11`` entry point; it only adds options,
and measures nothing unless ``--energy`` is given. Each test's call phase is
measured with two counter reads (and the wrap guard between them), so the plugin adds microseconds per
test. Options:

``--energy``                 measure each test
``--energy-top N``           tests listed in the summary (default 10)
``--energy-json FILE``       every test's energy as JSON (``quietwatt.pytest/1``)
``--energy-budget J``        fail the run when all tests together use more
``--energy-test-budget J``   fail each test that uses more (the test is reported
                             failed, with its energy and the budget)
``@pytest.mark.energy_budget(J)``  the same for one test (replaces the option)
``--energy-root DIR``, ``--energy-mechanism M``, ``--energy-domains D``,
``--energy-emulate off|auto|on``  as ``root=``, ``mechanism=``, ``domains=``, ``emulate=``
"""

from __future__ import annotations

import datetime
import json
import socket
import warnings
from typing import Any, Dict, Generator, List, Optional

import pytest

from ._results import DOMINATED, bound_unmoved_counters

SCHEMA = "quietwatt.pytest/1"


def pytest_addoption(parser: Any) -> None:
    g = parser.getgroup("quietwatt", "energy of each test (quietwatt)")
    g.addoption("--energy", action="store_true", default=False, help="measure the energy of each test (RAPL)")
    g.addoption("--energy-top", type=int, default=10, metavar="N", help="tests listed in the summary (default 10)")
    g.addoption("--energy-json", default=None, metavar="FILE", help="write every test's energy as JSON")
    g.addoption("--energy-budget", type=float, default=None, metavar="J", help="fail the run when all tests together use more joules")
    g.addoption("--energy-test-budget", type=float, default=None, metavar="J", help="fail each test that uses more joules (@pytest.mark.energy_budget(J) for one test)")
    g.addoption("--energy-root", default=None, metavar="DIR", help="where RAPL is read (default $QUIETWATT_ROOT or /)")
    g.addoption("--energy-mechanism", default=None, metavar="M", help="powercap, perf or msr (default: the first that works)")
    g.addoption("--energy-domains", default=None, metavar="D", help="domains, e.g. package,dram (default all)")
    g.addoption("--energy-emulate", default="off", choices=["off", "auto", "on"], help="measure against quietwatt's emulator")


class EnergyPlugin:
    """Measures each test's call phase and reports at the end."""

    def __init__(self, config: Any):
        from . import _quietwatt
        from ._env import Environment, resolve_domains

        self.config = config
        self._native = _quietwatt
        # The EMULATED warning would name pluggy's frame (no user line runs a
        # plugin's set-up): it goes at the top of the run's output instead.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.env = Environment(config.getoption("energy_root"), config.getoption("energy_emulate"))
        self.header = [str(w.message) for w in caught]
        self.mechanism: Optional[str] = config.getoption("energy_mechanism")
        self.domains = resolve_domains(config.getoption("energy_domains"))
        self.results: List[Dict[str, Any]] = []
        self.failures: List[str] = []
        self.outcomes: Dict[str, str] = {}
        self.host = socket.gethostname()
        self.timestamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        # Open once now, so that a machine without RAPL fails the run at once
        # with the reason, not in every test.
        probe = _quietwatt.Session(self.env.root, self.mechanism, self.domains)
        report, _ = probe.stop()
        opened = json.loads(report)
        self.mechanism = opened["mechanism"]
        #: The reader service read through, and what it granted (None: read here).
        self.via: Optional[Dict[str, Any]] = opened.get("via")
        # Read through the local reader service (the counters refused here), or
        # a power model's estimate (QUIETWATT_POWER_MODEL), each test's session
        # finds it again: neither is a mechanism to name.
        self._opens: Optional[str] = None if self.mechanism in ("socket", "estimate") else self.mechanism

    def pytest_report_header(self, config: Any) -> List[str]:
        """The emulation warning (``--energy-emulate``, or an emulator's root), at
        the top of the run."""
        return self.header

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: Any) -> Generator[None, None, None]:
        session = self._native.Session(self.env.root, self._opens, self.domains)
        try:
            yield
        finally:
            report = json.loads(session.stop()[0])
            bound_unmoved_counters(report)
            e, u = report.get("total_energy_j"), report.get("total_uncertainty_j")
            self.results.append(
                {
                    "nodeid": item.nodeid,
                    "energy_j": report.get("total_energy_j"),
                    "uncertainty_j": report.get("total_uncertainty_j"),
                    "duration_s": report.get("duration_s"),
                    "total_rule": report.get("total_rule"),
                    "domains": [
                        {k: d[k] for k in ("socket", "domain", "energy_j", "uncertainty_j")}
                        for d in report.get("domains", [])
                    ],
                    "warnings": report.get("warnings", []),
                    # The counters' resolution (their ~1 ms update) dominates:
                    # an uncertainty over 5 % of the figure, or no figure.
                    "resolution_dominated": e is None or u is None or e <= 0 or u > DOMINATED * e,
                    "budget_j": self.test_budget(item),
                    "over_budget": False,
                }
            )

    def test_budget(self, item: Any) -> Optional[float]:
        """The test's own budget: its ``energy_budget`` marker, else
        ``--energy-test-budget``."""
        marker = item.get_closest_marker("energy_budget")
        if marker is not None:
            value = marker.args[0] if marker.args else marker.kwargs.get("joules")
            try:
                return float(value)
            except (TypeError, ValueError):
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.energy_budget({value!r}): give joules, e.g. energy_budget(5.0)"
                ) from None
        budget = self.config.getoption("energy_test_budget")
        return None if budget is None else float(budget)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        if call.when != "call" or not report.passed or hasattr(report, "wasxfail"):
            return
        r = next((r for r in reversed(self.results) if r["nodeid"] == item.nodeid), None)
        if r is None or r["budget_j"] is None or r["energy_j"] is None or r["energy_j"] <= r["budget_j"]:
            return
        # Over its budget: the test fails, visibly, with the figures and the fix.
        r["over_budget"] = True
        budget = r["budget_j"]
        how = (
            "@pytest.mark.energy_budget"
            if item.get_closest_marker("energy_budget") is not None
            else "--energy-test-budget"
        )
        u = r["uncertainty_j"] or 0.0
        within = (
            f" (over by less than the measurement's ± {u:.6f} J)" if r["energy_j"] - u <= budget else ""
        )
        report.outcome = "failed"
        report.longrepr = (
            f"ENERGY BUDGET EXCEEDED: {item.nodeid} used {r['energy_j']:.6f} ± {u:.6f} J in "
            f"{r['duration_s']:.3f} s, over its budget of {budget:g} J ({how}){within}.\n"
            f"Make the test draw less, or raise the budget: {how}"
            + (f"({r['energy_j'] * 1.2:.3g})" if how.startswith("@") else f" {r['energy_j'] * 1.2:.3g}")
            + " (the whole machine's energy during the test's call phase)"
        )

    def pytest_runtest_logreport(self, report: Any) -> None:
        # Each test's outcome, as pytest's summary counts it: a failed setup or
        # teardown is an error, an expected failure xfailed.
        nodeid, when = report.nodeid, report.when
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.failed:
            outcome = "failed" if when == "call" else "error"
        elif report.skipped:
            outcome = "skipped"
        else:
            outcome = "passed"
        previous = self.outcomes.get(nodeid)
        if when == "teardown" and (outcome != "error" or previous is None):
            return
        self.outcomes[nodeid] = outcome if previous != "error" else previous

    def total(self) -> float:
        return sum(r["energy_j"] or 0.0 for r in self.results)

    def check_budgets(self) -> None:
        for r in self.results:
            if r["over_budget"]:
                self.failures.append(
                    f"{r['nodeid']} used {r['energy_j']:.6f} ± {r['uncertainty_j']:.6f} J, over its budget of {r['budget_j']:g} J (reported as a failed test)"
                )
        budget = self.config.getoption("energy_budget")
        if budget is not None and self.total() > budget:
            self.failures.append(f"the tests used {self.total():.6f} J in all, over the budget of {budget} J")

    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        self.check_budgets()
        path = self.config.getoption("energy_json")
        for r in self.results:
            r["outcome"] = self.outcomes.get(r["nodeid"], "passed")
        if path:
            doc = {
                "schema": SCHEMA,
                "schema_version": 1,
                "host": self.host,
                "timestamp": self.timestamp,
                "mechanism": self.mechanism,
                **({"via": self.via} if self.via else {}),
                "emulated": self.env.emulated,
                **({"estimated": True} if self.mechanism == "estimate" else {}),
                "total_energy_j": self.total(),
                "budget_j": self.config.getoption("energy_budget"),
                "test_budget_j": self.config.getoption("energy_test_budget"),
                "over_budget": self.failures,
                "tests": self.results,
                "not_measured": [
                    {"nodeid": n, "outcome": o}
                    for n, o in self.outcomes.items()
                    if n not in {r["nodeid"] for r in self.results}
                ],
            }
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
        if self.failures and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.env.close()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        top = self.config.getoption("energy_top")
        emu = ", EMULATED RAPL: not this machine's energy" if self.env.emulated else ""
        if self.mechanism == "estimate":
            emu += ", ESTIMATED by a power model (QUIETWATT_POWER_MODEL), not measured"
        tr.write_sep("=", f"energy of the tests ({self.mechanism}{emu})")
        ranked = sorted(self.results, key=lambda r: r["energy_j"] or 0.0, reverse=True)
        if ranked:
            tr.write_line(f"{'energy (J)':>12} {'± (J)':>10} {'time (s)':>9}  test")
            for r in ranked[:top]:
                e, u = r["energy_j"], r["uncertainty_j"]
                es = f"{e:12.6f}" if e is not None else f"{'n/a':>12}"
                us = f"{u:10.6f}" if u is not None else f"{'':>10}"
                mark = "  [resolution-dominated]" if r["resolution_dominated"] else ""
                tr.write_line(f"{es} {us} {r['duration_s']:9.3f}  {r['nodeid']}{mark}")
            if len(ranked) > top:
                tr.write_line(f"... and {len(ranked) - top} more (--energy-top N, --energy-json FILE)")
            if any(r["resolution_dominated"] for r in ranked[:top]):
                tr.write_line(
                    "[resolution-dominated]: the test is too short for RAPL's ~1 ms update interval "
                    "(the ± covers what it may have drawn); repeat its work to resolve it "
                    "(quietwatt.measure_calls)"
                )
        rule = ranked[0]["total_rule"] if ranked else ""
        tr.write_line(
            f"{len(ranked)} tests, {self.total():.6f} J in all (whole machine: {rule}, each test's call phase)"
        )
        for f in self.failures:
            tr.write_line(f"ENERGY BUDGET EXCEEDED: {f}", red=True, bold=True)


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        "energy_budget(joules): fail this test when its call phase uses more energy (with pytest --energy)",
    )
    if config.getoption("energy", default=False):
        from ._errors import Error

        try:
            plugin = EnergyPlugin(config)
        except Error as e:
            raise pytest.UsageError(f"--energy: {e}") from None
        config.pluginmanager.register(plugin, "quietwatt-energy")
