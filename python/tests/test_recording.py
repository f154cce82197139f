"""`quietwatt.read_recording` on what `quietwatt record` writes, in each format:
the rows add up to what the emulator served, the metadata is in `.attrs`, a
recording cut mid-line keeps its complete rows, and a Parquet recording killed
with SIGKILL keeps the row groups written before."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

import quietwatt as qw


def record(cli: str, emu: qw.Emulator, path, freq: str = "50", duration: str = "0.3") -> None:
    emu.reset_served()
    out = subprocess.run(
        [cli, "--root", emu.root, "record", "-m", "powercap", "-f", freq, "--duration", duration, "-o", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_a_recording_reads_back_with_its_metadata_and_adds_up_to_what_was_served(cli, emu, tmp_path, ext):
    path = tmp_path / f"energy.{ext}"
    record(cli, emu, path)
    df = qw.read_recording(path)
    for col in ("timestamp_ns", "socket", "domain", "energy_j", "power_w", "missed", "merged", "freq_hz", "counter"):
        assert col in df.columns, (col, list(df.columns))
    assert df.attrs["mechanism"] == "powercap"
    assert str(df.attrs["emulated"]).lower() == "true"
    assert len(df.attrs["channels"]) == 4
    assert df.attrs["warnings"] == []
    assert set(df["domain"]) == {"package", "core", "uncore", "dram"}
    assert df["counter"].isna().all()
    for domain in ("package", "dram"):
        rows = df[df["domain"] == domain]
        served = emu.served(domain, 0, "powercap")
        # Every row is the energy since the previous read: together, the served total
        # (to the microjoule of each row's printed value).
        assert rows["energy_j"].sum() == pytest.approx(served, abs=1e-6 * len(rows) + 1e-9)
        assert rows["timestamp_ns"].is_monotonic_increasing


@pytest.mark.parametrize("ext", ["csv", "jsonl"])
def test_a_last_line_cut_by_a_kill_is_left_out_and_said(cli, emu, tmp_path, ext):
    path = tmp_path / f"energy.{ext}"
    record(cli, emu, path)
    whole = qw.read_recording(path)
    text = path.read_text()
    path.write_text(text[: len(text) - 12])  # the last row, cut mid-line
    cut = qw.read_recording(path)
    assert len(cut) == len(whole) - 1
    assert len(cut.attrs["warnings"]) == 1 and "cut" in cut.attrs["warnings"][0]
    assert cut["energy_j"].tolist() == whole["energy_j"].tolist()[:-1]


def test_a_file_of_unknown_kind_or_missing_is_a_clear_error(tmp_path):
    with pytest.raises(qw.BadArgument, match="format="):
        qw.read_recording(tmp_path / "energy.txt")
    with pytest.raises(FileNotFoundError, match="no such recording"):
        qw.read_recording(tmp_path / "missing.csv")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"metadata": {}}\nnot json\n{"timestamp_ns": 1}\n')
    with pytest.raises(qw.BadArgument, match="line 2"):
        qw.read_recording(bad)
    fake = tmp_path / "fake.parquet"
    fake.write_text("timestamp_ns,socket\n1,0\n")
    with pytest.raises(qw.BadArgument, match="not a readable Parquet file"):
        qw.read_recording(fake)


def test_parquet_gives_the_csv_frame_and_the_jsonl_metadata(cli, emu, tmp_path):
    frames = {}
    for ext in ("csv", "jsonl", "parquet"):
        record(cli, emu, tmp_path / f"energy.{ext}")
        frames[ext] = qw.read_recording(tmp_path / f"energy.{ext}")
    csv, jsonl, pq = frames["csv"], frames["jsonl"], frames["parquet"]
    assert list(pq.columns) == list(csv.columns)
    # The same dtypes as the text formats give (the file's unsigned columns as
    # int64), freq_hz a float (the CSV's reader makes a whole rate an integer).
    for col in ("timestamp_ns", "socket", "domain", "energy_j", "power_w", "missed", "merged", "counter"):
        assert pq[col].dtype == csv[col].dtype, (col, pq[col].dtype, csv[col].dtype)
    assert pq["freq_hz"].dtype == "float64" and (pq["freq_hz"] == 50.0).all()
    # The metadata is the JSON Lines' object, typed, with its version.
    assert set(pq.attrs) == set(jsonl.attrs)
    assert pq.attrs["schema"] == "quietwatt.recording/1" and pq.attrs["schema_version"] == 1
    assert pq.attrs["emulated"] is True and pq.attrs["freq_hz"] == 50
    assert pq.attrs["wall_clock_anchor"]["unix_ns"] > 0


@pytest.mark.parametrize("engine", ["polars", "pyarrow"])
def test_parquet_reads_with_polars_alone_or_pyarrow(cli, emu, tmp_path, monkeypatch, engine):
    from quietwatt import _recording

    if engine == "polars":
        # As if pyarrow were not installed (pandas alone cannot read Parquet).
        monkeypatch.setattr(_recording, "_pyarrow_parquet", lambda: None)
    else:
        # python/requirements-test.txt installs it: a missing pyarrow fails, never skips.
        import pyarrow  # noqa: F401
    path = tmp_path / "energy.parquet"
    record(cli, emu, path)
    df = qw.read_recording(path)
    assert len(df) > 20 and df.attrs["mechanism"] == "powercap"
    assert df["counter"].isna().all() and df["counter"].dtype == "string"
    assert df["socket"].dtype == "int64" and df["missed"].dtype == "int64"
    rows = df[df["domain"] == "package"]
    assert rows["energy_j"].sum() == pytest.approx(emu.served("package", 0, "powercap"), rel=1e-9, abs=1e-9)


def wait_stopped(pid: int) -> None:
    """Until every thread of `pid` is stopped (state T); a minute at most."""
    deadline = time.monotonic() + 60
    while True:
        states = []
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                states.append(f.read().rsplit(") ", 1)[1][0])
        if all(s == "T" for s in states):
            return
        assert time.monotonic() < deadline, f"quietwatt did not stop: {states}"
        time.sleep(0.01)


def mean_power(rows) -> float:
    """Energy over time, from the read before the first row (its interval is its
    energy over its power) to the last row."""
    return rows["energy_j"].sum() / span_s(rows)


def span_s(rows) -> float:
    """Seconds from the read before the first row to the last row."""
    first = rows.iloc[0]
    start_ns = first["timestamp_ns"] - first["energy_j"] / first["power_w"] * 1e9
    return (rows["timestamp_ns"].iloc[-1] - start_ns) / 1e9


def assert_mean_power(rows, watts: float, domain: str) -> None:
    """Mean power within 1 % of the emulator's, plus the 30 ms a loaded host may
    serve a read away from the timestamp taken beside it (over the recording's span)."""
    tol = 0.01 * watts + watts * 0.03 / span_s(rows)
    assert mean_power(rows) == pytest.approx(watts, abs=tol), domain


def test_a_parquet_recording_killed_with_sigkill_keeps_the_row_groups_written_before(cli, emu, tmp_path):
    path = tmp_path / "energy.parquet"
    proc = subprocess.Popen(
        [cli, "--root", emu.root, "record", "-m", "powercap", "-f", "200", "-o", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # Until a few row groups are in (a read that overlaps a write may fail: again).
        deadline = time.monotonic() + 60
        seen = None
        while seen is None or len(seen) < 3 * 4 * 50:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no rows in the file after a minute"
            time.sleep(0.05)
            try:
                seen = qw.read_recording(path)
            except (qw.BadArgument, FileNotFoundError):
                pass
        # Stopped before the kill, so that it lands outside a write (the one window
        # the format leaves, documented), then killed: no footer written at the end.
        proc.send_signal(signal.SIGSTOP)
        wait_stopped(proc.pid)
        proc.kill()
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    df = qw.read_recording(path)
    assert len(df) >= len(seen)
    assert df["energy_j"].tolist()[: len(seen)] == seen["energy_j"].tolist()
    assert df["timestamp_ns"].is_monotonic_increasing
    # Whole samples: one row per channel at every timestamp.
    per_sample = df.groupby("timestamp_ns")["domain"].apply(tuple)
    assert per_sample.nunique() == 1 and len(per_sample.iloc[0]) == len(df.attrs["channels"]) == 4
    # The energy adds up: each domain's mean power is what the emulator draws, as
    # it is in a CSV of the same emulator (within 1 %: the timestamps are taken
    # beside each read, the emulator's clock inside it).
    csv_path = tmp_path / "energy.csv"
    record(cli, emu, csv_path, freq="200", duration="3")
    csv = qw.read_recording(csv_path)
    for domain in ("package", "core", "uncore", "dram"):
        watts = emu.watts(domain)
        assert_mean_power(df[df["domain"] == domain], watts, domain)
        assert_mean_power(csv[csv["domain"] == domain], watts, domain)
