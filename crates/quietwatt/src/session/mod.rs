//! Measuring a region of a program from inside it: start a [`Session`], do the
//! work, stop it and get a [`Report`]; or [`measure`] a closure.
//!
//! Two modes, chosen by [`SessionConfig::rate`]:
//! - no rate: the counters are read at [`Session::start`], at [`Session::stop`], and
//!   whenever a snapshot or window asks. No thread, nothing running in between:
//!   the cheapest way to measure, exact as long as no counter can wrap twice
//!   between two readings (a warning says when a gap was that long).
//! - a rate: a sampler thread reads the counters at that rate on absolute timerfd
//!   deadlines (the [`crate::ticker::Pacer`] of every recording), so that a long
//!   region is guarded against wraps, and the readings are kept as
//!   [`SampleRow`]s in a buffer of fixed size. Its loop allocates nothing and holds
//!   a lock only to account one reading. The thread is stopped and joined by
//!   [`Session::stop`], or by dropping the session.
//!
//! Every reading feeds one [`Meter`] for the session and one for each open
//! window ([`Session::begin_window`]): a window's report is computed by the same
//! code as the session's (uncertainty, total rule, warnings), over the readings
//! between its begin and its end, which a mere difference of two reports could
//! not give.
//!
//! The in-kernel mechanisms (ebpf, perf-ring) sample in the kernel and are drained
//! in batches by [`crate::source::inkernel`]; a session cannot drive them and refuses them
//! with [`SourceError::MechanismUnavailable`].

mod engine;
mod report;
mod samples;

pub use report::Report;
pub use samples::{SampleRow, SampleStats, DEFAULT_SAMPLES_KEPT};

use crate::domain::DomainId;
use crate::error::{Error, Result, SetupStep, SourceError};
use crate::meter::{monotonic_ns, Meter};
use crate::overhead::{Overhead, SamplerCounts, ThreadUsage};
use crate::root::SysRoot;
use crate::source::{self, Channel, Mechanism, Selection, Source};
use crate::ticker::{Hertz, TimerFd};
use engine::{Shared, State};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
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
    samples_kept: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            root: SysRoot::default(),
            mechanism: None,
            domains: Selection::all(),
            rate: None,
            samples_kept: DEFAULT_SAMPLES_KEPT,
        }
    }
}

impl SessionConfig {
    /// The defaults, with the root taken from `QUIETWATT_ROOT` when it is set and
    /// not empty (an emulator's mount point, as for the command line tool).
    pub fn from_env() -> Self {
        match std::env::var_os(ROOT_ENV) {
            Some(dir) if !dir.is_empty() => SessionConfig::default().root(SysRoot::new(dir)),
            _ => SessionConfig::default(),
        }
    }

    /// Where `/sys`, `/dev` and `/proc` are looked up (default `/`).
    pub fn root(mut self, root: SysRoot) -> Self {
        self.root = root;
        self
    }

    /// The mechanism to read; `None` (the default) chooses the first of
    /// [`Mechanism::ALL`] that opens and whose counters move.
    pub fn mechanism(mut self, mechanism: impl Into<Option<Mechanism>>) -> Self {
        self.mechanism = mechanism.into();
        self
    }

    /// The domains to measure (default: all). A domain the machine does not expose
    /// makes [`Session::start`] fail with [`SourceError::UnknownDomain`].
    pub fn domains(mut self, domains: Selection) -> Self {
        self.domains = domains;
        self
    }

    /// `Some(f)`: a sampler thread reads the counters at `f`; `None` (the default):
    /// the counters are read only at start, stop, snapshots and windows.
    pub fn rate(mut self, rate: impl Into<Option<Hertz>>) -> Self {
        self.rate = rate.into();
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
    /// Without a rate, the source is read here, on the caller's thread.
    polled: Option<Mutex<Box<dyn Source>>>,
    /// With a rate, the sampler thread, which owns the source.
    sampler: Option<JoinHandle<SamplerCounts>>,
    /// Said while starting (sampler placement, a rate too slow for the counters).
    notes: Vec<String>,
    /// The longest time a counter may go unread before it can wrap twice unseen.
    safe_gap: Option<Duration>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("mechanism", &self.mechanism)
            .field("channels", &self.channels)
            .field("rate", &self.rate)
            .field("running", &self.sampler.is_some())
            .finish()
    }
}

impl Session {
    /// Opens the counters and takes the first reading; with a rate, starts the
    /// sampler thread (returning once it is set up). Fails with the error of the
    /// source ([`SourceError::NoDomains`], [`SourceError::Permission`], [`SourceError::UnknownDomain`],
    /// ...), or [`SourceError::MechanismUnavailable`] for ebpf and perf-ring.
    pub fn start(config: SessionConfig) -> Result<Session> {
        if let Some(m @ (Mechanism::Ebpf | Mechanism::PerfRing)) = config.mechanism {
            return Err(SourceError::MechanismUnavailable {
                mechanism: m.name(),
                why: "a session reads the counters from user space, and this mechanism \
                      samples in the kernel and is drained in batches (quietwatt::inkernel); \
                      measure with perf, powercap or msr, or let the session choose"
                    .into(),
            }
            .into());
        }
        let source = source::open(&config.root, config.mechanism, &config.domains)?;
        Session::start_on(source, config)
    }

