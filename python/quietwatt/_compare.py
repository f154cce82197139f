"""Two pieces of work compared by their energy, with the statistics of
``quietwatt compare``: runs interleaved in a shuffled order, each side's mean
with its 95 % interval (measurement bounds included), the ratio ``b / a`` with
its interval, Welch's t test, Wilcoxon's rank-sum test with the Hodges-Lehmann
shift, a verdict, and an optional regression gate (``--fail-if-more-than``)."""

from __future__ import annotations

import html
import json
import math
import os
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _quietwatt
from ._env import Domains, Emulate, Environment, open_session, resolve_domains
from ._errors import BadArgument
from ._results import MaxPower, Measurement

#: The seed of the run order when none is given: the command-line tool's
#: default, so that a comparison is repeatable unless asked otherwise.
DEFAULT_SEED = 1592593421

Run = Union[Measurement, float, int]


@dataclass(frozen=True)
class Summary:
    """One side of a comparison: its runs' total energy (joules) summarised."""

    label: str
    """The callable's qualified name, or ``"a"``/``"b"``."""
    n: int
    """Runs measured."""
    mean: float
    """Mean energy per run, in joules."""
    std: float
    """Standard deviation of the runs (n - 1)."""
    min: float
    max: float
    ci: Tuple[float, float]
    """The 95 % interval of the mean: Student's t over the runs' spread, widened
    on each side by :attr:`measurement_bound`."""
    ci_spread: Optional[Tuple[float, float]]
    """The same interval from the spread alone (without the measurement bound)."""
    measurement_bound: float
    """The mean of the runs' ± measurement bounds (the counters' step and update
    interval): an error every run may share, which no spread shows."""
    confidence: float
    outliers: int
    """Runs beyond 1.5 interquartile ranges of the quartiles."""
    values: Tuple[float, ...]
    """Each run's energy, in the order measured."""
    bounds: Tuple[float, ...]
    """Each run's ± measurement bound."""

    def __str__(self) -> str:
        lo, hi = self.ci
        return (
            f"{self.label}: {self.mean:.6f} ± {self.std:.6f} J (mean ± std of {self.n} runs), "
            f"[{lo:.6f}, {hi:.6f}] J {self.confidence * 100:.0f} % CI, {self.min:.6f} … {self.max:.6f} J"
        )


def _pair(v: Any) -> Optional[Tuple[float, float]]:
    return None if v is None else (float(v[0]), float(v[1]))


def _opt(v: Any) -> Optional[float]:
    return None if v is None else float(v)


def _summary(label: str, d: Mapping[str, Any], values: Sequence[float], bounds: Sequence[float]) -> Summary:
    return Summary(
        label=label,
        n=int(d["n"]),
        mean=float(d["mean"]),
        std=float(d["std"]),
        min=float(d["min"]),
        max=float(d["max"]),
        ci=(float(d["ci"][0]), float(d["ci"][1])),
        ci_spread=_pair(d.get("ci_spread")),
        measurement_bound=float(d["measurement_bound"]),
        confidence=float(d["confidence"]),
        outliers=int(d.get("outliers", 0)),
        values=tuple(values),
        bounds=tuple(bounds),
    )


