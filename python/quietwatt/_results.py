"""What a measurement found: energy per domain, the total, and what to doubt."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


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
    """Everything measured, as ``quietwatt run --json`` prints it."""

    @classmethod
    def from_json(cls, text: str, emulated: bool, label: Optional[str] = None) -> "Measurement":
        m = cls(label=label, emulated=emulated, report=json.loads(text))
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
        total = (
            f"{self.total_j:.6f} ± {self.uncertainty_j:.6f} J (= {self.total_rule})"
            if self.total_j is not None
            else "no total"
        )
        return f"{what}{total} in {self.duration_s:.3f} s ({self.mechanism}{emu})"

    def __repr__(self) -> str:
        return f"Measurement({self})"