    /// Like [`Session::start`], on counters already opened: no discovery (zone
    /// names, units, ranges, quirks), only the first reading. The source comes from
    /// [`Session::stop_reusable`] of an earlier session (or [`source::open`]); the
    /// config's rate and buffer apply, its root, mechanism and domains are the
    /// source's. A caller that measures many short regions keeps one source.
    pub fn start_on(mut source: Box<dyn Source>, config: SessionConfig) -> Result<Session> {
        if source.mode() != crate::source::Mode::Polled {
            return Err(SourceError::MechanismUnavailable {
                mechanism: source.mechanism().name(),
                why: "a session reads the counters from user space, and this source samples \
                      in the kernel and is drained in batches"
                    .into(),
            }
            .into());
        }
        let mechanism = source.mechanism();
        let channels: Vec<DomainId> = source.channels().iter().map(|c| c.id).collect();
        let meter = Meter::new(Box::new(Fed::of(source.as_ref())));
        let safe_gap = meter.max_safe_period();
        let mut notes = Vec::new();
        if let (Some(f), Some(safe)) = (config.rate, safe_gap) {
            if f.period() > safe {
                notes.push(format!(
                    "a sampling period of {:.3} s is longer than the {:.3} s in which a counter can wrap twice at its domain's highest plausible power: a wrap could go unseen; sample faster",
                    f.period().as_secs_f64(),
                    safe.as_secs_f64()
                ));
            }
        }
        let rows = config
            .rate
            .map(|_| samples::SampleRing::new(config.samples_kept, channels.len()));
        let timer = match config.rate {
            Some(_) => Some(TimerFd::new().map_err(|source| Error::Setup {
                step: SetupStep::Timer,
                source,
            })?),
            None => None,
        };
        let mut raw = vec![0u64; channels.len()];
        // The first reading, last before any thread starts: the measurement begins
        // here, not after a thread start-up that a loaded machine can delay.
        let t = monotonic_ns();
        source.read(&mut raw)?;
        let mut state = State::new(meter, rows);
        state.feed(t, &raw, 0)?;
        let shared = Arc::new(Shared::new(state, timer));
        let (polled, sampler) = match config.rate {
            None => (Some(Mutex::new(source)), None),
            Some(f) => {
                let (handle, w) = engine::spawn(Arc::clone(&shared), source, f, t, raw)?;
                notes.extend(w);
                (None, Some(handle))
            }
        };
        Ok(Session {
            shared,
            mechanism,
            channels,
            rate: config.rate,
            polled,
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

    /// The sampler thread's rate, if the session has one.
    pub fn rate(&self) -> Option<Hertz> {
        self.rate
    }

    /// The energy so far. Without a rate the counters are read once more (on this
    /// thread); with one, this is the sampler's last reading, at most one period
    /// old. Fails only when that extra reading fails.
    pub fn snapshot(&self) -> Result<Report> {
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
            .map_or_else(Vec::new, |r| r.rows())
    }

    /// Like [`Session::samples`], and removes them: what a periodic consumer (an
    /// exporter) calls so that no row is handed out twice nor dropped.
    pub fn drain_samples(&self) -> Vec<SampleRow> {
        self.state()
            .rows
            .as_mut()
            .map_or_else(Vec::new, |r| r.drain())
    }

    /// The sample buffer's bound and what it held, handed out and dropped; `None`
    /// without a rate.
    pub fn sample_stats(&self) -> Option<SampleStats> {
        self.state().rows.as_ref().map(|r| r.stats())
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
    pub fn end_window(&self, name: &str) -> Result<Report> {
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

    /// Ends the measurement: the last reading (the sampler's, woken at once), the
    /// thread joined, and the report with the sampler's cost. Fails when a reading
    /// failed ([`SourceError::Vanished`], [`SourceError::CorruptCounter`], ...): a background
    /// session's report then stops at the last good reading, which
    /// [`Session::snapshot`] still gave before `stop`.
    pub fn stop(self) -> Result<Report> {
        self.stop_with_samples().map(|(r, _)| r)
    }

    /// Like [`Session::stop`], handing back the opened counters for
    /// [`Session::start_on`] when the session had no rate (with one, the sampler
    /// thread owned them and closed them: `None`).
    pub fn stop_reusable(mut self) -> Result<(Report, Option<Box<dyn Source>>)> {
        let (report, _) = self.finish()?;
        let source = self
            .polled
            .take()
            .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()));
        Ok((report, source))
    }

    /// Like [`Session::stop`], with the rows still in the buffer, the last
    /// reading's included: with the rows drained before and the energy of those
    /// dropped ([`SampleStats::dropped_energy_j`]), they add up to the report.
    pub fn stop_with_samples(mut self) -> Result<(Report, Vec<SampleRow>)> {
        self.finish()
    }

    /// The last reading, the thread joined, the final report and rows.
    fn finish(&mut self) -> Result<(Report, Vec<SampleRow>)> {
        self.read_now()?;
        let counts = self.join();
        let mut st = self.state();
        if let Some(e) = st.error.take() {
            return Err(e);
        }
        let mut report = self.report_of(&st.meter, &st, None);
        report.overhead = counts.map(|c| Overhead::new(&c, ThreadUsage::default(), c.samples));
        report.samples = st.rows.as_ref().map(|r| r.stats());
        let rows = st.rows.as_mut().map_or_else(Vec::new, |r| r.drain());
        Ok((report, rows))
    }

    /// Without a rate, reads the counters and accounts the reading; with a rate,
    /// nothing (the sampler reads).
    fn read_now(&self) -> Result<()> {
        let Some(source) = &self.polled else {
            return Ok(());
        };
        let mut source = source.lock().unwrap_or_else(|p| p.into_inner());
        let mut raw = vec![0u64; self.channels.len()];
        let t = monotonic_ns();
        source.read(&mut raw)?;
        let missed = 0;
        self.state().feed(t, &raw, missed)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state()
    }

    /// Stops the sampler thread and waits for it; its counts, if there was one.
    /// A panic of the sampler is not raised again here (this runs in `Drop`): the
    /// session's error says the sampling ended.
    fn join(&mut self) -> Option<SamplerCounts> {
        let handle = self.sampler.take()?;
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = &self.shared.timer {
            t.wake();
        }
        match handle.join() {
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
    fn report_of(&self, meter: &Meter, st: &State, window: Option<&str>) -> Report {
        let mut energy = meter.report();
        energy.warnings.extend(self.notes.iter().cloned());
        if let (None, Some(safe)) = (self.rate, self.safe_gap) {
            if st.longest_gap > safe {
                energy.warnings.push(format!(
                    "{:.3} s passed between two readings, longer than the {:.3} s in which a counter can wrap twice at its domain's highest plausible power: a wrap could have gone unseen; give the session a rate",
                    st.longest_gap.as_secs_f64(),
                    safe.as_secs_f64()
                ));
            }
        }
        if let Some(e) = &st.error {
            energy.warnings.push(format!(
                "the sampling stopped early: {e}; the figures end at the last good reading"
            ));
        }
        Report {
            mechanism: self.mechanism,
            channels: self.channels.clone(),
            window: window.map(str::to_string),
            energy,
            overhead: None,
            samples: None,
        }
    }
}

impl Drop for Session {
    /// Stops and joins the sampler thread of a session that was not stopped.
    fn drop(&mut self) {
        self.join();
    }
}

/// Runs `work` inside a session started from `config` and returns its result with
/// the session's report. If `work` panics, the session is dropped (its thread
/// joined) and the panic goes on.
pub fn measure<T>(config: SessionConfig, work: impl FnOnce() -> T) -> Result<(T, Report)> {
    let session = Session::start(config)?;
    let value = work();
    let report = session.stop()?;
    Ok((value, report))
}

/// The description of an opened source without the source itself: what a
/// [`Meter`] fed with readings taken elsewhere ([`Meter::feed`]) reports as its
/// mechanism, channels and notes. The session reads the counters once per reading
/// and feeds the same values to the session's meter and every window's.
struct Fed {
    mechanism: Mechanism,
    channels: Vec<Channel>,
    notes: Vec<String>,
}

impl Fed {
    fn of(source: &dyn Source) -> Fed {
        Fed {
            mechanism: source.mechanism(),
            channels: source.channels().to_vec(),
            notes: source.notes().to_vec(),
        }
    }

    /// A fresh meter over the same channels as `m`.
    fn meter_like(m: &Meter) -> Meter {
        Meter::new(Box::new(Fed {
            mechanism: m.mechanism(),
            channels: m.channels().to_vec(),
            notes: m.notes().to_vec(),
        }))
    }
}

impl Source for Fed {
    fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    fn channels(&self) -> &[Channel] {
        &self.channels
    }

    /// Never called: a fed meter is only given readings ([`Meter::feed`]).
    fn read(&mut self, _out: &mut [u64]) -> crate::error::SourceResult<()> {
        Err(SourceError::MechanismUnavailable {
            mechanism: self.mechanism.name(),
            why: "a session's meter is fed the session's readings and reads nothing itself".into(),
        })
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session is shared with the threads that snapshot it (an exporter's, a
    /// Python runtime's): it must stay `Send + Sync`.
    #[test]
    fn a_session_can_be_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Session>();
        shared::<Report>();
    }

    #[test]
    fn the_in_kernel_mechanisms_are_refused_before_anything_is_opened() {
        let err = Session::start(
            SessionConfig::default()
                .root(SysRoot::new("/nonexistent"))
                .mechanism(Mechanism::Ebpf),
        )
        .unwrap_err();
        assert!(matches!(
            err,
            Error::Source(SourceError::MechanismUnavailable {
                mechanism: "ebpf",
                ..
            })
        ));
    }
}
