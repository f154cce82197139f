//! `quietwatt compare 'CMD1' 'CMD2' ...` (also `bench energy`): commands compared
//! by their energy, as hyperfine compares their time. The runs are interleaved,
//! each round running every command once in a shuffled order (seeded), so that a
//! drift of the machine (temperature, frequency, other load) and the position in a
//! round fall on every command alike; each command's energy and time are
//! summarised with their intervals, and each command is compared with the
//! reference (the first, or `--reference`): the ratio of energies with its
//! interval, Welch's t test, the lab's rank test with the Hodges-Lehmann shift, and
//! a verdict. `--fail-if-more-than PCT` turns the verdict into an exit code for CI.
//!
//! Flags and wording only: the scheduler, the statistics, the gate and the
//! exports are `quietwatt-compare`'s, shared with `run -r` (`super::repeat`).

use super::repeat::{Measured, Series};
use super::MeterArgs;
use crate::emulated::Environment;
use crate::exit::Failure;
use quietwatt_compare::document::CompareDocument;
use quietwatt_compare::executor::Invocation;
use quietwatt_compare::profiled::{
    differential_folded, function_changes, write_differential_svg, FunctionChange, ProfileExecutor,
};
use quietwatt_compare::result::GateRule;
use quietwatt_compare::Plan;
use std::path::PathBuf;
use std::process::ExitCode;

/// The exit code of `--fail-if-more-than` when a command costs more.
pub const REGRESSION: u8 = 3;
/// The exit code of `--fail-if-more-than` when the runs cannot tell whether a
/// command costs more than allowed (the ratio's interval straddles the limit).
pub const INCONCLUSIVE: u8 = 4;
/// The exit code when a compared command fails (its own code is in the message):
/// a fixed code, so that a command's own exit 3 is never read as the gate's.
pub const COMMAND_FAILED: u8 = 5;

/// Arguments of `bench energy`.
#[derive(clap::Args)]
pub struct Args {
    /// Measured runs of each command.
    #[arg(short = 'r', long = "runs", visible_alias = "repeat", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(2..=100_000))]
    runs: u32,
    /// Unmeasured runs of each command first (caches, frequency ramp-up).
    #[arg(short = 'w', long, default_value_t = 0, value_name = "K")]
    warmup: u32,
    /// The shell that runs each command string.
    #[arg(long, default_value = "sh", value_name = "SHELL")]
    shell: String,
    /// Let the commands' output through (by default it goes to /dev/null, as
    /// hyperfine does).
    #[arg(long)]
    show_output: bool,
    /// Go on when a command exits with a non-zero code (its runs are measured all the same).
    #[arg(short, long)]
    ignore_failure: bool,
    /// Exit 3 when a command costs significantly more energy than the first one by
    /// more than PCT percent: the lower end of the ratio's 95 % interval above
    /// 1 + PCT/100 (and Welch's test significant). Exit 4 when the runs cannot
    /// tell (the interval straddles 1 + PCT/100): add runs, or --pass-inconclusive.
    /// For CI gating.
    #[arg(long, value_name = "PCT")]
    fail_if_more_than: Option<f64>,
    /// With --fail-if-more-than: let a gate that cannot decide pass (exit 0, with
    /// a warning) instead of exit 4.
    #[arg(long, requires = "fail_if_more_than")]
    pass_inconclusive: bool,
    #[command(flatten)]
    meter: MeterArgs,
    /// Print one JSON object on stdout (schema quietwatt.bench-energy/1) instead of the table on stderr.
    #[arg(long)]
    json: bool,
    /// Also write the results (the `--json` object) to FILE.
    #[arg(long, value_name = "FILE")]
    export_json: Option<PathBuf>,
    /// Also write one row per run (command, run, exit code, time, energies) to FILE.
    #[arg(long, value_name = "FILE")]
    export_csv: Option<PathBuf>,
    /// Also write the summary as a Markdown table (hyperfine's, by energy) to FILE.
    #[arg(long, value_name = "FILE")]
    export_markdown: Option<PathBuf>,
    /// Also draw each command's energy per run as a box plot, to FILE (SVG, with a
    /// PNG beside it).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// The command the others are compared with: its position (1 = the first) or
    /// its exact string [default: the first].
    #[arg(long, value_name = "CMD|N")]
    reference: Option<String>,
    /// Run this shell command before each run of every command, unmeasured (clear a
    /// cache, reset a file), as hyperfine's --prepare.
    #[arg(long, value_name = "CMD")]
    prepare: Option<String>,
    /// Seed of the order of the commands in each round (shuffled so that no command
    /// always runs first).
    #[arg(long, default_value_t = 0x5eed_0c0d, value_name = "N")]
    seed: u64,
    /// Profile every run (call stacks sampled on the energy clock, user space)
    /// and say which function's energy changed from the reference to the other
    /// command, with intervals from the runs: a table and a differential energy
    /// flame graph (--profile-output). Two commands.
    #[arg(long)]
    profile: bool,
    /// With --profile: the differential energy flame graph (SVG).
    #[arg(
        long,
        value_name = "FILE.svg",
        default_value = "compare-profile.svg",
        requires = "profile"
    )]
    profile_output: PathBuf,
    /// The commands, each one shell string: 'sleep 0.1' 'sleep 0.3'.
    #[arg(required = true, value_name = "CMD")]
    commands: Vec<String>,
}

