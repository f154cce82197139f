//! Recording: the sampler thread and the writer thread started together, joined by
//! a lock-free ring, and ended together so that the output is always complete.
//!
//! ```text
//!  sampler thread ── raw deltas (4 + n words) ──▶ rtrb ring ──▶ writer thread ──▶ Sink
//!  timerfd deadlines                                       joules, batches,
//!  no alloc, no lock, no I/O                               flush ≤ 1 s
//! ```
//!
//! Stopping (the caller's flag, `--duration`, the end of a measured command, a
//! write error) always goes the same way: the sampler takes one last reading and
//! ends, the writer drains the ring, finishes the sink and ends.

use crate::adaptive::{Adaptive, LoadProbe, RatePolicy, DEFAULT_HOLD, DEFAULT_PROBE_EVERY};
use crate::error::{Error, Result, SetupStep, SourceError};
use crate::kernel_figures::KernelFigures;
use crate::measurement::Measurement;
use crate::meter::Meter;
use crate::overhead::{Overhead, SamplerCounts, ThreadUsage};
use crate::root::SysRoot;
use crate::sampler::{self, Control, Rate, Setup, HEADER_WORDS, MAX_CHANNELS};
use crate::source::Mode;
use crate::ticker::{Hertz, Pacing, TimerFd};
use crate::units::EnergyUnit;
use crate::warning::Warning;
use crate::writer;
use quietwatt_sys::thread::{NotReady, Ready, ScopedWorker};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

pub use crate::sink::{CsvSink, Metadata, Sink};

/// How to run the sampling engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Fixed or adaptive rate. A buffered source samples at its own rate in the
    /// kernel and is drained at its own drain rate ([`crate::source::Mode`]).
    pub rate: Rate,
    /// End after this long (from the first reading); `None`: until stopped.
    pub duration: Option<Duration>,
    /// Timerfd deadlines (always, except to measure the alternative).
    pub pacing: Pacing,
    /// Pin the sampler thread to this CPU; `None`: to the CPU where the source's
    /// counters are read, if they are tied to one ([`crate::sampler::placement`]).
    pub cpu: Option<usize>,
    /// Ask for SCHED_FIFO for the sampler (a warning when refused).
    pub realtime: bool,
    /// Records the ring holds; `None`: two seconds at the highest rate, within 1024..16384.
    pub ring_capacity: Option<usize>,
    /// The sampler wakes the writer to write and flush this often (or at each tick
    /// when ticks are further apart).
    pub flush_every: Duration,
    /// Where `/proc/stat` is read for the adaptive rate.
    pub root: SysRoot,
    /// Adaptive rate: how long the load must stay lower before the rate falls.
    pub hold: Duration,
    /// Adaptive rate: shortest time between two load readings.
    pub probe_every: Duration,
}

impl EngineConfig {
    /// Defaults around a rate: timerfd pacing, flush every 500 ms, no pinning, normal priority.
    pub fn new(rate: Rate) -> EngineConfig {
        EngineConfig {
            rate,
            duration: None,
            pacing: Pacing::TimerFd,
            cpu: None,
            realtime: false,
            ring_capacity: None,
            flush_every: Duration::from_millis(500),
            root: SysRoot::default(),
            hold: DEFAULT_HOLD,
            probe_every: DEFAULT_PROBE_EVERY,
        }
    }

    /// The ring's capacity in records.
    pub fn ring_capacity(&self) -> usize {
        match self.ring_capacity {
            Some(n) => n.max(1),
            None => ((self.rate.max().hz() * 2.0) as usize).clamp(1024, 16384),
        }
    }
}

