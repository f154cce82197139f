"""One table schema for Monitor frames and recordings (names and dtypes), typed
recording metadata, and a Monitor that says when it missed its deadlines."""

from __future__ import annotations

import subprocess
import time
import warnings

import pandas as pd
import pytest

import quietwatt as qw


def record(cli: str, emu: qw.Emulator, path) -> None:
    subprocess.run(
        [cli, "--root", emu.root, "record", "-m", "powercap", "-f", "50", "--duration", "0.3", "-o", str(path)],
        check=True, capture_output=True, timeout=120,
    )


def dtypes(df: pd.DataFrame) -> dict:
    return {c: str(t) if str(t) != "str" else "string" for c, t in df.dtypes.items()}


def test_monitor_frames_and_recordings_of_every_format_share_one_schema(cli, emu, tmp_path):
    with qw.Monitor(freq=50, root=emu.root, mechanism="powercap") as mon:
        time.sleep(0.2)
    frames = {"monitor": mon.to_pandas()}
    for ext in ("csv", "jsonl", "parquet"):
        record(cli, emu, tmp_path / f"r.{ext}")
        frames[ext] = qw.read_recording(tmp_path / f"r.{ext}")
    expected = {c: ("string" if t == "string" else t) for c, t in qw.SCHEMA.items()}
    for name, df in frames.items():
        # Before: interval_ns in Monitor frames only, merged/freq_hz/counter in
        # recordings only, freq_hz int64 from CSV and float64 from Parquet.
        assert list(df.columns) == list(qw.SCHEMA), name
        assert dtypes(df) == expected, (name, dtypes(df))
        assert (df["interval_ns"] > 0).all(), name
        pkg = df[df["domain"] == "package"]
        # interval_ns is what power_w divides by, in every source.
        assert (pkg["power_w"] * pkg["interval_ns"] * 1e-9).to_numpy() == pytest.approx(
            pkg["energy_j"].to_numpy(), rel=1e-3, abs=1e-6
        ), name
        assert pkg["power_w"].median() == pytest.approx(20, rel=0.2), name
    pl = mon.to_polars()
    assert pl.columns == list(qw.SCHEMA)


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_recording_metadata_is_typed_the_same_from_every_format(cli, emu, tmp_path, ext):
    path = tmp_path / f"r.{ext}"
    record(cli, emu, path)
    attrs = qw.read_recording(path).attrs
    # Before (CSV): emulated == 'true', freq_hz == '50', the anchor a sentence.
    assert attrs["emulated"] is True
    assert isinstance(attrs["freq_hz"], float) and attrs["freq_hz"] == 50.0
    anchor = attrs["wall_clock_anchor"]
    assert set(anchor) == {"unix_ns", "monotonic_ns"} and all(isinstance(v, int) for v in anchor.values())
    start = attrs["start"]
    assert isinstance(start, pd.Timestamp) and start.tz is not None
    assert abs((pd.Timestamp.now(tz="UTC") - start).total_seconds()) < 600
    ch = attrs["channels"][0]
    assert ch["domain"] == "package" and ch["socket"] == 0 and ch["unit_j"] == pytest.approx(1e-6)


def test_a_monitor_that_misses_its_deadlines_says_so():
    # 20 kHz through FUSE (four reads of the emulator a sample) cannot be kept.
    with qw.Emulator() as emu:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with qw.Monitor(freq=20000, root=emu.root, mechanism="powercap") as mon:
                time.sleep(0.3)
    df = mon.to_pandas()
    missed = int(df[df["domain"] == "package"]["missed"].sum())
    assert missed > 0, "the test needs a rate this machine cannot keep"
    # Before: mon.warnings == [] whatever was missed.
    said = [w for w in mon.warnings if "sampling deadlines" in w]
    assert said and said[0].startswith(f"{missed} sampling deadlines at 20000 Hz"), mon.warnings
    assert any("sampling deadlines" in str(w.message) and w.filename == __file__ for w in caught), [
        (str(w.message), w.filename) for w in caught
    ]
