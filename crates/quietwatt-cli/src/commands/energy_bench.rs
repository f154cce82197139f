//! `quietwatt compare 'CMD1' 'CMD2' ...` (also `bench energy`): commands compared
//! by their energy, as hyperfine compares their time. The runs are interleaved,
//! each round running every command once in a shuffled order (seeded), so that a
//! drift of the machine (temperature, frequency, other load) and the position in a
//! round fall on every command alike; each command's energy and time are
//! summarised with their intervals, and each command is compared with the
//! reference (the first, or `--reference`): the ratio of energies with its
//! interval, Welch's t test, the lab's rank test with the Hodges-Lehmann shift, and
//! a verdict. `--fail-if-more-than PCT` turns the verdict into an exit code for CI.

use super::repeat::{failed_run, interrupted, stopped, RunResult, Runner, Summaries};
use super::SamplerArgs;
use crate::emulated::Environment;
use crate::exit::Failure;
use quietwatt::{FreqArg, Mechanism};
use quietwatt_stats::repeat::{self, Verdict};
use quietwatt_stats::rng::XorShift;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

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
    #[arg(short, long, default_value_t = 0, value_name = "K")]
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
    /// Mechanism to read (default: the best that works here; ebpf and perf-ring are not available here).
    #[arg(short, long)]
    mechanism: Option<Mechanism>,
    /// Domains to measure, comma-separated (package,core,uncore,dram,psys; default: all).
    #[arg(short, long)]
    domains: Option<String>,
    /// Reads per second while a command runs [default: 10, raised when a counter
    /// could wrap twice between reads]
    #[arg(short, long, allow_negative_numbers = true)]
    freq: Option<FreqArg>,
    #[command(flatten)]
    sampler: SamplerArgs,
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

    /// Runs `--prepare`, if given; its failure stops the series.
    fn prepare(&self) -> Result<(), Failure> {
        super::repeat::prepare(&self.shell, self.prepare.as_deref())
    }

    fn command(&self, i: usize) -> Command {
        let mut c = Command::new(&self.shell);
        c.arg("-c").arg(&self.commands[i]);
        if !self.show_output {
            c.stdout(Stdio::null()).stderr(Stdio::null());
        }
        c
    }
}

