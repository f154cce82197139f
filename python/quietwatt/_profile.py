"""Energy per call stack of this process: :class:`profile`, the library of
``quietwatt profile`` sampling this process's stacks while a block runs."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

if TYPE_CHECKING:
    import pandas

from . import _quietwatt
from ._env import Emulate, Environment

PathLike = Union[str, "os.PathLike[str]"]


class profile:
    """Samples this process's call stacks (every thread, and those it starts)
    while the block runs, reads the package energy at 1 kHz, and splits each
    1 ms interval's energy among the stacks sampled in it, as ``quietwatt
    profile`` does (the same library; ``cycles`` where a PMU counts them,
    ``cpu-clock`` otherwise)::

        with qw.profile("hot.svg") as p:    # .svg, .folded, .pb.gz, or format=
            work()
        print(p.top)                        # top functions by self energy
        p.document["attributed_uj"]         # profile --json's document

    Afterwards ``document`` is ``quietwatt profile --json``'s document
    (``quietwatt.profile/1``: the measured package µJ, what the stacks got and
    what stayed unattributed, exactly; each top function with its 95 % interval),
    and ``top`` the top functions as a pandas DataFrame. With ``path`` it writes
    the same file the command writes (an energy flame graph, folded stacks or
    pprof), whole or not at all.

    Python's own functions: CPython 3.12 and later name them when perf
    trampolines are on (``python -X perf``, or ``sys.activate_stack_trampoline("perf")``:
    quietwatt reads the ``/tmp/perf-PID.map`` they write); before 3.12 a Python
    frame shows as the interpreter's C function (``_PyEval_EvalFrameDefault``),
    while C extensions and libraries loaded with ``ctypes`` are named as any
    native code is. The profile's own threads (``qw-profile``, the energy
    sampler) are sampled too: what profiling costs, shown as it is.

    Kernel stacks need root, CAP_PERFMON or ``kernel.perf_event_paranoid`` <= 1;
    ``kernel=False`` profiles user stacks at the default 2. Raises
    :class:`quietwatt.PermissionDenied` with the fix,
    :class:`quietwatt.BadArgument` for a bad ``freq``, ``format`` or
    ``idle_watts``, :class:`quietwatt.OutputError` for a path that cannot be
    written (before anything runs when its directory is missing),
    :class:`quietwatt.NoRapl` when nothing can measure the energy here.
    """

    def __init__(
        self,
        path: Optional[PathLike] = None,
        *,
        freq: int = 997,
        format: Optional[str] = None,
        lines: bool = False,
        idle_watts: Union[float, str, None] = None,
        kernel: bool = True,
        mechanism: Optional[str] = None,
        root: Optional[PathLike] = None,
        emulate: Emulate = "off",
    ) -> None:
        self.path = None if path is None else os.fspath(path)
        self._args: Dict[str, Any] = dict(
            freq=freq,
            mechanism=mechanism,
            idle_watts=None if idle_watts is None else str(idle_watts),
            output=self.path,
            format=format,
            lines=lines,
            kernel=kernel,
        )
        self._root = root
        self._emulate = emulate
        self._env: Optional[Environment] = None
        self._running: Optional[_quietwatt.Profiler] = None
        self.document: Optional[Dict[str, Any]] = None

    def __enter__(self) -> "profile":
        if self._running is not None:
            raise RuntimeError("this profile is running already")
        self._env = Environment(self._root, self._emulate)
        try:
            self._running = _quietwatt.Profiler(self._env.root, emulated=self._env.emulated, **self._args)
        except BaseException:
            self._env.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        running, self._running = self._running, None
        try:
            if running is not None:
                self.document = json.loads(running.stop())
        finally:
            if self._env is not None:
                self._env.close()

    def _doc(self) -> Dict[str, Any]:
        if self.document is None:
            raise RuntimeError("the profile has not ended: read it after the with block")
        return self.document

    @property
    def top(self) -> "pandas.DataFrame":
        """The functions with the most self energy, most first: ``function``,
        ``self_j``, its 95 % interval ``self_low_j`` .. ``self_high_j``,
        ``total_j`` (with its callees), ``self_share`` of the measured package
        energy, and ``samples``."""
        import pandas as pd

        rows = [
            {
                "function": f["function"],
                "self_j": f["self_uj"] / 1e6,
                "self_low_j": f["self_uj_95"]["low_uj"] / 1e6,
                "self_high_j": f["self_uj_95"]["high_uj"] / 1e6,
                "total_j": f["total_uj"] / 1e6,
                "self_share": f["self_share"],
                "samples": f["self_uj_95"]["samples"],
            }
            for f in self._doc()["top_self"]
        ]
        columns = ["function", "self_j", "self_low_j", "self_high_j", "total_j", "self_share", "samples"]
        df = pd.DataFrame.from_records(rows, columns=columns)
        d = self._doc()
        df.attrs.update(
            {k: d[k] for k in ("mechanism", "emulated", "event", "package_uj", "attributed_uj", "unattributed_uj")}
        )
        return df

    def to_pandas(self) -> "pandas.DataFrame":
        """:attr:`top`."""
        return self.top

    def __repr__(self) -> str:
        if self.document is None:
            return "<quietwatt.profile (running)>" if self._running else "<quietwatt.profile (not started)>"
        d = self.document
        emulated = " EMULATED" if d["emulated"] else ""
        return (
            f"<quietwatt.profile{emulated}: {d['package_uj'] / 1e6:.6f} J package ({d['mechanism']}), "
            f"{d['attributed_uj'] / 1e6:.6f} J to {d['stacks']} stacks of {d['samples']} samples>"
        )
