//! `quietwatt run -- CMD`: the energy of one command.

use super::{rate_words, selection, MeterArgs};
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT, NO_RAPL, OUTPUT};
use quietwatt::command::measure_watched;
use quietwatt::document::RunDocument;
use quietwatt::source::Mode;
use quietwatt::{EnergyReport, FreqArg, Hertz, Meter, Rate};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

/// Arguments of `run`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    meter: MeterArgs,
    /// Print one JSON object (with an `overhead` object) instead of the table: on
    /// stdout, after whatever the command printed there (give `-o FILE` to keep
    /// them apart).
    #[arg(long)]
    json: bool,
    /// Write the report (the table, or the `--json` object) to FILE instead of
    /// stderr or stdout, as `perf stat -o`: the command's own output stays alone on
    /// its streams. Warnings still go to stderr.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        conflicts_with = "repeat"
    )]
    output: Option<std::path::PathBuf>,
    /// Fail (exit 69) when no mechanism can measure here, instead of running the
    /// command and reporting its energy as `<not supported>` (a --mechanism named
    /// that cannot open always fails).
    #[arg(long)]
    require_energy: bool,
    #[command(flatten)]
    in_kernel: super::inkernel::InKernelArgs,
    #[command(flatten)]
    attribution: super::attribute::RunArgs,
    /// Price the command's page faults and context switches (perf software counters
    /// on it and its children) with this model from `quietwatt model`, reported
    /// beside the energy as model estimates.
    #[arg(long, value_name = "FILE")]
    model: Option<std::path::PathBuf>,
    /// Run the command N times and print each domain's and the total's energy and
    /// the duration as mean ± standard deviation, 95 % interval, min and max (as
    /// `perf stat -r`; the runs' output is let through).
    /// `--runs` is the same flag (as in `compare`); each run prints one line, then
    /// the summary `compare` prints.
    #[arg(short = 'r', long = "repeat", visible_alias = "runs", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    repeat: Option<u32>,
    /// With --repeat: run the command K times unmeasured first.
    #[arg(short = 'w', long, value_name = "K", requires = "repeat")]
    warmup: Option<u32>,
    /// With --repeat: go on when a run exits non-zero (the exit code is then the
    /// first failing run's).
    #[arg(short = 'i', long, requires = "repeat")]
    ignore_failure: bool,
    /// With --repeat: also write the results (the `--json` object) to FILE.
    #[arg(long, value_name = "FILE", requires = "repeat")]
    export_json: Option<std::path::PathBuf>,
    /// With --repeat: also write one row per run (time, energies) to FILE.
    #[arg(long, value_name = "FILE", requires = "repeat")]
    export_csv: Option<std::path::PathBuf>,
    /// With --repeat: also write the summary as a Markdown table to FILE.
    #[arg(long, value_name = "FILE", requires = "repeat")]
    export_markdown: Option<std::path::PathBuf>,
    /// With --repeat: run this shell command (sh -c) before each run, unmeasured (clear
    /// a cache, reset a file), as hyperfine's --prepare.
    #[arg(long, value_name = "CMD", requires = "repeat")]
    prepare: Option<String>,
    /// Read through the local reader service listening at PATH (`quietwatt
    /// serve --socket`), as a user without access to the counters does. Without
    /// it, that happens only where the counters cannot be opened here, through
    /// the service at $QUIETWATT_SOCKET or /run/quietwatt/reader.sock.
    #[arg(long, value_name = "PATH", conflicts_with = "mechanism")]
    socket: Option<std::path::PathBuf>,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Runs the command, prints its energy, exits with its exit code.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    let inputs: Vec<(&str, &std::path::Path)> = args
        .model
        .iter()
        .map(|p| ("--model", p.as_path()))
        .collect();
    // Checked before anything runs (the single run exports too).
    super::exports::checked(
        &inputs,
        &[
            ("-o", args.output.as_deref()),
            ("--export-json", args.export_json.as_deref()),
            ("--export-csv", args.export_csv.as_deref()),
            ("--export-markdown", args.export_markdown.as_deref()),
        ],
    )?;
    if let Some(runs) = args.repeat {
        if args.attribution.attribute {
            return Err(Failure::usage(
                "--attribute reports one run's share: leave out --repeat, or leave out --attribute",
            ));
        }
        if args.model.is_some() {
            return Err(Failure::usage(
                "--model prices one run: leave out --repeat, or leave out --model",
            ));
        }
        return super::repeat::run(
            env,
            super::repeat::RepeatArgs {
                runs,
                warmup: args.warmup.unwrap_or(0),
                meter: &args.meter,
                json: args.json,
                export_json: args.export_json.as_deref(),
                export_csv: args.export_csv.as_deref(),
                export_markdown: args.export_markdown.as_deref(),
                prepare: args.prepare.as_deref(),
                ignore_failure: args.ignore_failure,
                command: &args.command,
            },
        );
    }
    let in_kernel_freq = FreqArg::Fixed(Hertz::clamped(super::inkernel::DEFAULT_RUN_HZ));
    let selection = selection(&args.meter.domains)?;
    let opened = match &args.socket {
        Some(path) => super::serve_reader::connect(path, &selection, args.meter.freq),
        None => super::inkernel::open(
            env,
            args.meter.mechanism,
            &args.in_kernel,
            args.meter.freq.unwrap_or(in_kernel_freq),
            &selection,
        )
        .and_then(|opened| match opened {
            Ok(s) => Ok((s, false)),
            // Refused here: the reader service, else the model's estimate.
            Err(local) => super::fallback::instead(
                local,
                args.meter.mechanism,
                &selection,
                args.meter.freq,
                &args.meter.estimate,
                &env.root,
            ),
        }),
    };
    let (source, via_emulator) = match opened {
        Ok(opened) => opened,
        // perf stat's habit: the command runs all the same, its energy unsupported
        // (a mechanism asked for by name that cannot open stays an error).
        Err(f) if f.code() == NO_RAPL && args.meter.mechanism.is_none() && !args.require_energy => {
            return run_unmeasured(&args, f)
        }
        Err(f) => return Err(f),
    };
    let buffered = matches!(source.mode(), Mode::Buffered { .. });
    if buffered && args.model.is_some() {
        return Err(Failure::usage(
            "--model works with the polling mechanisms (powercap, perf, msr): leave out --mechanism ebpf/perf-ring",
        ));
    }
    let mut meter = Meter::new(source);
    super::print_notes(&meter);
    // What stderr says about the counters goes into the JSON too.
    let notes = meter.notes().to_vec();
    let freq = match meter.mode() {
        // The kernel's rate, set when the source was opened.
        Mode::Buffered { freq, .. } => FreqArg::Fixed(freq),
        Mode::Polled => args
            .meter
            .freq
            .unwrap_or_else(|| FreqArg::Fixed(super::default_freq(&meter))),
    };
    let config = args.meter.sampler.config(freq, &env.root)?;
    // A fixed rate at which a counter could wrap twice unseen is raised by the
    // engine, with a warning in the summary and the JSON.
    let mut cmd = std::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    crate::signals::install();
    // Opened here, on the thread that spawns the command: see Attributor::open.
    let attributor = match &args.model {
        Some(p) => Some(
            quietwatt_model::attribution::Attributor::open(p)
                .map_err(|e| Failure::usage(e.to_string()))?,
        ),
        None => None,
    };
    let mut share =
        super::attribute::run_share(&args.attribution, env, &meter, &config.rate, &mut cmd)?;
    let mut pid = 0;
    let mut watch = |e: quietwatt::command::ChildEvent| {
        if let quietwatt::command::ChildEvent::Spawned(p) = e {
            pid = p;
        }
        crate::signals::forward_to_command(e);
    };
    let m = match &mut share {
        None => measure_watched(&mut meter, &mut cmd, &config, &mut watch)?,
        Some(share) => quietwatt::command::measure_watched_into(
            &mut meter,
            share.sink(),
            &mut cmd,
            &config,
            &mut watch,
        )?,
    };
    let estimate = attributor
        .map(quietwatt_model::attribution::Attributor::finish)
        .transpose()?;
    let exit_code = super::exit_code(m.status);
    if args.json {
        // Every warning is in the document too; stderr says them as the table does.
        for w in m.measurement.warnings() {
            eprintln!("quietwatt: warning: {w}");
        }
        let mut doc = RunDocument::new(
            &m,
            exit_code,
            env.is_emulated() || via_emulator,
            &config.rate,
        );
        doc.notes = Some(notes.clone());
        let doc = doc.with(RunExtras {
            model_estimate: estimate.as_ref(),
            share: share.as_ref().map(|s| s.json(pid)),
        });
        emit_json(args.output.as_deref(), &crate::schema::to_json(&doc))?;
    } else {
        let mut text = report_text(
            &args.command.join(" "),
            &m.measurement.energy,
            &config.rate,
            env.is_emulated() || via_emulator,
        );
        if args.output.is_none() {
            eprint!("{text}");
            text.clear();
        }
        for w in m.measurement.warnings() {
            eprintln!("quietwatt: warning: {w}");
        }
        if let Some(s) = &share {
            // The share's table is the attribution's own, on stderr.
            s.print(pid, &args.command.join(" "));
        }
        if let Some(e) = &estimate {
            text += &format!("{}\n", quietwatt_model::attribution::text(e));
        }
        if let Some(o) = &m.measurement.overhead {
            text += &format!("{o}\n");
        }
        if let Some(k) = &m.measurement.kernel {
            text += &format!("{k}\n");
        }
        emit_text(args.output.as_deref(), &text)?;
    }
    if let Some(e) = m.error {
        return Err(Failure::new(
            MEASUREMENT,
            format!("the measurement stopped early: {e}; the figures above cover only the time before it"),
        ));
    }
    Ok(ExitCode::from(exit_code.clamp(0, 255) as u8))
}