@dataclass
class Comparison:
    """``b`` against ``a`` (the reference), as ``quietwatt compare`` reports a
    command against the first::

        c = quietwatt.compare(old, new, runs=10)
        print(c)                    # new is 1.95 × old [1.80, 2.11] 95 % CI: significantly more ...
        c.ratio, c.ci, c.verdict, c.p_value

    Every figure is the whole machine's energy per run (package + DRAM, as
    :attr:`Measurement.total_j`), like every figure quietwatt gives.
    """

    a: Summary
    """The reference's runs."""
    b: Summary
    """The compared side's runs."""
    ratio: float
    """Mean energy of ``b`` over mean energy of ``a``."""
    ci: Tuple[float, float]
    """The ratio's 95 % interval (delta method on the log ratio, widened by the
    measurement bounds)."""
    verdict: str
    """``"significantly more"``/``"significantly less"`` (``b`` than ``a``) when
    Welch's p < 0.05 and :attr:`ci` leaves out 1, else ``"no significant
    difference"``."""
    p_value: float
    """Welch's t test (two-sided)."""
    t: float
    """Welch's t statistic."""
    df: float
    """Welch's degrees of freedom."""
    rank_p_value: Optional[float]
    """Wilcoxon's rank-sum (Mann-Whitney U) test, two-sided: no normality
    assumed (``None`` where the runs are too few for it)."""
    shift_j: Optional[float]
    """The Hodges-Lehmann shift ``b - a`` in joules (the median of the pairwise
    differences); ``None`` where the runs are too few."""
    shift_ci: Optional[Tuple[float, float]]
    """Its distribution-free interval."""
    gate: Optional[str]
    """With ``gate_pct``: ``"pass"``, ``"regression"`` (``b`` significantly
    more than ``a`` by more than ``gate_pct`` %: the interval's lower end above
    1 + gate_pct/100) or ``"inconclusive"`` (the interval straddles it: add
    runs); ``None`` without a gate."""
    gate_pct: Optional[float]
    confidence: float = 0.95
    emulated: bool = False
    """True when the runs were measured on quietwatt's emulator."""
    runs_a: List[Measurement] = field(default_factory=list)
    """Each run of ``a`` (empty when plain numbers were compared)."""
    runs_b: List[Measurement] = field(default_factory=list)
    report: Dict[str, Any] = field(default_factory=dict)
    """Everything computed, in the JSON shape the native statistics return."""
    ratio_std: Optional[float] = None
    """The ratio's standard deviation, propagated from both sides' standard
    deviations: the ``±`` of hyperfine's summary line (``None`` from a native
    module older than ``quietwatt-compare``)."""

    @property
    def summary(self) -> str:
        """Hyperfine's summary line, by energy, as ``quietwatt compare`` prints
        it: ``'b' used 1.94 ± 0.04 × the energy of 'a' [1.90, 1.98] (95 % CI)``."""
        pm = "" if self.ratio_std is None else f" ± {self.ratio_std:.2f}"
        lo, hi = self.ci
        return (
            f"'{self.b.label}' used {self.ratio:.2f}{pm} × the energy of '{self.a.label}' "
            f"[{lo:.2f}, {hi:.2f}] ({self.confidence * 100:.0f} % CI)"
        )

    @property
    def significant(self) -> bool:
        """Whether the verdict is a significant difference, either way."""
        return self.verdict != "no significant difference"

    @property
    def passed(self) -> Optional[bool]:
        """With a gate: True when it passed, False on ``"regression"`` and on
        ``"inconclusive"`` (the command-line tool's exit 4: add runs to
        decide); ``None`` without ``gate_pct``."""
        if self.gate is None:
            return None
        return self.gate == "pass"

    @property
    def warnings(self) -> List[str]:
        """The runs' warnings, each kind once with how many runs gave it (e.g.
        runs too short for the counters' resolution: make each call longer)."""
        kinds: Dict[str, List[str]] = {}
        for m in self.runs_a + self.runs_b:
            for w in m.warnings:
                kinds.setdefault(re.sub(r"[0-9][0-9.e+-]*", "#", w), []).append(w)
        n = len(self.runs_a) + len(self.runs_b)
        return [ws[0] if len(ws) == 1 else f"{ws[0]} ({len(ws)} of {n} runs)" for ws in kinds.values()]

    def _headline(self) -> str:
        lo, hi = self.ci
        return (
            f"{self.b.label} is {self.ratio:.3f} × {self.a.label} [{lo:.3f}, {hi:.3f}] "
            f"{self.confidence * 100:.0f} % CI: {self.verdict} (Welch's t test: p = {self.p_value:.3g})"
        )

    def _rank_line(self) -> Optional[str]:
        if self.rank_p_value is None:
            return None
        line = f"Wilcoxon rank-sum: p = {self.rank_p_value:.3g}"
        if self.shift_j is not None and self.shift_ci is not None:
            line += (
                f"; Hodges-Lehmann shift {self.shift_j:+.6f} J "
                f"[{self.shift_ci[0]:+.6f}, {self.shift_ci[1]:+.6f}]"
            )
        return line

    def _gate_line(self) -> Optional[str]:
        if self.gate is None:
            return None
        limit = 1 + (self.gate_pct or 0.0) / 100
        why = {
            "pass": f"not significantly more than {limit:.3g} × {self.a.label}",
            "regression": f"significantly more than {limit:.3g} × {self.a.label}",
            "inconclusive": f"the interval straddles {limit:.3g} × {self.a.label}: add runs to decide",
        }.get(self.gate, "")
        return f"gate +{self.gate_pct:g} %: {self.gate.upper()} ({why})"

    def __str__(self) -> str:
        emu = ", EMULATED" if self.emulated else ""
        lines = [
            self._headline(),
            f"  {self.a}",
            f"  {self.b}",
        ]
        rank = self._rank_line()
        if rank:
            lines.append(f"  {rank}")
        gate = self._gate_line()
        if gate:
            lines.append(f"  {gate}")
        lines.append(f"  (whole machine's energy per run, {self.a.n} + {self.b.n} runs{emu})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Comparison({self._headline()})"

    def _repr_html_(self) -> str:
        """A table for notebooks: each side, the ratio and the verdict."""
        esc = html.escape
        rows = "".join(
            f"<tr><td>{esc(s.label)}</td><td>{s.n}</td><td>{s.mean:.6f}</td><td>{s.std:.6f}</td>"
            f"<td>[{s.ci[0]:.6f}, {s.ci[1]:.6f}]</td><td>{s.min:.6f} … {s.max:.6f}</td></tr>"
            for s in (self.a, self.b)
        )
        gate = self._gate_line()
        emu = "<p><b>EMULATED</b>: the emulator's figures, not this machine's.</p>" if self.emulated else ""
        warns = "".join(f"<li>{esc(w)}</li>" for w in self.warnings)
        return (
            f"<div class='quietwatt'><p><b>{esc(self._headline())}</b></p>{emu}"
            "<table><tr><th></th><th>runs</th><th>mean (J)</th><th>std (J)</th>"
            "<th>95 % CI (J)</th><th>min … max (J)</th></tr>"
            f"{rows}</table>"
            + (f"<p>{esc(self._rank_line() or '')}</p>")
            + (f"<p><b>{esc(gate)}</b></p>" if gate else "")
            + "<p>Whole machine's energy per run (every process on the measured packages and their DRAM).</p>"
            + (f"<ul>{warns}</ul>" if warns else "")
            + "</div>"
        )


def _values(side: str, runs: Sequence[Run]) -> Tuple[List[float], List[float], List[Measurement]]:
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence):
        raise BadArgument(
            f"{side}={runs!r}: give a list of runs, each a quietwatt.Measurement or a number of joules"
        )
    if len(runs) < 2:
        raise BadArgument(
            f"{side}: {len(runs)} run(s): a comparison needs at least 2 runs of each side "
            "(10 or more for a useful interval)"
        )
    values: List[float] = []
    bounds: List[float] = []
    measured: List[Measurement] = []
    for i, r in enumerate(runs):
        if isinstance(r, Measurement):
            if not r.done or r.total_j is None:
                raise BadArgument(
                    f"{side}[{i}]: a measurement with no total ({'still running' if not r.done else 'nothing totalled'}): "
                    "compare finished measurements of domains that add up (package, dram or psys)"
                )
            values.append(float(r.total_j))
            bounds.append(float(r.uncertainty_j or 0.0))
            measured.append(r)
        elif isinstance(r, (int, float)) and not isinstance(r, bool):
            values.append(float(r))
            bounds.append(0.0)
        else:
            raise BadArgument(f"{side}[{i}]={r!r}: expected a quietwatt.Measurement or a number of joules")
    return values, bounds, measured


