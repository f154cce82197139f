//! `quietwatt run -r N -- CMD`: a command measured N times (perf stat -r, hyperfine),
//! and the runner that `bench energy` shares: one fresh meter per run, the same
//! rate for every run, each run's energy with its `±` bound.
//!
//! The statistics are the library's [`quietwatt::repeat`].

pub use super::runs::{outlier_warning, RunResult, Summaries};
use super::{rate_words, selection, SamplerArgs};
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT};
use quietwatt::command::measure_watched;
use quietwatt::{source, EngineConfig, FreqArg, Mechanism, Meter, Rate, Selection};
use std::path::Path;
use std::process::{Command, ExitCode};

/// How the measurement bound is folded into the intervals, for reports.
pub const UNCERTAINTY_METHOD: &str = "the 95 % interval of the mean is Student's t over the runs' \
spread, widened on each side by the mean of the runs' ± measurement bounds (the bound on the \
mean's measurement error)";

/// What `run --repeat` needs from `run`'s arguments.
pub struct RepeatArgs<'a> {
    /// `--repeat`.
    pub runs: u32,
    /// `--warmup`.
    pub warmup: u32,
    /// `-m`.
    pub mechanism: Option<Mechanism>,
    /// `-d`.
    pub domains: &'a Option<String>,
    /// `-f`.
    pub freq: Option<FreqArg>,
    /// `--cpu`, `--rt`, `--freq-min/max`.
    pub sampler: &'a SamplerArgs,
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

/// Opens a fresh meter per run, at one rate for all.
pub struct Runner<'e> {
    env: &'e Environment,
    mechanism: Option<Mechanism>,
    selection: Selection,
    /// The engine configuration every run uses.
    pub config: EngineConfig,
    /// The mechanism's name.
    pub mechanism_name: &'static str,
}

impl<'e> Runner<'e> {
    /// Opens the source once (notes and wrap warnings printed once) to settle the rate.
    pub fn new(
        env: &'e Environment,
        mechanism: Option<Mechanism>,
        domains: &Option<String>,
        freq: Option<FreqArg>,
        sampler: &SamplerArgs,
        what: &str,
    ) -> Result<Runner<'e>, Failure> {
        if matches!(mechanism, Some(Mechanism::Ebpf | Mechanism::PerfRing)) {
            return Err(Failure::usage(format!(
                "{what} measures through the polling mechanisms (powercap, perf, msr): \
                 leave out --mechanism ebpf/perf-ring, or measure one run with `quietwatt run`"
            )));
        }
        let selection = selection(domains)?;
        let meter = Meter::new(source::open(&env.root, mechanism, &selection)?);
        super::print_notes(&meter);
        // As `run`: its default, raised by the one rule where a counter could wrap.
        let freq = freq.unwrap_or_else(|| FreqArg::Fixed(super::run::default_freq(&meter)));
        let mut config = sampler.config(freq, &env.root)?;
        if let Rate::Fixed(f) = config.rate {
            // Raised once here, said once, rather than by the engine at every run.
            let mut raised = Vec::new();
            config.rate = Rate::Fixed(quietwatt::record::wrap_safe(&meter, f, &mut raised));
            for w in raised {
                eprintln!("quietwatt: warning: {w}");
            }
        }
        Ok(Runner {
            env,
            mechanism,
            selection,
            config,
            mechanism_name: meter.label(),
        })
    }

    /// The rate as `--json` reports it: `freq_hz` (a number) for a fixed rate,
    /// `freq_auto` for `--freq auto`.
    pub fn add_rate_json(&self, v: &mut serde_json::Value) {
        super::add_rate_json(v, &self.config.rate);
    }

    /// The rate in words.
    pub fn rate_words(&self) -> String {
        rate_words(&self.config.rate)
    }

    /// Measures one run of `cmd`.
    pub fn measure(&self, cmd: &mut Command) -> Result<RunResult, Failure> {
        let mut meter = Meter::new(source::open(
            &self.env.root,
            self.mechanism,
            &self.selection,
        )?);
        let m = measure_watched(
            &mut meter,
            cmd,
            &self.config,
            &mut crate::signals::forward_to_command,
        )?;
        for w in m.warnings.iter().chain(&m.report.warnings) {
            eprintln!("quietwatt: warning: {w}");
        }
        if let Some(e) = m.error {
            return Err(Failure::new(
                MEASUREMENT,
                format!("a run's measurement stopped early: {e}; no summary of partial runs"),
            ));
        }
        let r = &m.report;
        Ok(RunResult {
            exit_code: super::exit_code(m.status),
            duration_s: r.duration_s,
            total: r
                .total_energy_j
                .zip(r.total_uncertainty_j)
                .map(|(e, u)| (e.0, u.0)),
            domains: r
                .domains
                .iter()
                .map(|d| (d.socket, d.domain, d.energy_j.0, d.uncertainty_j.0))
                .collect(),
        })
    }
}

/// A command's words as it is shown.
fn shown(command: &[String]) -> String {
    command.join(" ")
}