impl Args {
    /// What can be refused before anything is mounted or run.
    pub fn check(&self) -> Result<(), Failure> {
        if self.commands.len() < 2 {
            return Err(Failure::usage(
                "compare compares commands: give two or more, each as one shell string, \
                 e.g. quietwatt compare 'sleep 0.1' 'sleep 0.3' (for one command: quietwatt run -r N -- CMD)",
            ));
        }
        self.reference()?;
        if self.profile {
            if self.commands.len() != 2 {
                return Err(Failure::usage(
                    "--profile compares the functions of two commands: give exactly two",
                ));
            }
            if self.prepare.is_some() {
                return Err(Failure::usage(
                    "--profile runs each command under the profiler alone: leave out --prepare",
                ));
            }
            if self.profile_output.extension().and_then(|e| e.to_str()) != Some("svg") {
                return Err(Failure::usage(format!(
                    "--profile-output {}: give a file ending in .svg",
                    self.profile_output.display()
                )));
            }
        }
        if let Some(p) = &self.plot {
            if p.extension().and_then(|e| e.to_str()) != Some("svg") {
                return Err(Failure::usage(format!(
                    "--plot {}: give a file ending in .svg (a PNG is written beside it)",
                    p.display()
                )));
            }
        }
        if let Some(p) = self.fail_if_more_than {
            if !(p.is_finite() && p >= 0.0) {
                return Err(Failure::usage(format!(
                    "--fail-if-more-than {p}: give a percentage of 0 or more, e.g. 5"
                )));
            }
        }
        Ok(())
    }

    /// The reference's index: `--reference N` (1-based) or its exact string.
    fn reference(&self) -> Result<usize, Failure> {
        let Some(r) = &self.reference else {
            return Ok(0);
        };
        if let Some(i) = self.commands.iter().position(|c| c == r) {
            return Ok(i);
        }
        match r.trim().parse::<usize>() {
            Ok(n) if (1..=self.commands.len()).contains(&n) => Ok(n - 1),
            _ => Err(Failure::usage(format!(
                "--reference {r:?}: give a command's position (1 to {}) or its exact string",
                self.commands.len()
            ))),
        }
    }
}

