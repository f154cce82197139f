//! Measuring a region of a program from inside it: start a [`Session`], do the
//! work, stop it and get a [`Measurement`]; or [`measure`] a closure.
//!
//! Two modes, chosen by [`SessionConfig::rate`]:
//! - no rate: the counters are read at [`Session::start`], at [`Session::stop`], and
//!   whenever a snapshot or window asks, and by a guard thread twice per safe
//!   period (half the time a counter takes to turn once at its domain's highest
//!   plausible power: every half minute or more on real RAPL counters), so that a
//!   region of any length is exact without choosing a rate (see `guard`). No
//!   samples are kept: the cheapest way to measure. A warning says when a gap was
//!   longer all the same (a host that stalled the guard).
//! - a rate: a sampler thread reads the counters in the background, so that a long
//!   region is guarded against wraps, and the readings are kept as
//!   [`SampleRow`]s in a buffer of fixed size. The thread is stopped and joined by
//!   [`Session::stop`], or by dropping the session. A polled mechanism (perf,
//!   powercap, msr) is read at that rate on absolute timerfd deadlines (the
//!   [`crate::ticker::Pacer`] of every recording). An in-kernel mechanism (ebpf,
//!   perf-ring: [`crate::source::inkernel`]) samples at that rate in the kernel,
//!   and the thread wakes once per drain period ([`SessionConfig::drain`], 1 s by
//!   default) to collect the queued readings, as a recording drives it; its first
//!   and last readings are user-space reads of the same counters, so the energy
//!   covers the session exactly.
//!
//! The sampler thread allocates nothing and takes no lock per reading: it pushes
//! each raw reading into a lock-free ring, and the calls that look at the session
//! (snapshots, windows, samples, stop) account what it pushed under the session's
//! lock when they are made (see `engine`). A snapshot therefore holds every reading
//! taken so far: with a polled mechanism, at most one period old; with an
//! in-kernel one, those up to the last drain, at most one drain period old (the
//! kernel's readings since then are still in its ring).
//!
//! Every reading feeds one [`Meter`] for the session and one for each open
//! window ([`Session::begin_window`]): a window's report is computed by the same
//! code as the session's (uncertainty, total rule, warnings), over the readings
//! between its begin and its end, which a mere difference of two reports could
//! not give.

mod engine;
mod guard;
mod samples;
mod socket;

pub use crate::measurement::SampleStats;
pub use samples::{SampleRow, DEFAULT_SAMPLES_KEPT};

use crate::domain::DomainId;
use crate::error::{Error, Result, SetupStep};
use crate::kernel_figures::KernelFigures;
use crate::measurement::Measurement;
use crate::meter::{monotonic_ns, Meter};
use crate::overhead::{Overhead, ThreadUsage};
use crate::root::SysRoot;
use crate::source::inkernel::{self, DEFAULT_DRAIN_HZ};
use crate::source::{Mechanism, Mode, Selection, Source};
use crate::ticker::{Hertz, TimerFd};
use crate::warning::{Warning, WarningKind};
use engine::{SamplerEnd, Shared, State};
use guard::{Guard, Polled};
use quietwatt_sys::thread::Worker;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The environment variable [`SessionConfig::from_env`] takes the root from.
pub const ROOT_ENV: &str = "QUIETWATT_ROOT";

/// What a [`Session`] measures and how; built with its methods from
/// [`SessionConfig::default`] (the real system, the best mechanism, every domain,
/// no sampler thread).
#[derive(Debug, Clone)]
pub struct SessionConfig {
    root: SysRoot,
    mechanism: Option<Mechanism>,
    domains: Selection,
    rate: Option<Hertz>,
    drain: Hertz,
    samples_kept: usize,
    socket: Option<std::path::PathBuf>,
    power_model: Option<crate::fallback::ModelChoice>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            root: SysRoot::default(),
            mechanism: None,
            domains: Selection::all(),
            rate: None,
            drain: Hertz::clamped(DEFAULT_DRAIN_HZ),
            samples_kept: DEFAULT_SAMPLES_KEPT,
            socket: None,
            power_model: None,
        }
    }
}