/// `run -r N`: measures the command N times (after K unmeasured warm-up runs),
/// prints the summary; exits with the command's code (the first failing run's,
/// which stops the series unless `--ignore-failure`).
pub fn run(env: &Environment, a: RepeatArgs<'_>) -> Result<ExitCode, Failure> {
    // `run` checked the export paths before calling this.
    let runner = Runner::new(env, a.mechanism, a.domains, a.freq, a.sampler, "--repeat")?;
    crate::signals::install();
    let make = || {
        let mut c = Command::new(&a.command[0]);
        c.args(&a.command[1..]);
        c
    };
    let what = shown(a.command);
    for i in 0..a.warmup {
        prepare("sh", a.prepare)?;
        let status = quietwatt::command::spawn_and_wait(
            &mut make(),
            &mut crate::signals::forward_to_command,
        )?;
        if stopped() {
            return Err(interrupted());
        }
        let code = super::exit_code(status);
        if code != 0 && !a.ignore_failure {
            return Err(failed_run(&what, i + 1, a.warmup, code, "warm-up run"));
        }
    }
    let mut runs = Vec::with_capacity(a.runs as usize);
    let mut first_failure = 0;
    let mut cut_short = false;
    let bar = super::exports::progress(u64::from(a.runs), a.json);
    for i in 0..a.runs {
        prepare("sh", a.prepare)?;
        let r = runner.measure(&mut make())?;
        bar.inc(1);
        if stopped() {
            // As perf stat -r: the run the signal cut is left out, the whole ones
            // are summarised and exported.
            bar.finish_and_clear();
            if runs.is_empty() {
                return Err(interrupted());
            }
            eprintln!(
                "quietwatt: interrupted: summarising the {} whole run(s) of {} (the run cut short is left out)",
                runs.len(),
                a.runs
            );
            cut_short = true;
            break;
        }
        let line = format!(
            "quietwatt: run {}/{}: {} in {:.4} s{}",
            i + 1,
            a.runs,
            r.total
                .map_or("-".into(), |(e, u)| format!("{e:.4} ± {u:.4} J")),
            r.duration_s,
            if r.exit_code != 0 {
                format!(" (exit code {})", r.exit_code)
            } else {
                String::new()
            }
        );
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
        let code = r.exit_code;
        runs.push(r);
        if code != 0 {
            if first_failure == 0 {
                first_failure = code;
            }
            if !a.ignore_failure {
                bar.abandon();
                return Err(failed_run(&what, i + 1, a.runs, code, "run"));
            }
        }
    }
    bar.finish_and_clear();
    let s = Summaries::new(&runs);
    let mut v = s.json();
    crate::schema::stamp(&mut v, "repeat");
    v["command"] = a.command.to_vec().into();
    v["mechanism"] = runner.mechanism_name.into();
    v["emulated"] = env.is_emulated().into();
    runner.add_rate_json(&mut v);
    v["runs"] = runs.len().into();
    if cut_short {
        v["interrupted"] = serde_json::json!({
            "exit_status": crate::signals::stopped_status(),
            "runs_asked": a.runs,
        });
    }
    v["warmup"] = a.warmup.into();
    v["uncertainty_method"] = UNCERTAINTY_METHOD.into();
    v["per_run"] = runs.iter().map(RunResult::json).collect::<Vec<_>>().into();
    if a.json {
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        eprintln!();
        eprintln!(
            " Energy of '{what}' over {} run(s){} ({} mechanism{}, read at {}):",
            runs.len(),
            if a.warmup > 0 {
                format!(" after {} warm-up run(s)", a.warmup)
            } else {
                String::new()
            },
            runner.mechanism_name,
            if env.is_emulated() { ", EMULATED" } else { "" },
            runner.rate_words()
        );
        eprintln!();
        s.print();
        eprintln!();
        eprintln!("  {UNCERTAINTY_METHOD}.");
        eprintln!();
    }
    outlier_warning(&what, &s);
    if let Some(p) = a.export_json {
        super::exports::json(p, &v)?;
    }
    if let Some(p) = a.export_csv {
        super::exports::csv(p, &[(what.as_str(), &runs)])?;
    }
    if let Some(p) = a.export_markdown {
        super::exports::markdown(p, &[(what.as_str(), &s)], &[None], 0)?;
    }
    if cut_short {
        return Ok(ExitCode::from(crate::signals::stopped_status()));
    }
    Ok(ExitCode::from(first_failure.clamp(0, 255) as u8))
}

/// Runs `--prepare` (through `SHELL -c`, output discarded), if given; a failure
/// stops the series.
pub fn prepare(shell: &str, cmd: Option<&str>) -> Result<(), Failure> {
    let Some(p) = cmd else {
        return Ok(());
    };
    let status = quietwatt::command::spawn_and_wait(
        Command::new(shell)
            .arg("-c")
            .arg(p)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
        &mut crate::signals::forward_to_command,
    )?;
    match super::exit_code(status) {
        0 => Ok(()),
        code => Err(Failure::new(
            code.clamp(1, 255) as u8,
            format!("--prepare '{p}' exited with code {code}: fix it or leave it out"),
        )),
    }
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
