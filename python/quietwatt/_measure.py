"""Energy of a block (``with measure()``) or of each call of a function
(``@measure_energy``): the counters are read at the start and at the end on the
caller's thread, and in between only by a guard thread that wakes twice per safe
period (every half minute or more on real RAPL counters) so that no counter can
wrap twice unseen. No samples kept: the cheapest way to measure."""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import sys
import time
from types import TracebackType
from typing import Any, Awaitable, Callable, Literal, Optional, Protocol, Type, TypeVar, Union, cast, overload


from . import _quietwatt
from ._env import Domains, Emulate, Environment, open_session, resolve_domains, resolve_socket
from ._results import MaxPower, Measurement

if sys.version_info >= (3, 10):
    from typing import ParamSpec
else:  # pragma: no cover - Python 3.9
    from typing_extensions import ParamSpec

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class MeasuredFunction(Protocol[P, R_co]):
    """What :func:`measure_energy` returns: the function, unchanged to call
    (same arguments, same result), with the latest call's measurement."""

    last_measurement: Optional[Measurement]
    """The latest call's :class:`Measurement` (``None`` before the first call)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

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
        max_power_w: the most power a domain can draw, in watts (a number for
            all, or ``{"package": 65, "dram": 10}``): bounds the energy of a
            counter that did not move because the block was shorter than RAPL's
            update interval; default :data:`quietwatt.MAX_PLAUSIBLE_POWER_W`.

        share: ``"process"`` or ``"cgroup"``: also split the package energy
            among what ran on its CPUs during the block, by CPU time at
            context-switch granularity (the attribution model of ``quietwatt run
            --attribute``, one interval), and report this process's (or its
            cgroup's) part as :attr:`Measurement.share`. Needs root (or CAP_BPF
            and CAP_PERFMON) and a kernel with BTF; raises
            :class:`quietwatt.ShareUnavailable` saying which is missing. DRAM is
            not split.
        idle_watts: with ``share``, the package's idle power, set apart and
            shared by CPU time over the package's capacity; default none (every
            joule is split among what ran, so a lone busy process gets the idle
            power of the other CPUs too).
        socket: read through the local reader service listening at this path
            (``quietwatt serve --socket``), whatever this process may open.
            Without it, a process refused the counters (no root) reads through
            the service at ``$QUIETWATT_SOCKET`` or
            ``/run/quietwatt/reader.sock`` when there is one; either way
            :attr:`Measurement.mechanism` is ``"socket"``, and the uncertainty
            holds the service's coarsening (docs/reader.md).

    Whose energy: the whole machine's. RAPL counts per package (socket) and
    per DRAM channel, so the figure includes every other process running on
    the measured packages meanwhile; it is not this process's share (give
    ``share="process"`` for that, beside it).

    Short blocks: RAPL updates its counters about every millisecond. A block
    with no update inside reads 0 J; its uncertainty then covers everything
    the domain could have drawn (its power bound times the block's length),
    :attr:`Measurement.resolution_dominated` is True and a warning says so. To
    resolve a short piece of work, repeat it: :func:`measure_calls` or
    ``@measure_energy(min_duration=0.1)``.

    ``async with quietwatt.measure() as m:`` works the same way in a coroutine
    (the reads take microseconds and do not block the event loop).

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
        max_power_w: MaxPower = None,
        share: Optional[Literal["process", "cgroup"]] = None,
        idle_watts: Optional[float] = None,
        socket: Union[str, "os.PathLike[str]", None] = None,
    ):
        self._args = (root, mechanism, resolve_domains(domains), emulate)
        self._socket = resolve_socket(socket)
        self._max_power_w = max_power_w
        self._share_args = (share, idle_watts)
        self._share: Optional[_quietwatt.Share] = None
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
            share, idle_watts = self._share_args
            if share is not None:
                # Before the first reading: every switch of the block is seen.
                self._share = _quietwatt.Share(env.root, share, idle_watts)
            self._session = open_session(env.root, mechanism, domains, reuse=True, socket=self._socket)
        except BaseException:
            self._share = None
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
        share, self._share = self._share, None
        try:
            report, _ = session.stop()
        finally:
            env.close()
        done = Measurement.from_json(report, env.emulated, self.result.label, self._max_power_w)
        span = session.span
        if share is not None and span is not None:
            done.report["share"] = json.loads(share.finish(report, span[0], span[1]))
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

    async def __aenter__(self) -> Measurement:
        return self.start()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()


Handler = Callable[[Measurement], Any]


def print_measurement(m: Measurement) -> None:
    """The default handler of :func:`measure_energy` when logging is not set
    up: one line per call on standard error (visible in a terminal and under a
    notebook cell), and one per warning."""
    print(f"quietwatt: {m}", file=sys.stderr)
    for w in m.warnings:
        print(f"quietwatt: {m.label}: warning: {w}", file=sys.stderr)


def _deliver(m: Measurement, handler: Optional[Handler], log: Union[logging.Logger, str, None]) -> None:
    if handler is not None:
        handler(m)
        return
    target = logging.getLogger(log) if isinstance(log, str) else (log or logger)
    if log is None and not target.hasHandlers():
        # Logging is not configured: INFO records would vanish. Print instead.
        print_measurement(m)
        return
    target.info("%s", m)
    for w in m.warnings:
        target.warning("%s: %s", m.label, w)


def _check_repeat(min_duration: Optional[float], repeat: int) -> None:
    from ._errors import BadArgument

    if min_duration is not None and not (isinstance(min_duration, (int, float)) and min_duration >= 0):
        raise BadArgument(f"min_duration={min_duration!r}: give seconds, e.g. min_duration=0.1")
    if not (isinstance(repeat, int) and repeat >= 1):
        raise BadArgument(f"repeat={repeat!r}: give a number of calls, 1 or more")


def _more(calls: int, started: float, min_duration: Optional[float], repeat: int) -> bool:
    if calls < repeat:
        return True
    return min_duration is not None and time.perf_counter() - started < min_duration


def measure_calls(
    func: Callable[..., Any],
    *args: Any,
    min_duration: Optional[float] = 0.1,
    repeat: int = 1,
    root: Union[str, "os.PathLike[str]", None] = None,
    mechanism: Optional[str] = None,
    domains: Domains = None,
    emulate: Emulate = "off",
    max_power_w: MaxPower = None,
    **kwargs: Any,
) -> Measurement:
    """Calls ``func(*args, **kwargs)`` back to back, at least ``repeat`` times
    and until ``min_duration`` seconds have passed (default 0.1 s: enough for
    the ~1 ms RAPL update interval to be about 1 % of the figure), all inside
    one measurement; returns it with :attr:`Measurement.calls` set, so that
    :attr:`Measurement.per_call_j` and :attr:`Measurement.per_call_uncertainty_j`
    give one call's energy resolved::

        m = quietwatt.measure_calls(sorted, data)        # a 50 µs call, resolved
        print(m.per_call_j, "±", m.per_call_uncertainty_j, "J per call")

    ``min_duration=None`` calls exactly ``repeat`` times. The figure is the
    whole machine's, like every figure here; the per-call figure is the mean.
    """
    _check_repeat(min_duration, repeat)
    label = getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))
    block = measure(root=root, mechanism=mechanism, domains=domains, emulate=emulate, label=label, max_power_w=max_power_w)
    m = block.start()
    calls = 0
    try:
        started = time.perf_counter()
        while _more(calls, started, min_duration, repeat):
            func(*args, **kwargs)
            calls += 1
    finally:
        block.stop()
        m.calls = max(calls, 1)
    return m


@overload
def measure_energy(func: Callable[P, R]) -> MeasuredFunction[P, R]: ...
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
    min_duration: Optional[float] = None,
    repeat: int = 1,
    max_power_w: MaxPower = None,
) -> Callable[[Callable[P, R]], MeasuredFunction[P, R]]: ...
def measure_energy(
    func: Optional[Callable[..., Any]] = None,
    *,
    handler: Optional[Handler] = None,
    logger: Union[logging.Logger, str, None] = None,
    root: Union[str, "os.PathLike[str]", None] = None,
    mechanism: Optional[str] = None,
    domains: Domains = None,
    emulate: Emulate = "off",
    min_duration: Optional[float] = None,
    repeat: int = 1,
    max_power_w: MaxPower = None,
) -> Any:
    """Measures the energy of every call of the decorated function.

    ::

        @quietwatt.measure_energy
        def train(): ...

        @quietwatt.measure_energy(handler=results.append, domains="package")
        def step(batch): ...

        @quietwatt.measure_energy
        async def fetch(url): ...          # the awaited call, not the coroutine's creation

    Each call's :class:`Measurement` (labelled with the function's qualified
    name) goes to ``handler`` when one is given; otherwise to ``logger`` (a
    :class:`logging.Logger` or its name) at INFO, its warnings at WARNING. With
    neither, it goes to the ``quietwatt`` logger when logging is configured
    (the logger or the root logger has a handler, e.g. after
    ``logging.basicConfig(level=logging.INFO)``), and else is printed to
    standard error by :func:`print_measurement`, so that it is never silently
    lost. The latest is also kept as ``func.last_measurement``. The function's
    return value and exceptions pass through unchanged; a call that raises is
    measured too.

    On an ``async def`` function the measurement spans the awaited call, from
    the first step of the coroutine to its return (other tasks that run on the
    loop meanwhile are in the figure, as everything else on the machine is).

    ``min_duration`` (seconds) and ``repeat`` (calls) call the function again,
    back to back, until both are reached, for work too short for RAPL's ~1 ms
    update interval: the measurement then covers :attr:`Measurement.calls`
    calls (see :attr:`Measurement.per_call_j`) and the last call's result is
    returned. Only for functions that can safely run more than once.

    The other arguments are those of :class:`measure`.
    """
    _check_repeat(min_duration, repeat)

    def wrap(f: Callable[..., Any]) -> Any:
        label = getattr(f, "__qualname__", getattr(f, "__name__", repr(f)))

        def begin() -> "tuple[measure, Measurement]":
            block = measure(
                root=root, mechanism=mechanism, domains=domains, emulate=emulate, label=label, max_power_w=max_power_w
            )
            return block, block.start()

        def end(block: measure, m: Measurement, calls: int) -> None:
            block.stop()
            m.calls = max(calls, 1)
            measured.last_measurement = m  # type: ignore[attr-defined]
            _deliver(m, handler, logger)

        if inspect.iscoroutinefunction(f):

            @functools.wraps(f)
            async def measured(*args: Any, **kwargs: Any) -> Any:
                block, m = begin()
                calls = 0
                try:
                    started = time.perf_counter()
                    while True:
                        result = await cast(Callable[..., Awaitable[Any]], f)(*args, **kwargs)
                        calls += 1
                        if not _more(calls, started, min_duration, repeat):
                            return result
                finally:
                    end(block, m, calls)

        else:

            @functools.wraps(f)
            def measured(*args: Any, **kwargs: Any) -> Any:
                block, m = begin()
                calls = 0
                try:
                    started = time.perf_counter()
                    while True:
                        result = f(*args, **kwargs)
                        calls += 1
                        if not _more(calls, started, min_duration, repeat):
                            return result
                finally:
                    end(block, m, calls)

        measured.last_measurement = None  # type: ignore[attr-defined]
        return measured

    if func is not None:
        return wrap(func)
    return wrap
