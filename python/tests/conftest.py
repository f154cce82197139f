"""Fixtures: quietwatt's emulator (FUSE: needs root or fusermount3, and
/dev/fuse) and the command-line tool built by cargo, for recordings."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

import quietwatt as qw

REPO = pathlib.Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]


@pytest.fixture
def emu():
    """An Intel machine drawing 20 W in the package (12 core, 2 uncore) and 4 W
    in DRAM; unmounted after the test."""
    try:
        e = qw.Emulator(watts={"package": 20, "core": 12, "uncore": 2, "dram": 4})
    except qw.EmulatorError as err:
        pytest.fail(f"the emulator cannot be mounted here (FUSE needs /dev/fuse and root): {err}")
    with e:
        yield e


@pytest.fixture(scope="session")
def cli() -> str:
    """The quietwatt binary: $QUIETWATT_BIN, or cargo's target/debug or
    target/release build (the README's test command builds it first)."""
    for candidate in (
        os.environ.get("QUIETWATT_BIN"),
        REPO / "target" / "debug" / "quietwatt",
        REPO / "target" / "release" / "quietwatt",
        shutil.which("quietwatt"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    pytest.fail("no quietwatt binary: run `cargo build -p quietwatt-cli` (or set QUIETWATT_BIN)")


def threads() -> list:
    """The names of this process's threads, native ones included, less the
    emulator's FUSE threads (which it starts as requests come)."""
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:
            continue  # a thread that ended while listed
        if not name.startswith("fuser"):
            names.append(name)
    return sorted(names)


def pytest_configure(config):
    # Every test against the `emu` fixture passes root=<emulator>, which warns
    # (as it must): kept out of the summary. pytest.warns still sees it.
    config.addinivalue_line("filterwarnings", r"ignore:quietwatt. EMULATED RAPL. root=:UserWarning")
