//! The OS events beside a recording (quietwatt-events' recorder): started before
//! the energy engine so that its window covers the energy's, stopped after it,
//! summarised against the energy file, and turned into a Chrome trace on request.

use crate::RecordingError;
use quietwatt::sink::OutputFile;
use quietwatt::{EnergyReport, Hertz, Metadata, SysRoot};
use quietwatt_events::recorder::DEFAULT_HZ;
use quietwatt_events::summary::EventSummary;
use quietwatt_events::trace::{self, EnergyFile, EventsFile};
use quietwatt_events::{full_trace, EventCounters, EventRecorder, EventTotals, Groups};
use std::path::{Path, PathBuf};

/// What to count beside the energy, and where the trace goes.
#[derive(Debug, Clone, PartialEq)]
pub struct EventsOptions {
    /// The groups counted (`None`: no events file, maybe only a trace).
    pub groups: Option<Groups>,
    /// Reads of the event counters per second.
    pub freq: Hertz,
    /// At the end, a Chrome JSON trace of the recording to this file.
    pub trace: Option<PathBuf>,
    /// Also every event one by one, stamped in the kernel, in a ring of this many
    /// bytes (`None`: counted only).
    pub full_trace_ring: Option<usize>,
    /// The true energy per event, when the energy is an emulator's of known power
    /// (0 J for a constant power): set beside each estimate.
    pub true_joules_per_event: Option<f64>,
}

impl Default for EventsOptions {
    fn default() -> Self {
        EventsOptions {
            groups: None,
            freq: Hertz::clamped(DEFAULT_HZ),
            trace: None,
            full_trace_ring: None,
            true_joules_per_event: None,
        }
    }
}

impl EventsOptions {
    /// `groups` counted at the default rate.
    pub fn counting(groups: Groups) -> Self {
        EventsOptions {
            groups: Some(groups),
            ..Self::default()
        }
    }

    /// Whether events or a trace are asked for: both need the recording in a file.
    pub fn any(&self) -> bool {
        self.groups.is_some() || self.trace.is_some()
    }

    /// The files these options write beside the recording `output`, with what
    /// names each (`"events"`, `"trace"`).
    pub fn outputs(&self, output: &Path) -> Vec<(&'static str, PathBuf)> {
        let mut v = Vec::new();
        if self.groups.is_some() {
            v.push(("events", EnergyFile::events_path(output)));
        }
        if let Some(t) = &self.trace {
            v.push(("trace", t.clone()));
        }
        v
    }
}

/// The events thread started: what it counts, for a front end to say.
#[derive(Debug)]
pub struct EventsStarted<'a> {
    /// What the counters said while opening (a group partly unavailable...).
    pub notes: &'a [String],
    /// The groups counted.
    pub groups: Groups,
    /// How many counters.
    pub counters: usize,
    /// At what rate.
    pub freq: Hertz,
    /// The events file.
    pub path: &'a Path,
}

/// A running events thread and where it writes.
pub(crate) struct Running {
    recorder: EventRecorder,
    path: PathBuf,
}

/// The events side of a finished recording.
#[derive(Debug)]
#[non_exhaustive]
pub struct EventsOutcome {
    /// The counts, with the thread's error if it ended early.
    pub totals: Option<EventTotals>,
    /// The events file.
    pub path: Option<PathBuf>,
    /// The summary (rates, energy per event).
    pub summary: Option<EventSummary>,
    /// The Chrome trace written.
    pub trace: Option<PathBuf>,
    /// Lines left out of the trace because the recording ended mid-write:
    /// (file, the cut line).
    pub cut_lines: Vec<(PathBuf, String)>,
}

impl EventsOutcome {
    /// The events thread's error, if it ended early.
    pub fn error(&self) -> Option<&quietwatt_events::EventsError> {
        self.totals.as_ref()?.error.as_ref()
    }
}

