"""Errors are quietwatt exceptions with the library's explanation and the fix,
catchable as the built-in exception a Python caller expects."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import quietwatt as qw


def test_a_root_without_rapl_raises_no_rapl_naming_doctor_and_emulate(tmp_path):
    with pytest.raises(qw.NoRapl) as e:
        with qw.measure(root=tmp_path):
            pass
    assert isinstance(e.value, qw.Error) and isinstance(e.value, RuntimeError)
    assert "quietwatt.doctor()" in str(e.value) and "emulate='auto'" in str(e.value)


def test_emulate_auto_falls_back_to_the_emulator_only_where_nothing_measures(tmp_path, emu):
    with pytest.warns(UserWarning, match="no mechanism can measure"):
        with qw.measure(root=tmp_path, emulate="auto") as m:
            pass
    assert m.emulated
    # Where RAPL works (here: an emulator at root=), auto measures it and mounts
    # no emulator of its own; the warning says the root is an emulator's.
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with qw.measure(root=emu.root, emulate="auto", mechanism="powercap") as m:
            pass
    assert m.mechanism == "powercap"
    assert [str(w.message).split(": ")[1:3] for w in caught] == [
        ["EMULATED RAPL", f"root={emu.root} is a quietwatt emulator's mount"]
    ]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"domains": "package,fan"}, "fan"),
        ({"mechanism": "nvml"}, "unknown mechanism 'nvml'"),
        ({"emulate": "sometimes"}, "emulate="),
        ({"domains": []}, "domains= is empty"),
        # A mechanism that samples in the kernel needs a thread: the fix in Python's terms.
        ({"mechanism": "perf-ring"}, r"Monitor\(freq="),
    ],
)
def test_bad_arguments_raise_bad_argument_which_is_a_value_error(emu, kwargs, match):
    with pytest.raises(qw.BadArgument, match=match) as e:
        with qw.measure(root=emu.root, **kwargs):
            pass
    assert isinstance(e.value, ValueError)


def test_a_domain_this_machine_lacks_names_it(emu):
    with pytest.raises(qw.Error, match="psys"):
        with qw.measure(root=emu.root, mechanism="powercap", domains="psys"):
            pass


def test_a_vanished_counter_is_a_measurement_error_not_a_wrong_number():
    with qw.Emulator() as e:
        block = qw.measure(root=e.root, mechanism="powercap")
        block.start()
        e.inject("vanish:0/package")
        with pytest.raises(qw.MeasurementError) as err:
            block.stop()
        assert "0/package" in str(err.value) or "energy_uj" in str(err.value)


def test_root_only_rapl_raises_permission_denied_as_a_permission_error():
    # A counter file only root may read, as RAPL is since CVE-2020-8694, read by a
    # child process that drops to an unprivileged user after importing quietwatt.
    if os.geteuid() != 0:
        pytest.fail("this test drops to an unprivileged user and needs root to do so")
    root = tempfile.mkdtemp(prefix="quietwatt-perm-")
    try:
        zone = os.path.join(root, "sys/class/powercap/intel-rapl:0")
        os.makedirs(zone)
        for name, text in (("name", "package-0"), ("energy_uj", "1000"), ("max_energy_range_uj", "262143328850")):
            with open(os.path.join(zone, name), "w") as f:
                f.write(text + "\n")
        os.chmod(os.path.join(zone, "energy_uj"), 0o400)
        for d, _, _ in os.walk(root):
            os.chmod(d, 0o755)
        code = (
            "import os, quietwatt as qw\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "try:\n"
            f"    qw.measure(root={root!r}, mechanism='powercap').start()\n"
            "except qw.PermissionDenied as e:\n"
            "    assert isinstance(e, PermissionError) and isinstance(e, qw.NoRapl)\n"
            "    print('DENIED', e)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(root)
    assert out.returncode == 0 and "DENIED" in out.stdout, out.stdout + out.stderr
    assert "energy_uj" in out.stdout


def test_a_stopped_measurement_and_an_unknown_window_say_so(emu):
    block = qw.measure(root=emu.root, mechanism="powercap")
    with pytest.raises(qw.BadArgument, match="not started"):
        block.stop()
    with block:
        pass
    with pytest.raises(qw.BadArgument, match="not started"):
        block.stop()
