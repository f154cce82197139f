"""Where a measurement reads: the real machine, ``root=`` (or ``QUIETWATT_ROOT``),
or the built-in emulator mounted for the measurement (``emulate=``)."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Dict, List, Literal, Optional, Sequence, Tuple, Type, Union

from . import _quietwatt
from ._errors import BadArgument

#: The environment variable that names the root when ``root=`` is not given, as
#: for the command-line tool.
ROOT_ENV = "QUIETWATT_ROOT"

#: ``emulate=``: ``"off"``, ``"auto"`` or ``"on"`` (``False``/``None`` and
#: ``True`` mean off and on).
Emulate = Union[Literal["off", "auto", "on"], bool, None]
Domains = Union[str, Sequence[str], None]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIPPED_FILES = (contextlib.__file__,)


def warn(message: str, category: Type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the user's line: the first frame outside
    quietwatt (and outside :mod:`contextlib`, for ``with`` blocks), so that a
    warning names the ``with qw.measure()`` or the call that caused it."""
    level = 1
    frame = sys._getframe(0)
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PACKAGE_DIR) or frame.f_code.co_filename in _SKIPPED_FILES
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(message, category, stacklevel=level)


def resolve_root(root: Union[str, "os.PathLike[str]", None]) -> str:
    """``root``, else ``$QUIETWATT_ROOT`` when set and not empty, else ``/``."""
    if root is not None:
        return os.fspath(root)
    return os.environ.get(ROOT_ENV) or "/"


def resolve_domains(domains: Domains) -> Optional[List[str]]:
    """``"package,dram"`` or ``["package", "dram"]`` as a list; ``None`` for all."""
    if domains is None:
        return None
    if isinstance(domains, str):
        names = [d.strip() for d in domains.split(",") if d.strip()]
    else:
        names = [str(d) for d in domains]
    for name in names:
        if name.lower() == "gpu":
            raise BadArgument(
                "domains='gpu': RAPL has no GPU domain. Its uncore domain (PP1) is, on client "
                "Intel parts, the integrated GPU's power plane: ask for domains='uncore' for that; "
                "a discrete GPU (NVIDIA, AMD) is read through its own library (NVML, ROCm SMI), "
                "not RAPL"
            )
    return names


# The mechanism chosen for a root and domains, so that the next measurement there
# opens it directly: choosing watches each candidate's counters move (up to 50 ms),
# which a `with measure()` around a short block should not pay every time.
_CHOSEN: Dict[Tuple[str, Optional[Tuple[str, ...]]], str] = {}


def open_session(
    root: str,
    mechanism: Optional[str],
    domains: Optional[List[str]],
    freq: Optional[float] = None,
    samples_kept: Optional[int] = None,
    reuse: bool = False,
    socket: Optional[str] = None,
) -> "_quietwatt.Session":
    """A native session, with the mechanism chosen before for this root and
    domains when none is given; with ``reuse``, on the counters an earlier reused
    session opened (no discovery: what makes a short ``measure()`` cheap). With
    ``socket``, through the local reader service listening there."""
    if socket is not None:
        return _quietwatt.Session(root, mechanism, domains, freq, samples_kept, reuse, socket)
    key = (root, None if domains is None else tuple(domains))
    chosen = mechanism or _CHOSEN.get(key)
    try:
        session = _quietwatt.Session(root, chosen, domains, freq, samples_kept, reuse)
    except Exception:
        if mechanism is None and chosen is not None:
            # What worked before no longer opens: choose again.
            _CHOSEN.pop(key, None)
            session = _quietwatt.Session(root, None, domains, freq, samples_kept, reuse)
        else:
            raise
    # Read through the local reader service (the counters refused here): not a
    # mechanism to name next time; the next session finds the service again.
    # Nor is a power model's estimate (QUIETWATT_POWER_MODEL, where nothing
    # can measure).
    if mechanism is None and session.mechanism not in ("socket", "estimate"):
        _CHOSEN[key] = session.mechanism
    return session


# Whether a root is an emulator's mount point, per root: the mount table is read
# once, not at every measurement.
_EMULATOR_ROOTS: Dict[str, bool] = {}


def _is_emulator(root: str) -> bool:
    if root not in _EMULATOR_ROOTS:
        _EMULATOR_ROOTS[root] = _quietwatt.is_emulator(root)
    return _EMULATOR_ROOTS[root]


def _when(emulate: Emulate) -> str:
    if emulate is None or emulate is False:
        return "off"
    if emulate is True:
        return "on"
    if isinstance(emulate, str) and emulate.lower() in ("off", "auto", "on"):
        return emulate.lower()
    raise BadArgument(
        f"emulate={emulate!r}: expected 'off' (this machine), 'auto' (the built-in "
        "emulator when nothing here can measure) or 'on' (always the emulator)"
    )


class Environment:
    """The root to read and, with ``emulate``, the emulator mounted for it.

    Unmount with :meth:`close` (a measurement does so when it stops).
    """

    def __init__(self, root: Union[str, "os.PathLike[str]", None], emulate: Emulate):
        when = _when(emulate)
        self.root = resolve_root(root)
        self._emulator: Optional[_quietwatt.BuiltInEmulator] = None
        if when == "on" or (when == "auto" and not _quietwatt.can_measure(self.root)):
            # Served by a child process: it unmounts when this process ends, however.
            self._emulator = _quietwatt.BuiltInEmulator()
            self.root = self._emulator.root
            why = (
                "emulate='on'"
                if when == "on"
                else "no mechanism can measure on this machine (see quietwatt.doctor())"
            )
            warn(
                f"quietwatt: EMULATED RAPL: {why}; measuring against the built-in "
                f"emulator at {self.root}: every figure is the emulator's (a known, "
                "constant power profile), NOT this machine's"
            )
            self.emulated = True
        else:
            self.emulated = _is_emulator(self.root)
            if self.emulated:
                how = "root=" if root is not None else f"${ROOT_ENV}="
                warn(
                    f"quietwatt: EMULATED RAPL: {how}{self.root} is a quietwatt emulator's mount: "
                    "every figure is the emulator's (its configured power profile), NOT this "
                    "machine's"
                )

    def close(self) -> None:
        """Unmounts the emulator this environment mounted, if any."""
        if self._emulator is not None:
            self._emulator.unmount()
            self._emulator = None


def resolve_socket(socket: Union[str, "os.PathLike[str]", None]) -> Optional[str]:
    """``socket=`` as a path, or ``None``."""
    if socket is None:
        return None
    try:
        return os.fspath(socket)
    except TypeError:
        raise BadArgument(
            f"socket={socket!r}: give the path of the reader service's socket, e.g. '/run/quietwatt/reader.sock'"
        ) from None
