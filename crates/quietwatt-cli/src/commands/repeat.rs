//! The one front door of repeated runs: `quietwatt run -r N -- CMD` (one command)
//! and `quietwatt compare 'CMD1' 'CMD2' ...` (several) are flags and wording over
//! the scheduler of `quietwatt-compare`: the same warm-up, the same interleaved
//! shuffled rounds (one command per round for `run -r`), the same line after each
//! run, the same summary, the same exports.
//!
//! Here: the rate settled once (the engine's one safe-rate rule), the real
//! executor built, the scheduler's events turned into the progress bar and the
//! per-run lines, its errors into messages and exit codes, and the summary printed.

pub use super::runs::{outlier_warning, print_table};
use super::{rate_words, selection, MeterArgs};
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT};
use quietwatt::{source, FreqArg, Mechanism, Meter, Rate};
use quietwatt_compare::document::{RepeatDocument, SeriesContext};
use quietwatt_compare::executor::{ExecError, Invocation};
use quietwatt_compare::result::{GateRule, UNCERTAINTY_METHOD};
use quietwatt_compare::{
    export, schedule, Comparison, Event, Executor, MeterExecutor, Plan, ScheduleError,
};
use std::path::Path;
use std::process::ExitCode;

/// A series of runs as both front doors ask for it.
pub struct Series<'a> {
    /// Each command as shown (`run -r`: its words joined; `compare`: the string).
    pub shown: Vec<String>,
    /// Each command as spawned.
    pub invocations: Vec<Invocation>,
    /// Runs, warm-ups, seed, `--ignore-failure`.
    pub plan: Plan,
    /// The reference's index.
    pub reference: usize,
    /// `--fail-if-more-than`, `--pass-inconclusive`.
    pub gate: Option<GateRule>,
    /// `-m`, `-d`, `-f`, `--cpu`, `--rt`, `--freq-min/max`.
    pub meter: &'a MeterArgs,
    /// `--json`: no progress bar.
    pub json: bool,
    /// The shell that runs `--prepare` (`compare`'s `--shell`).
    pub shell: &'a str,
    /// `--prepare`.
    pub prepare: Option<&'a str>,
    /// The front door's name in messages (`--repeat`, `compare`).
    pub what: &'a str,
    /// The exit code when a command's run fails: `None` for the command's own
    /// (`run -r`), a fixed code for `compare` (so that a command's own 3 is never
    /// read as the gate's).
    pub failed_exit: Option<u8>,
}

/// A series measured: the typed result and how it was read.
pub struct Measured {
    /// The result every export writes.
    pub comparison: Comparison,
    /// The mechanism's name.
    pub mechanism_name: &'static str,
    /// The rate every run used.
    pub rate: Rate,
    /// Whether the counters were the emulator's.
    pub emulated: bool,
}

impl Measured {
    /// How the series was read, as both documents say it.
    pub fn context(&self) -> SeriesContext {
        SeriesContext::new(self.mechanism_name, self.emulated, &self.rate)
    }

    /// Whether a signal cut the series short.
    pub fn interrupted(&self) -> bool {
        self.comparison.interrupted.is_some()
    }
}

