//! `record`'s typed errors (`quietwatt_recording::RecordingError`) in the flags'
//! words, with their exit codes: the messages `record` always printed.

use crate::exit::{Failure, MEASUREMENT, OUTPUT};
use quietwatt_recording::RecordingError;

/// Why the recording could not be composed or run, in the flags' words.
pub fn recording_failure(e: RecordingError) -> Failure {
    match e {
        RecordingError::NotStreamable { format } => Failure::usage(format!(
            "-o - cannot be {format}: a Parquet file's footer is written back into \
             the file after each row group, which a pipe cannot take; give -o \
             FILE.parquet, or --format csv|jsonl for stdout"
        )),
        RecordingError::EventsNeedFile => Failure::usage(
            "--events and --trace read the recording back from its file: give -o FILE, not -o -",
        ),
        RecordingError::EventsWithAttribution => Failure::usage(
            "--events reads the energy rows back from the file, which --attribute replaces \
             with the split: record them in two runs",
        ),
        RecordingError::CommandInKernel { .. } => Failure::usage(
            "record -- CMD works with the polling mechanisms (powercap, perf, msr): leave \
             out --mechanism ebpf/perf-ring, or record without a command",
        ),
        RecordingError::AttributionFormat { format } => Failure::usage(format!(
            "--attribute writes csv or jsonl, not {format}: name the file .csv or .jsonl"
        )),
        RecordingError::DrainRate { hz } => super::inkernel::drain_failure(hz),
        RecordingError::OutputIsPipe { path } => Failure::new(
            OUTPUT,
            format!(
                "{} is a pipe: Parquet needs a regular file it can write back into; record to a file, or write CSV or JSON Lines here",
                path.display()
            ),
        ),
        RecordingError::CreateOutput { path, source } => Failure::new(
            OUTPUT,
            format!(
                "cannot create {}: {source}; choose a writable path with -o",
                path.display()
            ),
        ),
        RecordingError::Sink {
            format,
            path,
            source,
        } => Failure::new(
            OUTPUT,
            format!("cannot write {format} to {}: {source}", path.display()),
        ),
        RecordingError::Mechanism(e) => super::inkernel::choose_failure(e),
        RecordingError::Attribution(e) => super::attribute::failure("--attribute", e),
        RecordingError::Events(e) => e.into(),
        RecordingError::FullTrace(e) => Failure::new(
            MEASUREMENT,
            format!("--full-trace: {e} (the counted events need no BPF ring: drop --full-trace to count only)"),
        ),
        RecordingError::Trace(e) => e.into(),
        RecordingError::TraceInvalid {
            energy,
            count,
            first,
        } => Failure::new(
            MEASUREMENT,
            format!(
                "the trace built from {} breaks the format ({count} problem(s), first: {first}); this is a bug",
                energy.display()
            ),
        ),
        RecordingError::WriteTrace { path, source } => Failure::new(
            OUTPUT,
            format!("writing {} failed: {source}", path.display()),
        ),
        RecordingError::Engine(e) => e.into(),
        e => Failure::new(MEASUREMENT, e.to_string()),
    }
}
