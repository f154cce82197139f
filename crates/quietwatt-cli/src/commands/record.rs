//! `quietwatt record -o FILE`: a time series of energy per domain. The flags
//! become `quietwatt-recording`'s typed options once; the library composes the
//! recording (mechanism, sink, events, attribution, command or duration); what is
//! left here is the words and the exit codes.

use super::{parse_duration, rate_words, selection, SamplerArgs};
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT, OUTPUT};
use crate::signals::{install, STOP};
use quietwatt::command::ChildEvent;
use quietwatt::document::RecordDocument;
use quietwatt::record::Recording;
use quietwatt::source::Mode;
use quietwatt::{Format, FreqArg, Mechanism, Meter, Rate};
use quietwatt::{Warning, WarningKind};
use quietwatt_recording::{
    EventsStarted, MechanismRequest, Output, Progress, RecordingBuilder, RecordingOutcome,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `record`.
#[derive(clap::Args)]
pub struct Args {
    /// Output file, replaced if it exists, or `-` for stdout. CSV
    /// (`timestamp_ns,socket,domain,energy_j,power_w,missed,merged,freq_hz,counter`,
    /// metadata as `#` lines), JSON Lines (metadata on the first line) or Parquet
    /// (the same columns, typed; metadata in the key-value metadata), as the
    /// extension says: `.csv`, `.jsonl`, `.parquet`; CSV without an extension and on
    /// stdout.
    #[arg(short, long)]
    output: PathBuf,
    /// Output format, whatever the file's extension: csv, jsonl or parquet
    /// (Parquet needs a file, not stdout).
    #[arg(long)]
    format: Option<Format>,
    /// Samples per second, or `auto` to follow the machine's load between
    /// --freq-min and --freq-max.
    #[arg(short, long, default_value = "100", allow_negative_numbers = true)]
    freq: FreqArg,
    #[command(flatten)]
    sampler: SamplerArgs,
    /// Stop after this long: seconds, or with a unit (500ms, 2m, 1h) (default: until
    /// Ctrl-C or SIGTERM, or the end of the command).
    #[arg(long, value_parser = parse_duration, conflicts_with = "command")]
    duration: Option<Duration>,
    /// Mechanism to read (default: the best that works here).
    #[arg(short, long)]
    mechanism: Option<Mechanism>,
    /// Domains to record, comma-separated (default: all).
    #[arg(short, long)]
    domains: Option<String>,
    /// Print the summary as one JSON object on stdout (with an `overhead` object).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    events: super::events::RecordEventsArgs,
    #[command(flatten)]
    in_kernel: super::inkernel::InKernelArgs,
    #[command(flatten)]
    estimate: super::estimate::EstimateArgs,
    #[command(flatten)]
    attribution: super::attribute::RecordArgs,
    /// A command to run: the recording covers it, from just before its start to
    /// its end, and quietwatt exits with its exit code (signals sent to quietwatt
    /// are passed on to it, as `run` does). With `-o -` the command's stdout goes
    /// to stderr, so that stdout holds the recording alone.
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

impl Args {
    /// Whether the recording goes to stdout (`-o -`).
    fn to_stdout(&self) -> bool {
        self.output.as_os_str() == "-"
    }

    /// The format: `--format`, else the file's extension, else CSV; an extension
    /// of no format is refused.
    fn format(&self) -> Result<Format, Failure> {
        if let Some(f) = self.format {
            return Ok(f);
        }
        if self.to_stdout() {
            return Ok(Format::Csv);
        }
        match Format::from_extension(&self.output) {
            Ok(f) => Ok(f.unwrap_or(Format::Csv)),
            Err(e) => Err(Failure::usage(format!(
                "-o {}: '.{}' is not a format quietwatt writes (csv, jsonl, parquet): name \
                 the file .csv, .jsonl or .parquet, or give --format csv|jsonl|parquet to \
                 keep this name",
                self.output.display(),
                e.0
            ))),
        }
    }

    /// The library's typed options for these flags, given once (the root and
    /// what depends on the environment are added by [`run`]).
    fn builder(&self) -> Result<RecordingBuilder, Failure> {
        let output = if self.to_stdout() {
            Output::Stdout
        } else {
            Output::File(self.output.clone())
        };
        let mut b = RecordingBuilder::new()
            .mechanism(MechanismRequest::from(self.mechanism))
            .domains(selection(&self.domains)?)
            .drain_hz(self.in_kernel.drain_hz)
            .stand_in_events(self.in_kernel.stand_in_events)
            .output(output, self.format()?)
            .events(self.events.options(None))
            .power_model(self.estimate.choice());
        if let Some(options) = self.attribution.options() {
            b = b.attribution(options);
        }
        if let Some(d) = self.duration {
            b = b.duration(d);
        }
        if let Some((program, rest)) = self.command.split_first() {
            let mut cmd = std::process::Command::new(program);
            cmd.args(rest);
            if self.to_stdout() {
                // stdout carries the recording: the command's output would be mixed
                // into its rows. It goes to quietwatt's stderr instead.
                use std::os::fd::AsFd;
                let err = std::io::stderr()
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(|e| {
                        Failure::new(OUTPUT, format!("cannot pass stderr to the command: {e}"))
                    })?;
                cmd.stdout(std::process::Stdio::from(err));
            }
            b = b.command(cmd);
        }
        Ok(b)
    }

    /// Checks what can be checked before anything is mounted or measured.
    pub fn check(&self) -> Result<(), Failure> {
        let format = self.format()?;
        if self.to_stdout() && format.streams() && self.json {
            return Err(Failure::usage(
                "-o - writes the recording to stdout: --json would print the summary into it; \
                 leave out --json (the summary goes to stderr) or record to a file",
            ));
        }
        if !self.to_stdout() {
            let beside = self.events.outputs(&self.output);
            let mut outputs = vec![("-o", self.output.as_path())];
            outputs.extend(beside.iter().map(|(f, p)| (*f, p.as_path())));
            super::distinct_files(&[], &outputs)?;
        }
        self.builder()?
            .validate()
            .map_err(super::record_errors::recording_failure)
    }

    /// The output's name in messages.
    fn output_name(&self) -> String {
        if self.to_stdout() {
            "stdout".into()
        } else {
            self.output.display().to_string()
        }
    }
}

/// Records until the duration ends or a signal arrives; the file stays complete.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    args.check()?;
    let format = args.format()?;
    let mut config = args.sampler.config(args.freq, &env.root)?;
    config.duration = args.duration;
    // Against an emulator of constant power the energy per event is known: 0 J.
    let truth = env.constant_emulator().map(|_| 0.0);
    let builder = args
        .builder()?
        .root(env.root.clone())
        .engine(config.clone())
        .emulated(env.is_emulated())
        .events(args.events.options(truth));
    let mut progress = Said { args: &args };
    let done = builder
        .run(&STOP, &mut progress)
        .map_err(super::record_errors::recording_failure)?;
    let RecordingOutcome {
        recording: rec,
        status,
        mut error,
        notes,
        events,
        attribution,
        ..
    } = done;
    if args.to_stdout() && error.as_ref().is_some_and(broken_pipe) {
        // The reader of `-o -` went away (`| head`): the way such a recording ends.
        error = None;
    }
    if let Some(e) = &events {
        super::events::warn_cut(&e.cut_lines);
    }
    let m = &rec.measurement;
    if args.json {
        // Every warning is in the document too; stderr says them as the table does.
        for w in m.warnings() {
            eprintln!("quietwatt: warning: {w}");
        }
    }
    if let Some(o) = &rec.output_short {
        eprintln!("quietwatt: warning: {}", output_short_text(&rec, o));
    }
    if args.json {
        let mut doc = RecordDocument::new(
            &rec,
            args.output.display().to_string(),
            format.name(),
            env.is_emulated(),
            &config.rate,
            error.as_ref().map(|e| stopped_early(e, rec.samples)),
        );
        if let Some(o) = &rec.output_short {
            doc.report
                .warnings
                .push(Warning::new(WarningKind::Setup, output_short_text(&rec, o)));
        }
        doc.notes = Some(notes.clone());
        doc.exit_code = status.map(super::exit_code);
        let doc = doc.with(RecordExtras {
            events: events
                .as_ref()
                .map(super::events::json_fields)
                .unwrap_or_default(),
            attribution: attribution
                .as_ref()
                .map(|t| super::attribute::json_top(t, 10)),
        });
        println!("{}", crate::schema::to_json(&doc));
    } else {
        crate::commands::run::print_report(
            &if args.command.is_empty() {
                args.output_name()
            } else {
                args.command.join(" ")
            },
            &m.energy,
            &config.rate,
            env.is_emulated(),
        );
        let missed = m.overhead.as_ref().map_or(0, |o| o.missed_deadlines);
        match &m.kernel {
            None => eprintln!(
                "  {} samples written, {missed} deadline(s) missed",
                rec.samples
            ),
            Some(_) => eprintln!(
                "  {} samples written, {missed} lost in the kernel (their energy is in the next sample)",
                rec.samples
            ),
        }
        if let Some(o) = &m.overhead {
            eprintln!("{o}");
        }
        if let Some(k) = &m.kernel {
            eprintln!("{k}");
        }
        if let Some(t) = &attribution {
            super::attribute::print_top(t, 10);
        }
        if let Some(e) = &events {
            super::events::print(e);
        }
    }
    if let Some(e) = &error {
        return Err(failure(e, rec.samples));
    }
    if let Some(f) = events.as_ref().and_then(super::events::error) {
        return Err(f);
    }
    // The command's exit code, as `run` passes it on.
    Ok(status.map_or(ExitCode::SUCCESS, |s| {
        ExitCode::from(super::exit_code(s).clamp(0, 255) as u8)
    }))
}

/// What `record` says on stderr as the library opens and starts the recording.
struct Said<'a> {
    args: &'a Args,
}

