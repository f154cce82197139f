"""The exceptions quietwatt raises.

Every one derives from :class:`quietwatt.Error`, and also from the built-in
exception a Python caller would expect (``PermissionError``, ``ValueError``,
``OSError``), so either can be caught. The message is the library's
explanation, with the fix.
"""


class Error(Exception):
    """Base class of every quietwatt error."""


class NoRapl(Error, RuntimeError):
    """No mechanism can measure energy here: no RAPL, counters that never move
    (a hypervisor), or a mechanism that is not usable.

    ``quietwatt.doctor()`` says what each mechanism needs; ``emulate="auto"``
    measures against the built-in emulator instead.
    """


class PermissionDenied(NoRapl, PermissionError):
    """RAPL exists but this process may not read it (root-only since
    CVE-2020-8694): the message names the file and the fix (run as root, grant
    read access to ``energy_uj``, or CAP_PERFMON for perf)."""


class BadArgument(Error, ValueError):
    """An argument quietwatt cannot use: an unknown domain or mechanism, a bad
    frequency, a window that was never opened, a stopped measurement, a power
    model (``QUIETWATT_POWER_MODEL``) that is unreadable, corrupt or another
    CPU's."""


class MeasurementError(Error):
    """A measurement broke part-way: a counter that reads garbage or cannot be
    read any more."""


class CounterVanished(MeasurementError):
    """A counter disappeared while measuring (a CPU taken offline, a module
    unloaded)."""


class OutputError(Error, OSError):
    """Writing a result failed."""


class EmulatorError(Error, OSError):
    """The emulator could not be mounted or unmounted (FUSE needs /dev/fuse and
    root or fusermount3)."""


class ShareUnavailable(Error, RuntimeError):
    """``measure(share=...)`` cannot split the energy here: the accounting
    program on context switches needs root (or CAP_BPF and CAP_PERFMON) and a
    kernel with BTF; the message says which is missing. The machine's figures
    need neither: leave ``share`` out."""


__all__ = [
    "Error",
    "NoRapl",
    "PermissionDenied",
    "BadArgument",
    "MeasurementError",
    "CounterVanished",
    "OutputError",
    "EmulatorError",
    "ShareUnavailable",
]