/// Measures the series: the rate settled once (said once), then the scheduler,
/// with a progress bar on a terminal and one line per run on stderr.
pub fn measure(env: &Environment, s: &Series<'_>) -> Result<Measured, Failure> {
    if matches!(
        s.meter.mechanism,
        Some(Mechanism::Ebpf | Mechanism::PerfRing)
    ) {
        return Err(Failure::usage(format!(
            "{} measures through the polling mechanisms (powercap, perf, msr): \
             leave out --mechanism ebpf/perf-ring, or measure one run with `quietwatt run`",
            s.what
        )));
    }
    let sel = selection(&s.meter.domains)?;
    // Refused here, nothing named: the local reader service, if there is one.
    // Refused here: the reader service, else the power model's estimate.
    let source = match source::open(&env.root, s.meter.mechanism, &sel) {
        Ok(source) => source,
        Err(local) => {
            super::fallback::instead(
                local,
                s.meter.mechanism,
                &sel,
                s.meter.freq,
                &s.meter.estimate,
                &env.root,
            )?
            .0
        }
    };
    let meter = Meter::new(source);
    super::print_notes(&meter);
    // As `run`: its default, raised by the one rule where a counter could wrap.
    let freq = s
        .meter
        .freq
        .unwrap_or_else(|| FreqArg::Fixed(super::default_freq(&meter)));
    let mut config = s.meter.sampler.config(freq, &env.root)?;
    if let Rate::Fixed(f) = config.rate {
        // Raised once here, said once, rather than by the engine at every run.
        let mut raised = Vec::new();
        config.rate = Rate::Fixed(quietwatt::record::wrap_safe(&meter, f, &mut raised));
        for w in raised {
            eprintln!("quietwatt: warning: {w}");
        }
    }
    let rate = config.rate;
    let mechanism_name = meter.label();
    drop(meter);
    crate::signals::install();
    let mut executor = MeterExecutor::new(
        env.root.clone(),
        s.meter.mechanism,
        sel,
        config,
        s.invocations.clone(),
        crate::signals::forward_to_command,
    )
    .with_prepare(s.shell, s.prepare)
    .with_power_model(s.meter.estimate.choice());
    measure_with(env, s, &mut executor, mechanism_name, rate)
}

/// Measures the series with `executor` (the meter's, or `compare --profile`'s),
/// read through `mechanism_name` at `rate`.
pub fn measure_with<E: Executor<Error = ExecError>>(
    env: &Environment,
    s: &Series<'_>,
    executor: &mut E,
    mechanism_name: &'static str,
    rate: Rate,
) -> Result<Measured, Failure> {
    let k = s.shown.len();
    let runs = s.plan.runs;
    let bar = super::exports::progress(u64::from(runs) * k as u64, s.json);
    let outcome = schedule(executor, k, &s.plan, &mut stopped, &mut |e| match e {
        Event::Starting { command, round } if k > 1 => {
            bar.set_message(format!("round {round}/{runs}: #{}", command + 1));
        }
        Event::Starting { .. } => {}
        Event::Measured {
            command,
            round,
            run,
        } => {
            bar.inc(1);
            for w in &run.warnings {
                bar.suspend(|| eprintln!("quietwatt: warning: {w}"));
            }
            let line = format!(
                "quietwatt: {}",
                export::run_line(&s.shown, command, round, runs, run)
            );
            if bar.is_hidden() {
                eprintln!("{line}");
            } else {
                bar.println(line);
            }
        }
    });
    let outcome = match outcome {
        Ok(o) => {
            bar.finish_and_clear();
            o
        }
        Err(e) => {
            bar.abandon();
            return Err(failure(s, e));
        }
    };
    if let Some(asked) = outcome.interrupted {
        let (verb, unit) = if k > 1 {
            ("comparing", "round")
        } else {
            ("summarising", "run")
        };
        eprintln!(
            "quietwatt: interrupted: {verb} the {} whole {unit}(s) of {asked} (the {unit} cut short is left out)",
            outcome.rounds,
        );
    }
    Ok(Measured {
        comparison: Comparison::new(&s.shown, &s.plan, &outcome, s.reference, s.gate),
        mechanism_name,
        rate,
        emulated: env.is_emulated(),
    })
}

/// The scheduler's error in the CLI's words and codes.
fn failure(s: &Series<'_>, e: ScheduleError<ExecError>) -> Failure {
    match e {
        ScheduleError::Executor(ExecError::Engine(e)) => e.into(),
        ScheduleError::Executor(ExecError::Stopped(e)) => Failure::new(
            MEASUREMENT,
            format!("a run's measurement stopped early: {e}; no summary of partial runs"),
        ),
        ScheduleError::Executor(ExecError::Profile(e)) => Failure::new(MEASUREMENT, e),
        ScheduleError::Executor(ExecError::Prepare { command, code }) => Failure::new(
            code.clamp(1, 255) as u8,
            format!("--prepare '{command}' exited with code {code}: fix it or leave it out"),
        ),
        ScheduleError::Failed {
            command,
            kind,
            index,
            of,
            exit_code,
        } => {
            let f = failed_run(
                s.shown.get(command).map_or("?", String::as_str),
                index,
                of,
                exit_code,
                kind.words(),
            );
            match s.failed_exit {
                Some(code) => Failure::new(code, f.message()),
                None => f,
            }
        }
        ScheduleError::Interrupted => interrupted(),
        e => Failure::new(MEASUREMENT, e.to_string()),
    }
}

