"""Recordings: written as ``quietwatt record`` writes them (:func:`record`, the
same library builder), and read back as DataFrames (:func:`read_recording`)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

if TYPE_CHECKING:
    import pandas

from . import _quietwatt
from ._env import Domains, Emulate, Environment, resolve_domains, warn
from ._errors import BadArgument
from ._schema import add_start_time, conform, typed_metadata

PathLike = Union[str, "os.PathLike[str]"]

_COLUMNS = ["timestamp_ns", "socket", "domain", "energy_j", "power_w", "missed", "merged", "freq_hz", "counter"]


def _csv_metadata(path: str) -> Tuple[Dict[str, Any], int]:
    """The ``# key: value`` lines before the header, and how many there are."""
    meta: Dict[str, Any] = {"channels": []}
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#"):
                break
            n += 1
            key, _, value = line[1:].strip().partition(": ")
            if key == "channel":
                meta["channels"].append(value)
            else:
                meta[key] = value
    return meta, n


def _read_csv(path: str, pd: Any) -> Any:
    meta, skip = _csv_metadata(path)
    warnings: List[str] = []
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    # A recording killed mid-write (SIGKILL, a full disk) may end in a cut line:
    # keep every complete row and say what was left out.
    if lines and not lines[-1].endswith("\n") and len(lines) > skip + 1:
        warnings.append(f"the last line was cut (the recording ended mid-write): left out: {lines[-1]!r}")
        lines = lines[:-1]
    import io

    df = pd.read_csv(io.StringIO("".join(lines[skip:])), dtype={"counter": "string"}, keep_default_na=False)
    return _finish(df, typed_metadata(meta), warnings, pd)


def _finish(df: Any, meta: Dict[str, Any], warnings: List[str], pd: Any) -> Any:
    df = conform(df, pd)
    df.attrs.update(meta)
    df.attrs["warnings"] = warnings
    add_start_time(df, pd)
    return df


def _read_jsonl(path: str, pd: Any) -> Any:
    meta: Dict[str, Any] = {}
    rows: List[Dict[str, Any]] = []
    warnings: List[str] = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if k == len(lines) - 1:
                warnings.append(f"the last line was cut (the recording ended mid-write): left out: {line!r}")
                continue
            raise BadArgument(f"{path}: line {k + 1} is not JSON ({e}): not a quietwatt recording?") from e
        if k == 0 and "metadata" in obj:
            meta = obj["metadata"]
        else:
            rows.append(obj)
    df = pd.DataFrame.from_records(rows, columns=_COLUMNS)
    return _finish(df, meta, warnings, pd)


# The key of the Parquet key-value metadata that holds the JSON metadata object
# (the first line of a JSON Lines recording).
_PARQUET_METADATA_KEY = "quietwatt.recording"


def _pyarrow_parquet() -> Any:
    """``pyarrow.parquet``, or None when pyarrow is not installed."""
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    return pq


def _parquet_columns(path: str) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """The columns (as NumPy arrays) and the key-value metadata of a Parquet file:
    through pyarrow when it is installed (what pandas itself reads Parquet with),
    else polars (which needs no pyarrow for this)."""
    pq = _pyarrow_parquet()
    if pq is not None:
        table = pq.read_table(path)
        kv = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        return {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}, kv
    try:
        import polars as pl
    except ImportError as e:
        raise ImportError("reading a Parquet recording needs polars or pyarrow: pip install polars") from e
    frame = pl.read_parquet(path)
    return {c: frame[c].to_numpy() for c in frame.columns}, dict(pl.read_parquet_metadata(path))