impl SessionConfig {
    /// The defaults, with the root taken from `QUIETWATT_ROOT` when it is set and
    /// not empty (an emulator's mount point, as for the command line tool), and
    /// the power model from `QUIETWATT_POWER_MODEL` ([`SessionConfig::power_model`]).
    pub fn from_env() -> Self {
        let config = SessionConfig::default().power_model(crate::fallback::ModelChoice::from_env());
        match std::env::var_os(ROOT_ENV) {
            Some(dir) if !dir.is_empty() => config.root(SysRoot::new(dir)),
            _ => config,
        }
    }

    /// Where `/sys`, `/dev` and `/proc` are looked up (default `/`).
    pub fn root(mut self, root: SysRoot) -> Self {
        self.root = root;
        self
    }

    /// The mechanism to read; `None` (the default) chooses the first polled one
    /// (perf, powercap, msr) that opens and whose counters move. ebpf and
    /// perf-ring sample in the kernel and need a [`SessionConfig::rate`]; where the
    /// kernel refuses perf-ring's group, the same events are polled through perf
    /// (a warning in the reports says so).
    pub fn mechanism(mut self, mechanism: impl Into<Option<Mechanism>>) -> Self {
        self.mechanism = mechanism.into();
        self
    }

    /// The domains to measure (default: all). A domain the machine does not expose
    /// makes [`Session::start`] fail with [`crate::SourceError::UnknownDomain`].
    pub fn domains(mut self, domains: Selection) -> Self {
        self.domains = domains;
        self
    }

    /// `Some(f)`: a sampler thread reads the counters at `f` (for ebpf and
    /// perf-ring, the kernel samples at `f` and the thread drains it); `None` (the
    /// default): the counters are read only at start, stop, snapshots and windows.
    pub fn rate(mut self, rate: impl Into<Option<Hertz>>) -> Self {
        self.rate = rate.into();
        self
    }

    /// How often the sampler thread of an in-kernel mechanism (ebpf, perf-ring)
    /// wakes to collect the kernel's readings (default 1 Hz: one wake-up a
    /// second); snapshots see the readings up to the last drain. Polled
    /// mechanisms ignore it.
    pub fn drain(mut self, drain: Hertz) -> Self {
        self.drain = drain;
        self
    }

    /// How many [`SampleRow`]s a session with a rate keeps (default
    /// [`DEFAULT_SAMPLES_KEPT`], at least 1): beyond, the oldest are dropped and
    /// counted ([`SampleStats`]), so memory stays flat however long the run.
    pub fn samples_kept(mut self, rows: usize) -> Self {
        self.samples_kept = rows.max(1);
        self
    }
}

/// A measurement in progress. `Send + Sync`: it can be shared (in an `Arc`) with
/// the threads that take snapshots or open windows.
pub struct Session {
    shared: Arc<Shared>,
    mechanism: Mechanism,
    channels: Vec<DomainId>,
    rate: Option<Hertz>,
    /// How the background thread reads ([`Mode::Polled`] without one).
    mode: Mode,
    /// Without a rate, the source is read here, on the caller's thread, and by the
    /// wrap guard.
    polled: Option<Polled>,
    /// Without a rate, the thread that reads once per safe period (see [`guard`]).
    guard: Option<Guard>,
    /// With a rate, the sampler thread, which owns the source.
    sampler: Option<Worker<SamplerEnd>>,
    /// Said while starting (sampler placement, a rate too slow for the counters).
    notes: Vec<Warning>,
    /// The longest time a counter may go unread before it can wrap twice unseen.
    safe_gap: Option<Duration>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("mechanism", &self.mechanism)
            .field("channels", &self.channels)
            .field("rate", &self.rate)
            .field("mode", &self.mode)
            .field("running", &self.sampler.is_some())
            .finish()
    }
}

impl Session {
    /// Opens the counters and takes the first reading; with a rate, starts the
    /// sampler thread (returning once it is set up). Fails with the error of the
    /// source ([`crate::SourceError::NoDomains`], [`crate::SourceError::Permission`],
    /// [`crate::SourceError::UnknownDomain`], ...), or [`Error::NeedsRate`] for ebpf and
    /// perf-ring without a rate.
    pub fn start(config: SessionConfig) -> Result<Session> {
        let mut notes = Vec::new();
        let source = match config.mechanism {
            Some(m @ (Mechanism::Ebpf | Mechanism::PerfRing)) if config.socket.is_none() => {
                let Some(freq) = config.rate else {
                    return Err(Error::NeedsRate {
                        mechanism: m.name(),
                    });
                };
                match inkernel::open(&config.root, m, &config.domains, freq, config.drain)? {
                    inkernel::Opened::InKernel(s) => Box::new(s) as Box<dyn Source>,
                    inkernel::Opened::Fallback { source, reason } => {
                        notes.push(Warning::setup(format!(
                            "{m}: {reason}; the same events are polled through perf at {} Hz instead",
                            freq.hz()
                        )));
                        source
                    }
                }
            }
            m => socket::open(&config, m)?,
        };
        let mut session = Session::start_on(source, config)?;
        session.notes.extend(notes);
        Ok(session)
    }