/// The summary on stderr, the same for one command and several: the header, each
/// command's table, each command against the reference, hyperfine's summary lines.
pub fn print_text(m: &Measured) {
    let c = &m.comparison;
    let warm = if c.warmup > 0 {
        format!(" after {} warm-up run(s)", c.warmup)
    } else {
        String::new()
    };
    let how = format!(
        "{} mechanism{}{}, read at {}",
        m.mechanism_name,
        if m.emulated { ", EMULATED" } else { "" },
        super::estimated_words(m.mechanism_name),
        rate_words(&m.rate)
    );
    eprintln!();
    if let [only] = c.commands.as_slice() {
        eprintln!(
            " Energy of '{}' over {} run(s){warm} ({how}):",
            only.command, c.runs
        );
        eprintln!();
        print_table(only);
    } else {
        eprintln!(
            " {} commands, {} interleaved run(s) each{warm} ({how}):",
            c.commands.len(),
            c.runs
        );
        for (i, s) in c.commands.iter().enumerate() {
            eprintln!();
            eprintln!(" #{} '{}'", i + 1, s.command);
            print_table(s);
        }
    }
    eprintln!();
    for x in &c.comparisons {
        let interval = |r: &Option<quietwatt_stats::repeat::Ratio>| {
            r.as_ref().map_or("-".to_string(), |r| {
                format!("{:.3} [{:.3}, {:.3}]", r.estimate, r.ci[0], r.ci[1])
            })
        };
        eprintln!(
            " #{} against #{}: energy × {} (95 % CI), time × {}",
            x.command + 1,
            x.reference + 1,
            interval(&x.energy_ratio),
            interval(&x.duration_ratio)
        );
        eprintln!(
            "   energy: {}{}",
            x.verdict.words(),
            x.welch.as_ref().map_or(String::new(), |w| format!(
                " ({}: p = {:.3e})",
                w.test, w.p_value
            ))
        );
        if let Some(u) = &x.rank_test {
            eprintln!("   {}: p = {:.3e}", u.test, u.p_value);
            if let Some(h) = &u.shift {
                eprintln!(
                    "   Hodges-Lehmann shift: {:+.4} J [{:+.4}, {:+.4}] (95 % CI)",
                    h.estimate, h.lower, h.upper
                );
            }
        }
    }
    let lines = export::summary_lines(c);
    if !lines.is_empty() {
        eprintln!();
        eprintln!(" Summary");
        for l in lines {
            eprintln!("   {l}");
        }
    }
    if !c.comparisons.is_empty() {
        eprintln!();
    }
    eprintln!("  {UNCERTAINTY_METHOD}.");
    eprintln!();
    for s in &c.commands {
        outlier_warning(&s.command, s);
    }
}

/// `--export-json` (the document), `--export-csv` and `--export-markdown` (from
/// the typed result), those given.
pub fn export(
    m: &Measured,
    document: &serde_json::Value,
    json: Option<&Path>,
    csv: Option<&Path>,
    markdown: Option<&Path>,
) -> Result<(), Failure> {
    if let Some(p) = json {
        super::exports::json(p, document)?;
    }
    if let Some(p) = csv {
        super::exports::write(p, "--export-csv", &export::csv(&m.comparison))?;
    }
    if let Some(p) = markdown {
        // A PR comment is read without the run's stderr: what the figures are
        // goes with them.
        let mut md = String::new();
        if !super::estimated_words(m.mechanism_name).is_empty() {
            md.push_str(
                "> **ESTIMATED** by a power model, not measured: it tells the commands apart by the CPU time they keep busy, not by their instruction mix or memory traffic.\n\n",
            );
        } else if m.emulated {
            md.push_str("> **EMULATED** RAPL: the emulator's figures, not this machine's.\n\n");
        }
        md.push_str(&export::markdown(&m.comparison));
        super::exports::write(p, "--export-markdown", &md)?;
    }
    Ok(())
}