impl Progress for Said<'_> {
    fn opened(&mut self, meter: &Meter, fallback: Option<(Mechanism, &str)>) {
        if let Some((m, reason)) = fallback {
            super::inkernel::warn_fallback(m, reason);
        }
        super::print_notes(meter);
    }

    fn events_started(&mut self, started: EventsStarted<'_>) {
        super::events::print_started(&started);
    }

    fn starting(&mut self, meter: &Meter, rate: &Rate) {
        install();
        let args = self.args;
        let how = match meter.mode() {
            Mode::Polled => format!("through {} at {}", meter.mechanism(), rate_words(rate)),
            Mode::Buffered { drain, .. } => format!(
                "sampled in the kernel ({}) at {}, drained at {} Hz,",
                meter.mechanism(),
                rate_words(rate),
                drain.hz()
            ),
        };
        eprintln!(
            "quietwatt: recording {} domain(s) {how} to {} ({}){}",
            meter.channels().len(),
            args.output_name(),
            args.format().unwrap_or_default(),
            if !args.command.is_empty() {
                format!(" while '{}' runs", args.command.join(" "))
            } else if args.duration.is_none() {
                " until Ctrl-C".into()
            } else {
                String::new()
            }
        );
    }

    fn child(&mut self, event: ChildEvent) {
        crate::signals::forward_to_command(event);
    }
}

