//! A recording composed by the library: which mechanism reads the counters
//! ([`quietwatt::source::choose`]), where the samples go (a format, a file or
//! stdout, the metadata), the OS events counted beside them (quietwatt-events'
//! recorder), the energy split among processes or cgroups (quietwatt-attribution's
//! `open_sink`), and what bounds the recording (a duration, a command, or a stop
//! flag), all from typed options given once to a [`RecordingBuilder`]. The engine's
//! `record` and `record_command` do the measuring; this crate only composes.
//!
//! The `record` command is flags over it; Python can use the same builder (no
//! front end's types cross it, and its errors are typed).
//!
//! ```no_run
//! use quietwatt::{Format, Hertz, Rate};
//! use quietwatt_recording::{RecordingBuilder, Output};
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//!
//! let done = RecordingBuilder::new()
//!     .rate(Rate::Fixed(Hertz::clamped(100.0)))
//!     .output(Output::File("energy.csv".into()), Format::Csv)
//!     .duration(Duration::from_secs(2))
//!     .run(&AtomicBool::new(false), &mut ())
//!     .expect("a recording");
//! println!("{} samples", done.recording.samples);
//! ```
#![deny(missing_docs)]

mod error;
pub mod events;

pub use error::RecordingError;
pub use events::{EventsOptions, EventsOutcome, EventsStarted};
pub use quietwatt::source::choose::{Choice, ChooseError, MechanismRequest};

use quietwatt::command::ChildEvent;
use quietwatt::record::{EngineConfig, Recording, Stopped};
use quietwatt::sink::{OutputFile, Sink};
use quietwatt::source::Mode;
use quietwatt::{Format, Hertz, Mechanism, Metadata, Meter, Rate, Selection, SysRoot};
use quietwatt_attribution::{Attributed, LongFormat, Totals};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Where the samples go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// This file, replaced if it exists.
    File(PathBuf),
    /// Standard output (streaming formats only).
    Stdout,
}

impl Output {
    /// The path the engine names in its errors (`-` for stdout).
    pub fn path(&self) -> &Path {
        match self {
            Output::File(p) => p,
            Output::Stdout => Path::new("-"),
        }
    }
}

/// What bounds the recording.
#[derive(Debug, Default)]
enum Bound {
    /// Until the stop flag (or a duration).
    #[default]
    Stopped,
    /// This long (or the stop flag first).
    Duration(Duration),
    /// A command, from just before its start to its end.
    Command(Box<Command>),
}

/// What a recording tells its caller as it goes, so that a front end can word it
/// at the moment it happens. Every method does nothing by default; `()` is the
/// caller that wants nothing.
pub trait Progress {
    /// The source is open and metered: its notes, its mechanism and mode.
    /// `fallback`: why a named in-kernel mechanism polls instead.
    fn opened(&mut self, meter: &Meter, fallback: Option<(Mechanism, &str)>) {
        let _ = (meter, fallback);
    }
    /// The events thread started.
    fn events_started(&mut self, started: EventsStarted<'_>) {
        let _ = started;
    }
    /// Everything is open: the measurement starts now.
    fn starting(&mut self, meter: &Meter, rate: &Rate) {
        let _ = (meter, rate);
    }
    /// The command's process started or ended (a front end forwards signals).
    fn child(&mut self, event: ChildEvent) {
        let _ = event;
    }
}

impl Progress for () {}

/// A recording's options, given once; [`RecordingBuilder::run`] composes and runs it.
#[derive(Debug)]
pub struct RecordingBuilder {
    root: SysRoot,
    choice: Choice,
    drain_hz: f64,
    engine: EngineConfig,
    output: Output,
    format: Format,
    emulated: bool,
    events: EventsOptions,
    attribution: Option<quietwatt_attribution::Options>,
    bound: Bound,
    power_model: Option<quietwatt::fallback::ModelChoice>,
}

