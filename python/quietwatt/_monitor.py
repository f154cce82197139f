"""A power timeline: counters sampled at a fixed rate on a Rust thread (the GIL is
not held while it samples), named windows that may nest and overlap, and the
samples as a pandas or polars DataFrame."""

from __future__ import annotations

import json
import os
from types import TracebackType
from typing import Any, Dict, List, Optional, Tuple, Type, Union

from . import _quietwatt
from ._env import Domains, Emulate, Environment, open_session, resolve_domains
from ._errors import BadArgument
from ._results import Measurement

#: Columns of :meth:`Monitor.to_pandas` (``die`` is added where the kernel splits
#: packages by die).
COLUMNS = ("timestamp_ns", "socket", "domain", "energy_j", "power_w", "interval_ns", "missed")


class Monitor:
    """Samples the counters at ``freq`` Hz until :meth:`stop`.

    ::

        mon = quietwatt.Monitor(freq=1000)
        mon.start()
        for epoch in range(3):
            mon.begin_window(f"epoch {epoch}")
            train_one_epoch()
            w = mon.end_window(f"epoch {epoch}")
            print(w.label, w.total_j, "J")
        run = mon.stop()
        df = mon.to_pandas()   # timestamp_ns, socket, domain, energy_j, power_w, ...

    Sampling runs on a thread of quietwatt's native library, started by
    :meth:`start` and joined by :meth:`stop`: nothing is forked or spawned, no
    thread is left behind (use it as a context manager, or call :meth:`stop`, so
    that a notebook cell that fails still stops it). The GIL is released while it
    samples. Each sample costs a few microseconds of CPU (``stop()``'s report
    says how much, under ``overhead``).

    Memory is bounded: the samples not yet handed out are kept up to ``keep_s``
    seconds' worth (default 300 s); older ones are dropped, counted in the
    report's ``samples.dropped`` and in :attr:`warnings`, and their energy still
    counts in every total. :meth:`to_pandas` and :meth:`samples` hand out what
    accumulated, so a long run that calls them now and then loses nothing.

    Windows (:meth:`begin_window`, :meth:`end_window`) are cut at the exact
    readings at their ends, whatever the rate. The other arguments are those of
    :class:`quietwatt.measure`.
    """

    def __init__(
        self,
        freq: float = 1000.0,
        root: Union[str, "os.PathLike[str]", None] = None,
        mechanism: Optional[str] = None,
        domains: Domains = None,
        emulate: Emulate = "off",
        keep_s: float = 300.0,
    ):
        if not (isinstance(freq, (int, float)) and freq > 0):
            raise BadArgument(f"freq={freq!r}: give a positive rate in Hz, e.g. freq=1000")
        if not (isinstance(keep_s, (int, float)) and keep_s > 0):
            raise BadArgument(f"keep_s={keep_s!r}: give a positive number of seconds")
        self.freq = float(freq)
        self._args = (root, mechanism, resolve_domains(domains), emulate)
        self._keep = max(1, int(self.freq * keep_s))
        self._env: Optional[Environment] = None
        self._session: Optional[_quietwatt.Session] = None
        self._channels: List[Tuple[int, Optional[int], str]] = []
        self._chunks: List[Tuple[List[int], List[int], List[int], List[float]]] = []
        self.result: Optional[Measurement] = None
        self.emulated = False

    # -- life cycle -------------------------------------------------------

    def start(self) -> "Monitor":
        """Opens the counters and starts the sampler thread."""
        if self._session is not None:
            raise BadArgument("this monitor is already running: stop() it first, or make a new quietwatt.Monitor")
        root, mechanism, domains, emulate = self._args
        env = Environment(root, emulate)
        try:
            self._session = open_session(env.root, mechanism, domains, self.freq, self._keep)
        except BaseException:
            env.close()
            raise
        self._env = env
        self.emulated = env.emulated
        self._channels = list(self._session.channels)
        self._chunks = []
        self.result = None
        return self

    def stop(self) -> Measurement:
        """Stops the sampler thread (joined before this returns) and returns the
        energy of the whole run; the samples stay for :meth:`to_pandas`."""
        session, env = self._session, self._env
        if session is None or env is None:
            if self.result is not None:
                return self.result
            raise BadArgument("this monitor was not started: call start() first, or use it in a with block")
        self._session = None
        self._env = None
        try:
            report, rows = session.stop()
        finally:
            env.close()
        self._chunks.append(rows)
        self.result = Measurement.from_json(report, self.emulated)
        return self.result

    @property
    def running(self) -> bool:
        """Whether the sampler runs."""
        return self._session is not None

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._session is not None:
            self.stop()

    def __del__(self) -> None:
        # A monitor dropped while running (a notebook cell rerun) stops its thread.
        try:
            if self._session is not None:
                self.stop()
        except Exception:
            pass

    # -- figures ----------------------------------------------------------

    def _running(self) -> _quietwatt.Session:
        if self._session is None:
            raise BadArgument("this monitor is not running: call start() first")
        return self._session

    def snapshot(self) -> Measurement:
        """The energy since :meth:`start`, without stopping."""
        return Measurement.from_json(self._running().snapshot(), self.emulated)

    def begin_window(self, name: str) -> None:
        """Opens a window named ``name`` now. Windows may nest and overlap; a name
        is reused once its window has ended."""
        self._running().begin_window(str(name))

    def end_window(self, name: str) -> Measurement:
        """Closes the window ``name`` and returns its energy."""
        return Measurement.from_json(self._running().end_window(str(name)), self.emulated, label=str(name))

    @property
    def warnings(self) -> List[str]:
        """What makes the run's figures doubtful: samples dropped from the bounded
        buffer, a sampler that stopped early, and the report's warnings."""
        out: List[str] = []
        if self._session is not None:
            err = self._session.sampling_error()
            if err:
                out.append(f"sampling stopped early: {err}")
            stats_json = self._session.sample_stats()
            stats = json.loads(stats_json) if stats_json else {}
        else:
            stats = (self.result.report.get("samples") or {}) if self.result else {}
            if self.result is not None:
                out.extend(self.result.warnings)
        if stats.get("dropped"):
            out.append(
                f"{stats['dropped']} samples dropped from the buffer (keep_s too short for the run); "
                "their energy still counts in the totals"
            )
        return out

    # -- samples ----------------------------------------------------------

    def _collect(self) -> None:
        if self._session is not None:
            self._chunks.append(self._session.drain_samples())

    def samples(self) -> Dict[str, List[Any]]:
        """Every sample so far in long form, as lists: one row per sample and
        counter (the columns of :data:`COLUMNS`)."""
        self._collect()
        n = len(self._channels)
        cols: Dict[str, List[Any]] = {c: [] for c in COLUMNS}
        with_die = any(ch[1] is not None for ch in self._channels)
        if with_die:
            cols["die"] = []
        for t_ns, dt_ns, missed, energy in self._chunks:
            for i, (t, dt, miss) in enumerate(zip(t_ns, dt_ns, missed)):
                row = energy[i * n : (i + 1) * n]
                for (socket, die, domain), e in zip(self._channels, row):
                    cols["timestamp_ns"].append(t)
                    cols["socket"].append(socket)
                    cols["domain"].append(domain)
                    cols["energy_j"].append(e)
                    cols["power_w"].append(e / (dt * 1e-9) if dt else float("nan"))
                    cols["interval_ns"].append(dt)
                    cols["missed"].append(miss)
                    if with_die:
                        cols["die"].append(die)
        return cols

    def _attrs(self) -> Dict[str, Any]:
        return {
            "freq_hz": self.freq,
            "mechanism": (self.result.mechanism if self.result else None),
            "emulated": self.emulated,
            "channels": [f"{s}/{d}" for s, _, d in self._channels],
        }

    def to_pandas(self) -> "Any":
        """The samples as a pandas DataFrame (``timestamp_ns``, ``socket``,
        ``domain``, ``energy_j``, ``power_w``, ``interval_ns``, ``missed``), the
        run's facts in ``.attrs``. Needs pandas (``pip install pandas``)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Monitor.to_pandas needs pandas: pip install pandas") from e
        df = pd.DataFrame(self.samples())
        df.attrs.update(self._attrs())
        return df

    def to_polars(self) -> "Any":
        """The samples as a polars DataFrame (the columns of :meth:`to_pandas`).
        Needs polars (``pip install polars``)."""
        try:
            import polars as pl
        except ImportError as e:
            raise ImportError("Monitor.to_polars needs polars: pip install polars") from e
        return pl.DataFrame(self.samples())

    def plot(self, ax: Any = None, by: str = "domain") -> Any:
        """Draws power over time per counter with matplotlib; returns the axes."""
        import matplotlib.pyplot as plt

        df = self.to_pandas()
        if ax is None:
            _, ax = plt.subplots(figsize=(8, 3.5))
        t0 = df["timestamp_ns"].min() if len(df) else 0
        for (socket, domain), g in df.groupby(["socket", "domain"]):
            ax.plot((g["timestamp_ns"] - t0) * 1e-9, g["power_w"], label=f"{socket}/{domain}", lw=0.8)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("power (W)")
        emu = ", EMULATED" if self.emulated else ""
        ax.set_title(f"quietwatt at {self.freq:g} Hz{emu}")
        ax.legend(loc="upper right", fontsize="small")
        return ax