def _label(runs: Sequence[Run], default: str) -> str:
    for r in runs:
        if isinstance(r, Measurement) and r.label:
            return r.label
    return default


def _check_gate(gate_pct: Optional[float]) -> None:
    if gate_pct is None:
        return
    if isinstance(gate_pct, bool) or not isinstance(gate_pct, (int, float)) or not (0 <= gate_pct < math.inf):
        raise BadArgument(
            f"gate_pct={gate_pct!r}: expected a percentage ≥ 0, e.g. gate_pct=5 fails when b costs "
            "significantly more than 5 % over a"
        )


def compare_runs(
    a: Sequence[Run],
    b: Sequence[Run],
    gate_pct: Optional[float] = None,
    labels: Optional[Tuple[str, str]] = None,
) -> Comparison:
    """Compares runs already measured: ``b`` against the reference ``a``, each a
    list of :class:`Measurement` (their :attr:`~Measurement.total_j`, with
    :attr:`~Measurement.uncertainty_j` as each run's measurement bound) or of
    plain joules (bound 0), with the statistics of ``quietwatt compare``::

        old = [quietwatt.measure_calls(f, min_duration=0.2) for _ in range(10)]
        new = [quietwatt.measure_calls(g, min_duration=0.2) for _ in range(10)]
        print(quietwatt.compare_runs(old, new, gate_pct=5))

    Interleave the runs of the two sides (as :func:`compare` does) so that a
    drift of the machine falls on both alike. ``gate_pct`` sets
    :attr:`Comparison.gate`. Raises :class:`quietwatt.BadArgument` for fewer
    than 2 runs a side, a measurement with no total, or a bad ``gate_pct``.
    """
    _check_gate(gate_pct)
    va, ba, ma = _values("a", a)
    vb, bb, mb = _values("b", b)
    la, lb = labels if labels is not None else (_label(a, "a"), _label(b, "b"))
    if la == lb:
        la, lb = f"a ({la})", f"b ({lb})"
    report = json.loads(
        _quietwatt.compare_json(va, ba, vb, bb, None if gate_pct is None else float(gate_pct))
    )
    rank = report.get("rank_test") or {}
    shift = rank.get("shift") or {}
    return Comparison(
        a=_summary(la, report["a"], va, ba),
        b=_summary(lb, report["b"], vb, bb),
        ratio=float(report["ratio"]["estimate"]),
        ci=(float(report["ratio"]["ci"][0]), float(report["ratio"]["ci"][1])),
        verdict=str(report["verdict"]),
        p_value=float(report["welch"]["p_value"]),
        t=float(report["welch"]["t"]),
        df=float(report["welch"]["df"]),
        rank_p_value=_opt(rank.get("p_value")),
        shift_j=_opt(shift.get("estimate")),
        shift_ci=None if not shift else (float(shift["lower"]), float(shift["upper"])),
        gate=report.get("gate"),
        gate_pct=None if gate_pct is None else float(gate_pct),
        confidence=float(report["ratio"].get("confidence", 0.95)),
        emulated=any(m.emulated for m in ma + mb),
        runs_a=ma,
        runs_b=mb,
        report=report,
        ratio_std=_opt(report.get("ratio_std")),
    )


