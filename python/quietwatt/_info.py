"""What this machine offers: each mechanism's verdict and the counters it reads."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

from . import _quietwatt
from ._env import Emulate, Environment


def doctor(root: Union[str, "os.PathLike[str]", None] = None, emulate: Emulate = "off") -> List[Dict[str, Any]]:
    """Whether each mechanism (powercap, perf, msr, ebpf, perf-ring) can measure
    here, what was found, and the exact fix when it cannot: a list of
    ``{"mechanism", "works", "finding", "fix"}``, as ``quietwatt doctor --json``.

    The eBPF and perf-ring mechanisms are the command-line tool's: this package
    reads powercap, perf and msr."""
    env = Environment(root, emulate)
    try:
        return json.loads(_quietwatt.doctor_json(env.root))
    finally:
        env.close()


def domains(
    root: Union[str, "os.PathLike[str]", None] = None,
    mechanism: Optional[str] = None,
    emulate: Emulate = "off",
) -> List[Dict[str, Any]]:
    """The counters each mechanism that opens here reads (or ``mechanism`` alone,
    whose error is raised when it cannot open): ``{"mechanism", "socket",
    "domain", "unit_j", "origin", "moves"}`` each (``die`` where the kernel
    splits packages by die; ``moves`` is False for counters that never change,
    as some hypervisors expose them)."""
    env = Environment(root, emulate)
    try:
        return json.loads(_quietwatt.domains_json(env.root, mechanism))
    finally:
        env.close()