/// Runs the comparison, prints it, exits 0 (or [`REGRESSION`] for the gate).
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    args.check()?;
    super::exports::checked(
        &[],
        &[
            ("--export-json", args.export_json.as_deref()),
            ("--export-csv", args.export_csv.as_deref()),
            ("--export-markdown", args.export_markdown.as_deref()),
            ("--plot", args.plot.as_deref()),
        ],
    )?;
    let runner = Runner::new(
        env,
        args.mechanism,
        &args.domains,
        args.freq,
        &args.sampler,
        "bench energy",
    )?;
    crate::signals::install();
    let k = args.commands.len();
    let reference = args.reference()?;
    for round in 0..args.warmup {
        for i in 0..k {
            args.prepare()?;
            let status = quietwatt::command::spawn_and_wait(
                &mut args.command(i),
                &mut crate::signals::forward_to_command,
            )?;
            if stopped() {
                return Err(interrupted());
            }
            let code = super::exit_code(status);
            if code != 0 && !args.ignore_failure {
                return Err(command_failed(failed_run(
                    &args.commands[i],
                    round + 1,
                    args.warmup,
                    code,
                    "warm-up run",
                )));
            }
        }
    }
    let mut runs: Vec<Vec<RunResult>> = vec![Vec::new(); k];
    let mut rng = XorShift::new(args.seed);
    let mut order: Vec<usize> = (0..k).collect();
    let bar = super::exports::progress(u64::from(args.runs) * k as u64, args.json);
    // Rounds measured whole (all of them unless a signal cut the series short).
    let mut rounds = args.runs;
    'rounds: for round in 0..args.runs {
        // Fisher-Yates: a fresh order each round.
        for j in (1..k).rev() {
            order.swap(j, rng.below(j + 1));
        }
        for &i in &order {
            args.prepare()?;
            bar.set_message(format!("round {}/{}: #{}", round + 1, args.runs, i + 1));
            let r = runner.measure(&mut args.command(i))?;
            bar.inc(1);
            if stopped() {
                // As perf stat -r: the round the signal cut is left out (every
                // command keeps as many runs), the whole rounds are summarised.
                bar.finish_and_clear();
                if round == 0 {
                    return Err(interrupted());
                }
                for r in &mut runs {
                    r.truncate(round as usize);
                }
                eprintln!(
                    "quietwatt: interrupted: comparing the {round} whole round(s) of {} (the round cut short is left out)",
                    args.runs
                );
                rounds = round;
                break 'rounds;
            }
            let code = r.exit_code;
            runs[i].push(r);
            if code != 0 && !args.ignore_failure {
                bar.abandon();
                return Err(command_failed(failed_run(
                    &args.commands[i],
                    round + 1,
                    args.runs,
                    code,
                    "run",
                )));
            }
        }
    }
    bar.finish_and_clear();
    let summaries: Vec<Summaries> = runs.iter().map(|r| Summaries::new(r)).collect();
    let totals: Vec<Option<Vec<f64>>> = runs
        .iter()
        .map(|r| r.iter().map(|r| r.total.map(|t| t.0)).collect())
        .collect();
    let mut comparisons = Vec::new();
    let mut gate_failed = Vec::new();
    let mut gate_undecided = Vec::new();
    for i in (0..k).filter(|&i| i != reference) {
        let (a, b) = match (&summaries[reference].energy, &summaries[i].energy) {
            (Some(a), Some(b)) => (a, b),
            _ => continue,
        };
        let welch = repeat::welch(a, b);
        let ratio = repeat::ratio(a, b);
        let rank = match (&totals[reference], &totals[i]) {
            (Some(x), Some(y)) => repeat::rank_test(x, y),
            _ => None,
        };
        let verdict = repeat::verdict(welch.as_ref(), ratio.as_ref());
        let time_ratio = summaries[reference]
            .duration
            .as_ref()
            .zip(summaries[i].duration.as_ref())
            .and_then(|(a, b)| repeat::ratio(a, b));
        if let (Some(pct), Some(r)) = (args.fail_if_more_than, &ratio) {
            match repeat::gate(verdict, r, pct) {
                repeat::GateOutcome::Regression => gate_failed.push(i),
                repeat::GateOutcome::Inconclusive => gate_undecided.push(i),
                _ => {}
            }
        }
        comparisons.push((i, welch, ratio, rank, verdict, time_ratio));
    }
    let mut v = serde_json::json!({
        "mechanism": runner.mechanism_name,
        "emulated": env.is_emulated(),
        "runs": rounds,
        "warmup": args.warmup,
        "shell": args.shell,
        "order": format!("interleaved: each round runs every command once, in an order shuffled with seed {}", args.seed),
        "seed": args.seed,
        "reference": reference,
        "prepare": args.prepare,
        "uncertainty_method": super::repeat::UNCERTAINTY_METHOD,
        "commands": args.commands.iter().zip(&summaries).zip(&runs).map(|((c, s), r)| {
            let mut o = s.json();
            o["command"] = c.as_str().into();
            o["per_run"] = r.iter().map(RunResult::json).collect::<Vec<_>>().into();
            o
        }).collect::<Vec<_>>(),
        "comparisons": comparisons.iter().map(|(i, w, r, u, verdict, t)| serde_json::json!({
            "command": i,
            "reference": reference,
            "energy_ratio": r,
            "duration_ratio": t,
            "welch": w,
            "rank_test": u,
            "verdict": verdict,
            "significance_level": repeat::ALPHA,
        })).collect::<Vec<_>>(),
    });
    crate::schema::stamp(&mut v, "bench-energy");
    if rounds < args.runs {
        v["interrupted"] = serde_json::json!({
            "exit_status": crate::signals::stopped_status(),
            "runs_asked": args.runs,
        });
    }
    runner.add_rate_json(&mut v);
    if let Some(pct) = args.fail_if_more_than {
        v["gate"] = serde_json::json!({
            "fail_if_more_than_pct": pct,
            "failed": !gate_failed.is_empty(),
            "failed_commands": gate_failed,
            "inconclusive": !gate_undecided.is_empty(),
            "inconclusive_commands": gate_undecided,
            "pass_inconclusive": args.pass_inconclusive,
        });
    }
    if args.json {
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        print_text(
            env,
            &args,
            &runner,
            &summaries,
            &comparisons,
            reference,
            rounds,
        );
    }
    for (c, s) in args.commands.iter().zip(&summaries) {
        super::repeat::outlier_warning(c, s);
    }
    if let Some(p) = &args.export_json {
        super::exports::json(p, &v)?;
    }
    if let Some(p) = &args.export_csv {
        let per: Vec<(&str, &[RunResult])> = args
            .commands
            .iter()
            .map(String::as_str)
            .zip(runs.iter().map(Vec::as_slice))
            .collect();
        super::exports::csv(p, &per)?;
    }
    if let Some(p) = &args.export_markdown {
        let mut relative = vec![None; k];
        for (i, _, r, ..) in &comparisons {
            relative[*i] = r.clone();
        }
        let rows: Vec<(&str, &Summaries)> = args
            .commands
            .iter()
            .map(String::as_str)
            .zip(&summaries)
            .collect();
        super::exports::markdown(p, &rows, &relative, reference)?;
    }
    if let Some(p) = &args.plot {
        let series: Vec<quietwatt_stats::plot::Series> = args
            .commands
            .iter()
            .zip(&runs)
            .enumerate()
            .map(|(i, (c, r))| quietwatt_stats::plot::Series {
                label: format!("#{} {}", i + 1, shorten(c, 24)),
                values: r.iter().filter_map(|r| r.total.map(|t| t.0)).collect(),
            })
            .collect();
        let title = format!(
            "Energy per run, {} run(s) each ({}{})",
            rounds,
            runner.mechanism_name,
            if env.is_emulated() { ", EMULATED" } else { "" }
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
    }
    if rounds < args.runs {
        return Ok(ExitCode::from(crate::signals::stopped_status()));
    }
    if !gate_failed.is_empty() {
        let pct = args.fail_if_more_than.unwrap_or(0.0);
        for i in &gate_failed {
            eprintln!(
                "quietwatt: energy regression: '{}' costs more than '{}' by over {pct} % \
                 (the ratio's 95 % interval starts above {:.4})",
                args.commands[*i],
                args.commands[reference],
                1.0 + pct / 100.0
            );
        }
        return Ok(ExitCode::from(REGRESSION));
    }
    if !gate_undecided.is_empty() {
        let pct = args.fail_if_more_than.unwrap_or(0.0);
        for (i, _, r, ..) in comparisons.iter().filter(|c| gate_undecided.contains(&c.0)) {
            let (est, lo, hi) = r.as_ref().map_or((f64::NAN, f64::NAN, f64::NAN), |r| {
                (r.estimate, r.ci[0], r.ci[1])
            });
            eprintln!(
                "quietwatt: {}: the gate cannot decide whether '{}' costs more than '{}' by over {pct} %: \
                 the ratio {est:.3} [{lo:.3}, {hi:.3}] (95 %) straddles {:.3}; add runs (-r) or quiet the machine{}",
                if args.pass_inconclusive { "warning" } else { "error" },
                args.commands[*i],
                args.commands[reference],
                1.0 + pct / 100.0,
                if args.pass_inconclusive {
                    " (passed: --pass-inconclusive)"
                } else {
                    ", or give --pass-inconclusive to let it through"
                }
            );
        }
        if !args.pass_inconclusive {
            return Ok(ExitCode::from(INCONCLUSIVE));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A compared command's failure, under [`COMMAND_FAILED`] (its own code stays in
/// the message).
fn command_failed(f: Failure) -> Failure {
    Failure::new(COMMAND_FAILED, f.message())
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

type Compared = (
    usize,
    Option<repeat::Welch>,
    Option<repeat::Ratio>,
    Option<repeat::RankTest>,
    Verdict,
    Option<repeat::Ratio>,
);

fn print_text(
    env: &Environment,
    args: &Args,
    runner: &Runner<'_>,
    summaries: &[Summaries],
    comparisons: &[Compared],
    reference: usize,
    rounds: u32,
) {
    eprintln!();
    eprintln!(
        " {} commands, {} interleaved run(s) each{} ({} mechanism{}, read at {}):",
        args.commands.len(),
        rounds,
        if args.warmup > 0 {
            format!(" after {} warm-up run(s)", args.warmup)
        } else {
            String::new()
        },
        runner.mechanism_name,
        if env.is_emulated() { ", EMULATED" } else { "" },
        runner.rate_words()
    );
    for (i, (c, s)) in args.commands.iter().zip(summaries).enumerate() {
        eprintln!();
        eprintln!(" #{} '{c}'", i + 1);
        s.print();
    }
    eprintln!();
    for (i, w, r, u, verdict, t) in comparisons {
        let interval = |r: &Option<repeat::Ratio>| {
            r.as_ref().map_or("-".to_string(), |r| {
                format!("{:.3} [{:.3}, {:.3}]", r.estimate, r.ci[0], r.ci[1])
            })
        };
        eprintln!(
            " #{} against #{}: energy × {} (95 % CI), time × {}",
            i + 1,
            reference + 1,
            interval(r),
            interval(t)
        );
        eprintln!(
            "   energy: {}{}",
            verdict.words(),
            w.as_ref().map_or(String::new(), |w| format!(
                " ({}: p = {:.3e})",
                w.test, w.p_value
            ))
        );
        if let Some(u) = u {
            eprintln!("   {}: p = {:.3e}", u.test, u.p_value);
            if let Some(h) = &u.shift {
                eprintln!(
                    "   Hodges-Lehmann shift: {:+.4} J [{:+.4}, {:+.4}] (95 % CI)",
                    h.estimate, h.lower, h.upper
                );
            }
        }
    }
    eprintln!();
    eprintln!("  {}.", super::repeat::UNCERTAINTY_METHOD);
    eprintln!();
}
