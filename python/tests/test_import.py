"""Importing starts nothing (notebooks, multiprocessing), and the API documents
itself."""

from __future__ import annotations

import os
import pydoc
import subprocess
import sys

import quietwatt as qw


def test_import_starts_no_thread_and_no_process():
    code = (
        "import os, threading\n"
        "import quietwatt\n"
        "print(len(os.listdir('/proc/self/task')), threading.active_count(), len(os.listdir('/proc/self/fd')))\n"
    )
    base = subprocess.run([sys.executable, "-c", code.replace("import quietwatt\n", "")], capture_output=True, text=True)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    tasks, active, fds = map(int, out.stdout.split())
    assert (tasks, active) == (1, 1), out.stdout
    assert fds == int(base.stdout.split()[2]), "import opened files"


def test_help_explains_the_entry_points():
    text = pydoc.render_doc(qw.measure, renderer=pydoc.plaintext)
    for word in ("root", "mechanism", "domains", "emulate", "NoRapl", "uncertainty_j"[:11]):
        assert word in text, word
    for obj in (qw.measure_energy, qw.Monitor, qw.Emulator, qw.read_recording, qw.doctor, qw.domains):
        assert obj.__doc__ and len(obj.__doc__) > 200, obj


def test_the_package_ships_type_information():
    pkg = os.path.dirname(qw.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    assert os.path.exists(os.path.join(pkg, "_quietwatt.pyi"))