impl Default for RecordingBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RecordingBuilder {
    /// A recording of every domain, the best mechanism here, 100 Hz, CSV on stdout,
    /// until stopped.
    pub fn new() -> Self {
        let root = SysRoot::default();
        let mut engine = EngineConfig::new(Rate::Fixed(Hertz::clamped(100.0)));
        engine.root = root.clone();
        RecordingBuilder {
            root,
            choice: Choice::new(MechanismRequest::Auto),
            drain_hz: quietwatt::inkernel::DEFAULT_DRAIN_HZ,
            engine,
            output: Output::Stdout,
            format: Format::Csv,
            emulated: false,
            events: EventsOptions::default(),
            attribution: None,
            bound: Bound::Stopped,
            power_model: None,
        }
    }

    /// Where `/sys`, `/dev` and `/proc` are read (an emulator's mount in tests).
    pub fn root(mut self, root: SysRoot) -> Self {
        self.engine.root = root.clone();
        self.root = root;
        self
    }

    /// Which mechanism (default: auto).
    pub fn mechanism(mut self, m: MechanismRequest) -> Self {
        self.choice.mechanism = m;
        self
    }

    /// Which domains (default: all).
    pub fn domains(mut self, selection: Selection) -> Self {
        self.choice.selection = selection;
        self
    }

    /// The sampling rate, fixed or adaptive (the in-kernel mechanisms take a fixed one).
    pub fn rate(mut self, rate: Rate) -> Self {
        self.engine.rate = rate;
        self
    }

    /// The engine's other settings (pinning, priority, adaptive bounds...); its
    /// rate and root are kept, its duration replaced by the builder's bound.
    pub fn engine(mut self, config: EngineConfig) -> Self {
        self.engine = config;
        self.engine.root = self.root.clone();
        self
    }

    /// ebpf, perf-ring: how often user space drains the kernel's ring, in hertz.
    pub fn drain_hz(mut self, hz: f64) -> Self {
        self.drain_hz = hz;
        self
    }

    /// Perf software counters in place of RAPL (tests, benchmarks).
    pub fn stand_in_events(mut self, on: bool) -> Self {
        self.choice.stand_in_events = on;
        self
    }

    /// Where the samples go, and in which format.
    pub fn output(mut self, output: Output, format: Format) -> Self {
        self.output = output;
        self.format = format;
        self
    }

    /// Where nothing can measure, estimate with this power model
    /// ([`quietwatt::fallback::instead`]): mechanism `estimate`, said in the
    /// metadata and notes.
    pub fn power_model(mut self, model: Option<quietwatt::fallback::ModelChoice>) -> Self {
        self.power_model = model;
        self
    }

    /// Whether the counters are an emulator's: said in the metadata and notes.
    pub fn emulated(mut self, emulated: bool) -> Self {
        self.emulated = emulated;
        self
    }

    /// OS events beside the energy.
    pub fn events(mut self, events: EventsOptions) -> Self {
        self.events = events;
        self
    }

    /// The energy split among processes or cgroups, written instead of the
    /// energy per domain.
    pub fn attribution(mut self, options: quietwatt_attribution::Options) -> Self {
        self.attribution = Some(options);
        self
    }

    /// Stop after this long.
    pub fn duration(mut self, d: Duration) -> Self {
        self.bound = Bound::Duration(d);
        self
    }

    /// Record while `cmd` runs (polled mechanisms only).
    pub fn command(mut self, cmd: Command) -> Self {
        self.bound = Bound::Command(Box::new(cmd));
        self
    }

    /// The format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Checks the combination before anything is opened.
    pub fn validate(&self) -> Result<(), RecordingError> {
        let to_stdout = self.output == Output::Stdout;
        if to_stdout && !self.format.streams() {
            return Err(RecordingError::NotStreamable {
                format: self.format,
            });
        }
        if to_stdout && self.events.any() {
            return Err(RecordingError::EventsNeedFile);
        }
        if self.attribution.is_some() && self.events.any() {
            return Err(RecordingError::EventsWithAttribution);
        }
        if let (Bound::Command(_), MechanismRequest::Named(m)) =
            (&self.bound, self.choice.mechanism)
        {
            if self.choice.mechanism.in_kernel() {
                return Err(RecordingError::CommandInKernel { mechanism: m });
            }
        }
        if self.attribution.is_some() {
            long_format(self.format)?;
        }
        Ok(())
    }

