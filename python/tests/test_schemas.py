"""Every JSON document quietwatt prints or exports validates against its JSON
Schema in docs/schemas/ (and carries `schema` and `schema_version`): each command
is run here, against the emulator."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import jsonschema
import pytest

import quietwatt as qw
from conftest import REPO

SCHEMAS = REPO / "docs" / "schemas"


def validate(kind: str, doc) -> None:
    schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=str)
    assert not errors, f"{kind}: " + "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    assert doc["schema"] == f"quietwatt.{kind}/1" and doc["schema_version"] == 1


def run(cli: str, *args: str, ok=(0,)) -> str:
    out = subprocess.run([cli, *args], capture_output=True, text=True, timeout=300)
    assert out.returncode in ok, f"{args}: exit {out.returncode}: {out.stderr}"
    return out.stdout


# (kind, arguments after `--root ROOT`): every command with --json.
COMMANDS = [
    ("run", ["run", "--json", "--", "true"]),
    ("run", ["run", "-m", "msr", "-d", "package", "--json", "--", "sleep", "0.02"]),
    ("repeat", ["run", "-r", "2", "--warmup", "1", "--json", "--", "true"]),
    ("bench-energy", ["bench", "energy", "-r", "2", "--json", "true", "sleep 0.01"]),
    ("record", ["record", "--json", "-o", "/dev/null", "--duration", "0.1"]),
    ("record", ["record", "--json", "-o", "/dev/null", "--duration", "0.1", "-f", "auto"]),
    ("profile", ["profile", "--json", "--format", "folded", "-o", "/dev/null", "--", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]),
    ("profile", ["profile", "--json", "--format", "folded", "-o", "/dev/null", "-a", "--duration", "0.2"]),
    ("check", ["check", "--json", "--interval", "0.1"]),
    ("doctor", ["doctor", "--json"]),
    ("list", ["list", "--json"]),
    ("bench-sampler", ["bench", "sampler", "--json", "--duration", "0.2", "--variants", "reference,timerfd"]),
    ("bench-latency", ["bench", "latency", "--json", "--iterations", "200", "--bootstrap", "100"]),
    ("bench-workload", ["bench", "workload", "ep", "--json"]),
]


@pytest.mark.parametrize("kind, args", COMMANDS, ids=[f"{k}:{' '.join(a[:3])}" for k, a in COMMANDS])
def test_each_json_output_matches_its_schema(cli, emu, kind, args):
    # check exits 1 when it flags a domain; the document is printed either way.
    out = run(cli, "--root", emu.root, *args, ok=(0, 1) if kind == "check" else (0,))
    validate(kind, json.loads(out))


def test_outputs_without_rapl_match_their_schemas_too(cli, tmp_path):
    validate("run", json.loads(run(cli, "--root", str(tmp_path), "run", "--json", "--", "true")))
    validate("doctor", json.loads(run(cli, "--root", str(tmp_path), "doctor", "--json", ok=(69,))))
    validate("list", json.loads(run(cli, "--root", str(tmp_path), "list", "--json", ok=(0, 69))))


def test_exports_and_the_recording_metadata_match_their_schemas(cli, emu, tmp_path):
    export = tmp_path / "repeat.json"
    run(cli, "--root", emu.root, "run", "-r", "2", "--export-json", str(export), "--", "true")
    validate("repeat", json.loads(export.read_text()))
    export = tmp_path / "bench.json"
    run(cli, "--root", emu.root, "bench", "energy", "-r", "2", "--export-json", str(export), "true", "true")
    validate("bench-energy", json.loads(export.read_text()))
    rec = tmp_path / "r.jsonl"
    run(cli, "--root", emu.root, "record", "-o", str(rec), "--duration", "0.1")
    validate("recording", json.loads(rec.read_text().splitlines()[0])["metadata"])
    # A Parquet recording's key-value metadata holds the same object.
    import polars as pl

    rec = tmp_path / "r.parquet"
    run(cli, "--root", emu.root, "record", "-o", str(rec), "--duration", "0.1")
    validate("recording", json.loads(pl.read_parquet_metadata(rec)["quietwatt.recording"]))


def test_bench_wakeup_and_model_validate_match_their_schemas(cli, emu, tmp_path):
    out = run(cli, "--root", emu.root, "bench", "wakeup", "--json", "--count", "10", "--interval-ms", "5")
    validate("bench-wakeup", json.loads(out))
    # validate draws its plots beside the model file: a copy, in a temporary directory.
    model = tmp_path / "model.json"
    shutil.copy(REPO / "docs/models/2026-11-23-pf160.json", model)
    out = run(cli, "--root", emu.root, "model", "validate", "--model", str(model), "--size", "256", "--reps", "2", "--json")
    validate("model-validate", json.loads(out))


def test_the_pytest_plugin_report_matches_its_schema(pytester, emu):
    pytester.makepyfile("def test_one():\n    sum(range(1000))\n")
    out = pytester.path / "energy.json"
    r = pytester.runpytest("-p", "no:cacheprovider", "--energy", f"--energy-root={emu.root}", f"--energy-json={out}")
    r.assert_outcomes(passed=1)
    validate("pytest", json.loads(out.read_text()))


# What only a command has (`run --json`'s exit code, rate, notes, error, and the
# CLI's additions) and the stamp: the keys `run --json` may have that a Python
# report has not.
COMMAND_ONLY = {"schema", "schema_version", "exit_code", "freq_hz", "freq_auto", "notes", "error", "model_estimate", "share"}
# What only a session has: its sample buffer (a Monitor) and a window's name.
SESSION_ONLY = {"samples", "window"}


def json_type(v) -> str:
    return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__


def test_a_python_report_and_run_json_are_one_document(cli, emu):
    """Python's reports and `run --json` serialise one Rust type (`Measurement`,
    which `RunDocument` flattens): the same keys, of the same JSON types, less
    what only a command or only a session has; so the two cannot drift."""
    cmd = json.loads(run(cli, "--root", emu.root, "run", "-m", "powercap", "-f", "200", "--json", "--", "sleep", "0.05"))
    with qw.Monitor(freq=200, root=emu.root, mechanism="powercap") as mon:
        time.sleep(0.05)
    with qw.measure(root=emu.root, mechanism="powercap") as block:
        time.sleep(0.01)
    for py in (mon.result.report, block.report):
        assert set(py) - SESSION_ONLY <= set(cmd), f"keys of Python's report not in run --json: {set(py) - set(cmd)}"
        assert set(cmd) - set(py) <= COMMAND_ONLY | {"overhead"}, f"keys of run --json not in Python's report: {set(cmd) - set(py)}"
        for k in set(py) & set(cmd):
            assert json_type(py[k]) == json_type(cmd[k]), f"`{k}`: {py[k]!r} against {cmd[k]!r}"
        assert [set(d) - {"unmoved"} for d in py["domains"]] == [set(d) for d in cmd["domains"]]
    # A Monitor samples at a rate, as `run` does: its cost is there, in the same shape.
    assert set(mon.result.report["overhead"]) == set(cmd["overhead"])


def test_every_schema_is_used_by_a_test_here():
    tested = {k for k, _ in COMMANDS} | {"recording", "bench-wakeup", "model-validate", "pytest"}
    assert {p.name.split(".")[0] for p in SCHEMAS.glob("*.schema.json")} == tested
