"""The local reader service from Python, as a user without access to the
counters (``nobody``, through ``setpriv``): ``quietwatt serve --socket`` runs as
root against the emulator, whose counters only root may read, as the kernel's
since CVE-2020-8694; ``measure()`` and ``Monitor`` in a process of ``nobody``
read through the service found at ``$QUIETWATT_SOCKET`` without being told,
say so (``mechanism == "socket"``), and give the emulator's energy within the
uncertainty, which holds the policy's coarsening."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

POLICY = "version = 1\n[[allow]]\nusers = [65534]\ninterval_ms = 100\nresolution_uj = 1000\n"

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def service(emu, cli):
    """``serve --socket`` as root on ``emu``, in a directory nobody can reach."""
    d = tempfile.mkdtemp(prefix="quietwatt-reader-")
    os.chmod(d, 0o755)
    policy = os.path.join(d, "policy.toml")
    with open(policy, "w") as f:
        f.write(POLICY)
    sock = os.path.join(d, "reader.sock")
    args = [cli, "--root", emu.root, "serve", "--listen", "none", "--socket", sock]
    args += ["--policy", policy, "-m", "powercap", "--freq", "50"]
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(sock):
            if p.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"serve --socket did not start: {p.stderr.read() if p.poll() is not None else ''}")
            time.sleep(0.05)
        yield sock
    finally:
        p.terminate()
        p.wait(timeout=30)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def package_for_nobody():
    """This quietwatt package copied where ``nobody`` can import it (the
    virtual environment may sit in a directory only root can enter), as a
    ``PYTHONPATH``; with the interpreter's real path."""
    import quietwatt

    d = tempfile.mkdtemp(prefix="quietwatt-py-")
    os.chmod(d, 0o755)
    shutil.copytree(os.path.dirname(quietwatt.__file__), os.path.join(d, "quietwatt"))
    # pytest and what it imports, for `pytest --energy` as nobody.
    import _pytest
    import iniconfig
    import packaging
    import pluggy

    for mod in (pytest, _pytest, pluggy, iniconfig, packaging):
        src = mod.__file__
        if os.path.basename(src) == "__init__.py":
            shutil.copytree(os.path.dirname(src), os.path.join(d, mod.__name__))
        else:
            shutil.copy(src, d)
    for extra in ("py.py",):
        src = os.path.join(os.path.dirname(os.path.dirname(_pytest.__file__)), extra)
        if os.path.exists(src):
            shutil.copy(src, d)
    for dirpath, dirnames, filenames in os.walk(d):
        for name in dirnames + filenames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def as_nobody(package_for_nobody):
    def run(code: str, sock: str, root: str) -> dict:
        """Runs ``code`` in a Python of ``nobody`` that finds the service and
        the emulator through the environment; what it prints on its last line,
        as JSON."""
        env = dict(
            os.environ,
            QUIETWATT_SOCKET=sock,
            QUIETWATT_ROOT=root,
            PYTHONPATH=package_for_nobody,
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONNOUSERSITE="1",
        )
        python = os.path.realpath(sys.executable)
        r = subprocess.run(NOBODY + [python, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd="/")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    return run


def test_measure_as_nobody_reads_the_emulators_energy_through_the_service(emu, service, as_nobody):
    # The counters themselves are refused to nobody...
    refused = as_nobody(
        "import json, quietwatt as qw\n"
        "try:\n"
        "    import quietwatt._quietwatt as n\n"
        "    n.Session('" + emu.root + "', 'powercap', None)\n"
        "    print(json.dumps({'opened': True}))\n"
        "except Exception as e:\n"
        "    print(json.dumps({'opened': False, 'error': str(e)}))\n",
        service,
        emu.root,
    )
    assert refused["opened"] is False and "permission denied" in refused["error"], refused
    # ...and measure() reads through the service instead.
    doc = as_nobody(
        "import json, time, warnings, quietwatt as qw\n"
        "warnings.simplefilter('ignore')\n"
        "with qw.measure() as m:\n"
        "    time.sleep(1)\n"
        "print(json.dumps({'mechanism': m.mechanism, 'via': m.via, 'report': m.report}))\n",
        service,
        emu.root,
    )
    assert doc["mechanism"] == "socket", doc
    # Where it read through, and what the policy granted nobody.
    via = doc["via"]
    assert via["socket"] == service and via["mechanism"] == "powercap" and via["emulated"] is True, via
    assert (via["uid"], via["interval_s"], via["resolution_uj"], via["coarsened"]) == (65534, 0.1, 1000, False), via
    # emulate="auto" emulates only where nothing can measure: the service can.
    auto = as_nobody(
        "import json, warnings, quietwatt as qw\n"
        "warnings.simplefilter('ignore')\n"
        "with qw.measure(emulate='auto') as m:\n"
        "    pass\n"
        "print(json.dumps({'mechanism': m.mechanism}))\n",
        service,
        emu.root,
    )
    assert auto["mechanism"] == "socket", auto
    report = doc["report"]
    d = report["duration_s"]
    for name, watts in (("package", 20.0), ("dram", 4.0)):
        dom = next(x for x in report["domains"] if x["domain"] == name)
        e, u = dom["energy_j"], dom["uncertainty_j"]
        # Rounded down to the policy's millijoule.
        assert abs(e * 1000 - round(e * 1000)) < 1e-6, e
        # The emulator's constant power over the measured span; each end lags
        # by up to the policy's interval and the service's sampling period (the
        # uncertainty holds it), a service held up by a loaded machine a
        # quarter second more.
        assert abs(e - watts * d) <= u + watts * 0.25, (name, e, u, d)
        assert 0 < u <= watts * 0.5, (name, u)


def test_a_monitor_as_nobody_samples_through_the_service(emu, service, as_nobody):
    doc = as_nobody(
        "import json, time, warnings, quietwatt as qw\n"
        "warnings.simplefilter('ignore')\n"
        "mon = qw.Monitor(freq=50)\n"
        "with mon:\n"
        "    time.sleep(1.5)\n"
        "s = mon.samples()\n"
        "pk = [e for d, e in zip(s['domain'], s['energy_j']) if d == 'package']\n"
        "print(json.dumps({'mechanism': mon.result.mechanism, 'total': mon.result.report,\n"
        "                  'rows': pk}))\n",
        service,
        emu.root,
    )
    assert doc["mechanism"] == "socket", doc
    rows = doc["rows"]
    # The rows add up to the run's package energy: readings repeat between the
    # policy's intervals (0 J rows), none is lost or counted twice.
    package = next(x for x in doc["total"]["domains"] if x["domain"] == "package")
    assert len(rows) > 10 and all(e >= 0 for e in rows), rows
    assert abs(sum(rows) - package["energy_j"]) < 1e-6, (sum(rows), package)
    assert abs(package["energy_j"] - 20.0 * doc["total"]["duration_s"]) <= package["uncertainty_j"] + 20.0 * 0.25


def test_socket_names_the_service_whatever_this_process_may_open(emu, service):
    import quietwatt as qw

    # This process (root) could open the emulator's counters itself: socket=
    # reads through the service all the same, never coarsened for root.
    with qw.measure(root=emu.root, socket=service) as m:
        time.sleep(0.5)
    assert m.mechanism == "socket"
    # Root is never coarsened: its readings are the service's own.
    assert m.via is not None and m.via["uid"] == 0 and m.via["resolution_uj"] == 1, m.via
    package = next(d for d in m.domains if d.domain == "package")
    assert abs(package.energy_j - 20.0 * m.duration_s) <= package.uncertainty_j + 20.0 * 0.25
    with qw.Monitor(freq=20, root=emu.root, socket=pathlib.Path(service)) as mon:
        time.sleep(0.3)
    assert mon.result.mechanism == "socket"
    with pytest.raises(qw.BadArgument, match="socket=42"):
        qw.measure(socket=42)
    # A path where no service listens: the error says how to start one.
    with pytest.raises(Exception, match="no reader service at /nonexistent.sock"):
        with qw.measure(root=emu.root, socket="/nonexistent.sock"):
            pass


def test_pytest_energy_as_nobody_measures_each_test_through_the_service(emu, service, as_nobody):
    work = tempfile.mkdtemp(prefix="quietwatt-pytest-")
    os.chmod(work, 0o777)
    try:
        with open(os.path.join(work, "test_work.py"), "w") as f:
            f.write("import time\n\ndef test_sleeps():\n    time.sleep(0.5)\n")
        out = os.path.join(work, "energy.json")
        doc = as_nobody(
            "import json, sys, pytest\n"
            f"code = pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'quietwatt.pytest_plugin', '--energy',"
            f" '--energy-json', {out!r}, {os.path.join(work, 'test_work.py')!r}])\n"
            f"print(json.dumps({{'code': int(code), 'doc': json.load(open({out!r}))}}))\n",
            service,
            emu.root,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert doc["code"] == 0, doc
    report = doc["doc"]
    assert report["mechanism"] == "socket", report
    assert report["via"]["socket"] == service and report["via"]["uid"] == 65534, report
    (test,) = report["tests"]
    # Package and DRAM of the emulator (24 W) over the test's call, within its
    # uncertainty and a loaded machine's quarter second.
    assert abs(test["energy_j"] - 24.0 * test["duration_s"]) <= test["uncertainty_j"] + 24.0 * 0.25, test
