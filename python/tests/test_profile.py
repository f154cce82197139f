"""quietwatt.profile(): energy per call stack of this process, against the
emulator, with a C function loaded through ctypes as the known hot spot."""

from __future__ import annotations

import ctypes
import gzip
import pathlib
import shutil
import subprocess

import pytest

import quietwatt as qw

SPIN_C = """
#include <stdint.h>
/* Spins for n rounds of a multiply-add chain: the profile's hot spot. */
uint64_t quietwatt_py_spin(uint64_t n) {
    uint64_t x = 1;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + (i ^ (x >> 7));
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}
"""


@pytest.fixture(scope="module")
def spin(tmp_path_factory: pytest.TempPathFactory):
    """The C spinner as a shared library (built with frame pointers), loaded."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.fail("no C compiler (cc, gcc or clang): apt-get install gcc")
    d = tmp_path_factory.mktemp("spin")
    (d / "spin.c").write_text(SPIN_C)
    lib = d / "libqwspin.so"
    subprocess.run([cc, "-O1", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", str(lib), str(d / "spin.c")], check=True)
    f = ctypes.CDLL(str(lib)).quietwatt_py_spin
    f.argtypes = [ctypes.c_uint64]
    f.restype = ctypes.c_uint64
    return f


def folded_sum(path: pathlib.Path) -> int:
    return sum(int(line.rsplit(" ", 1)[1]) for line in path.read_text().splitlines())


def test_a_c_function_is_named_with_most_of_the_energy_and_every_microjoule_adds_up(emu, spin, tmp_path):
    out = tmp_path / "p.folded"
    with qw.profile(out, root=emu.root) as p:
        spin(150_000_000)
    d = p.document
    assert d is not None and d["schema"] == "quietwatt.profile/1", d
    # Exact conservation: the stacks plus the unattributed part are the measured energy.
    assert d["attributed_uj"] + d["unattributed_uj"] == d["package_uj"] > 0
    assert folded_sum(out) == d["package_uj"]
    top = p.top
    hot = top[top["function"] == "quietwatt_py_spin"]
    assert len(hot) == 1, top
    # The spinner holds most of what the stacks got (the rest: the interpreter,
    # the profile's own threads).
    assert hot["self_j"].iloc[0] * 1e6 >= 0.5 * d["attributed_uj"], top
    assert (hot["self_low_j"] <= hot["self_j"]).all() and (hot["self_j"] <= hot["self_high_j"]).all()
    assert top.attrs["emulated"] is True and "EMULATED" in repr(p)


def test_the_flame_graph_and_pprof_are_written_as_the_command_writes_them(emu, spin, tmp_path):
    svg = tmp_path / "p.svg"
    with qw.profile(svg, root=emu.root):
        spin(30_000_000)
    text = svg.read_text()
    assert text.startswith("<?xml") and "quietwatt_py_spin" in text and "EMULATED RAPL" in text
    pb = tmp_path / "p.pb.gz"
    with qw.profile(pb, root=emu.root):
        spin(30_000_000)
    assert len(gzip.decompress(pb.read_bytes())) > 0


def test_bad_arguments_are_refused_before_anything_runs_or_is_written(emu, tmp_path):
    for kwargs, error in [
        (dict(freq=0), qw.BadArgument),
        (dict(format="png"), qw.BadArgument),
        (dict(idle_watts="hot"), qw.BadArgument),
        (dict(mechanism="teleport"), qw.BadArgument),
    ]:
        with pytest.raises(error):
            with qw.profile(tmp_path / "x.svg", root=emu.root, **kwargs):
                pytest.fail(f"the block ran with {kwargs}")
    with pytest.raises(qw.BadArgument):
        with qw.profile(tmp_path / "x.png", root=emu.root):
            pytest.fail("the block ran with a .png path")
    with pytest.raises(qw.OutputError):
        with qw.profile(tmp_path / "missing" / "x.svg", root=emu.root):
            pytest.fail("the block ran with a path in a missing directory")
    assert list(tmp_path.iterdir()) == []
