"""The documented notebook example runs and draws its power timeline."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_the_power_timeline_example_writes_a_png_with_three_windows(tmp_path):
    out = tmp_path / "timeline.png"
    r = subprocess.run(
        [sys.executable, str(REPO / "docs/examples/power_timeline.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = r.stdout.splitlines()
    for phase in ("idle-ish", "busy", "sleep"):
        assert any(line.strip().startswith(f"{phase}:") and " J " in line for line in lines), r.stdout