/// Runs the comparison, prints it, exits 0 (or [`REGRESSION`]/[`INCONCLUSIVE`]
/// for the gate).
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    args.check()?;
    super::exports::checked(
        &[],
        &[
            ("--export-json", args.export_json.as_deref()),
            ("--export-csv", args.export_csv.as_deref()),
            ("--export-markdown", args.export_markdown.as_deref()),
            ("--plot", args.plot.as_deref()),
            (
                "--profile-output",
                args.profile.then_some(args.profile_output.as_path()),
            ),
        ],
    )?;
    let reference = args.reference()?;
    let series = Series {
        shown: args.commands.clone(),
        invocations: args
            .commands
            .iter()
            .map(|c| Invocation::shell(&args.shell, c, !args.show_output))
            .collect(),
        plan: Plan {
            runs: args.runs,
            warmup: args.warmup,
            seed: args.seed,
            ignore_failure: args.ignore_failure,
        },
        reference,
        gate: args.fail_if_more_than.map(|pct| GateRule {
            pct,
            pass_inconclusive: args.pass_inconclusive,
        }),
        meter: &args.meter,
        json: args.json,
        shell: &args.shell,
        prepare: args.prepare.as_deref(),
        what: "bench energy",
        failed_exit: Some(COMMAND_FAILED),
    };
    let (m, functions) = if args.profile {
        let (m, f) = profiled(env, &args, &series)?;
        (m, Some(f))
    } else {
        (super::repeat::measure(env, &series)?, None)
    };
    let c = &m.comparison;
    let mut doc = CompareDocument::new(
        c,
        &args.shell,
        args.prepare.as_deref(),
        m.context(),
        crate::signals::stopped_status(),
    );
    doc.functions = functions.as_deref();
    let v = crate::schema::value(&doc);
    if args.json {
        println!("{}", crate::schema::to_json(&doc));
        for s in &c.commands {
            super::repeat::outlier_warning(&s.command, s);
        }
    } else {
        super::repeat::print_text(&m);
        if let Some(f) = &functions {
            print_functions(&args, f);
        }
    }
    super::repeat::export(
        &m,
        &v,
        args.export_json.as_deref(),
        args.export_csv.as_deref(),
        args.export_markdown.as_deref(),
    )?;
    if let Some(p) = &args.plot {
        plot(env, &m, p)?;
    }
    if m.interrupted() {
        return Ok(ExitCode::from(crate::signals::stopped_status()));
    }
    gate_exit(&args, &m)
}

/// `--profile`: the series measured with every run profiled, the functions'
/// changes from the reference to the other command, the differential flame
/// graph written.
fn profiled(
    env: &Environment,
    args: &Args,
    series: &Series<'_>,
) -> Result<(Measured, Vec<FunctionChange>), Failure> {
    if args.meter.estimate.power_model.is_some() {
        return Err(Failure::usage(
            "--profile splits measured energy among call stacks: a power model's estimate knows no stacks; leave out --power-model (or --profile)",
        ));
    }
    let mut run = quietwatt_profile::ProfileRun::new(env.root.clone());
    run.mechanism = args.meter.mechanism;
    let probe = quietwatt::source::open(
        &env.root,
        args.meter.mechanism,
        &super::selection(&args.meter.domains)?,
    )?;
    let mechanism_name = probe.label();
    drop(probe);
    crate::signals::install();
    let mut executor = ProfileExecutor::new(
        run,
        series.invocations.clone(),
        crate::signals::forward_to_command,
    );
    let rate = quietwatt::Rate::Fixed(quietwatt::Hertz::clamped(
        quietwatt_profile::profile::ENERGY_HZ,
    ));
    let m = super::repeat::measure_with(env, series, &mut executor, mechanism_name, rate)?;
    let (a, b) = (series.reference, 1 - series.reference);
    let (pa, pb) = (&executor.profiles[a], &executor.profiles[b]);
    let changes = function_changes(pa, pb);
    let folded = differential_folded(pa, pb, &changes);
    let title = format!(
        "energy change per function: '{}' against '{}'",
        args.commands[b], args.commands[a]
    );
    let changed = changes.iter().filter(|c| c.significant).count();
    let subtitle = format!(
        "widths: the second's mean µJ over {} runs; coloured: the {changed} function(s) changed significantly (Welch, Holm-adjusted p < 0.05), the rest drawn unchanged{}",
        pb.len(),
        if env.is_emulated() { "; EMULATED RAPL" } else { "" }
    );
    let mut svg = Vec::new();
    write_differential_svg(&mut svg, &folded, &title, &subtitle)
        .and_then(|()| quietwatt_profile::output::write_whole(&args.profile_output, &svg))
        .map_err(|e| {
            Failure::new(
                crate::exit::OUTPUT,
                format!(
                    "cannot write --profile-output {}: {}",
                    args.profile_output.display(),
                    quietwatt_profile::output::why_not_written(&args.profile_output, &e)
                ),
            )
        })?;
    Ok((m, changes))
}

