//! `quietwatt record -o FILE`: a time series of energy per domain.

use super::{append_warnings, parse_duration, rate_words, selection, SamplerArgs};
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT, OUTPUT};
use crate::signals::{install, STOP};
use quietwatt::record::{record, Recording};
use quietwatt::sink::OutputFile;
use quietwatt::{Format, FreqArg, Mechanism, Metadata, Meter, Rate};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `record`.
#[derive(clap::Args)]
pub struct Args {
    /// Output file (CSV: `timestamp_ns,socket,domain,energy_j,power_w,missed,merged,freq_hz`,
    /// metadata as `#` lines; JSON Lines: metadata on the first line).
    #[arg(short, long)]
    output: PathBuf,
    /// Output format: csv or jsonl.
    #[arg(long, default_value = "csv")]
    format: Format,
    /// Samples per second, or `auto` to follow the machine's load between
    /// --freq-min and --freq-max.
    #[arg(short, long, default_value = "100")]
    freq: FreqArg,
    #[command(flatten)]
    sampler: SamplerArgs,
    /// Stop after this many seconds (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_parser = parse_duration)]
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
}

/// Records until the duration ends or a signal arrives; the file stays complete.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    let mut config = args.sampler.config(args.freq, &env.root)?;
    config.duration = args.duration;
    // Open the output first: an unwritable path fails before anything is measured.
    let file = OutputFile::create(&args.output).map_err(|e| {
        Failure::new(
            OUTPUT,
            format!(
                "cannot create {}: {e}; choose a writable path with -o",
                args.output.display()
            ),
        )
    })?;
    let mut storage = quietwatt::inkernel::Storage::new();
    let opened = super::inkernel::open(
        &mut storage,
        env,
        args.mechanism,
        &args.in_kernel,
        args.freq,
        &selection(&args.domains)?,
    )?;
    let source = match opened {
        super::inkernel::Opened::Polling(source) => source,
        super::inkernel::Opened::InKernel(sampler) => {
            let a = super::inkernel::RecordArgs {
                output: &args.output,
                format: args.format,
                file,
                freq: args.freq,
                sampler: &args.sampler,
                duration: args.duration,
                json: args.json,
                events: &args.events,
                in_kernel: &args.in_kernel,
            };
            return super::inkernel::record(env, sampler, a);
        }
    };
    let mut meter = Meter::new(source);
    crate::commands::run::print_notes(&meter);
    if let Rate::Fixed(f) = config.rate {
        for w in meter.wrap_warnings(f.period()) {
            eprintln!("quietwatt: warning: {w}");
        }
    }
    let mut meta = Metadata::new(meter.mechanism().name(), &config.rate, &env.root);
    meta.push("emulated", env.is_emulated().to_string());
    meta.push("root", env.root.dir().display().to_string());
    let mut sink = args.format.sink(file);
    let events = super::events::start(env, &args.events, &args.output, &meta)?;
    install();
    eprintln!(
        "quietwatt: recording {} domain(s) through {} at {} to {} ({}){}",
        meter.channels().len(),
        meter.mechanism(),
        rate_words(&config.rate),
        args.output.display(),
        args.format,
        if args.duration.is_none() {
            " until Ctrl-C"
        } else {
            ""
        }
    );
    let rec = record(
        &mut meter,
        sink.as_mut(),
        &args.output,
        &meta,
        &config,
        &STOP,
    )?;
    let events = super::events::stop(events, &args.events, &args.output, &rec.report, env)?;
    for w in &rec.warnings {
        eprintln!("quietwatt: warning: {w}");
    }
    if args.json {
        let mut v = summary_json(
            &rec,
            &args.output,
            args.format,
            env.is_emulated(),
            &config.rate,
        );
        events.add_json(&mut v);
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        crate::commands::run::print_report(
            &args.output.display().to_string(),
            &rec.report,
            &config.rate,
            env.is_emulated(),
        );
        eprintln!(
            "  {} samples written, {} deadline(s) missed",
            rec.samples, rec.missed_deadlines
        );
        eprintln!("{}", rec.overhead);
        events.print();
    }
    match &rec.error {
        None => events.error().map_or(Ok(ExitCode::SUCCESS), Err),
        Some(e) => Err(failure(e, rec.samples)),
    }
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

/// The `--json` summary of a recording, as `record` prints it for every mechanism
/// (the in-kernel ones add their kernel-side figures).
pub(super) fn summary_json(
    rec: &Recording,
    output: &Path,
    format: Format,
    emulated: bool,
    rate: &Rate,
) -> serde_json::Value {
    let mut v = serde_json::to_value(&rec.report).unwrap_or_default();
    v["output"] = output.display().to_string().into();
    v["format"] = format.name().into();
    v["emulated"] = emulated.into();
    v["freq"] = rate.to_string().into();
    v["samples"] = rec.samples.into();
    v["overhead"] = serde_json::to_value(&rec.overhead).unwrap_or_default();
    append_warnings(&mut v, &rec.warnings);
    if let Some(e) = &rec.error {
        v["error"] = stopped_early(e, rec.samples).into();
    }
    v
}
