"""Energy of a block (``with measure()``) or of each call of a function
(``@measure_energy``): the counters are read at the start and at the end on the
caller's thread, and in between only by a guard thread that wakes twice per safe
period (every half minute or more on real RAPL counters) so that no counter can
wrap twice unseen. No samples kept: the cheapest way to measure."""

from __future__ import annotations

import functools
import logging
import os
from types import TracebackType
from typing import Any, Callable, Optional, Type, TypeVar, Union, overload

from . import _quietwatt
from ._env import Domains, Emulate, Environment, open_session, resolve_domains
from ._results import Measurement

F = TypeVar("F", bound=Callable[..., Any])

#: Where ``measure_energy`` logs a result when no handler is given.
logger = logging.getLogger("quietwatt")


class measure:
    """Measures the energy of a ``with`` block.

    ::

        with quietwatt.measure() as m:
            work()
        print(m.total_j, "±", m.uncertainty_j, "J over", m.duration_s, "s")
        for d in m.domains:
            print(d.socket, d.domain, d.energy_j, d.uncertainty_j)

    The counters are read when the block starts and when it ends, on this thread:
    nothing runs in between. Counters are corrected for wraps as long as the
    block lasts less than the shortest wrap period (about 60 s for a busy
    package on older Intel parts; `quietwatt list` tells); for longer blocks,
    use :class:`Monitor`, which samples. With two reads, a counter that restarts
    from 0 in between (a module reload, a resume from suspend) is seen only when
    it ends below where it started; :class:`Monitor` sees every restart.

    Arguments (the same for every entry point):
        root: where ``/sys``, ``/dev`` and ``/proc`` are looked up (an emulator's
            mount point, a test tree); default ``$QUIETWATT_ROOT`` or ``/``.
        mechanism: ``"powercap"``, ``"perf"`` or ``"msr"``; default: the first
            that opens and whose counters move.
        domains: ``"package,dram"`` or a list; default all.
        emulate: ``"off"`` (default), ``"auto"`` (the built-in emulator when
            nothing here can measure, with a warning) or ``"on"``.

    Raises (at the start of the block): :class:`quietwatt.NoRapl` when nothing can
    measure here, :class:`quietwatt.PermissionDenied` when RAPL is root-only,
    :class:`quietwatt.BadArgument` for an unknown domain or mechanism. An
    exception inside the block still stops the measurement, and propagates.
    """

    def __init__(
        self,
        root: Union[str, "os.PathLike[str]", None] = None,
        mechanism: Optional[str] = None,
        domains: Domains = None,
        emulate: Emulate = "off",
        label: Optional[str] = None,
    ):
        self._args = (root, mechanism, resolve_domains(domains), emulate)
        self._env: Optional[Environment] = None
        self._session: Optional[_quietwatt.Session] = None
        self.result = Measurement(label=label)

    def start(self) -> Measurement:
        """Starts measuring (what ``with`` does); returns the measurement that
        :meth:`stop` fills."""
        if self._session is not None:
            from ._errors import BadArgument

            raise BadArgument("this measurement is already running: stop() it first, or make a new quietwatt.measure()")
        root, mechanism, domains, emulate = self._args
        env = Environment(root, emulate)
        try:
            self._session = open_session(env.root, mechanism, domains, reuse=True)
        except BaseException:
            env.close()
            raise
        self._env = env
        self.result.emulated = env.emulated
        return self.result

    def stop(self) -> Measurement:
        """Stops measuring and fills the measurement."""
        session, env = self._session, self._env
        if session is None or env is None:
            from ._errors import BadArgument

            raise BadArgument("this measurement was not started: use it as `with quietwatt.measure() as m:` or call start() first")
        self._session = None
        self._env = None
        try:
            report, _ = session.stop()
        finally:
            env.close()
        done = Measurement.from_json(report, env.emulated, self.result.label)
        self.result.report = done.report
        return self.result

    def __enter__(self) -> Measurement:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()


Handler = Callable[[Measurement], Any]


def _deliver(m: Measurement, handler: Optional[Handler], log: Union[logging.Logger, str, None]) -> None:
    if handler is not None:
        handler(m)
        return
    target = logging.getLogger(log) if isinstance(log, str) else (log or logger)
    target.info("%s", m)
    for w in m.warnings:
        target.warning("%s: %s", m.label, w)


@overload
def measure_energy(func: F) -> F: ...
@overload
def measure_energy(
    func: None = None,
    *,
    handler: Optional[Handler] = None,
    logger: Union[logging.Logger, str, None] = None,
    root: Union[str, "os.PathLike[str]", None] = None,
    mechanism: Optional[str] = None,
    domains: Domains = None,
    emulate: Emulate = "off",
) -> Callable[[F], F]: ...
def measure_energy(
    func: Optional[F] = None,
    *,
    handler: Optional[Handler] = None,
    logger: Union[logging.Logger, str, None] = None,
    root: Union[str, "os.PathLike[str]", None] = None,
    mechanism: Optional[str] = None,
    domains: Domains = None,
    emulate: Emulate = "off",
) -> Any:
    """Measures the energy of every call of the decorated function.

    ::

        @quietwatt.measure_energy
        def train(): ...

        @quietwatt.measure_energy(handler=results.append, domains="package")
        def step(batch): ...

    Each call's :class:`Measurement` (labelled with the function's qualified
    name) goes to ``handler`` when one is given, otherwise to ``logger`` (a
    :class:`logging.Logger` or its name; default the ``quietwatt`` logger) at
    INFO, its warnings at WARNING. The latest is also kept as
    ``func.last_measurement``. The function's return value and exceptions pass
    through unchanged; a call that raises is measured too.

    The other arguments are those of :class:`measure`.
    """

    def wrap(f: F) -> F:
        label = getattr(f, "__qualname__", getattr(f, "__name__", repr(f)))

        @functools.wraps(f)
        def measured(*args: Any, **kwargs: Any) -> Any:
            block = measure(root=root, mechanism=mechanism, domains=domains, emulate=emulate, label=label)
            m = block.start()
            try:
                return f(*args, **kwargs)
            finally:
                block.stop()
                measured.last_measurement = m  # type: ignore[attr-defined]
                _deliver(m, handler, logger)

        measured.last_measurement = None  # type: ignore[attr-defined]
        return measured  # type: ignore[return-value]

    if func is not None:
        return wrap(func)
    return wrap
