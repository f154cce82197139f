"""The one table schema of quietwatt's samples: :meth:`Monitor.to_pandas`,
:meth:`Monitor.to_polars` and :func:`read_recording` (CSV, JSON Lines, Parquet)
all give these columns, in this order, with these dtypes."""

from __future__ import annotations

import re
from typing import Any, Dict, List

#: Column name -> pandas dtype, for every sample table quietwatt hands out. One
#: row per sample and counter.
#:
#: ``timestamp_ns``: CLOCK_MONOTONIC nanoseconds of the read;
#: ``socket``: the package; ``domain``: package, core, uncore, dram or psys;
#: ``energy_j``: joules since the previous row of that counter;
#: ``power_w``: ``energy_j`` over ``interval_ns``;
#: ``interval_ns``: nanoseconds since the previous row of that counter;
#: ``missed``: sampling deadlines that passed without a read before this row;
#: ``merged``: reads folded into this row (a recording's writer fell behind; 0
#: in a Monitor); ``freq_hz``: the sampling rate in force; ``counter``: NA, or
#: reset/backstep/jump/ambiguous when the counter misbehaved during the row.
#: A ``die`` column (int64) is added where the kernel splits packages by die.
SCHEMA: Dict[str, str] = {
    "timestamp_ns": "int64",
    "socket": "int64",
    "domain": "string",
    "energy_j": "float64",
    "power_w": "float64",
    "interval_ns": "int64",
    "missed": "int64",
    "merged": "int64",
    "freq_hz": "float64",
    "counter": "string",
}

COLUMNS = tuple(SCHEMA)


def conform(df: Any, pd: Any) -> Any:
    """``df`` with the columns of :data:`SCHEMA` in order and their dtypes
    (``interval_ns`` computed per counter where the source lacks it)."""
    if "interval_ns" not in df.columns:
        keys = ["socket", "domain"] + (["die"] if "die" in df.columns else [])
        gap = df.groupby(keys, sort=False)["timestamp_ns"].diff()
        # The first row of a counter: its interval from its energy and power.
        with_power = (df["power_w"] > 0) & (df["energy_j"] > 0)
        first = (df["energy_j"] / df["power_w"].where(with_power) * 1e9).round()
        df["interval_ns"] = gap.fillna(first).fillna(0)
    for c, t in SCHEMA.items():
        if c == "domain":
            df[c] = df[c].astype("string")
        elif t == "string":
            df[c] = df[c].astype("string").replace("", pd.NA)
        else:
            df[c] = df[c].astype(t)
    extra = ["die"] if "die" in df.columns else []
    if extra:
        df["die"] = df["die"].astype("int64")
    return df[list(COLUMNS) + extra]


_ANCHOR = re.compile(r"unix_ns (\d+) = monotonic_ns (\d+)")
_CHANNEL = re.compile(
    r"(?P<socket>\d+)(?:\.(?P<die>\d+))?/(?P<domain>\w+) unit=(?P<unit>[\d.e+-]+) (?P<uunit>\w+) "
    r"range=(?P<range>[\d.e+-]+) J origin=(?P<origin>.*)"
)
_UNITS = {"J": 1.0, "mJ": 1e-3, "uJ": 1e-6, "µJ": 1e-6, "nJ": 1e-9}


def typed_metadata(meta: Dict[str, Any]) -> Dict[str, Any]:
    """A CSV recording's ``# key: value`` metadata with the types a JSON Lines
    or Parquet recording's has: ``emulated`` a bool, ``freq_hz`` a float,
    ``schema_version`` an int, ``wall_clock_anchor`` ``{"unix_ns", "monotonic_ns"}``
    and each channel ``{"socket", "die", "domain", "unit_j", "range_j", "origin"}``."""
    out = dict(meta)
    if isinstance(out.get("emulated"), str):
        out["emulated"] = out["emulated"].strip().lower() == "true"
    for key, kind in (("freq_hz", float), ("schema_version", int)):
        if isinstance(out.get(key), str):
            try:
                out[key] = kind(out[key])
            except ValueError:
                pass
    anchor = out.get("wall_clock_anchor")
    if isinstance(anchor, str):
        m = _ANCHOR.search(anchor)
        if m:
            out["wall_clock_anchor"] = {"monotonic_ns": int(m.group(2)), "unix_ns": int(m.group(1))}
    channels: List[Any] = []
    for ch in out.get("channels", []):
        m = _CHANNEL.match(ch) if isinstance(ch, str) else None
        if m is None:
            channels.append(ch)
            continue
        channels.append(
            {
                "die": None if m.group("die") is None else int(m.group("die")),
                "domain": m.group("domain"),
                "origin": m.group("origin"),
                "range_j": float(m.group("range")),
                "socket": int(m.group("socket")),
                "unit_j": float(m.group("unit")) * _UNITS.get(m.group("uunit"), float("nan")),
            }
        )
    if "channels" in out:
        out["channels"] = channels
    return out


def add_start_time(df: Any, pd: Any) -> None:
    """``df.attrs["start"]``: the first row's wall-clock time (a UTC
    ``pandas.Timestamp``), from the recording's clock anchor."""
    anchor = df.attrs.get("wall_clock_anchor")
    if isinstance(anchor, dict) and len(df):
        unix_ns = anchor["unix_ns"] + int(df["timestamp_ns"].iloc[0]) - anchor["monotonic_ns"]
        df.attrs["start"] = pd.Timestamp(unix_ns, unit="ns", tz="UTC")