    /// Like [`Session::start`], on counters already opened: no discovery (zone
    /// names, units, ranges, quirks), only the first reading. The source comes from
    /// [`Session::stop_reusable`] of an earlier session (or [`crate::source::open`], or
    /// [`inkernel::open`]); the config's rate and buffer apply, its root, mechanism
    /// and domains are the source's. A caller that measures many short regions
    /// keeps one source. A buffered source (ebpf, perf-ring) always gets a sampler
    /// thread, at its own sampling and drain rates, whatever the config's rate.
    pub fn start_on(mut source: Box<dyn Source>, config: SessionConfig) -> Result<Session> {
        let mechanism = source.mechanism();
        let mode = source.mode();
        let rate = match mode {
            Mode::Polled => config.rate,
            Mode::Buffered { freq, .. } => Some(freq),
        };
        let channels: Vec<DomainId> = source.channels().iter().map(|c| c.id).collect();
        let meter = Meter::describing(source.as_ref());
        let safe_gap = meter.max_safe_period();
        let mut notes = Vec::new();
        if let (Some(f), Some(safe)) = (rate, safe_gap) {
            // A session keeps the caller's rate (its guard reads between), and says
            // what the one rule would have raised it to.
            if crate::safe_rate::safe_rate(f, safe_gap).raised {
                notes.push(Warning::rate(format!(
                    "a sampling period of {:.3} s is longer than the {:.3} s in which a counter can wrap twice at its domain's highest plausible power: a wrap could go unseen; sample faster",
                    f.period().as_secs_f64(),
                    safe.as_secs_f64()
                )));
            }
        }
        let rows = rate.map(|_| samples::SampleRing::new(config.samples_kept, channels.len()));
        let timer = match rate {
            Some(_) => Some(TimerFd::new().map_err(|source| Error::Setup {
                step: SetupStep::Timer,
                source,
            })?),
            None => None,
        };
        let (outbox, inbox) = match rate {
            Some(f) => {
                let (p, c) = engine::ring(engine::ring_records(mode, f), channels.len());
                (Some(p), Some(c))
            }
            None => (None, None),
        };
        let mut raw = vec![0u64; channels.len()];
        // A buffered source's kernel sampling starts, then the first reading, last
        // before any thread starts: the measurement begins here, not after a
        // thread start-up that a loaded machine can delay.
        source.start()?;
        let t = monotonic_ns();
        source.read(&mut raw)?;
        let mut state = State::new(meter, rows, inbox);
        state.feed(t, &raw, 0, 0)?;
        let shared = Arc::new(Shared::new(state, timer));
        let (polled, sampler, guard) = match (rate, outbox) {
            (Some(f), Some(outbox)) => {
                let (handle, w) = engine::spawn(Arc::clone(&shared), source, outbox, f, t, raw)?;
                notes.extend(w.into_iter().map(Warning::setup));
                (None, Some(handle), None)
            }
            _ => {
                let polled: Polled = Arc::new(Mutex::new(source));
                // Without a rate the caller reads at its start and end only: the
                // guard reads in between, once per safe period, so that no counter
                // can wrap twice unseen however long the region.
                let guard = match safe_gap {
                    Some(gap) => Some(
                        // Half the safe gap: a late wake-up stays within it.
                        Guard::spawn(
                            Arc::clone(&polled),
                            Arc::clone(&shared),
                            channels.len(),
                            gap / 2,
                        )
                        .map_err(|source| Error::Setup {
                            step: SetupStep::Thread("quietwatt-guard"),
                            source,
                        })?,
                    ),
                    None => None,
                };
                (Some(polled), None, guard)
            }
        };
        Ok(Session {
            shared,
            mechanism,
            channels,
            rate,
            mode,
            polled,
            guard,
            sampler,
            notes,
            safe_gap,
        })
    }

