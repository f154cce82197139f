"""What this machine offers: each mechanism's verdict and the counters it reads."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

from . import _quietwatt
from ._env import Domains, Emulate, Environment, resolve_domains
from ._errors import BadArgument

MECHANISMS = ("powercap", "perf", "msr", "ebpf", "perf-ring")


class Verdicts(List[Dict[str, Any]]):
    """What :func:`doctor` returns: a list of ``{"mechanism", "works", "finding",
    "fix"}`` dicts, shown as a table in a notebook."""

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td>{html.escape(str(v.get('mechanism')))}</td><td>{'yes' if v.get('works') else 'no'}</td>"
            f"<td>{html.escape(str(v.get('finding') or ''))}</td><td>{html.escape(str(v.get('fix') or ''))}</td></tr>"
            for v in self
        )
        return (
            "<table class='quietwatt'><tr><th>mechanism</th><th>works</th><th>finding</th><th>fix</th></tr>"
            f"{rows}</table>"
        )


def doctor(
    root: Union[str, "os.PathLike[str]", None] = None,
    mechanism: Optional[str] = None,
    domains: Domains = None,
    emulate: Emulate = "off",
) -> List[Dict[str, Any]]:
    """Whether each mechanism (powercap, perf, msr, ebpf, perf-ring), or
    ``mechanism`` alone, can measure here, what was found, and the exact fix when
    it cannot: a list of ``{"mechanism", "works", "finding", "fix"}``, as
    ``quietwatt doctor --json``. ``domains`` is accepted like everywhere else and
    changes nothing here (a mechanism works or not for all its domains).

    :func:`quietwatt.measure` reads powercap, perf and msr; :class:`quietwatt.Monitor`
    also samples in the kernel (ebpf, perf-ring), where the perf RAPL events exist."""
    if mechanism is not None and mechanism not in MECHANISMS:
        raise BadArgument(f"unknown mechanism '{mechanism}': expected one of {', '.join(MECHANISMS)}")
    resolve_domains(domains)
    env = Environment(root, emulate)
    try:
        verdicts = json.loads(_quietwatt.doctor_json(env.root))
    finally:
        env.close()
    return Verdicts(v for v in verdicts if mechanism is None or v["mechanism"] == mechanism)


def domains(
    root: Union[str, "os.PathLike[str]", None] = None,
    mechanism: Optional[str] = None,
    domains: Domains = None,
    emulate: Emulate = "off",
) -> List[Dict[str, Any]]:
    """The counters each mechanism that opens here reads (or ``mechanism`` alone,
    whose error is raised when it cannot open; only ``domains`` when given):
    ``{"mechanism", "socket", "domain", "unit_j", "origin", "moves"}`` each
    (``die`` where the kernel splits packages by die; ``moves`` is False for
    counters that never change, as some hypervisors expose them)."""
    wanted = resolve_domains(domains)
    env = Environment(root, emulate)
    try:
        rows = json.loads(_quietwatt.domains_json(env.root, mechanism))
    finally:
        env.close()
    return [r for r in rows if wanted is None or r["domain"] in wanted]