/// `--profile`'s table: the functions whose self energy changed most.
fn print_functions(args: &Args, changes: &[FunctionChange]) {
    eprintln!();
    eprintln!("Functions by change of self energy (second command minus the reference, mean over the runs, Welch 95 % interval; * significant after Holm over {} functions):", changes.len());
    eprintln!(
        "  {:>12}  {:>27}  {:>8}  function",
        "change J", "95 % interval J", "p (Holm)"
    );
    for c in changes.iter().take(10) {
        eprintln!(
            "  {:>+12.6}  {:>27}  {:>8.4}{} {}",
            c.change_uj / 1e6,
            format!(
                "[{:+.6}, {:+.6}]",
                c.change_95_uj[0] / 1e6,
                c.change_95_uj[1] / 1e6
            ),
            c.p_holm,
            if c.significant { "*" } else { " " },
            c.function
        );
    }
    eprintln!(
        "  wrote the differential energy flame graph to {}",
        args.profile_output.display()
    );
}

/// The gate's exit code, with its words on stderr.
fn gate_exit(args: &Args, m: &Measured) -> Result<ExitCode, Failure> {
    let c = &m.comparison;
    let Some(g) = &c.gate else {
        return Ok(ExitCode::SUCCESS);
    };
    let pct = g.fail_if_more_than_pct;
    let name = |i: usize| args.commands.get(i).map_or("?", String::as_str);
    if g.failed {
        for i in &g.failed_commands {
            eprintln!(
                "quietwatt: energy regression: '{}' costs more than '{}' by over {pct} % \
                 (the ratio's 95 % interval starts above {:.4})",
                name(*i),
                name(c.reference),
                1.0 + pct / 100.0
            );
        }
        return Ok(ExitCode::from(REGRESSION));
    }
    if g.inconclusive {
        for i in &g.inconclusive_commands {
            let (est, lo, hi) = c
                .against_reference(*i)
                .and_then(|x| x.energy_ratio.as_ref())
                .map_or((f64::NAN, f64::NAN, f64::NAN), |r| {
                    (r.estimate, r.ci[0], r.ci[1])
                });
            eprintln!(
                "quietwatt: {}: the gate cannot decide whether '{}' costs more than '{}' by over {pct} %: \
                 the ratio {est:.3} [{lo:.3}, {hi:.3}] (95 %) straddles {:.3}; add runs (-r) or quiet the machine{}",
                if g.pass_inconclusive { "warning" } else { "error" },
                name(*i),
                name(c.reference),
                1.0 + pct / 100.0,
                if g.pass_inconclusive {
                    " (passed: --pass-inconclusive)"
                } else {
                    ", or give --pass-inconclusive to let it through"
                }
            );
        }
        if !g.pass_inconclusive {
            return Ok(ExitCode::from(INCONCLUSIVE));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--plot`: each command's energy per run as a box.
fn plot(env: &Environment, m: &Measured, p: &std::path::Path) -> Result<(), Failure> {
    let c = &m.comparison;
    let series: Vec<quietwatt_stats::plot::Series> = c
        .commands
        .iter()
        .enumerate()
        .map(|(i, s)| quietwatt_stats::plot::Series {
            label: format!("#{} {}", i + 1, shorten(&s.command, 24)),
            values: s.per_run.iter().filter_map(|r| r.total_energy_j).collect(),
        })
        .collect();
    let title = format!(
        "Energy per run, {} run(s) each ({}{})",
        c.runs,
        m.mechanism_name,
        if env.is_emulated() {
            ", EMULATED"
        } else if !super::estimated_words(m.mechanism_name).is_empty() {
            ", ESTIMATED"
        } else {
            ""
        }
    );
    let written = super::PlotFiles::default()
        .write(
            &quietwatt_stats::plot::boxplot_svg(&title, "energy (J)", &series),
            p,
        )
        .map_err(|e| {
            Failure::new(
                crate::exit::OUTPUT,
                format!("cannot write --plot {}: {e}", p.display()),
            )
        })?;
    eprintln!("quietwatt: plot written to {written}");
    Ok(())
}

/// `s` cut to `n` characters with an ellipsis, for a plot's labels.
fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut t: String = s.chars().take(n - 1).collect();
    t.push('…');
    t
}
