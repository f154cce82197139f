//! Why a recording could not be composed or run: typed, with no wording of any
//! front end's flags (the CLI and Python word them).

use quietwatt::source::choose::ChooseError;
use quietwatt::Format;
use std::path::PathBuf;

/// Why a recording did not start, or ended without anything to show.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// Parquet cannot stream to stdout: its footer is written back into the file.
    #[error("{format} cannot be written to stdout: it is written back into its file")]
    NotStreamable {
        /// The format asked for.
        format: Format,
    },
    /// Events and traces read the recording back from its file.
    #[error("events and traces read the recording back from its file: record to a file")]
    EventsNeedFile,
    /// Events read the energy rows back, which attribution replaces with its split.
    #[error(
        "events read the energy rows back from the file, which attribution replaces with its split"
    )]
    EventsWithAttribution,
    /// A command's recording is driven by a polled sampler.
    #[error(
        "a command is recorded through a polling mechanism (powercap, perf, msr), not {mechanism}"
    )]
    CommandInKernel {
        /// The in-kernel mechanism asked for.
        mechanism: quietwatt::Mechanism,
    },
    /// Attribution writes its long format in CSV or JSON Lines only.
    #[error("attribution writes csv or jsonl, not {format}")]
    AttributionFormat {
        /// The format asked for.
        format: Format,
    },
    /// The drain rate is not a rate quietwatt can keep.
    #[error("invalid drain rate {hz} Hz")]
    DrainRate {
        /// What was given.
        hz: f64,
    },
    /// Parquet needs a regular file it can write back into.
    #[error("{} is a pipe: Parquet needs a regular file", path.display())]
    OutputIsPipe {
        /// The output.
        path: PathBuf,
    },
    /// The output could not be created.
    #[error("cannot create {}: {source}", path.display())]
    CreateOutput {
        /// The output.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The format's sink refused the file (Parquet on something not a regular file).
    #[error("cannot write {format} to {}: {source}", path.display())]
    Sink {
        /// The format.
        format: Format,
        /// The output.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No source opened.
    #[error(transparent)]
    Mechanism(#[from] ChooseError),
    /// The attribution could not open (no BPF support, no topology).
    #[error(transparent)]
    Attribution(#[from] quietwatt_attribution::AttributionError),
    /// The events could not open or start.
    #[error(transparent)]
    Events(#[from] quietwatt_events::EventsError),
    /// The full trace of the events could not open.
    #[error("full trace: {0}")]
    FullTrace(#[source] quietwatt_events::EventsError),
    /// The trace could not be built from the files.
    #[error(transparent)]
    Trace(#[from] quietwatt_events::trace::TraceError),
    /// The trace built breaks the Chrome trace format: a bug.
    #[error("the trace built from {} breaks the format ({count} problem(s), first: {first})", energy.display())]
    TraceInvalid {
        /// The energy file.
        energy: PathBuf,
        /// How many problems.
        count: usize,
        /// The first.
        first: String,
    },
    /// The trace could not be written.
    #[error("writing {} failed: {source}", path.display())]
    WriteTrace {
        /// The trace file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The engine failed before anything was measured.
    #[error(transparent)]
    Engine(#[from] quietwatt::Error),
}