/// Runs the command where no mechanism can measure: its exit code passed on,
/// signals forwarded as for a measured one, the energy reported `<not supported>`
/// with the reason and the fix.
fn run_unmeasured(args: &Args, why: Failure) -> Result<ExitCode, Failure> {
    let mut cmd = std::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    crate::signals::install();
    let start = std::time::Instant::now();
    let status =
        quietwatt::command::spawn_and_wait(&mut cmd, &mut crate::signals::forward_to_command)?;
    let elapsed = start.elapsed().as_secs_f64();
    let exit_code = super::exit_code(status);
    let reason = why.message().lines().next().unwrap_or_default().to_string();
    if args.json {
        let doc = quietwatt::document::UnmeasuredRun::new(reason.clone(), exit_code, elapsed);
        emit_json(args.output.as_deref(), &crate::schema::to_json(&doc))?;
    } else {
        let what = args.command.join(" ");
        let text = format!(
            "\n Energy of '{what}':\n\n  {:>6}  {:<8} {:>16}\n  {:>6}  {:<8} {:>16}\n\n  \
             {elapsed:.6} seconds elapsed\n\n",
            "socket", "domain", "energy (J)", "", "total", "<not supported>"
        );
        emit_text(args.output.as_deref(), &text)?;
    }
    eprintln!(
        "quietwatt: warning: no energy measured: {reason}\n  run `quietwatt doctor` for what each \
         mechanism needs here, add `--emulate auto` to try the built-in emulator, \
         --power-model FILE to estimate (a model `quietwatt calibrate` made on a machine of this \
         CPU with RAPL), or --require-energy to make this an error"
    );
    Ok(ExitCode::from(exit_code.clamp(0, 255) as u8))
}

