"""`quietwatt.record`: a recording from Python through the library builder that
`quietwatt record` uses: the same file, read back whole, and the same summary
document as `record --json`; bad arguments refused before anything is written;
Ctrl-C ends it with the file complete."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import jsonschema
import pytest

import quietwatt as qw
from conftest import REPO

DOMAINS = ("package", "core", "uncore", "dram")


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_a_python_recording_is_the_clis_file_and_document(emu, tmp_path, ext):
    path = tmp_path / f"energy.{ext}"
    emu.reset_served()
    with pytest.warns(UserWarning, match="EMULATED RAPL"):
        doc = qw.record(path, 0.3, freq=50, mechanism="powercap", root=emu.root)
    schema = json.loads((REPO / "docs" / "schemas" / "record.schema.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert not errors, errors
    assert doc["schema"] == "quietwatt.record/1"
    assert (doc["output"], doc["format"], doc["emulated"], doc["mechanism"]) == (str(path), ext, True, "powercap")
    df = qw.read_recording(path)
    assert df.attrs["warnings"] == []
    assert set(df["domain"]) == set(DOMAINS)
    for d in doc["domains"]:
        rows = df[(df["domain"] == d["domain"]) & (df["socket"] == d["socket"])]
        # Every sample the summary counts is in the file, and the file's rows add
        # up to the summary's energy, which the emulator served.
        assert len(rows) == doc["samples"], (d["domain"], len(rows), doc["samples"])
        assert rows["energy_j"].sum() == pytest.approx(d["energy_j"], abs=1e-6 * len(rows) + 1e-9)
        assert d["energy_j"] <= emu.served(d["domain"], 0, "powercap") + 1e-6


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"freq": 0}, "freq=0"),
        ({"domains": "package,nonsense"}, "nonsense"),
        ({"mechanism": "carrier-pigeon"}, "carrier-pigeon"),
        ({"format": "xlsx"}, "xlsx"),
        ({"duration": -1.0}, "duration=-1"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(emu, tmp_path, kwargs, words):
    path = tmp_path / "never.csv"
    with pytest.raises(qw.BadArgument, match=words):
        qw.record(path, **{"duration": 0.1, **kwargs}, root=emu.root)
    assert not path.exists()


def test_an_output_that_cannot_be_created_is_an_output_error(emu, tmp_path):
    with pytest.raises(qw.OutputError, match="no-such-dir"):
        qw.record(tmp_path / "no-such-dir" / "energy.csv", 0.1, root=emu.root)


def test_ctrl_c_ends_a_python_recording_with_its_file_whole(emu, tmp_path):
    path = tmp_path / "until-interrupted.csv"
    code = (
        "import quietwatt as qw, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "try:\n"
        f"    qw.record({str(path)!r}, freq=200, mechanism='powercap', root={emu.root!r})\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Until samples were written (the writer flushes twice a second).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and any(line[:1].isdigit() for line in path.read_text().splitlines()):
                break
            assert p.poll() is None, p.communicate()
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert "interrupted" in out, err
    df = qw.read_recording(path)
    # Every sample whole: all four domains, no line cut.
    assert df.attrs["warnings"] == []
    assert len(df) > 0 and len(df) % len(DOMAINS) == 0
