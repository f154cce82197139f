"""The ``quietwatt`` command comes with ``pip install .`` (the venv these tests
run in is made that way by scripts/setup-python.sh): no cargo needed for record,
serve, compare or attribution. Before, neither ``quietwatt`` nor ``python -m
quietwatt`` existed after ``pip install .``."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import quietwatt as qw

SCRIPT = pathlib.Path(sys.executable).parent / "quietwatt"


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def test_pip_install_puts_the_quietwatt_command_beside_python():
    assert SCRIPT.exists(), f"{SCRIPT} was not installed by pip install ."
    r = run(str(SCRIPT), "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["quietwatt", qw.__version__], r.stdout


def test_the_command_measures_and_exits_as_the_cli_does(tmp_path):
    out = tmp_path / "r.csv"
    r = run(str(SCRIPT), "--emulate", "on", "record", "-o", str(out), "--freq", "100", "--json", "--", "sleep", "0.3")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["emulated"] is True and summary["samples"] > 10, summary
    assert "EMULATED" in r.stderr
    assert qw.read_recording(out)["energy_j"].sum() > 0
    # The measured command's exit code passes through, as with the cargo-built CLI.
    r = run(str(SCRIPT), "--emulate", "on", "run", "--", "sh", "-c", "exit 7")
    assert r.returncode == 7, r.stderr
    # A usage error is exit 2 with clap's message.
    r = run(str(SCRIPT), "run", "--freq", "nope", "--", "true")
    assert r.returncode == 2 and "--freq" in r.stderr, r.stderr


def test_python_dash_m_quietwatt_is_the_same_command():
    r = run(sys.executable, "-m", "quietwatt", "--help")
    assert r.returncode == 0, r.stderr
    assert "Usage: quietwatt" in r.stdout and "record" in r.stdout, r.stdout
