"""A power timeline: counters sampled at a fixed rate on a Rust thread (the GIL is
not held while it samples), named windows that may nest and overlap, and the
samples as a pandas or polars DataFrame."""

from __future__ import annotations

import html
import json
import os
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple, Type, Union

from . import _quietwatt
from ._env import Domains, Emulate, Environment, open_session, resolve_domains, resolve_socket, warn
from ._errors import BadArgument
from ._results import MaxPower, Measurement
from ._schema import COLUMNS, conform

if TYPE_CHECKING:
    import pandas
    import polars

#: A gap between two samples this many periods long is named in the warnings.
GAP_PERIODS = 10


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
        max_power_w: MaxPower = None,
        socket: Union[str, "os.PathLike[str]", None] = None,
    ):
        if not (isinstance(freq, (int, float)) and freq > 0):
            raise BadArgument(f"freq={freq!r}: give a positive rate in Hz, e.g. freq=1000")
        if not (isinstance(keep_s, (int, float)) and keep_s > 0):
            raise BadArgument(f"keep_s={keep_s!r}: give a positive number of seconds")
        self.freq = float(freq)
        self._args = (root, mechanism, resolve_domains(domains), emulate)
        self._socket = resolve_socket(socket)
        self._keep = max(1, int(self.freq * keep_s))
        self._env: Optional[Environment] = None
        self._session: Optional[_quietwatt.Session] = None
        self._channels: List[Tuple[int, Optional[int], str]] = []
        self._chunks: List[Tuple[List[int], List[int], List[int], List[float]]] = []
        self.result: Optional[Measurement] = None
        self.emulated = False
        self._max_power_w = max_power_w
        #: Windows so far: ``(name, begin_ns, end_ns or None)`` in CLOCK_MONOTONIC
        #: nanoseconds (the samples' clock), for :meth:`plot`.
        self.windows: List[Tuple[str, int, Optional[int]]] = []
        self._warned: Set[str] = set()

    # -- life cycle -------------------------------------------------------

    def start(self) -> "Monitor":
        """Opens the counters and starts the sampler thread."""
        if self._session is not None:
            raise BadArgument("this monitor is already running: stop() it first, or make a new quietwatt.Monitor")
        root, mechanism, domains, emulate = self._args
        env = Environment(root, emulate)
        try:
            self._session = open_session(env.root, mechanism, domains, self.freq, self._keep, socket=self._socket)
        except BaseException:
            env.close()
            raise
        self._env = env
        self.emulated = env.emulated
        self._channels = list(self._session.channels)
        self._chunks = []
        self.result = None
        self.windows = []
        self._warned = set()
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
        self.result = Measurement.from_json(report, self.emulated, max_power_w=self._max_power_w)
        for w in self._sampling_warnings(serious_only=True):
            if w not in self._warned:
                self._warned.add(w)
                warn(f"quietwatt.Monitor: {w}")
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

    def __repr__(self) -> str:
        state = "running" if self.running else ("stopped" if self.result is not None else "not started")
        emu = ", EMULATED" if self.emulated else ""
        return f"<quietwatt.Monitor at {self.freq:g} Hz, {state}, {len(self.windows)} windows{emu}>"

    def _repr_html_(self) -> str:
        """For notebooks: the state, the run's result, the windows and the warnings."""
        esc = html.escape
        parts = [f"<p><b>{esc(repr(self))}</b></p>"]
        if self.result is not None:
            parts.append(self.result._repr_html_())
        if self.windows:
            rows = "".join(
                f"<tr><td>{esc(n)}</td><td>{'open' if e is None else f'{(e - b) / 1e9:.3f} s'}</td></tr>"
                for n, b, e in self.windows
            )
            parts.append(f"<table><tr><th>window</th><th>length</th></tr>{rows}</table>")
        warns = "".join(f"<li>{esc(w)}</li>" for w in self.warnings)
        if warns:
            parts.append(f"<ul>{warns}</ul>")
        return "<div class='quietwatt'>" + "".join(parts) + "</div>"

    # -- figures ----------------------------------------------------------

    def _running(self) -> _quietwatt.Session:
        if self._session is None:
            raise BadArgument("this monitor is not running: call start() first")
        return self._session

    def snapshot(self) -> Measurement:
        """The energy since :meth:`start`, without stopping."""
        return Measurement.from_json(self._running().snapshot(), self.emulated, max_power_w=self._max_power_w)

    def begin_window(self, name: str) -> None:
        """Opens a window named ``name`` now. Windows may nest and overlap; a name
        is reused once its window has ended."""
        self._running().begin_window(str(name))
        self.windows.append((str(name), time.monotonic_ns(), None))

    def end_window(self, name: str) -> Measurement:
        """Closes the window ``name`` and returns its energy."""
        m = Measurement.from_json(
            self._running().end_window(str(name)), self.emulated, label=str(name), max_power_w=self._max_power_w
        )
        for i in range(len(self.windows) - 1, -1, -1):
            if self.windows[i][0] == str(name) and self.windows[i][2] is None:
                self.windows[i] = (self.windows[i][0], self.windows[i][1], time.monotonic_ns())
                break
        return m

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
        out.extend(self._sampling_warnings())
        return out

    def _sampling_warnings(self, serious_only: bool = False) -> List[str]:
        """Missed deadlines and long gaps between samples, from the samples; with
        ``serious_only``, missed deadlines only when over 1 % of the samples (what
        :meth:`stop` passes to ``warnings.warn``; :attr:`warnings` lists all)."""
        self._collect()
        missed = 0
        longest = 0
        samples = 0
        for _, dt_ns, miss, _ in self._chunks:
            missed += sum(miss)
            samples += len(miss)
            if dt_ns:
                longest = max(longest, max(dt_ns))
        period_ns = 1e9 / self.freq
        out: List[str] = []
        if missed and (not serious_only or missed > 0.01 * (samples + missed)):
            out.append(
                f"{missed} sampling deadlines at {self.freq:g} Hz passed without a read (a loaded host, "
                "or a rate the counters' reads cannot keep): those rows span the gap, their energy is "
                "counted, but their power is an average over it; sample slower, or see the 'missed' column"
            )
        if longest > GAP_PERIODS * period_ns:
            out.append(
                f"the longest gap between two samples was {longest / 1e6:.1f} ms, {longest / period_ns:.0f} "
                f"periods at {self.freq:g} Hz: power at a finer scale than that is not known there"
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
                    cols["merged"].append(0)
                    cols["freq_hz"].append(self.freq)
                    cols["counter"].append(None)
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

    def to_pandas(self) -> "pandas.DataFrame":
        """The samples as a pandas DataFrame with the columns and dtypes of
        :data:`quietwatt.SCHEMA` (those of :func:`quietwatt.read_recording`),
        the run's facts in ``.attrs``. Needs pandas (``pip install pandas``)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Monitor.to_pandas needs pandas: pip install pandas") from e
        df: "pandas.DataFrame" = conform(pd.DataFrame(self.samples()), pd)
        df.attrs.update(self._attrs())
        return df

    def to_polars(self) -> "polars.DataFrame":
        """The samples as a polars DataFrame: the columns of :data:`quietwatt.SCHEMA`
        (Int64, Utf8, Float64). Needs polars (``pip install polars``)."""
        try:
            import polars as pl
        except ImportError as e:
            raise ImportError("Monitor.to_polars needs polars: pip install polars") from e
        kinds = {"int64": pl.Int64, "float64": pl.Float64, "string": pl.Utf8}
        from ._schema import SCHEMA

        schema = {c: kinds[t] for c, t in SCHEMA.items()}
        cols = self.samples()
        if "die" in cols:
            schema["die"] = pl.Int64
        return pl.DataFrame(cols, schema=schema)

    def plot(
        self,
        ax: Any = None,
        by: str = "domain",
        raw: bool = False,
        points: int = 400,
        windows: bool = True,
    ) -> Any:
        """Draws power over time with matplotlib and returns the axes.

        ``by``: one line per ``"domain"`` (summed over sockets, the default),
        per ``"socket"`` (package + dram of each socket: the whole-machine
        figure split by socket), or per ``"channel"`` (each socket/domain
        counter). Domains inside package (core, uncore) are drawn apart, never
        added to it. Power is resampled to about ``points`` time bins (energy
        per bin over the bin's length, so nothing is lost); ``raw=True`` draws
        every sample instead. Windows are shaded and named. The figure uses a
        constrained layout, so ``ax.figure.savefig(...)`` does not clip labels
        (``bbox_inches="tight"`` is safe as well)."""
        import matplotlib.pyplot as plt

        if by not in ("domain", "socket", "channel"):
            raise BadArgument(f"by={by!r}: expected 'domain', 'socket' or 'channel'")
        df = self.to_pandas()
        if ax is None:
            _, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
        t0 = int(df["timestamp_ns"].min()) if len(df) else 0
        if by == "domain":
            df["line"] = df["domain"]
        elif by == "socket":
            df = df[df["domain"].isin(["package", "dram"])].copy()
            df["line"] = "socket " + df["socket"].astype(str) + " (package + dram)"
        else:
            df["line"] = df["socket"].astype(str) + "/" + df["domain"].astype(str)
        span = (int(df["timestamp_ns"].max()) - t0) if len(df) else 0
        for line, g in df.groupby("line", sort=False):
            if raw or span == 0 or len(g) <= points * max(1, g["timestamp_ns"].nunique() // max(1, len(g))):
                per_t = g.groupby("timestamp_ns").agg(energy_j=("energy_j", "sum"), interval_ns=("interval_ns", "max"))
                t = (per_t.index.to_numpy() - t0) * 1e-9
                p = per_t["energy_j"] / (per_t["interval_ns"].where(per_t["interval_ns"] > 0) * 1e-9)
                ax.plot(t, p.to_numpy(), label=str(line), lw=0.8)
                continue
            width = max(span / points, 1.0)
            b = ((g["timestamp_ns"] - t0) // width).astype("int64")
            per_bin = g.groupby(b).agg(energy_j=("energy_j", "sum"))
            n_channels = g.groupby(["socket", "domain"]).ngroups
            time_ns = g.groupby(b)["interval_ns"].sum() / max(1, n_channels)
            p = per_bin["energy_j"] / (time_ns.where(time_ns > 0) * 1e-9)
            ax.plot((per_bin.index.to_numpy() + 0.5) * width * 1e-9, p.to_numpy(), label=str(line), lw=1.0)
        if windows:
            for name, begin, end in self.windows:
                stop = end if end is not None else (t0 + span)
                ax.axvspan((begin - t0) * 1e-9, (stop - t0) * 1e-9, alpha=0.12, color="grey")
                ax.text((begin - t0) * 1e-9, 1.0, f" {name}", transform=ax.get_xaxis_transform(),
                        va="top", ha="left", fontsize="small")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("power (W)")
        emu = ", EMULATED" if self.emulated else ""
        how = "every sample" if raw else f"resampled to ~{points} points"
        ax.set_title(f"quietwatt at {self.freq:g} Hz ({how}, whole machine{emu})")
        ax.legend(loc="upper right", fontsize="small")
        return ax