    /// Opens everything, records, stops the events and returns what was
    /// measured. A recording that failed part-way returns what it kept with its
    /// error ([`RecordingOutcome::error`]); one that measured nothing is an `Err`.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        progress: &mut dyn Progress,
    ) -> Result<RecordingOutcome, RecordingError> {
        self.validate()?;
        let path = self.output.path().to_path_buf();
        let file = self.open_output()?;
        let in_kernel = self.choice.mechanism.in_kernel();
        // The kernel's rate and drain matter to the in-kernel mechanisms only.
        if let (true, MechanismRequest::Named(mechanism)) = (in_kernel, self.choice.mechanism) {
            let Rate::Fixed(f) = self.engine.rate else {
                return Err(ChooseError::NeedsFixedRate { mechanism }.into());
            };
            self.choice.kernel_rate = Some(f);
            self.choice.drain = Hertz::new(self.drain_hz)
                .map_err(|_| RecordingError::DrainRate { hz: self.drain_hz })?;
        }
        let chosen = match quietwatt::source::choose::open(&self.root, &self.choice) {
            Ok(c) => c,
            // Refused here, nothing named: the local reader service, if there is
            // one (docs/reader.md), asked for readings at the recording's rate.
            Err(ChooseError::Source(e))
                if self.choice.mechanism == MechanismRequest::Auto
                    && !self.choice.stand_in_events =>
            {
                let want = quietwatt::reader::Want {
                    interval: match self.engine.rate {
                        Rate::Fixed(f) => Some(f.period()),
                        Rate::Auto { .. } => None,
                    },
                    resolution_uj: None,
                };
                match quietwatt::fallback::instead(
                    &e,
                    &self.choice.selection,
                    want,
                    self.power_model.as_ref(),
                    &self.root,
                ) {
                    Some(Ok(s)) => quietwatt::source::choose::Chosen {
                        source: s,
                        fallback: None,
                    },
                    Some(Err(e)) => return Err(ChooseError::Source(e).into()),
                    None => return Err(ChooseError::Source(e).into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
        let mut meter = Meter::new(chosen.source);
        let fallback = match (self.choice.mechanism.named(), chosen.fallback.as_deref()) {
            (Some(m), Some(r)) => Some((m, r)),
            _ => None,
        };
        progress.opened(&meter, fallback);
        let notes = meter.notes().to_vec();
        let mut meta = Metadata::new(meter.label(), &self.engine.rate, &self.root);
        meta.push("emulated", self.emulated.to_string());
        meta.push("root", self.root.dir().display().to_string());
        if let Mode::Buffered { drain, .. } = meter.mode() {
            meta.push("drain_hz", drain.hz().to_string());
            if self.choice.stand_in_events {
                meta.push("stand_in_events", "cpu-clock,task-clock@cpu0".to_string());
            }
        }
        let mut sink = match self.attribution {
            None => RecordSink::Plain(self.format.file_sink(file).map_err(|source| {
                RecordingError::Sink {
                    format: self.format,
                    path: path.clone(),
                    source,
                }
            })?),
            Some(options) => {
                let long = long_format(self.format)?;
                RecordSink::Attributed(Box::new(quietwatt_attribution::open_sink(
                    &options, &self.root, file, long,
                )?))
            }
        };
        let running = events::start(&self.events, &self.root, &path, &meta, &mut |s| {
            progress.events_started(s);
        })?;
        progress.starting(&meter, &self.engine.rate);
        let mut config = self.engine.clone();
        let outcome = match self.bound {
            Bound::Command(mut cmd) => quietwatt::command::record_command(
                &mut meter,
                sink.as_sink(),
                &path,
                &meta,
                &config,
                &mut cmd,
                &mut |e| progress.child(e),
            )
            .map(|(rec, status)| (rec, Some(status))),
            bound => {
                config.duration = match bound {
                    Bound::Duration(d) => Some(d),
                    _ => None,
                };
                quietwatt::record::record(&mut meter, sink.as_sink(), &path, &meta, &config, stop)
                    .map(|rec| (rec, None))
            }
        };
        let (recording, status, error) = match outcome {
            Ok((rec, status)) => (rec, status, None),
            Err(Stopped {
                error,
                kept: Some(rec),
                status,
            }) => (*rec, status, Some(error)),
            Err(Stopped {
                error, kept: None, ..
            }) => return Err(error.into()),
        };
        let events = match running {
            None if !self.events.any() => None,
            running => Some(events::stop(
                running,
                &self.events,
                &path,
                &recording.measurement.energy,
                self.emulated,
            )?),
        };
        Ok(RecordingOutcome {
            recording,
            error,
            status,
            notes,
            format: self.format,
            events,
            attribution: sink.totals().cloned(),
        })
    }

    /// Opens the output first: an unwritable path fails before anything is measured.
    fn open_output(&self) -> Result<OutputFile, RecordingError> {
        let Output::File(p) = &self.output else {
            return OutputFile::stdout().map_err(|source| RecordingError::CreateOutput {
                path: "-".into(),
                source,
            });
        };
        // Parquet writes its footer back into the file: a FIFO would block in open()
        // until a reader came, then fail; refused before opening, as a device is.
        if self.format == Format::Parquet {
            use std::os::unix::fs::FileTypeExt;
            if let Ok(m) = std::fs::metadata(p) {
                let ft = m.file_type();
                if ft.is_fifo() || ft.is_socket() {
                    return Err(RecordingError::OutputIsPipe { path: p.clone() });
                }
            }
        }
        OutputFile::create(p).map_err(|source| RecordingError::CreateOutput {
            path: p.clone(),
            source,
        })
    }
}

/// Attribution's long format for a recording's format.
fn long_format(format: Format) -> Result<LongFormat, RecordingError> {
    match format {
        Format::Csv => Ok(LongFormat::Csv),
        Format::Jsonl => Ok(LongFormat::Jsonl),
        #[allow(unreachable_patterns)]
        format => Err(RecordingError::AttributionFormat { format }),
    }
}

/// The recording's sink: the format's own, or the attribution's long format,
/// whose totals are read after the recording.
enum RecordSink {
    Plain(Box<dyn Sink>),
    Attributed(Box<Attributed<OutputFile>>),
}

impl RecordSink {
    fn as_sink(&mut self) -> &mut dyn Sink {
        match self {
            RecordSink::Plain(s) => s.as_mut(),
            RecordSink::Attributed(s) => s.as_mut(),
        }
    }

    fn totals(&self) -> Option<&Totals> {
        match self {
            RecordSink::Plain(_) => None,
            RecordSink::Attributed(s) => Some(s.transform().totals()),
        }
    }
}

/// A finished recording: the engine's [`Recording`] and what was composed around it.
#[derive(Debug)]
#[non_exhaustive]
pub struct RecordingOutcome {
    /// What the engine measured and wrote (up to the failure, with `error`).
    pub recording: Recording,
    /// What stopped the recording early ([`quietwatt::Error::Output`] for a write:
    /// a full disk, a closed pipe); the output holds every sample before it.
    pub error: Option<quietwatt::Error>,
    /// The command's exit status, for a command's recording.
    pub status: Option<ExitStatus>,
    /// What the counters said while opening.
    pub notes: Vec<String>,
    /// The format written.
    pub format: Format,
    /// The events side, when events or a trace were asked for.
    pub events: Option<EventsOutcome>,
    /// The split's totals, with attribution.
    pub attribution: Option<Totals>,
}

/// Why a recording that stopped early (`error`, with `samples` already written)
/// stopped, and what its output still holds: the words every front end gives,
/// without naming a flag. A full disk (ENOSPC, EDQUOT) names the fix.
pub fn stopped_early(error: &quietwatt::Error, samples: u64) -> String {
    match error {
        quietwatt::Error::Output { path, source } => {
            let holds = format!(
                "{} holds the {samples} samples recorded before it, each complete",
                path.display()
            );
            if matches!(
                source.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) {
                format!(
                    "writing {} failed: the disk is full ({source}); {holds} (whatever the \
                     full disk cut short was removed). Free space on that filesystem, or \
                     record to one with room",
                    path.display()
                )
            } else {
                format!("writing {} failed: {source}; {holds}", path.display())
            }
        }
        e => {
            format!("recording stopped early: {e}; the {samples} samples before it are in the file")
        }
    }
}