/// Opens the counters and starts the events thread, when events are asked for.
pub(crate) fn start(
    options: &EventsOptions,
    root: &SysRoot,
    output: &Path,
    meta: &Metadata,
    said: &mut dyn FnMut(EventsStarted<'_>),
) -> Result<Option<Running>, RecordingError> {
    let Some(groups) = options.groups else {
        return Ok(None);
    };
    let mut counters = EventCounters::open(groups, root, None)?;
    if let Some(ring) = options.full_trace_ring {
        counters
            .enable_full_trace(groups, ring)
            .map_err(RecordingError::FullTrace)?;
    }
    let path = EnergyFile::events_path(output);
    let file = OutputFile::create(&path).map_err(|source| RecordingError::CreateOutput {
        path: path.clone(),
        source,
    })?;
    // The energy file's `units` line describes its own columns, not these.
    let mut fields = meta.fields_except("units");
    fields.push(("events".into(), groups.to_string()));
    fields.push(("events_freq_hz".into(), options.freq.hz().to_string()));
    fields.push(("energy_file".into(), output.display().to_string()));
    let n = counters.channels().len();
    let notes = counters.notes.clone();
    let recorder = EventRecorder::start(counters, file, &fields, options.freq)?;
    said(EventsStarted {
        notes: &notes,
        groups,
        counters: n,
        freq: options.freq,
        path: &path,
    });
    Ok(Some(Running { recorder, path }))
}

/// The default ring of the full trace, in bytes.
pub const DEFAULT_FULL_TRACE_RING: usize = full_trace::DEFAULT_RING_BYTES;

/// Stops the events thread, builds the summary, writes the trace.
pub(crate) fn stop(
    running: Option<Running>,
    options: &EventsOptions,
    output: &Path,
    report: &EnergyReport,
    emulated: bool,
) -> Result<EventsOutcome, RecordingError> {
    let truth = options.true_joules_per_event;
    let (totals, path) = match running {
        Some(r) => (Some(r.recorder.stop()), Some(r.path)),
        None => (None, None),
    };
    let mut summary = totals.as_ref().map(|t| EventSummary::new(t, Some(report)));
    if let (Some(s), Some(p)) = (summary.as_mut(), path.as_ref()) {
        if emulated {
            s.notes.push(
                "the energy is EMULATED: energy per second and per event describe the emulator, not this machine"
                    .into(),
            );
        }
        // The energy file is complete once the engine returned; a format that cannot
        // be read back only loses the per-event estimate.
        match (EnergyFile::read(output), EventsFile::read(p)) {
            (Ok(e), Ok(v)) => {
                let domain = ["package", "psys", "core"]
                    .into_iter()
                    .find(|d| e.rows.iter().any(|r| r.domain == *d))
                    .unwrap_or("package");
                s.energy_per_event = trace::energy_per_event(&e, &v, domain);
                for estimate in &mut s.energy_per_event {
                    estimate.true_joules_per_event = truth;
                }
                if truth.is_some() && !s.energy_per_event.is_empty() {
                    s.notes.push(
                        "the emulator draws a constant power, so the true energy per event is 0 J: an estimate whose interval leaves out 0 is a false positive of the method (about 1 in 20 at 95 %)"
                            .into(),
                    );
                }
                if !s.energy_per_event.is_empty() {
                    s.notes.push(format!(
                        "energy per event uses the {domain} energy of each events window"
                    ));
                }
            }
            (Err(e), _) | (_, Err(e)) => s.notes.push(format!(
                "no energy per event: cannot read the recording back ({e})"
            )),
        }
    }
    let mut cut_lines = Vec::new();
    let trace = match &options.trace {
        Some(t) => {
            cut_lines = write_trace(output, path.as_deref(), t)?;
            Some(t.clone())
        }
        None => None,
    };
    Ok(EventsOutcome {
        totals,
        path,
        summary,
        trace,
        cut_lines,
    })
}

/// Converts an energy file (and its events file, when given) into a Chrome JSON
/// trace at `out`. Returns the lines left out because a file ended mid-write
/// (file, line): the trace has every complete row.
pub fn write_trace(
    energy: &Path,
    events: Option<&Path>,
    out: &Path,
) -> Result<Vec<(PathBuf, String)>, RecordingError> {
    write_trace_with_stacks(energy, events, None, out)
}

/// [`write_trace`], with a profile's stack samples (`quietwatt profile --record`'s
/// `<stem>.stacks.csv`) on per-CPU tracks beside the power.
pub fn write_trace_with_stacks(
    energy: &Path,
    events: Option<&Path>,
    stacks: Option<&Path>,
    out: &Path,
) -> Result<Vec<(PathBuf, String)>, RecordingError> {
    let e = EnergyFile::read(energy)?;
    let v = events.map(EventsFile::read).transpose()?;
    let st = stacks
        .map(quietwatt_events::trace::StacksFile::read)
        .transpose()?;
    let cut = [
        (energy, e.cut_last_line.as_ref()),
        (
            events.unwrap_or(energy),
            v.as_ref().and_then(|f| f.cut_last_line.as_ref()),
        ),
        (
            stacks.unwrap_or(energy),
            st.as_ref().and_then(|f| f.cut_last_line.as_ref()),
        ),
    ];
    let cut_lines: Vec<(PathBuf, String)> = cut
        .into_iter()
        .filter_map(|(p, l)| l.map(|l| (p.to_path_buf(), l.clone())))
        .collect();
    let json = trace::chrome::convert_with_stacks(&e, v.as_ref(), st.as_ref());
    let problems = trace::chrome::validate(&json);
    if let Some(p) = problems.first() {
        return Err(RecordingError::TraceInvalid {
            energy: energy.to_path_buf(),
            count: problems.len(),
            first: p.clone(),
        });
    }
    let create = |source| RecordingError::CreateOutput {
        path: out.to_path_buf(),
        source,
    };
    let file = std::fs::File::create(out).map_err(create)?;
    let mut w = std::io::BufWriter::new(file);
    serde_json::to_writer(&mut w, &json)
        .map_err(std::io::Error::from)
        .and_then(|()| std::io::Write::flush(&mut w))
        .map_err(|source| RecordingError::WriteTrace {
            path: out.to_path_buf(),
            source,
        })?;
    Ok(cut_lines)
}
