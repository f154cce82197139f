"""Recordings written by ``quietwatt record`` read back as DataFrames."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Tuple, Union

from ._errors import BadArgument

PathLike = Union[str, "os.PathLike[str]"]


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
    if "counter" in df.columns:
        df["counter"] = df["counter"].replace("", pd.NA)
    df.attrs.update(meta)
    df.attrs["warnings"] = warnings
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
    cols = ["timestamp_ns", "socket", "domain", "energy_j", "power_w", "missed", "merged", "freq_hz", "counter"]
    df = pd.DataFrame.from_records(rows, columns=cols)
    df["counter"] = df["counter"].astype("string")
    df.attrs.update(meta)
    df.attrs["warnings"] = warnings
    return df


def read_recording(path: PathLike, format: str = "auto") -> Any:
    """A recording of ``quietwatt record`` (CSV or JSON Lines) as a pandas
    DataFrame: one row per sample and counter (``timestamp_ns``, ``socket``,
    ``domain``, ``energy_j``, ``power_w``, ``missed``, ``merged``, ``freq_hz``,
    ``counter``), its metadata (mechanism, rate, CPU, clock anchor, channels,
    ``emulated``) in ``.attrs``.

    The format follows the extension (``.csv``, ``.jsonl``/``.ndjson``) unless
    ``format=`` says. A last line cut by a kill is left out and named in
    ``.attrs["warnings"]``; every complete row is kept.
    """
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError("read_recording needs pandas: pip install pandas") from e
    path = os.fspath(path)
    fmt = format.lower()
    if fmt == "auto":
        ext = os.path.splitext(path)[1].lower()
        fmt = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}.get(ext, "")
        if not fmt:
            raise BadArgument(f"{path}: cannot tell the format from the extension: pass format='csv' or format='jsonl'")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such recording")
    if fmt == "csv":
        return _read_csv(path, pd)
    if fmt == "jsonl":
        return _read_jsonl(path, pd)
    raise BadArgument(f"format={format!r}: quietwatt records 'csv' and 'jsonl'")