/// The `--json` object: to `-o FILE`, or on stdout.
fn emit_json(output: Option<&Path>, text: &str) -> Result<(), Failure> {
    match output {
        Some(p) => write_output(p, &format!("{text}\n")),
        None => {
            println!("{text}");
            Ok(())
        }
    }
}

/// The table: to `-o FILE`, or on stderr.
fn emit_text(output: Option<&Path>, text: &str) -> Result<(), Failure> {
    match output {
        Some(p) => write_output(p, text),
        None => {
            eprint!("{text}");
            Ok(())
        }
    }
}

fn write_output(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text).map_err(|e| {
        Failure::new(
            OUTPUT,
            format!(
                "cannot write -o {}: {e}; give a path in a writable directory",
                path.display()
            ),
        )
    })
}

/// The human table, on stderr so that the command's own output stays clean, then
/// the report's warnings.
pub fn print_report(what: &str, r: &EnergyReport, rate: &Rate, emulated: bool) {
    eprint!("{}", report_text(what, r, rate, emulated));
    for w in &r.warnings {
        eprintln!("quietwatt: warning: {w}");
    }
}

/// The human table (without the warnings). Every figure carries its ± bound (the
/// counters' step, their update interval, and any interval lost to a reset or
/// glitch).
pub fn report_text(what: &str, r: &EnergyReport, rate: &Rate, emulated: bool) -> String {
    let mut s = String::new();
    // writeln! to a String cannot fail.
    macro_rules! out {
        ($($t:tt)*) => {{
            let _ = writeln!(s, $($t)*);
        }};
    }
    out!();
    out!(
        " Energy of '{what}' ({} mechanism{}{}, read at {}):",
        r.mechanism,
        if emulated { ", EMULATED" } else { "" },
        super::estimated_words(r.mechanism),
        rate_words(rate)
    );
    out!();
    out!(
        "  {:>6}  {:<8} {:>14} {:>12} {:>12} {:>10}",
        "socket",
        "domain",
        "energy (J)",
        "± (J)",
        "power (W)",
        "± (W)"
    );
    // The digits each uncertainty supports (two significant); the JSON keeps all.
    let dj = |u: f64| quietwatt::units::decimals_for(u);
    for d in &r.domains {
        let (ej, ew) = (dj(d.uncertainty_j.0), dj(d.power_uncertainty_w.0));
        out!(
            "  {:>6}  {:<8} {:>14.ej$} {:>12.ej$} {:>12.ew$} {:>10.ew$}",
            d.socket,
            d.domain,
            d.energy_j.0,
            d.uncertainty_j.0,
            d.mean_power_w.0,
            d.power_uncertainty_w.0
        );
    }
    match (
        r.total_energy_j,
        r.total_uncertainty_j,
        r.total_power_w,
        r.total_power_uncertainty_w,
    ) {
        (Some(e), Some(u), Some(p), Some(pu)) => {
            let (ej, ew) = (dj(u.0), dj(pu.0));
            out!(
                "  {:>6}  {:<8} {:>14.ej$} {:>12.ej$} {:>12.ew$} {:>10.ew$}   = {}",
                "",
                "total",
                e.0,
                u.0,
                p.0,
                pu.0,
                r.total_rule
            );
        }
        _ => out!(
            "  {:>6}  {:<8} {:>14}   (nothing selected can be totalled: see the warnings)",
            "",
            "total",
            "-"
        ),
    }
    if let Some(f) = &r.finer_total {
        let ej = dj(f.uncertainty_j.0);
        out!(
            "  {:>6}  {:<8} {:>14.ej$} {:>12.ej$}   = {} (finer than psys)",
            "",
            "",
            f.energy_j.0,
            f.uncertainty_j.0,
            f.rule
        );
    }
    out!();
    out!("  {:.6} seconds measured", r.duration_s);
    out!();
    s
}

/// What the CLI adds to `run --json` beside the engine's [`RunDocument`].
#[derive(serde::Serialize)]
struct RunExtras<'a, E> {
    /// The model's estimates (`--model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    model_estimate: Option<&'a E>,
    /// The command's share of the energy (`--share`).
    #[serde(skip_serializing_if = "Option::is_none")]
    share: Option<quietwatt_attribution::document::CommandShare>,
}