    /// The mechanism read.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The counters measured, in the order of [`SampleRow::energy_j`] and of a
    /// report's domains.
    pub fn channels(&self) -> &[DomainId] {
        &self.channels
    }

    /// The longest time a counter may go between two readings before it can wrap
    /// twice unseen at its domain's highest plausible power (half the shortest
    /// wrap time, [`Meter::max_safe_period`]); a rate slower than that gets a
    /// warning in the reports. `None` without channels.
    pub fn safe_period(&self) -> Option<Duration> {
        self.safe_gap
    }

    /// The sampler thread's rate (for ebpf and perf-ring, the kernel's sampling
    /// rate), if the session has one.
    pub fn rate(&self) -> Option<Hertz> {
        self.rate
    }

    /// How the session's sampler thread reads: [`Mode::Polled`] (also without a
    /// thread), or [`Mode::Buffered`] with the kernel's rate and the drain rate.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The energy so far. Without a rate the counters are read once more (on this
    /// thread); with one, this is the sampler's last reading: at most one period
    /// old when polled, at most one drain period old (1 s by default) for ebpf and
    /// perf-ring, whose readings since the last drain are still in the kernel's
    /// ring. Fails only when that extra reading fails.
    pub fn snapshot(&self) -> Result<Measurement> {
        self.read_now()?;
        let st = self.state();
        Ok(self.report_of(&st.meter, &st, None))
    }

    /// The rows the sampler has taken so far and the buffer still holds, oldest
    /// first (empty without a rate); they stay in the buffer.
    pub fn samples(&self) -> Vec<SampleRow> {
        self.state()
            .rows
            .as_ref()
            .map_or_else(Vec::new, samples::SampleRing::rows)
    }

    /// Like [`Session::samples`], and removes them: what a periodic consumer (an
    /// exporter) calls so that no row is handed out twice nor dropped.
    pub fn drain_samples(&self) -> Vec<SampleRow> {
        self.state()
            .rows
            .as_mut()
            .map_or_else(Vec::new, samples::SampleRing::drain)
    }

    /// The sample buffer's bound and what it held, handed out and dropped; `None`
    /// without a rate.
    pub fn sample_stats(&self) -> Option<SampleStats> {
        self.state().sample_stats()
    }

    /// The reading error that ended the sampler thread, if one did: a long-running
    /// consumer (an exporter) marks the counters failed rather than serving a
    /// figure that silently stopped moving. [`Session::stop`] returns the error itself.
    pub fn sampling_error(&self) -> Option<String> {
        self.state().error.as_ref().map(ToString::to_string)
    }

    /// Opens a window named `name` at the latest reading (without a rate, a reading
    /// taken now). Windows may nest and overlap; a name opened twice is a stack:
    /// [`Session::end_window`] closes the latest. Each open window costs the
    /// sampler one more counter update per channel and reading.
    pub fn begin_window(&self, name: &str) -> Result<()> {
        self.read_now()?;
        self.state().open_window(name)
    }

    /// Closes the latest window named `name` at the latest reading (without a
    /// rate, a reading taken now) and returns its energy; [`Error::UnknownWindow`]
    /// when no window of that name is open.
    pub fn end_window(&self, name: &str) -> Result<Measurement> {
        self.read_now()?;
        let mut st = self.state();
        let Some(meter) = st.close_window(name) else {
            return Err(Error::UnknownWindow {
                name: name.to_string(),
                open: st.window_names().join(", "),
            });
        };
        Ok(self.report_of(&meter, &st, Some(name)))
    }

    /// Ends the measurement: the last reading (the sampler's, woken at once: for
    /// ebpf and perf-ring a last drain and a user-space read), the thread joined,
    /// and the report with the sampler's cost. Fails when a reading
    /// failed ([`crate::SourceError::Vanished`], [`crate::SourceError::CorruptCounter`], ...): a background
    /// session's report then stops at the last good reading, which
    /// [`Session::snapshot`] still gave before `stop`.
    pub fn stop(self) -> Result<Measurement> {
        self.stop_with_samples().map(|(r, _)| r)
    }

