"""async code, the emulated-figures warning whatever the route, warnings at the
user's line, the refused 'gpu' domain, and results visible by default."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import warnings

import pytest

import quietwatt as qw
from conftest import REPO


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_measure_energy_on_an_async_function_measures_the_awaited_call(emu):
    got = []

    @qw.measure_energy(root=emu.root, handler=got.append)
    async def work(x: int) -> int:
        await asyncio.sleep(0.15)
        busy(0.05)
        return x + 1

    assert asyncio.iscoroutinefunction(work)
    assert asyncio.run(work(1)) == 2
    m = got[0]
    # Before: 0.000000 ± 0.000002 J in 0.000 s (the coroutine's creation).
    assert m.duration_s >= 0.2, str(m)
    assert m.label.endswith("work") and work.last_measurement is m
    # 24 W (package + dram) over 0.2 s at least.
    assert m.total_j + m.uncertainty_j >= 24 * 0.2


def test_an_async_function_that_raises_is_measured_too(emu):
    got = []

    @qw.measure_energy(root=emu.root, handler=got.append)
    async def fails() -> None:
        await asyncio.sleep(0.05)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        asyncio.run(fails())
    assert got and got[0].duration_s >= 0.05


def test_async_with_measure_spans_the_awaits(emu):
    async def main() -> qw.Measurement:
        async with qw.measure(root=emu.root) as m:
            await asyncio.sleep(0.1)
        return m

    m = asyncio.run(main())
    assert m.done and m.duration_s >= 0.1 and m.total_j > 0


def test_root_at_an_emulator_warns_at_the_users_line(emu):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with qw.measure(root=emu.root) as m:  # THE LINE
            pass
    ours = [w for w in caught if "EMULATED RAPL" in str(w.message)]
    # Before: no warning at all for root=<emulator>.
    assert len(ours) == 1 and m.emulated
    assert ours[0].filename == __file__, ours[0].filename
    with open(__file__) as f:
        assert "# THE LINE" in f.read().splitlines()[ours[0].lineno - 1]


def test_emulate_on_warns_at_the_users_line_too():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @qw.measure_energy(emulate="on", handler=lambda m: None)
        def f() -> None:
            pass

        f()  # THE CALL
    ours = [w for w in caught if "EMULATED RAPL" in str(w.message)]
    assert ours and ours[0].filename == __file__
    with open(__file__) as f_:
        assert "# THE CALL" in f_.read().splitlines()[ours[0].lineno - 1]


def test_gpu_is_refused_with_what_it_would_have_meant(emu):
    with pytest.raises(qw.BadArgument, match="uncore.*integrated GPU"):
        qw.measure(root=emu.root, domains="gpu")
    with pytest.raises(qw.BadArgument, match="NVML"):
        qw.Monitor(root=emu.root, domains=["package", "GPU"])
    with qw.measure(root=emu.root, domains="uncore") as m:
        pass
    assert [d.domain for d in m.domains] == ["uncore"]


def test_the_bare_decorator_prints_each_result_when_logging_is_not_set_up(emu):
    # Before: logged at INFO to a logger nobody configured, so nothing appeared.
    script = f"""
import quietwatt as qw

@qw.measure_energy(root={emu.root!r})
def step():
    pass

step()
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "quietwatt: 'step' " in r.stderr and " J (whole machine: package + dram)" in r.stderr, r.stderr
