//! `quietwatt record -o FILE`: a time series of energy per domain.

use super::{parse_duration, rate_words, selection, SamplerArgs};
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT, OUTPUT};
use crate::signals::{install, STOP};
use quietwatt::document::RecordDocument;
use quietwatt::record::{record, Recording, Stopped};
use quietwatt::sink::OutputFile;
use quietwatt::source::Mode;
use quietwatt::{Format, FreqArg, Mechanism, Metadata, Meter};
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
    /// Stop after this many seconds (default: until Ctrl-C or SIGTERM, or the end
    /// of the command).
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

    /// Checks what can be checked before anything is mounted or measured.
    pub fn check(&self) -> Result<(), Failure> {
        let format = self.format()?;
        if self.to_stdout() {
            if !format.streams() {
                return Err(Failure::usage(format!(
                    "-o - cannot be {format}: a Parquet file's footer is written back into \
                     the file after each row group, which a pipe cannot take; give -o \
                     FILE.parquet, or --format csv|jsonl for stdout"
                )));
            }
            if self.json {
                return Err(Failure::usage(
                    "-o - writes the recording to stdout: --json would print the summary into it; \
                     leave out --json (the summary goes to stderr) or record to a file",
                ));
            }
            if self.events.any() {
                return Err(Failure::usage(
                    "--events and --trace read the recording back from its file: give -o FILE, not -o -",
                ));
            }
        }
        if !self.to_stdout() {
            let beside = self.events.outputs(&self.output);
            let mut outputs = vec![("-o", self.output.as_path())];
            outputs.extend(beside.iter().map(|(f, p)| (*f, p.as_path())));
            super::distinct_files(&[], &outputs)?;
        }
        if self.attribution.attribute.is_some() && self.events.any() {
            return Err(Failure::usage(
                "--events reads the energy rows back from the file, which --attribute replaces \
                 with the split: record them in two runs",
            ));
        }
        if !self.command.is_empty()
            && matches!(self.mechanism, Some(Mechanism::Ebpf | Mechanism::PerfRing))
        {
            return Err(Failure::usage(
                "record -- CMD works with the polling mechanisms (powercap, perf, msr): leave \
                 out --mechanism ebpf/perf-ring, or record without a command",
            ));
        }
        Ok(())
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
    // Parquet writes its footer back into the file: a FIFO would block in open()
    // until a reader came, then fail; refused before opening, as a device is.
    if format == Format::Parquet && !args.to_stdout() {
        use std::os::unix::fs::FileTypeExt;
        if let Ok(m) = std::fs::metadata(&args.output) {
            let ft = m.file_type();
            if ft.is_fifo() || ft.is_socket() {
                return Err(Failure::new(
                    OUTPUT,
                    format!(
                        "{} is a pipe: Parquet needs a regular file it can write back into; record to a file, or write CSV or JSON Lines here",
                        args.output.display()
                    ),
                ));
            }
        }
    }
    // Open the output first: an unwritable path fails before anything is measured.
    let file = if args.to_stdout() {
        OutputFile::stdout()
    } else {
        OutputFile::create(&args.output)
    };
    let file = file.map_err(|e| {
        Failure::new(
            OUTPUT,
            format!(
                "cannot create {}: {e}; choose a writable path with -o",
                args.output.display()
            ),
        )
    })?;
    let source = super::inkernel::open(
        env,
        args.mechanism,
        &args.in_kernel,
        args.freq,
        &selection(&args.domains)?,
    )?;
    let mut meter = Meter::new(source);
    super::print_notes(&meter);
    // What stderr says about the counters goes into the JSON too.
    let notes = meter.notes().to_vec();
    // A fixed rate at which a counter could wrap twice unseen is raised by the
    // engine, with a warning in the summary and the JSON.
    let mut meta = Metadata::new(meter.label(), &config.rate, &env.root);
    meta.push("emulated", env.is_emulated().to_string());
    meta.push("root", env.root.dir().display().to_string());
    super::inkernel::push_meta(&mut meta, meter.mode(), &args.in_kernel);
    let mut sink =
        super::attribute::record_sink(&args.attribution, env, file, format, &args.output)?;
    let events = super::events::start(env, &args.events, &args.output, &meta)?;
    install();
    let how = match meter.mode() {
        Mode::Polled => format!(
            "through {} at {}",
            meter.mechanism(),
            rate_words(&config.rate)
        ),
        Mode::Buffered { drain, .. } => format!(
            "sampled in the kernel ({}) at {}, drained at {} Hz,",
            meter.mechanism(),
            rate_words(&config.rate),
            drain.hz()
        ),
    };
    eprintln!(
        "quietwatt: recording {} domain(s) {how} to {} ({}){}",
        meter.channels().len(),
        args.output_name(),
        format,
        if !args.command.is_empty() {
            format!(" while '{}' runs", args.command.join(" "))
        } else if args.duration.is_none() {
            " until Ctrl-C".into()
        } else {
            String::new()
        }
    );
    let outcome = if args.command.is_empty() {
        record(
            &mut meter,
            sink.as_sink(),
            &args.output,
            &meta,
            &config,
            &STOP,
        )
        .map(|rec| (rec, None))
    } else {
        let mut cmd = std::process::Command::new(&args.command[0]);
        cmd.args(&args.command[1..]);
        if args.to_stdout() {
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
        quietwatt::command::record_command(
            &mut meter,
            sink.as_sink(),
            &args.output,
            &meta,
            &config,
            &mut cmd,
            &mut crate::signals::forward_to_command,
        )
        .map(|(rec, status)| (rec, Some(status)))
    };
    // A recording that failed part-way is summarised from what it kept, then its
    // error is the exit.
    let (rec, status, mut error) = match outcome {
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
    if args.to_stdout() && error.as_ref().is_some_and(broken_pipe) {
        // The reader of `-o -` went away (`| head`): the way such a recording ends.
        error = None;
    }
    let events = super::events::stop(events, &args.events, &args.output, &rec.report, env)?;
    for w in &rec.warnings {
        eprintln!("quietwatt: warning: {w}");
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
            doc.report.warnings.push(output_short_text(&rec, o));
        }
        doc.notes = Some(notes.clone());
        doc.exit_code = status.map(super::exit_code);
        let doc = doc.with(RecordExtras {
            events: events.json_fields(),
            attribution: sink.totals().map(|t| super::attribute::json_top(t, 10)),
        });
        println!("{}", crate::schema::to_json(&doc));
    } else {
        crate::commands::run::print_report(
            &if args.command.is_empty() {
                args.output_name()
            } else {
                args.command.join(" ")
            },
            &rec.report,
            &config.rate,
            env.is_emulated(),
        );
        match &rec.kernel {
            None => eprintln!(
                "  {} samples written, {} deadline(s) missed",
                rec.samples, rec.missed_deadlines
            ),
            Some(_) => eprintln!(
                "  {} samples written, {} lost in the kernel (their energy is in the next sample)",
                rec.samples, rec.missed_deadlines
            ),
        }
        eprintln!("{}", rec.overhead);
        if let Some(k) = &rec.kernel {
            eprintln!("{k}");
        }
        if let Some(t) = sink.totals() {
            super::attribute::print_top(t, 10);
        }
        events.print();
    }
    if let Some(e) = &error {
        return Err(failure(e, rec.samples));
    }
    if let Some(f) = events.error() {
        return Err(f);
    }
    // The command's exit code, as `run` passes it on.
    Ok(status.map_or(ExitCode::SUCCESS, |s| {
        ExitCode::from(super::exit_code(s).clamp(0, 255) as u8)
    }))
}

/// A write that failed because the reader of a pipe went away.
fn broken_pipe(e: &quietwatt::Error) -> bool {
    matches!(e, quietwatt::Error::Output { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Why a recording stopped early, what the file holds, and what to do: for every
/// mechanism, on stderr and in the `--json` summary alike.
pub(super) fn stopped_early(e: &quietwatt::Error, samples: u64) -> String {
    match e {
        quietwatt::Error::Output { path, source } => {
            let holds = format!(
                "{} holds the {samples} samples recorded before it, each complete",
                path.display()
            );
            if disk_full(source) {
                format!(
                    "writing {} failed: the disk is full ({source}); {holds} (whatever the \
                     full disk cut short was removed). Free space on that filesystem, or \
                     record to one with room (-o)",
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
        .report
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
        rec.report.duration_s,
        per_domain.join(", ")
    )
}