    /// Like [`Session::stop`], handing back the opened counters for
    /// [`Session::start_on`] when the session had no rate (with one, the sampler
    /// thread owned them and closed them: `None`).
    pub fn stop_reusable(mut self) -> Result<(Measurement, Option<Box<dyn Source>>)> {
        let (report, _) = self.finish()?;
        // The guard is joined: the session holds the only reference.
        let source = self
            .polled
            .take()
            .and_then(|a| Arc::try_unwrap(a).ok())
            .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()));
        Ok((report, source))
    }

    /// Like [`Session::stop`], with the rows still in the buffer, the last
    /// reading's included: with the rows drained before and the energy of those
    /// dropped ([`SampleStats::dropped_energy_j`]), they add up to the report.
    pub fn stop_with_samples(mut self) -> Result<(Measurement, Vec<SampleRow>)> {
        self.finish()
    }

    /// The last reading, the thread joined, the final report and rows.
    fn finish(&mut self) -> Result<(Measurement, Vec<SampleRow>)> {
        if let Some(g) = self.guard.take() {
            g.stop();
        }
        self.read_now()?;
        let end = self.join();
        let mut st = self.state();
        if let Some(e) = st.error.take() {
            return Err(e);
        }
        let mut report = self.report_of(&st.meter, &st, None);
        if let Some(end) = end {
            let c = &end.counts;
            let o = Overhead::new(c, ThreadUsage::default(), c.samples);
            report.set_kernel(
                end.kernel
                    .as_ref()
                    .map(|side| KernelFigures::new(side, c, ThreadUsage::default())),
            );
            report.overhead = Some(o);
        }
        report.samples = st.sample_stats();
        let rows = st
            .rows
            .as_mut()
            .map_or_else(Vec::new, samples::SampleRing::drain);
        Ok((report, rows))
    }

    /// Without a rate, reads the counters and accounts the reading; with a rate,
    /// nothing (the sampler reads).
    fn read_now(&self) -> Result<()> {
        let Some(source) = &self.polled else {
            return Ok(());
        };
        let mut source = source.lock().unwrap_or_else(PoisonError::into_inner);
        let mut raw = vec![0u64; self.channels.len()];
        let t = monotonic_ns();
        source.read(&mut raw)?;
        self.state().feed(t, &raw, 0, 0)
    }

    /// The state, with every reading the sampler has taken so far accounted.
    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.folded()
    }

    /// Stops the sampler thread and waits for it; what it hands back, if there was
    /// one. A panic of the sampler is not raised again here (this runs in `Drop`):
    /// the session's error says the sampling ended.
    fn join(&mut self) -> Option<SamplerEnd> {
        let handle = self.sampler.take()?;
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = &self.shared.timer {
            t.wake();
        }
        match handle.try_join() {
            Ok(c) => Some(c),
            Err(_) => {
                let mut st = self.state();
                st.error.get_or_insert(Error::Setup {
                    step: SetupStep::Thread("quietwatt-session"),
                    source: std::io::Error::other("the sampler thread panicked"),
                });
                None
            }
        }
    }

    /// A report of `meter` (the session's or a window's), with what the session
    /// has to say about it.
    fn report_of(&self, meter: &Meter, st: &State, window: Option<&str>) -> Measurement {
        let mut m = Measurement::of(meter);
        let energy = &mut m.energy;
        energy.warnings.extend(self.notes.iter().cloned());
        if let (None, Some(safe)) = (self.rate, self.safe_gap) {
            if st.longest_gap > safe {
                energy.warnings.push(Warning::rate(format!(
                    "{:.3} s passed between two readings, longer than the {:.3} s in which a counter can wrap twice at its domain's highest plausible power: a wrap could have gone unseen; give the session a rate",
                    st.longest_gap.as_secs_f64(),
                    safe.as_secs_f64()
                )));
            }
        }
        if st.merged > 0 {
            energy.warnings.push(Warning::new(
                WarningKind::Sampling,
                format!(
                "{} reading(s) were folded into the next one: nobody read the session while its sampler's ring was full; the sample rows are coarser there, the energy is whole",
                st.merged
            ),
            ));
        }
        if let Some(e) = &st.error {
            energy.warnings.push(Warning::new(
                WarningKind::Sampling,
                format!(
                    "the sampling stopped early: {e}; the figures end at the last good reading"
                ),
            ));
        }
        m.mechanism = self.mechanism;
        m.channels.clone_from(&self.channels);
        m.window = window.map(str::to_string);
        m
    }
}

