"""`quietwatt.read_recording` on what `quietwatt record` writes, in each format:
the rows add up to what the emulator served, the metadata is in `.attrs`, and a
recording cut mid-line keeps its complete rows."""

from __future__ import annotations

import subprocess

import pytest

import quietwatt as qw


def record(cli: str, emu: qw.Emulator, path) -> None:
    emu.reset_served()
    out = subprocess.run(
        [cli, "--root", emu.root, "record", "-m", "powercap", "-f", "50", "--duration", "0.3", "-o", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("ext", ["csv", "jsonl"])
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