def _read_parquet(path: str, pd: Any) -> Any:
    try:
        columns, kv = _parquet_columns(path)
    except ImportError:
        raise
    except Exception as e:  # OSError, and the engines' own classes (polars.ComputeError, ...)
        raise BadArgument(f"{path}: not a readable Parquet file ({e}): not a quietwatt recording?") from e
    missing = [c for c in _COLUMNS if c not in columns]
    if missing:
        raise BadArgument(f"{path}: no {', '.join(missing)} column: not a quietwatt recording")
    df = pd.DataFrame({c: columns[c] for c in _COLUMNS})
    # The file's unsigned columns (socket, missed, merged are u32 in quietwatt) as
    # the CSV and JSON Lines readers give them: int64, where `x - 1` cannot wrap.
    for c in ("socket", "missed", "merged"):
        df[c] = df[c].astype("int64")
    meta = kv.get(_PARQUET_METADATA_KEY)
    return _finish(df, json.loads(meta) if meta is not None else typed_metadata(kv), [], pd)


def read_recording(path: PathLike, format: str = "auto") -> "pandas.DataFrame":
    """A recording of ``quietwatt record`` (CSV, JSON Lines or Parquet) as a pandas
    DataFrame: one row per sample and counter, with the columns and dtypes of
    :data:`quietwatt.SCHEMA` (those of :meth:`Monitor.to_pandas`), whatever the
    format. Its metadata is in ``.attrs``, typed the same from every format:
    ``emulated`` (bool), ``freq_hz`` (float), ``mechanism``, ``cpu_model``,
    ``host``, ``wall_clock_anchor`` (``{"unix_ns", "monotonic_ns"}``),
    ``channels`` (dicts), and ``start``, the first row's time as a UTC
    ``pandas.Timestamp``.

    The format follows the extension (``.csv``, ``.jsonl``/``.ndjson``,
    ``.parquet``) unless ``format=`` says. A last line cut by a kill is left out
    and named in ``.attrs["warnings"]``; every complete row is kept. Parquet is
    read with pyarrow when it is installed, else with polars.
    """
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError("read_recording needs pandas: pip install pandas") from e
    path = os.fspath(path)
    fmt = format.lower()
    if fmt == "auto":
        ext = os.path.splitext(path)[1].lower()
        fmt = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet"}.get(ext, "")
        if not fmt:
            raise BadArgument(
                f"{path}: cannot tell the format from the extension: pass format='csv', 'jsonl' or 'parquet'"
            )
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such recording")
    readers = {"csv": _read_csv, "jsonl": _read_jsonl, "parquet": _read_parquet}
    if fmt in readers:
        df: "pandas.DataFrame" = readers[fmt](path, pd)
        return df
    raise BadArgument(f"format={format!r}: quietwatt records 'csv', 'jsonl' and 'parquet'")


def record(
    path: PathLike,
    duration: Optional[float] = None,
    *,
    freq: float = 100.0,
    mechanism: Optional[str] = None,
    domains: Domains = None,
    format: Optional[str] = None,
    root: Optional[PathLike] = None,
    emulate: Emulate = "off",
) -> Dict[str, Any]:
    """Records the energy counters to ``path`` for ``duration`` seconds (until
    Ctrl-C without one), as ``quietwatt record -o PATH --duration S --json`` does:
    the same library builder writes the same file (CSV, JSON Lines or Parquet, by
    the extension unless ``format=`` says), and the summary returned is the same
    document (``schema`` ``quietwatt.record/1``: each domain's energy with its
    uncertainty, the samples written, what recording cost).

    Read the file back with :func:`read_recording`. A Ctrl-C stops the recording
    with the file complete, then raises ``KeyboardInterrupt``; a failed write (a
    full disk) keeps every sample before it and says so in ``"error"``.

    Raises :class:`quietwatt.NoRapl` when nothing can measure here,
    :class:`quietwatt.BadArgument` for a bad rate, domain, format or mechanism,
    :class:`quietwatt.OutputError` when the file cannot be created.
    """
    names = resolve_domains(domains)
    env = Environment(root, emulate)
    try:
        doc: Dict[str, Any] = json.loads(
            _quietwatt.record_json(
                env.root,
                os.fspath(path),
                duration_s=duration,
                mechanism=mechanism,
                domains=names,
                freq=freq,
                format=format,
                emulated=env.emulated,
            )
        )
    finally:
        env.close()
    if doc.get("error"):
        warn(f"quietwatt: the recording stopped early: {doc['error']}")
    return doc
