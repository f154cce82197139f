"""quietwatt's RAPL emulator, for testing energy code the way quietwatt tests
itself: a machine with a known power profile, served over FUSE."""

from __future__ import annotations

import json
import os
from types import TracebackType
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Type, Union

from . import _quietwatt
from ._errors import BadArgument


def _watts_spec(watts: Union[str, Mapping[str, float], None]) -> Optional[str]:
    if watts is None or isinstance(watts, str):
        return watts
    return ",".join(f"{k}={float(v)}" for k, v in watts.items())


class Emulator:
    """Mounts an emulated RAPL machine (powercap zones, MSRs, the perf PMU
    description, CPU topology) in a temporary directory until :meth:`unmount`::

        with quietwatt.Emulator(watts={"package": 30, "dram": 5}) as emu:
            with quietwatt.measure(root=emu.root) as m:
                work()
            print(m.domain("package").energy_j, "J measured;",
                  emu.served("package"), "J served")

    Arguments:
        layout: ``"intel"`` (default: Kaby Lake desktop, package/core/uncore/dram),
            ``"amd"`` (Zen 3 EPYC: package and per-core), or
            ``"intel:0x8F"``-style to pick a model (0x55 Skylake-X: the fixed
            DRAM unit; 0x8F Sapphire Rapids: 1 J psys).
        watts: per-domain power, ``{"package": 30, "core": 15, "1/dram": 6,
            "platform": 8}`` or the same as text (``"package=30,core=15"``).
        sockets: packages (default 1).
        psys: add the platform (psys) domain (Intel).
        dram: serve the dram domain (Intel; default True).
        counter_bits: counter width, 8 to 32 (small values wrap quickly).
        update_interval_s: how often the counters move (default about 1 ms).
        start_offset_s: seconds the machine has been up at the mount, so the
            counters start where a running machine's would (default 0).
        trace: power over time, ``[(time_s, scale), ...]``: from ``time_s``
            (seconds since the mount, plus ``start_offset_s``) on, every domain
            draws ``scale`` times its power.
        faults: faults to inject, in ``quietwatt emulate --fault`` syntax
            (``"reset:0/package@300ms"``, ``"freeze:0/dram"``, ...).
        dir: mount here instead of a new temporary directory.

    Needs FUSE (``/dev/fuse``; root, or ``fusermount3`` from Debian's fuse3).
    """

    def __init__(
        self,
        layout: str = "intel",
        watts: Union[str, Mapping[str, float], None] = None,
        sockets: int = 1,
        psys: bool = False,
        dram: bool = True,
        counter_bits: int = 32,
        update_interval_s: Optional[float] = None,
        start_offset_s: float = 0.0,
        trace: Optional[Sequence[Tuple[float, float]]] = None,
        faults: Sequence[str] = (),
        cpus_per_socket: Optional[int] = None,
        dir: Union[str, "os.PathLike[str]", None] = None,
    ):
        vendor, _, model = layout.partition(":")
        try:
            model_n = int(model, 0) if model else None
        except ValueError:
            raise BadArgument(f"layout={layout!r}: the model after ':' is a number, e.g. 'intel:0x55'") from None
        self._native = _quietwatt.Emulator(
            vendor=vendor,
            model=model_n,
            sockets=sockets,
            cpus_per_socket=cpus_per_socket,
            watts=_watts_spec(watts),
            psys=psys,
            dram=dram,
            counter_bits=counter_bits,
            update_interval_s=update_interval_s,
            start_offset_s=start_offset_s,
            trace=None if trace is None else [(float(t), float(k)) for t, k in trace],
            faults=list(faults),
            dir=None if dir is None else os.fspath(dir),
        )

    @property
    def root(self) -> str:
        """The directory to measure under: pass it as ``root=``."""
        return self._native.root

    @property
    def mounted(self) -> bool:
        """Whether it is still mounted."""
        return self._native.mounted

    @property
    def config(self) -> Dict[str, Any]:
        """Everything it serves (vendor, sockets, domains, power profile, ...)."""
        config: Dict[str, Any] = json.loads(self._native.config_json())
        return config

    def watts(self, domain: str, socket: int = 0) -> float:
        """The power the domain draws, as configured."""
        return self._native.watts(domain, socket)

    def truth(self, domain: str, socket: int = 0) -> float:
        """The exact energy (J) the domain has drawn since the mount."""
        return self._native.truth(domain, socket)

    def served(self, domain: str, socket: int = 0, mechanism: Optional[str] = None) -> Optional[float]:
        """The energy (J) the domain's counter served between its first and its
        last read since :meth:`reset_served` (through ``mechanism``, ``powercap``
        or ``msr``, or any): what a correct reader of those reads measured.
        ``None`` before any read."""
        s = self.served_detail(domain, socket, mechanism)
        return None if s is None else s["last_j"] - s["first_j"]

    def served_detail(self, domain: str, socket: int = 0, mechanism: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """What :meth:`served` is computed from: the counter at the first and
        last reads (``first_j``, ``last_j``), their times since the mount
        (``first_t_s``, ``last_t_s``), the number of reads, and the steps
        (resets, jumps) in between."""
        text = self._native.served_json(domain, socket, mechanism)
        return None if text is None else json.loads(text)

    def reset_served(self) -> None:
        """Forgets what was served so far (before measuring again)."""
        self._native.reset_served()

    def inject(self, fault: str) -> None:
        """Injects a fault now (``quietwatt emulate --fault`` syntax)."""
        self._native.inject(fault)

    def unmount(self) -> None:
        """Unmounts it and removes its temporary directory. Safe to call twice."""
        self._native.unmount()

    def __enter__(self) -> "Emulator":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.unmount()

    def __repr__(self) -> str:
        return f"<quietwatt.Emulator at {self.root}{'' if self.mounted else ' (unmounted)'}>"
