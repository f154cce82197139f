"""What a measurement found: energy per domain, the total, and what to doubt."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

#: A power no real part of each domain exceeds, per socket, in watts: the bound
#: quietwatt's core uses where the system states no limit for a domain
#: (``Domain::max_plausible_power`` in ``quietwatt-core``), deliberately generous
#: (a 400 W server part); where powercap or the MSRs state one, twice that is used.
#: When no counter update falls inside a block, the block's energy is only known
#: to lie between 0 and that power times the block's length.
#: ``measure(max_power_w=...)`` replaces it for a machine whose limits you know.
MAX_PLAUSIBLE_POWER_W: Dict[str, float] = {
    "package": 500.0,
    "core": 450.0,
    "uncore": 150.0,
    "dram": 150.0,
    "psys": 1000.0,
}

#: A counter still for longer than this is frozen or draws nothing (quietwatt's
#: ``STALE_AFTER``), not a counter between two updates.
_STILL_UNKNOWN_BELOW_S = 0.5

#: A figure whose uncertainty is above this fraction of it is dominated by the
#: counters' resolution (quietwatt's own threshold for its warning).
DOMINATED = 0.05

MaxPower = Union[float, Mapping[str, float], None]


def _power_bound(domain: str, max_power_w: MaxPower) -> float:
    if max_power_w is None:
        return MAX_PLAUSIBLE_POWER_W.get(domain, max(MAX_PLAUSIBLE_POWER_W.values()))
    if isinstance(max_power_w, (int, float)):
        return float(max_power_w)
    if domain in max_power_w:
        return float(max_power_w[domain])
    return MAX_PLAUSIBLE_POWER_W.get(domain, max(MAX_PLAUSIBLE_POWER_W.values()))


def _rule_members(rule: Optional[str]) -> List[str]:
    """The domain names a total rule (``package + dram``, ``psys (covers the
    platform)``) adds up."""
    if not rule or rule == "none":
        return []
    return [part.strip().split(" ")[0] for part in rule.split("+")]


def bound_unmoved_counters(report: Dict[str, Any], max_power_w: MaxPower = None) -> None:
    """Marks, in place, the counters that did not move during a measurement
    shorter than a counter can stand still (0.5 s): no RAPL update fell inside
    it, so their energy lies anywhere between 0 and what the domain can draw over
    it. The native report already bounds that by the domain's stated power
    (twice its powercap or MSR limit, or the documented default of
    :data:`MAX_PLAUSIBLE_POWER_W`) times the duration, and says so in its
    warnings; ``max_power_w`` replaces that bound with one you know for the
    machine (tighter or looser). The total's uncertainty follows its members'."""
    duration = report.get("duration_s") or 0.0
    if not report.get("domains") or duration <= 0 or duration >= _STILL_UNKNOWN_BELOW_S:
        return
    members = _rule_members(report.get("total_rule"))
    added: Dict[str, float] = {}
    for d in report["domains"]:
        if d.get("energy_j") or 0.0:
            continue
        d["unmoved"] = True
        if max_power_w is None:
            continue
        bound = d.get("quantum_j", 0.0) + _power_bound(d["domain"], max_power_w) * duration
        grow = bound - d.get("uncertainty_j", 0.0)
        d["uncertainty_j"] = bound
        d["power_uncertainty_w"] = bound / duration
        if d["domain"] in members:
            if d["domain"] == "psys":  # one psys is counted, whichever it is
                added["psys"] = max(added.get("psys", 0.0), grow)
            else:
                added[f"{d['socket']}/{d['domain']}/{d.get('die')}"] = grow
    if report.get("total_uncertainty_j") is not None and added:
        report["total_uncertainty_j"] += sum(added.values())
        report["total_power_uncertainty_w"] = report["total_uncertainty_j"] / duration
        u, e = report["total_uncertainty_j"], report.get("total_energy_j") or 0.0
        share = f"{100 * u / e:.0f} %" if e > 0 else "all"
        report["warnings"] = [
            re.sub(r"^the total's uncertainty \(± [0-9.]+ J\) is [0-9]+ % of it",
                   f"the total's uncertainty (± {u:.6f} J) is {share} of it", w)
            for w in report.get("warnings", [])
        ]


@dataclass(frozen=True)
class DomainEnergy:
    """The energy one RAPL counter measured."""

    socket: int
    """The package (socket) the counter belongs to."""
    domain: str
    """``package``, ``core``, ``uncore``, ``dram`` or ``psys``."""
    energy_j: float
    """Joules measured."""
    uncertainty_j: float
    """± bound on ``energy_j``: the counter's quantum, RAPL's update interval at
    each end, and anything lost to counter anomalies."""
    power_w: float
    """Mean power over the measurement."""
    die: Optional[int] = None
    """The die inside the package, where the kernel splits packages by die."""
    wraps: int = 0
    """Counter wraps corrected."""

    def __str__(self) -> str:
        return f"{self.socket}/{self.domain}: {self.energy_j:.6f} ± {self.uncertainty_j:.6f} J"


@dataclass
class Measurement:
    """The energy of a block, a function, a window or a whole monitored run.

    The fields are ``None`` while the measurement runs; ``report`` holds the
    full result in the JSON shape of ``quietwatt run --json``.
    """

    label: Optional[str] = None
    """The function's qualified name (``measure_energy``) or the window's name."""
    emulated: bool = False
    """True when the figures come from quietwatt's emulator, not the hardware."""
    report: Dict[str, Any] = field(default_factory=dict)
    """Everything measured, as ``quietwatt run --json`` prints it (plus
    ``emulated``, ``calls`` and ``unmoved`` on counters whose uncertainty was
    widened because no update fell inside the measurement)."""
    calls: int = 1
    """How many calls of the function the figures cover (``measure_calls``,
    ``measure_energy(min_duration=...)``); :attr:`per_call_j` divides by it."""

    scope = "machine"
    """Whose energy this is: always the whole machine's (every process on the
    measured packages and their DRAM), never this process's alone. RAPL counts
    per package and per DRAM channel; a busy neighbour adds to the figure."""

    @classmethod
    def from_json(
        cls,
        text: str,
        emulated: bool,
        label: Optional[str] = None,
        max_power_w: MaxPower = None,
    ) -> "Measurement":
        report = json.loads(text)
        bound_unmoved_counters(report, max_power_w)
        m = cls(label=label, emulated=emulated, report=report)
        m.report["emulated"] = emulated
        return m

    @property
    def done(self) -> bool:
        """Whether the measurement has a result."""
        return bool(self.report)

    @property
    def mechanism(self) -> Optional[str]:
        """How the counters were read: ``powercap``, ``perf`` or ``msr``."""
        return self.report.get("mechanism")

    @property
    def estimated(self) -> bool:
        """Whether the figures are a power model's estimate, not a measurement
        (``mechanism == "estimate"``: ``QUIETWATT_POWER_MODEL`` where nothing
        can measure); ``report["estimate"]`` names the model and its error."""
        return bool(self.report.get("estimated"))

    @property
    def via(self) -> Optional[Dict[str, Any]]:
        """Where the counters were read through the local reader service
        (``mechanism == "socket"``): its ``socket``, the ``mechanism`` it reads
        with, the ``uid`` it saw, and the ``interval_s`` and ``resolution_uj``
        its policy granted (``coarsened``: finer was asked for). ``None`` where
        they were read in this process."""
        via = self.report.get("via")
        return via if isinstance(via, dict) else None

    @property
    def duration_s(self) -> Optional[float]:
        """Seconds between the first and the last reading."""
        return self.report.get("duration_s")

    @property
    def total_j(self) -> Optional[float]:
        """The total energy, each joule counted once (see :attr:`total_rule`);
        ``None`` when nothing measured can be totalled."""
        return self.report.get("total_energy_j")

    @property
    def uncertainty_j(self) -> Optional[float]:
        """± bound on :attr:`total_j`."""
        return self.report.get("total_uncertainty_j")

    @property
    def power_w(self) -> Optional[float]:
        """Mean total power."""
        return self.report.get("total_power_w")

    @property
    def per_call_j(self) -> Optional[float]:
        """:attr:`total_j` divided by :attr:`calls`."""
        t = self.total_j
        return None if t is None else t / self.calls

    @property
    def per_call_uncertainty_j(self) -> Optional[float]:
        """:attr:`uncertainty_j` divided by :attr:`calls`: repeating the work is
        how a short call's energy gets resolved."""
        u = self.uncertainty_j
        return None if u is None else u / self.calls

    @property
    def resolution_dominated(self) -> bool:
        """True when the counters' resolution (their step, their ~1 ms update
        interval) dominates the figure: an uncertainty over 5 % of the total, or
        no total at all. Measure longer, or repeat the work
        (:func:`quietwatt.measure_calls`), to resolve it."""
        if not self.done:
            return False
        t, u = self.total_j, self.uncertainty_j
        if t is None or u is None or t <= 0:
            return True
        return u > DOMINATED * t

    @property
    def total_rule(self) -> Optional[str]:
        """What the total adds up, e.g. ``package + dram``."""
        return self.report.get("total_rule")

    @property
    def warnings(self) -> List[str]:
        """Everything that makes a figure doubtful (a counter that reset, an
        uncertainty too large for the run's length, ...)."""
        return list(self.report.get("warnings", []))

    @property
    def domains(self) -> List[DomainEnergy]:
        """Energy per counter."""
        return [
            DomainEnergy(
                socket=d["socket"],
                domain=d["domain"],
                energy_j=d["energy_j"],
                uncertainty_j=d["uncertainty_j"],
                power_w=d["mean_power_w"],
                die=d.get("die"),
                wraps=d.get("wraps", 0),
            )
            for d in self.report.get("domains", [])
        ]

    @property
    def share(self) -> Optional[Dict[str, Any]]:
        """With ``measure(share="process"|"cgroup")``: this process's (or its
        cgroup's) part of the package energy, split by CPU time at context-switch
        granularity: ``energy_j`` (``dynamic_j`` + ``idle_j``), ``cpu_s``, the
        ``package_j`` split, ``entity``, ``idle_power`` (how the idle power was
        set apart) and ``dram`` (not split). ``None`` without ``share``."""
        s = self.report.get("share")
        return dict(s) if isinstance(s, dict) else None

    @property
    def share_j(self) -> Optional[float]:
        """``share["energy_j"]``: this process's (or cgroup's) joules of the
        packages, ``None`` without ``share``."""
        s = self.share
        return None if s is None else float(s["energy_j"])

    def domain(self, domain: str, socket: int = 0) -> Optional[DomainEnergy]:
        """The energy of one counter, or ``None`` when it was not measured."""
        for d in self.domains:
            if d.domain == domain and d.socket == socket:
                return d
        return None

    def __str__(self) -> str:
        if not self.done:
            return f"<quietwatt measurement {self.label or ''} running>"
        what = f"'{self.label}' " if self.label else ""
        emu = ", EMULATED" if self.emulated else ""
        if self.estimated:
            emu += ", ESTIMATED by a power model, not measured"
        total = (
            f"{self.total_j:.6f} ± {self.uncertainty_j:.6f} J (whole machine: {self.total_rule})"
            if self.total_j is not None
            else "no total"
        )
        calls = ""
        if self.calls != 1 and self.per_call_j is not None:
            calls = f", {self.per_call_j:.6f} ± {self.per_call_uncertainty_j:.6f} J per call over {self.calls} calls"
        dominated = ", RESOLUTION-DOMINATED" if self.resolution_dominated else ""
        share = ""
        s = self.share
        if s is not None:
            share = (
                f"; {s['scope']}'s share {s['energy_j']:.6f} J of the packages' {s['package_j']:.6f} J "
                f"({s['cpu_s']:.3f} s CPU)"
            )
        return f"{what}{total} in {self.duration_s:.3f} s{calls}{share} ({self.mechanism}{emu}{dominated})"

    def __repr__(self) -> str:
        return f"Measurement({self})"

    def _repr_html_(self) -> str:
        """A table for notebooks: the total, each counter, and the warnings."""
        if not self.done:
            return f"<p>quietwatt measurement {html.escape(self.label or '')} running</p>"
        esc = html.escape
        head = esc(str(self))
        rows = "".join(
            f"<tr><td>{d.socket}</td><td>{esc(d.domain)}</td><td>{d.energy_j:.6f}</td>"
            f"<td>± {d.uncertainty_j:.6f}</td><td>{d.power_w:.3f}</td></tr>"
            for d in self.domains
        )
        warns = "".join(f"<li>{esc(w)}</li>" for w in self.warnings)
        emu = "<p><b>EMULATED</b>: the emulator's figures, not this machine's.</p>" if self.emulated else ""
        return (
            f"<div class='quietwatt'><p><b>{head}</b></p>{emu}"
            "<table><tr><th>socket</th><th>domain</th><th>energy (J)</th><th>± (J)</th><th>power (W)</th></tr>"
            f"{rows}</table><p>Whole machine: every process on the measured packages and their DRAM.</p>"
            + (f"<ul>{warns}</ul>" if warns else "")
            + "</div>"
        )
