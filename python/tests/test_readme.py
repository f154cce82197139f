"""The Python README's examples run as written on this machine (no RAPL: the
built-in emulator, which they say), and pass strict mypy; results, monitors
and doctor() render in notebooks; plot() follows its arguments."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

import quietwatt as qw
from conftest import REPO

README = REPO / "python" / "README.md"
#: The repository's README: its "From Python" example runs too.
TOP_README = REPO / "README.md"


def blocks() -> list:
    top = TOP_README.read_text().split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S) + re.findall(
        r"```python\n(.*?)```", top, re.S
    )


def test_the_readme_has_python_examples_and_the_first_one_says_what_it_measures():
    bs = blocks()
    assert len(bs) >= 3
    assert 'emulate="auto"' in bs[0] and "def work()" in bs[0]


@pytest.mark.parametrize("i", range(len(blocks())))
def test_each_readme_example_runs_as_written(tmp_path, i):
    path = tmp_path / f"readme_{i}.py"
    path.write_text(blocks()[i])
    # The package as installed (the wheel, with its native module), not the sources.
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("QUIETWATT_ROOT", None)
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    # Every example that measures says where the figures come from.
    if "EMULATED" in r.stdout:
        assert "UserWarning: quietwatt: EMULATED RAPL" in r.stderr, r.stderr
    if "savefig" in blocks()[i]:
        assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"


def test_the_readme_examples_pass_strict_mypy(tmp_path):
    pytest.importorskip("mypy", reason="pip install -r python/requirements-test.txt")
    files = []
    for i, b in enumerate(blocks()):
        (tmp_path / f"readme_{i}.py").write_text(b)
        files.append(str(tmp_path / f"readme_{i}.py"))
    # The package as installed: mypy reads its types (py.typed, _quietwatt.pyi).
    env = {**os.environ, "MYPYPATH": str(REPO / "python")}
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / ".mypy"), *files],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_types_users_rely_on_are_precise(tmp_path):
    pytest.importorskip("mypy", reason="pip install -r python/requirements-test.txt")
    code = '''
import quietwatt as qw

@qw.measure_energy
def f(x: int) -> str:
    return str(x)

reveal_type(f(1))
reveal_type(f.last_measurement)
reveal_type(qw.read_recording("x.csv"))
qw.measure(emulate="yes")
'''
    (tmp_path / "t.py").write_text(code)
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / ".mypy"), str(tmp_path / "t.py")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "MYPYPATH": str(REPO / "python")},
    )
    out = r.stdout
    assert re.search(r'Revealed type is "(builtins\.)?str"', out), out
    assert "quietwatt._results.Measurement | None" in out, out
    assert "DataFrame" in out, out
    # Before: emulate="yes" type-checked.
    assert 'Argument "emulate" to "measure" has incompatible type' in out, out


def test_results_monitors_and_doctor_render_as_html(emu):
    with qw.measure(root=emu.root) as m:
        time.sleep(0.02)
    h = m._repr_html_()
    assert "<table>" in h and "package" in h and "Whole machine" in h and "EMULATED" in h
    with qw.Monitor(freq=100, root=emu.root) as mon:
        mon.begin_window("w")
        time.sleep(0.05)
        mon.end_window("w")
    assert "Monitor at 100 Hz, stopped, 1 windows, EMULATED" in repr(mon)
    assert "<td>w</td>" in mon._repr_html_()
    d = qw.doctor(root=emu.root)
    assert "<th>mechanism</th>" in d._repr_html_() and isinstance(d, list) and d[0]["mechanism"]


def test_plot_follows_by_resamples_shades_windows_and_does_not_clip(emu, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    with qw.Monitor(freq=1000, root=emu.root, mechanism="powercap") as mon:
        mon.begin_window("busy")
        time.sleep(0.3)
        mon.end_window("busy")
    raw = mon.plot(raw=True)
    n_raw = len(raw.get_lines()[0].get_xdata())
    ax = mon.plot(points=50)
    # Before: `by` ignored, every 1 kHz sample drawn.
    assert {line.get_label() for line in ax.get_lines()} == {"package", "core", "uncore", "dram"}
    assert len(ax.get_lines()[0].get_xdata()) <= 60 < n_raw
    pkg = ax.get_lines()[0].get_ydata()
    assert abs(sorted(pkg)[len(pkg) // 2] - 20) < 4  # the package's 20 W, averaged per bin
    by_socket = mon.plot(by="socket")
    assert [line.get_label() for line in by_socket.get_lines()] == ["socket 0 (package + dram)"]
    by_channel = mon.plot(by="channel")
    assert "0/dram" in {line.get_label() for line in by_channel.get_lines()}
    assert len(ax.patches) == 1  # the window, shaded
    with pytest.raises(qw.BadArgument, match="by="):
        mon.plot(by="colour")
    # Saved as is, the x label is inside the image (constrained layout).
    fig = ax.figure
    fig.savefig(tmp_path / "t.png")
    fig.canvas.draw()
    label = ax.xaxis.label.get_window_extent()
    assert label.y0 >= 0 and label.x0 >= 0