/// How a recording went: the measurement, and what only a recording has (its
/// output's samples).
#[derive(Debug)]
pub struct Recording {
    /// Energy over the whole recording, from the counters themselves (complete even
    /// when the output failed); what it cost (`overhead`, always present: its
    /// `missed_deadlines` are the deadlines that passed before the sampler could
    /// read, whose energy is in the next sample); the kernel side's figures for a
    /// buffered source (ebpf, perf-ring); and every warning, things refused that
    /// did not stop the recording (`--rt` without permission, a raised minimum
    /// rate) included.
    pub measurement: Measurement,
    /// Samples the output holds, each whole (one row per domain); the priming read
    /// is not one. After a failed write (a full disk) the samples that did not fit
    /// are not counted.
    pub samples: u64,
    /// What the output holds when a write failed (a full disk): less than
    /// [`Recording::measurement`], which covers the whole measurement. `None` when
    /// the output holds every sample.
    pub output_short: Option<OutputContent>,
}

/// What an output cut short by a failed write holds.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputContent {
    /// From the first reading to the last sample it holds.
    pub duration: Duration,
    /// The energy of its samples, per channel (in the report's channel order).
    pub energy: Vec<crate::units::Joules>,
}

/// A recording that failed: what stopped it and what was kept. Everything measured
/// before the failure is in the output, each sample whole, and `kept` accounts for
/// it (samples, energy, cost).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Stopped {
    /// What stopped it ([`Error::Output`] for a write: a full disk, a closed pipe;
    /// a read error otherwise). Its [`Error::kind`] says what the caller can do.
    #[source]
    pub error: Error,
    /// The recording up to the failure; `None` when it failed before anything was
    /// measured (a header that could not be written, a thread that did not start).
    pub kept: Option<Box<Recording>>,
    /// For [`crate::command::record_command`]: the command's exit status, when it
    /// ran to its end (a failed recording waits for the command).
    pub status: Option<std::process::ExitStatus>,
}

impl From<Error> for Stopped {
    fn from(error: Error) -> Stopped {
        Stopped {
            error,
            kept: None,
            status: None,
        }
    }
}

/// Samples `meter` into `sink` until `config.duration` has passed or `stop` is set.
/// `output` names the sink's file in errors. A header that cannot be written fails
/// before anything is measured ([`Stopped::kept`] is `None`); a failure later ends
/// the recording with what was kept, the output valid up to it.
pub fn record(
    meter: &mut Meter,
    sink: &mut dyn Sink,
    output: &Path,
    meta: &Metadata,
    config: &EngineConfig,
    stop: &AtomicBool,
) -> std::result::Result<Recording, Stopped> {
    let mode = meter.mode();
    let (rec, failed, ()) =
        record_between(meter, sink, output, meta, config, Some(stop), |control| {
            // The sampler sees `stop` at its next tick and unparks this thread when it
            // ends. This thread looks itself only where the sampler's period can be
            // longer than STOP_POLL; otherwise it sleeps, so that it adds no wake-up.
            // A buffered source's sampler wakes at each drain (1 Hz by default) and
            // sees `stop` then: polling here as well would add four wake-ups a
            // second to the one the in-kernel path exists to keep. Only a drain
            // slower than BUFFERED_STOP makes this thread look itself.
            let slow = match mode {
                Mode::Polled => config.rate.min().period() > STOP_POLL,
                Mode::Buffered { drain, .. } => drain.period() > BUFFERED_STOP,
            };
            let poll = if slow { STOP_POLL } else { WAIT_BACKSTOP };
            while !control.sampler_done() && !stop.load(Ordering::Relaxed) {
                thread::park_timeout(poll);
            }
            Ok(())
        })?;
    match failed {
        None => Ok(rec),
        Some(error) => Err(Stopped {
            error,
            kept: Some(Box::new(rec)),
            status: None,
        }),
    }
}