/// A write that failed because the reader of a pipe went away.
fn broken_pipe(e: &quietwatt::Error) -> bool {
    matches!(e, quietwatt::Error::Output { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Why a recording stopped early, what the file holds, and what to do: for every
/// mechanism, on stderr and in the `--json` summary alike.
pub(super) fn stopped_early(e: &quietwatt::Error, samples: u64) -> String {
    let text = quietwatt_recording::stopped_early(e, samples);
    match e {
        quietwatt::Error::Output { source, .. } if disk_full(source) => format!("{text} (-o)"),
        _ => text,
    }
}

/// The exit of a recording that stopped early ([`stopped_early`]).
pub(super) fn failure(e: &quietwatt::Error, samples: u64) -> Failure {
    let code = match e {
        quietwatt::Error::Output { .. } => OUTPUT,
        _ => MEASUREMENT,
    };
    Failure::new(code, stopped_early(e, samples))
}

/// No room left: the disk (ENOSPC) or the user's quota (EDQUOT).
fn disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// What the CLI adds to `record --json` beside the engine's [`RecordDocument`].
#[derive(serde::Serialize)]
struct RecordExtras<'a> {
    /// `record --events`: the summary and the files.
    #[serde(flatten)]
    events: super::events::EventsFields<'a>,
    /// `record --attribute`: the split's totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    attribution: Option<quietwatt_attribution::AttributionTotals>,
}

/// What a file cut short holds against what was measured: the summary's figures
/// cover the whole measurement, the file less.
pub(super) fn output_short_text(rec: &Recording, o: &quietwatt::record::OutputContent) -> String {
    let per_domain: Vec<String> = rec
        .measurement
        .energy
        .domains
        .iter()
        .zip(&o.energy)
        .map(|(d, e)| {
            format!(
                "{}/{} {:.3} of {:.3} J",
                d.socket, d.domain, e.0, d.energy_j.0
            )
        })
        .collect();
    format!(
        "the output holds {:.3} s of the {:.3} s measured ({}); the summary's figures cover the whole measurement",
        o.duration.as_secs_f64(),
        rec.measurement.energy.duration_s,
        per_domain.join(", ")
    )
}