impl Drop for Session {
    /// Stops and joins the sampler thread of a session that was not stopped.
    fn drop(&mut self) {
        if let Some(g) = self.guard.take() {
            g.stop();
        }
        self.join();
    }
}

/// Runs `work` inside a session started from `config` and returns its result with
/// the session's report. If `work` panics, the session is dropped (its thread
/// joined) and the panic goes on.
pub fn measure<T>(config: SessionConfig, work: impl FnOnce() -> T) -> Result<(T, Measurement)> {
    let session = Session::start(config)?;
    let value = work();
    let report = session.stop()?;
    Ok((value, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::Wrap;
    use crate::domain::Domain;
    use crate::source::Channel;
    use crate::units::EnergyUnit;
    use std::path::PathBuf;
    use std::sync::atomic::AtomicU64;

    /// Two counters drawing 1 W and 2 W exactly: microjoules from the monotonic
    /// clock, so that any two readings are plausible however the sampler is
    /// scheduled, and the truth between two readings is known.
    struct Clockwork {
        channels: Vec<Channel>,
        reads: Arc<AtomicU64>,
        /// Reads still to refuse with EBUSY (a transient error).
        busy: Arc<AtomicU64>,
        /// The microseconds of the first and the last reading: the truth between
        /// them, whenever the host delayed a read after its timestamp.
        span: Arc<(AtomicU64, AtomicU64)>,
    }

    impl Clockwork {
        fn new(reads: Arc<AtomicU64>) -> Clockwork {
            let channel = |d| Channel {
                id: DomainId::new(0, d),
                unit: EnergyUnit::Microjoule,
                wrap: Wrap::PERF,
                origin: PathBuf::from(format!("/clockwork/{d}")),
                limit: None,
            };
            Clockwork {
                channels: vec![channel(Domain::Package), channel(Domain::Dram)],
                reads,
                busy: Arc::new(AtomicU64::new(0)),
                span: Arc::new((AtomicU64::new(u64::MAX), AtomicU64::new(0))),
            }
        }
    }

    impl Source for Clockwork {
        fn mechanism(&self) -> Mechanism {
            Mechanism::Powercap
        }
        fn channels(&self) -> &[Channel] {
            &self.channels
        }
        fn read(&mut self, out: &mut [u64]) -> crate::error::SourceResult<()> {
            let refuse = |n: u64| n.checked_sub(1);
            if self
                .busy
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, refuse)
                .is_ok()
            {
                return Err(crate::SourceError::Io {
                    path: self.channels[0].origin.clone(),
                    source: std::io::Error::from_raw_os_error(libc::EBUSY),
                });
            }
            let us = monotonic_ns() / 1000;
            out[0] = us;
            out[1] = 2 * us;
            self.span.0.fetch_min(us, Ordering::Relaxed);
            self.span.1.store(us, Ordering::Relaxed);
            self.reads.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    /// Waits (without assuming any timing) until the source was read `n` times
    /// more than `from`; a minute is only a guard against a stuck sampler.
    fn until_reads(reads: &AtomicU64, from: u64, n: u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while reads.load(Ordering::Relaxed) < from + n {
            assert!(
                std::time::Instant::now() < deadline,
                "the sampler stopped reading"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Nobody reads the session for three rings' worth of readings: the sampler
    /// folds its ring itself and no row is lost. Then a caller holds the session's
    /// lock for more than a ring's worth: the readings that did not fit go into the
    /// next, counted and reported, and the energy stays whole.
    #[test]
    fn a_session_nobody_reads_keeps_every_row_and_a_full_ring_merges_with_the_energy_whole() {
        let reads = Arc::new(AtomicU64::new(0));
        let rate = Hertz::new(1000.0).unwrap();
        let ring = engine::ring_records(Mode::Polled, rate) as u64;
        let clockwork = Clockwork::new(reads.clone());
        let span = Arc::clone(&clockwork.span);
        let s =
            Session::start_on(Box::new(clockwork), SessionConfig::default().rate(rate)).unwrap();
        until_reads(&reads, 0, 3 * ring);
        let stats = s.sample_stats().unwrap();
        assert_eq!(stats.merged, 0, "{stats:?}");
        assert_eq!(stats.dropped, 0, "{stats:?}");
        assert!(stats.kept as u64 >= 3 * ring - 1, "{stats:?}");

        s.begin_window("held").unwrap();
        let held = reads.load(Ordering::Relaxed);
        {
            let _lock = s.shared.folded();
            until_reads(&reads, held, ring + ring / 2);
        }
        let window = s.end_window("held").unwrap();
        let (r, rows) = s.stop_with_samples().unwrap();
        let stats = r.samples.clone().unwrap();
        let o = r.overhead.clone().unwrap();
        assert!(stats.merged > 0, "{stats:?}");
        assert_eq!(o.ring_full, stats.merged, "{o:?}");
        assert!(
            r.warnings()
                .iter()
                .any(|w| w.contains("folded into the next")),
            "{:?}",
            r.warnings()
        );
        // Every reading is a row or merged into one.
        assert_eq!(rows.len() as u64 + stats.merged, o.samples);
        // The rows add up to the report, whose energy is the clock's: 1 W and 2 W
        // between the first and the last reading (as the counters saw them: the
        // host may delay a read after its timestamp), to the microjoule quantum.
        let d = (span.1.load(Ordering::Relaxed) - span.0.load(Ordering::Relaxed)) as f64 / 1e6;
        for (i, watts) in [(0, 1.0), (1, 2.0)] {
            let sum: f64 = rows.iter().map(|row| row.energy_j[i].0).sum();
            let e = r.energy.domains[i].energy_j.0;
            assert!(
                (sum - e).abs() < 1e-9,
                "channel {i}: rows {sum} J, report {e} J"
            );
            assert!(
                (e - watts * d).abs() < 2e-6 * watts,
                "channel {i}: {e} J in {d} s"
            );
        }
        // The rows cover the report's span, first reading to last, on the
        // session's own timestamps (not the counters': a delayed read shifts one).
        let covered: u64 = rows.iter().map(|row| row.interval_ns).sum();
        assert!(
            (covered as f64 / 1e9 - r.energy.duration_s).abs() < 1e-6,
            "rows cover {covered} ns, the report {} s",
            r.energy.duration_s
        );
        // The window spans the held lock: its energy is inside the session's.
        let w = window.energy.domains[0].energy_j.0;
        assert!(w > 0.0 && w <= r.energy.domains[0].energy_j.0);
    }

    /// A session's sampler retries a read refused for a moment (EBUSY) and skips
    /// the tick when it stays refused: the session goes on, its energy whole.
    #[test]
    fn a_session_rides_over_transient_read_errors() {
        let reads = Arc::new(AtomicU64::new(0));
        let source = Clockwork::new(reads.clone());
        let busy = source.busy.clone();
        let rate = Hertz::new(200.0).unwrap();
        let s = Session::start_on(Box::new(source), SessionConfig::default().rate(rate)).unwrap();
        until_reads(&reads, 0, 5);
        // Six refusals: one tick's four tries, then two of the next tick's.
        busy.store(6, Ordering::Relaxed);
        let after = reads.load(Ordering::Relaxed);
        until_reads(&reads, after, 5);
        let r = s.stop().unwrap();
        let o = r.overhead.clone().unwrap();
        assert_eq!((o.read_retries, o.skipped_ticks), (5, 1), "{o:?}");
        let d = r.energy.duration_s;
        let e = r.energy.domains[0].energy_j.0;
        assert!((e - d).abs() < 2e-6, "{e} J in {d} s at 1 W");
    }

    /// A session is shared with the threads that snapshot it (an exporter's, a
    /// Python runtime's): it must stay `Send + Sync`.
    #[test]
    fn a_session_can_be_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Session>();
        shared::<Measurement>();
    }

    #[test]
    fn the_in_kernel_mechanisms_without_a_rate_are_refused_before_anything_is_opened() {
        for m in [Mechanism::Ebpf, Mechanism::PerfRing] {
            let err = Session::start(
                SessionConfig::default()
                    .root(SysRoot::new("/nonexistent"))
                    .mechanism(m),
            )
            .unwrap_err();
            assert!(
                matches!(err, Error::NeedsRate { mechanism } if mechanism == m.name()),
                "{err:?}"
            );
            assert!(err.to_string().contains("give the session a rate"), "{err}");
        }
    }
}
