//! `quietwatt trace FILE -o trace.json`: a recording as a Chrome JSON trace (power
//! counters per domain, event rates and C-state residency per CPU, slices and
//! instants for events traced one by one, a profile's stack samples), for Perfetto
//! UI or chrome://tracing.

use crate::exit::Failure;
use quietwatt_events::trace::{EnergyFile, StacksFile};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `trace`.
#[derive(clap::Args)]
pub struct Args {
    /// Energy file written by `quietwatt record` (CSV, JSON Lines or Parquet).
    input: PathBuf,
    /// The trace to write (Chrome JSON, Trace Event Format's JSON Object Format).
    #[arg(short, long)]
    output: PathBuf,
    /// Events file of the same recording (default: INPUT's `<stem>.events.csv` when
    /// it exists).
    #[arg(long)]
    events: Option<PathBuf>,
    /// Stack samples of a profile (`quietwatt profile --record`) on per-CPU tracks
    /// (default: INPUT's `<stem>.stacks.csv` when it exists).
    #[arg(long)]
    stacks: Option<PathBuf>,
}

/// Converts and writes the trace; the JSON is checked against the format first.
pub fn run(args: Args) -> Result<ExitCode, Failure> {
    let events = args.events.or_else(|| {
        let p = EnergyFile::events_path(&args.input);
        p.exists().then_some(p)
    });
    let stacks = args.stacks.or_else(|| {
        let p = StacksFile::path_beside(&args.input);
        p.exists().then_some(p)
    });
    let mut inputs = vec![("INPUT", args.input.as_path())];
    if let Some(e) = &events {
        inputs.push(("--events", e.as_path()));
    }
    if let Some(s) = &stacks {
        inputs.push(("--stacks", s.as_path()));
    }
    super::distinct_files(&inputs, &[("-o", args.output.as_path())])?;
    super::events::write_trace(
        &args.input,
        events.as_deref(),
        stacks.as_deref(),
        &args.output,
    )?;
    eprintln!(
        "quietwatt: wrote {} from {}{} (open it in ui.perfetto.dev or chrome://tracing)",
        args.output.display(),
        args.input.display(),
        events
            .iter()
            .chain(&stacks)
            .map(|e| format!(" and {}", e.display()))
            .collect::<String>()
    );
    Ok(ExitCode::SUCCESS)
}