def _name(f: Callable[..., Any]) -> str:
    """The qualified name, less the enclosing function's ``f.<locals>.``."""
    name = str(getattr(f, "__qualname__", getattr(f, "__name__", repr(f))))
    return name.rsplit("<locals>.", 1)[-1]


def compare(
    a: Callable[..., Any],
    b: Callable[..., Any],
    runs: int = 10,
    warmup: int = 1,
    *,
    gate_pct: Optional[float] = None,
    seed: Optional[int] = DEFAULT_SEED,
    args: Sequence[Any] = (),
    kwargs: Optional[Mapping[str, Any]] = None,
    root: Union[str, "os.PathLike[str]", None] = None,
    mechanism: Optional[str] = None,
    domains: Domains = None,
    emulate: Emulate = "off",
    max_power_w: MaxPower = None,
) -> Comparison:
    """Compares the energy of two callables, as ``quietwatt compare`` compares
    two commands: each is called ``warmup`` times unmeasured (caches, frequency
    ramp-up), then ``runs`` rounds each call both once, in an order shuffled
    anew each round (``seed``; ``None`` for a fresh order every time), so that a
    drift of the machine and the place in a round fall on both alike. Each call
    is measured on its own (as ``with quietwatt.measure()``), and
    :func:`compare_runs` compares ``b`` with the reference ``a``::

        c = quietwatt.compare(old_impl, new_impl, runs=10, args=(data,))
        print(c)            # new_impl is 1.95 × old_impl [1.80, 2.11] 95 % CI: significantly more ...
        if c.verdict == "significantly more": ...

        assert quietwatt.compare(old_impl, new_impl, gate_pct=5).passed   # a CI gate

    ``args``/``kwargs`` are passed to both. Each call should last well over
    RAPL's ~1 ms update interval (0.1 s or more for a 1 % bound); wrap a short
    one in a loop. The other arguments are those of :class:`quietwatt.measure`;
    with ``emulate``, one emulator serves every run. An exception from either
    callable propagates (the measurement of that call is discarded).

    Raises :class:`quietwatt.BadArgument` for a non-callable, ``runs`` < 2,
    ``warmup`` < 0 or a bad ``gate_pct``; :class:`quietwatt.NoRapl` when nothing
    can measure here (``emulate="auto"`` measures against the emulator then).
    """
    for side, f in (("a", a), ("b", b)):
        if not callable(f):
            raise BadArgument(
                f"{side}={f!r} is not callable: pass the function itself, compare(f, g), "
                "not its result, compare(f(), g()); arguments go in args=/kwargs="
            )
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 2:
        raise BadArgument(
            f"runs={runs!r}: a comparison needs at least 2 runs of each (default 10; more narrow the interval)"
        )
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise BadArgument(f"warmup={warmup!r}: give a number of unmeasured calls of each, 0 or more")
    _check_gate(gate_pct)
    call_args = tuple(args)
    call_kwargs = dict(kwargs or {})
    names = (_name(a), _name(b))
    labels = names if names[0] != names[1] else (f"a ({names[0]})", f"b ({names[1]})")
    doms = resolve_domains(domains)
    env = Environment(root, emulate)
    measured: Dict[str, List[Measurement]] = {"a": [], "b": []}
    try:
        # Open once before the runs (the mechanism is chosen and the counters
        # found here), so that each run pays only its two reads.
        open_session(env.root, mechanism, doms, reuse=True).stop()
        for _ in range(warmup):
            a(*call_args, **call_kwargs)
            b(*call_args, **call_kwargs)
        rng = random.Random(seed)
        sides = [("a", a), ("b", b)]
        for _ in range(runs):
            order = list(sides)
            rng.shuffle(order)
            for side, f in order:
                session = open_session(env.root, mechanism, doms, reuse=True)
                try:
                    f(*call_args, **call_kwargs)
                finally:
                    report, _ = session.stop()
                label = labels[0] if side == "a" else labels[1]
                measured[side].append(Measurement.from_json(report, env.emulated, label, max_power_w))
    finally:
        env.close()
    return compare_runs(measured["a"], measured["b"], gate_pct=gate_pct, labels=labels)
