"""quietwatt: the energy of CPUs and DRAM through RAPL, from Python.

::

    import quietwatt as qw

    with qw.measure() as m:            # two reads: the cheapest measurement
        work()
    print(m.total_j, "±", m.uncertainty_j, "J")

    @qw.measure_energy                 # every call measured, to a logger or a handler
    def step(): ...

    with qw.Monitor(freq=1000) as mon: # a 1 kHz timeline, sampled off the GIL
        mon.begin_window("epoch 1"); train(); w = mon.end_window("epoch 1")
    df = mon.to_pandas()

    c = qw.compare(old, new, runs=10)  # b against a: ratio, 95 % CI, Welch, verdict
    print(c)                           # new is 1.95 × old [1.80, 2.11] 95 % CI: significantly more

    qw.doctor()                        # why RAPL can or cannot be read here
    qw.record("energy.csv", 10)        # `quietwatt record` from Python: the file and its summary
    with qw.profile("hot.svg") as p:   # energy per call stack of this process
        work()
    p.top                              # the top functions by self energy, as a DataFrame
    qw.read_recording("energy.csv")    # a `quietwatt record` file as a DataFrame

    with qw.Emulator(watts={"package": 20}) as emu:   # a machine with a known truth
        with qw.measure(root=emu.root) as m: ...

Numbers are corrected for counter wraps, resets and glitches, each counted once
(no double counting of core inside package, psys beside packages, or AMD's
per-die counters), and come with their uncertainty. Importing the package starts
nothing: no thread, no process.
"""

from ._quietwatt import __version__
from ._errors import (
    BadArgument,
    CounterVanished,
    EmulatorError,
    Error,
    MeasurementError,
    NoRapl,
    ShareUnavailable,
    OutputError,
    PermissionDenied,
)
from ._compare import Comparison, Summary, compare, compare_runs
from ._emulator import Emulator
from ._env import ROOT_ENV
from ._info import doctor, domains
from ._measure import MeasuredFunction, measure, measure_calls, measure_energy, print_measurement
from ._monitor import Monitor
from ._profile import profile
from ._recording import read_recording, record
from ._schema import SCHEMA
from ._results import MAX_PLAUSIBLE_POWER_W, DomainEnergy, Measurement

__all__ = [
    "__version__",
    "measure",
    "measure_energy",
    "measure_calls",
    "print_measurement",
    "MeasuredFunction",
    "MAX_PLAUSIBLE_POWER_W",
    "Monitor",
    "profile",
    "compare",
    "compare_runs",
    "Comparison",
    "Summary",
    "Measurement",
    "DomainEnergy",
    "Emulator",
    "read_recording",
    "record",
    "SCHEMA",
    "doctor",
    "domains",
    "ROOT_ENV",
    "Error",
    "NoRapl",
    "ShareUnavailable",
    "PermissionDenied",
    "BadArgument",
    "MeasurementError",
    "CounterVanished",
    "OutputError",
    "EmulatorError",
]