/// [`record`], running `between` on this thread until it is time to stop (it
/// returns then, or when [`Control::sampler_done`]): the common part of a
/// recording that ends with a flag and one that ends with a command. The error
/// beside the recording is what stopped it early, if anything.
pub(crate) fn record_between<T>(
    meter: &mut Meter,
    sink: &mut dyn Sink,
    output: &Path,
    meta: &Metadata,
    config: &EngineConfig,
    stop: Option<&AtomicBool>,
    between: impl FnOnce(&Control<'_>) -> Result<T>,
) -> Result<(Recording, Option<Error>, T)> {
    let out_err = |source| Error::Output {
        path: output.to_path_buf(),
        source,
    };
    sink.begin(meta, meter.channels()).map_err(out_err)?;
    let (mut run, value) = drive(meter, sink, config, stop, between)?;
    let mut measurement = run.measurement(meter);
    measurement
        .energy
        .warnings
        .extend(hidden_turns(meter, run.longest_ns).map(Warning::rate));
    let error = match run.write_error {
        Some(e) => Some(out_err(e)),
        None => run.read_error,
    };
    let output_short = matches!(error, Some(Error::Output { .. })).then(|| OutputContent {
        duration: match (run.held.last_t_ns, meter.first_reading_ns()) {
            (Some(last), Some(first)) => Duration::from_nanos(last.saturating_sub(first)),
            _ => Duration::ZERO,
        },
        energy: run.held.energy.clone(),
    });
    let rec = Recording {
        measurement,
        samples: run.written,
        output_short,
    };
    Ok((rec, error, value))
}

/// A warning when two reads were further apart (the host held the sampler up)
/// than some counter takes to turn once at its domain's highest plausible power:
/// no reader can see the turns inside such a gap, so the row after it (marked
/// with missed deadlines) and the totals may be short by whole counter ranges.
fn hidden_turns(meter: &Meter, longest_ns: u64) -> Option<String> {
    let turn = meter.max_safe_period()? * 2;
    let gap = Duration::from_nanos(longest_ns);
    (gap > turn).then(|| {
        format!(
            "two reads were {} apart (the host held the sampler up): longer than the {} in which a counter can turn once at its domain's highest plausible power, so the row after that gap, and the totals, may be short by whole counter ranges; keep the machine less loaded while recording, or give the sampler real-time priority (as root)",
            crate::meter::human_duration(gap),
            crate::meter::human_duration(turn)
        )
    })
}

/// How often the thread that waits for the end of a recording looks at the
/// caller's stop flag itself when the sampling period can be longer: the latest a
/// stop is seen at any rate (the sampler sees it at its next tick).
pub const STOP_POLL: Duration = Duration::from_millis(250);

/// The longest a recording from a buffered source may take to see its stop flag
/// (one drain period) before the waiting thread polls the flag itself.
const BUFFERED_STOP: Duration = Duration::from_secs(1);

/// How long that thread sleeps at faster rates, where the sampler wakes it: only a
/// guard against a wake-up lost to a bug.
const WAIT_BACKSTOP: Duration = Duration::from_secs(5);

/// What one run of the engine gave.
pub(crate) struct EngineRun {
    pub counts: SamplerCounts,
    pub writer_usage: crate::overhead::ThreadUsage,
    /// The calling thread's, while it waited for the end.
    pub waiter_usage: crate::overhead::ThreadUsage,
    /// Samples written: those the output holds whole ([`crate::sink::Sink::kept`]).
    pub written: u64,
    /// What they hold.
    pub held: crate::writer::Held,
    /// The longest interval between two reads (ns).
    pub longest_ns: u64,
    pub read_error: Option<Error>,
    pub write_error: Option<io::Error>,
    pub warnings: Vec<Warning>,
}

impl EngineRun {
    /// The measurement of `meter` after this run: its figures, what the run cost,
    /// the kernel side's figures of a buffered source, the run's warnings (taken
    /// from it) after the meter's, then the kernel side's.
    pub(crate) fn measurement(&mut self, meter: &Meter) -> Measurement {
        let mut m = Measurement::of(meter);
        m.energy.warnings.append(&mut self.warnings);
        m.overhead = Some(
            Overhead::new(&self.counts, self.writer_usage, self.written)
                .with_waiter(self.waiter_usage),
        );
        m.set_kernel(
            meter
                .kernel_side()
                .map(|side| KernelFigures::new(&side, &self.counts, self.writer_usage)),
        );
        m
    }
}

/// Runs the engine: starts the writer and the sampler, waits for the sampler's
/// priming read, runs `between` on this thread (it returns when it is time to stop,
/// or when [`Control::sampler_done`]), then stops and joins both threads.
pub(crate) fn drive<T>(
    meter: &mut Meter,
    sink: &mut dyn Sink,
    config: &EngineConfig,
    stop: Option<&AtomicBool>,
    between: impl FnOnce(&Control<'_>) -> Result<T>,
) -> Result<(EngineRun, T)> {
    let n = meter.channels().len();
    if n > MAX_CHANNELS {
        return Err(Error::TooManyChannels {
            count: n,
            max: MAX_CHANNELS,
        });
    }
    let units: Vec<EnergyUnit> = meter.channels().iter().map(|c| c.unit).collect();
    let mut rate_notes = Vec::new();
    let mode = meter.mode();
    let (adaptive, start) = match mode {
        Mode::Polled => adaptive(meter, config, &mut rate_notes)?,
        // The sampler wakes to drain; the kernel keeps its own rate.
        Mode::Buffered { drain, .. } => (None, drain),
    };
    let timer = match config.pacing {
        Pacing::TimerFd => Some(TimerFd::new().map_err(|source| Error::Setup {
            step: SetupStep::Timer,
            source,
        })?),
        Pacing::RelativeSleep => None,
    };
    let control = Control::new(timer, stop);
    // Whole records only: a multiple of the record's size, so none wraps around.
    let records = match mode {
        Mode::Polled => config.ring_capacity(),
        // Two drains' worth of records, so that the writer keeps up with a batch.
        Mode::Buffered { freq, drain } => config
            .ring_capacity()
            .max((2.0 * freq.hz() / drain.hz()) as usize + 16)
            .min(1 << 18),
    };
    let words = records * (HEADER_WORDS + n);
    let (producer, consumer) = rtrb::RingBuffer::<u64>::new(words);
    // A buffered source's kernel sampling starts, then the priming read, last
    // before the threads start: an energy measurement begins here, not after a
    // thread start-up that a loaded machine can delay.
    meter.start()?;
    let (first_ns, _) = meter.sample()?;
    // Where the counters are read, unless the user said where (--cpu).
    let (cpu, notes) = sampler::placement(&meter.read_cpus(), config.cpu);
    let mut warnings: Vec<Warning> = rate_notes.into_iter().map(Warning::rate).collect();
    warnings.extend(notes.into_iter().map(Warning::setup));
    let setup = Setup {
        cpu,
        cpu_from_counters: config.cpu.is_none(),
        realtime: config.realtime,
        end_after_ns: config.duration.map(|d| d.as_nanos() as u64),
        flush_every_ns: config.flush_every.as_nanos() as u64,
        first_ns,
    };
    let spawn_err = |source| Error::Setup {
        step: SetupStep::Thread("quietwatt-sampler or quietwatt-writer"),
        source,
    };
    thread::scope(|s| {
        let control = &control;
        let units = &units;
        // The writer has no setup: it is ready as soon as it runs.
        let (writer, _) =
            ScopedWorker::spawn(s, "quietwatt-writer", move |ready: Ready<(), ()>| {
                ready.ok(());
                writer::run(consumer, sink, units, control)
            })
            .map_err(spawn_err)?;
        let writer_thread = writer.thread().clone();
        // If this spawn fails the producer is dropped with the closure, which ends the writer.
        let (sampler, handshake) = ScopedWorker::spawn(s, "quietwatt-sampler", move |ready| {
            sampler::run(
                meter,
                producer,
                adaptive,
                start,
                setup,
                control,
                writer_thread,
                ready,
            )
        })
        .map_err(spawn_err)?;
        let waiter_start = ThreadUsage::current();
        // The measurement (`between`) starts only once the sampler is ready.
        let between_result = match handshake.wait() {
            Ok(w) => {
                warnings.extend(w.into_iter().map(Warning::setup));
                between(control)
            }
            Err(NotReady::Failed(e)) => Err(e),
            // The sampler panicked during setup: its join below re-raises the panic.
            Err(NotReady::Ended) => Err(Error::Setup {
                step: SetupStep::Thread("quietwatt-sampler"),
                source: io::Error::other("the sampler thread ended during setup"),
            }),
        };
        control.stop();
        let waiter_usage = ThreadUsage::current().since(waiter_start);
        // Both joined before a panic of either is raised again: the scope would
        // otherwise wait for the writer with nobody left to wake it.
        let so = sampler.try_join();
        writer.thread().unpark();
        let wo = writer.try_join();
        let so = so.unwrap_or_else(|p| std::panic::resume_unwind(p));
        let wo = wo.unwrap_or_else(|p| std::panic::resume_unwind(p));
        let value = between_result?;
        Ok((
            EngineRun {
                counts: so.counts,
                writer_usage: wo.usage,
                waiter_usage,
                written: wo.kept,
                held: wo.held,
                longest_ns: wo.longest_ns,
                read_error: so.error,
                write_error: wo.error,
                warnings,
            },
            value,
        ))
    })
}

/// `rate`, raised when a counter could wrap twice between two reads at it: its
/// figures would then miss whole ranges unseen (at 1 Hz, counters that turn every
/// 0.25 s once gave 0.06 J for 60 J). Said in the warnings, which reach the JSON.
pub fn wrap_safe(meter: &Meter, rate: Hertz, warnings: &mut Vec<String>) -> Hertz {
    let s = crate::safe_rate::safe_rate(rate, meter.max_safe_period());
    if !s.raised {
        return rate;
    }
    let why: Vec<String> = meter.wrap_warnings(rate.period());
    if !s.safe {
        warnings.push(format!(
            "no rate up to {} Hz reads every counter before it can wrap twice; figures may miss whole counter ranges: {}",
            s.rate.hz(),
            why.join("; ")
        ));
    } else {
        warnings.push(format!(
            "the sampling rate is raised from {} Hz to {:.0} Hz so that no counter can wrap twice between two reads: {}",
            rate.hz(),
            s.rate.hz(),
            why.join("; ")
        ));
    }
    s.rate
}

/// The adaptive rate, when asked for, with its wrap floor; and the rate to start at.
fn adaptive(
    meter: &Meter,
    config: &EngineConfig,
    warnings: &mut Vec<String>,
) -> Result<(Option<Adaptive>, Hertz)> {
    let Rate::Auto { min, max } = config.rate else {
        return Ok((None, wrap_safe(meter, config.rate.max(), warnings)));
    };
    let floor = crate::safe_rate::floor(meter.max_safe_period());
    let policy = RatePolicy::new(min, max, config.hold, floor);
    if policy.min().hz() > min.hz() {
        warnings.push(format!(
            "the adaptive rate: its lowest rate is raised from {} Hz to {:.0} Hz so that no counter can wrap twice between two reads",
            min.hz(),
            policy.min().hz()
        ));
    }
    let probe = match LoadProbe::open(&config.root, config.root.is_system()) {
        // A root without /proc (the emulator serves only RAPL's files): the load that
        // matters is this machine's.
        Err(Error::Source(SourceError::Io { path, source }))
            if source.kind() == io::ErrorKind::NotFound && !config.root.is_system() =>
        {
            warnings.push(format!(
                "the adaptive rate: {} does not exist; the load is read from this machine's /proc/stat",
                path.display()
            ));
            LoadProbe::open(&SysRoot::default(), true)?
        }
        r => r?,
    };
    let a = Adaptive::new(probe, policy, config.probe_every);
    let start = a.current();
    Ok((Some(a), start))
}
