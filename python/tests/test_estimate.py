"""Python where nothing can measure: with ``QUIETWATT_POWER_MODEL`` naming a
power model (``quietwatt calibrate``'s file), ``measure()``, ``Monitor`` and
``pytest --energy`` estimate instead of failing, and say so everywhere
(``mechanism == "estimate"``, ``estimated``), each figure's uncertainty holding
the model's stated error. The root is an empty directory: no RAPL at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

import quietwatt as qw

IDLE_W = 10.0
PER_CPU_W = 5.0
ERROR_W = 0.1


def this_cpu() -> dict:
    """This machine's CPU as a model file names it (the first processor of
    /proc/cpuinfo)."""
    fields: dict = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break
            k, _, v = line.partition(":")
            fields[k.strip()] = v.strip()
    return {
        "vendor": fields.get("vendor_id", ""),
        "family": int(fields.get("cpu family", "0")),
        "model": int(fields.get("model", "0")),
        "model_name": fields.get("model name", ""),
        "cpus": os.cpu_count() or 1,
    }


@pytest.fixture
def no_rapl(monkeypatch):
    """An empty root and a model of this CPU named by QUIETWATT_POWER_MODEL."""
    d = tempfile.mkdtemp(prefix="quietwatt-estimate-")
    root = os.path.join(d, "empty")
    os.mkdir(root)
    model = os.path.join(d, "model.json")
    with open(model, "w") as f:
        json.dump(
            {
                "schema": "quietwatt.power-model/1",
                "cpu": this_cpu(),
                "inputs": ["busy_cpus"],
                "domains": [
                    {"domain": "package", "idle_w": IDLE_W, "per_busy_cpu_w": PER_CPU_W, "error_w": ERROR_W, "loo_rmse_w": 0.05, "points": 6}
                ],
                "origin": {"kind": "calibrated", "mechanism": "powercap", "emulated": True, "seconds_per_level": 1.0, "created_unix_s": 0},
                "blind_to": ["instruction mix"],
            },
            f,
        )
    monkeypatch.setenv("QUIETWATT_POWER_MODEL", model)
    monkeypatch.delenv("QUIETWATT_SOCKET", raising=False)
    return root, model


def test_measure_estimates_where_nothing_measures_and_says_so(no_rapl):
    root, model = no_rapl
    with qw.measure(root=root) as m:
        time.sleep(0.5)
    assert m.mechanism == "estimate" and m.estimated, m.report
    assert m.report["estimate"]["model"] == model
    assert "ESTIMATED" in str(m)
    (p,) = [d for d in m.domains if d.domain == "package"]
    # At least the idle power over the block, at most every CPU busy, each end
    # within the stated error and the busy time's 10 ms quanta.
    cpus = os.cpu_count() or 1
    low = IDLE_W * m.duration_s - p.uncertainty_j
    high = (IDLE_W + PER_CPU_W * cpus) * m.duration_s + p.uncertainty_j
    assert low <= p.energy_j <= high, (p, m.duration_s)
    # The model's error is in the uncertainty: at least its watts over the span.
    assert p.uncertainty_j >= ERROR_W * m.duration_s


def test_a_monitor_estimates_too(no_rapl):
    root, _ = no_rapl
    with qw.Monitor(freq=100, root=root) as mon:
        time.sleep(0.3)
    assert mon.result is not None and mon.result.mechanism == "estimate" and mon.result.estimated
    rows = mon.samples()
    assert len(rows["domain"]) > 5 and set(rows["domain"]) == {"package"}


def test_without_a_model_nothing_is_estimated(no_rapl, monkeypatch):
    root, _ = no_rapl
    monkeypatch.delenv("QUIETWATT_POWER_MODEL")
    with pytest.raises(qw.NoRapl):
        with qw.measure(root=root):
            pass


def test_a_corrupt_model_is_the_callers_to_fix(no_rapl, monkeypatch):
    root, model = no_rapl
    with open(model, "w") as f:
        f.write('{"schema": "quietwatt.power-model/2", "cpu": 3}')
    with pytest.raises(qw.BadArgument) as e:
        with qw.measure(root=root):
            pass
    assert "is corrupt" in str(e.value) and "quietwatt calibrate" in str(e.value), e.value


def test_pytest_energy_estimates_each_test(no_rapl):
    root, _ = no_rapl
    work = tempfile.mkdtemp(prefix="quietwatt-pytest-estimate-")
    with open(os.path.join(work, "test_work.py"), "w") as f:
        f.write("import time\n\ndef test_sleeps():\n    time.sleep(0.2)\n")
    out = os.path.join(work, "energy.json")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--confcutdir", work, "--rootdir", work, "--energy",
         "--energy-root", root, "--energy-json", out, os.path.join(work, "test_work.py")],
        capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.load(open(out))
    assert doc["mechanism"] == "estimate" and doc["estimated"] is True, doc
    assert "ESTIMATED by a power model" in r.stdout, r.stdout
    (test,) = doc["tests"]
    assert test["energy_j"] >= IDLE_W * test["duration_s"] - test["uncertainty_j"], test