/// What `run --repeat` needs from `run`'s arguments.
pub struct RepeatArgs<'a> {
    /// `--repeat`/`--runs`.
    pub runs: u32,
    /// `--warmup`.
    pub warmup: u32,
    /// `-m`, `-d`, `-f`, `--cpu`, `--rt`, `--freq-min/max`.
    pub meter: &'a MeterArgs,
    /// `--json`.
    pub json: bool,
    /// `--export-json`.
    pub export_json: Option<&'a Path>,
    /// `--export-csv`.
    pub export_csv: Option<&'a Path>,
    /// `--export-markdown`.
    pub export_markdown: Option<&'a Path>,
    /// `--prepare`.
    pub prepare: Option<&'a str>,
    /// `--ignore-failure`.
    pub ignore_failure: bool,
    /// The command.
    pub command: &'a [String],
}

/// `run -r N`: the command measured N times (after K unmeasured warm-up runs),
/// the summary printed; exits with the command's code (the first failing run's,
/// which stops the series unless `--ignore-failure`).
pub fn run(env: &Environment, a: RepeatArgs<'_>) -> Result<ExitCode, Failure> {
    // `run` checked the export paths before calling this.
    let series = Series {
        shown: vec![a.command.join(" ")],
        invocations: vec![Invocation {
            program: a.command[0].clone(),
            args: a.command[1..].to_vec(),
            quiet: false,
        }],
        plan: Plan {
            runs: a.runs,
            warmup: a.warmup,
            seed: 0,
            ignore_failure: a.ignore_failure,
        },
        reference: 0,
        gate: None,
        meter: a.meter,
        json: a.json,
        shell: "sh",
        prepare: a.prepare,
        what: "--repeat",
        failed_exit: None,
    };
    let m = measure(env, &series)?;
    let c = &m.comparison;
    let Some(only) = c.commands.first() else {
        return Err(interrupted());
    };
    let doc = RepeatDocument::new(
        c,
        only,
        a.command,
        m.context(),
        crate::signals::stopped_status(),
    );
    let v = crate::schema::value(&doc);
    if a.json {
        println!("{}", crate::schema::to_json(&doc));
        outlier_warning(&only.command, only);
    } else {
        print_text(&m);
    }
    export(&m, &v, a.export_json, a.export_csv, a.export_markdown)?;
    if m.interrupted() {
        return Ok(ExitCode::from(crate::signals::stopped_status()));
    }
    let first_failure = only
        .per_run
        .iter()
        .map(|r| r.exit_code)
        .find(|&c| c != 0)
        .unwrap_or(0);
    Ok(ExitCode::from(first_failure.clamp(0, 255) as u8))
}

/// Whether a SIGINT/SIGTERM/SIGHUP asked quietwatt to stop.
pub fn stopped() -> bool {
    crate::signals::STOP.load(std::sync::atomic::Ordering::Relaxed)
}

/// The error for a series stopped by a signal before any run was measured
/// whole: 128 + the signal, as a shell reports a process killed by it.
pub fn interrupted() -> Failure {
    Failure::new(
        crate::signals::stopped_status(),
        "interrupted before a run was measured whole: nothing to summarise",
    )
}

/// The error for a run that failed.
pub fn failed_run(what: &str, i: u32, n: u32, code: i32, kind: &str) -> Failure {
    Failure::new(
        code.clamp(1, 255) as u8,
        format!(
            "'{what}' exited with code {code} in {kind} {i} of {n}; fix the command, or add \
             --ignore-failure (-i) to measure failing runs all the same"
        ),
    )
}
