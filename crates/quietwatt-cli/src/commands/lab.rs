//! `quietwatt bench latency | workload | overhead`: the overhead lab (issue 6),
//! dispatched from `bench`.

use crate::emulated::Environment;
use crate::exit::{Failure, OUTPUT, USAGE};
use quietwatt::Mechanism;
use quietwatt_lab::experiment::{
    self, CommandFactory, Monitor, Plan, ProcessExecutor, QuietwattSource, Results, Workload,
};
use quietwatt_lab::latency::{self, LatencyConfig, LatencyReport};
use quietwatt_lab::workload::{self, Kind};
use std::num::NonZero;
use std::process::ExitCode;

/// Arguments of `bench latency`.
#[derive(clap::Args)]
pub struct LatencyArgs {
    /// Calls timed per primitive.
    #[arg(long, default_value_t = latency::DEFAULT_ITERATIONS)]
    iterations: usize,
    /// Bootstrap resamples for the 95 % interval of each median.
    #[arg(long, default_value_t = latency::DEFAULT_BOOTSTRAP)]
    bootstrap: usize,
    /// Pin the measuring thread to this CPU (default: the first allowed).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Print one JSON object on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

/// Times every primitive and prints the table (paper 002, Table III) or JSON.
pub fn latency(env: &Environment, args: LatencyArgs) -> Result<ExitCode, Failure> {
    // The library refuses it too, without naming the flag.
    if args.iterations == 0 {
        return Err(Failure::usage("--iterations must be at least 1"));
    }
    let config = LatencyConfig {
        iterations: args.iterations,
        bootstrap: args.bootstrap,
        cpu: args.cpu,
        root: env.root.clone(),
        ..LatencyConfig::default()
    };
    if !args.json {
        eprintln!(
            "quietwatt: bench latency: {} calls per primitive, pinned to one CPU (a few seconds)",
            config.iterations
        );
    }
    let report = latency::run(&config).map_err(|e| Failure::new(USAGE, e.to_string()))?;
    if args.json {
        let mut v = crate::schema::stamped(&report, "bench-latency");
        v["emulated"] = env.is_emulated().into();
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print_latency(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_latency(r: &LatencyReport) {
    let us = |ns: f64| ns / 1e3;
    println!();
    match r.timer.tsc_ghz {
        Some(ghz) => println!(
            "timer: rdtsc serialized with lfence, TSC {ghz:.4} GHz calibrated against CLOCK_MONOTONIC over {} ms{}",
            latency::CALIBRATION.as_millis(),
            match r.timer.tsc_invariant {
                Some(true) => " (invariant TSC)",
                Some(false) => " (TSC NOT invariant: figures may drift with frequency)",
                None => "",
            }
        ),
        None => println!("timer: clock_gettime(CLOCK_MONOTONIC) (no TSC on this architecture)"),
    }
    println!(
        "{} calls per primitive on CPU {}{}; 95 % CI of the median: percentile bootstrap, {} resamples, seed {:#x}",
        r.iterations,
        r.cpu,
        r.other_cpu
            .map(|c| format!(" (other CPU: {c})"))
            .unwrap_or_default(),
        r.bootstrap,
        r.seed
    );
    println!("RAPL root: {}", r.root);
    println!();
    let tw = r
        .rows
        .iter()
        .map(|row| row.target.chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, 72);
    println!(
        "{:<15} {:<tw$} {:>10} {:>22} {:>10} {:>9}  note",
        "primitive", "target", "median us", "95 % CI of median", "p99 us", "net us"
    );
    for row in &r.rows {
        let target: String = row.target.chars().take(tw).collect();
        match &row.latency {
            Some(d) => println!(
                "{:<15} {:<tw$} {:>10.4} {:>22} {:>10.4} {:>9}  {}{}",
                row.primitive,
                target,
                us(d.median_ns),
                format!("[{:.4}, {:.4}]", us(d.ci_low_ns), us(d.ci_high_ns)),
                us(d.p99_ns),
                d.net_median_ns
                    .map(|n| format!("{:.4}", us(n)))
                    .unwrap_or_else(|| "floor".into()),
                row.label.as_deref().unwrap_or(""),
                if d.errors > 0 {
                    format!(" ({} calls failed)", d.errors)
                } else {
                    String::new()
                }
            ),
            None => println!(
                "{:<15} {:<tw$} {:>10} {:>22} {:>10} {:>9}  {}{}",
                row.primitive,
                target,
                "-",
                "-",
                "-",
                "-",
                row.label
                    .as_deref()
                    .map(|l| format!("{l}: "))
                    .unwrap_or_default(),
                row.unavailable.as_deref().unwrap_or("not measured")
            ),
        }
    }
    println!();
    println!(
        "every figure includes the timer's own cost (the rdtsc row); net = median - that floor"
    );
}

/// Arguments of `bench workload`.
#[derive(clap::Args)]
pub struct WorkloadArgs {
    /// The kernel: `ep` (Gaussian pairs, compute-bound), `cg` (sparse conjugate
    /// gradient, memory-bound) or `idle` (sleep).
    kind: Kind,
    /// Problem size: pairs (ep, default 67108864), matrix rows (cg, default 400000)
    /// or milliseconds (idle, default 1000).
    #[arg(long)]
    size: Option<u64>,
    /// Threads sharing the work (default: every CPU this process may use).
    #[arg(long)]
    threads: Option<usize>,
    /// Print one JSON object on stdout instead of the lines for people.
    #[arg(long)]
    json: bool,
}

/// Every CPU this process may use, the default thread count of the workloads.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, NonZero::get)
}

/// Runs one built-in workload and prints its own solve time (not the process's),
/// as NPB does, so that `quietwatt run -- quietwatt bench workload ep` measures it.
pub fn workload(args: WorkloadArgs) -> Result<ExitCode, Failure> {
    let spec = workload::Spec {
        kind: args.kind,
        size: args.size.unwrap_or_else(|| args.kind.default_size()),
        threads: args.threads.unwrap_or_else(default_threads),
    };
    let solved = workload::run(spec).map_err(|e| Failure::new(USAGE, e.to_string()))?;
    if args.json {
        let v = crate::schema::stamped(&solved, "bench-workload");
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        println!(
            "{}: {} {} on {} thread(s): solve time {:.6} s (setup {:.3} s, not included)",
            spec.kind,
            spec.size,
            spec.kind.size_unit(),
            spec.threads,
            solved.solve_s,
            solved.setup_s
        );
        println!("  {}", solved.detail);
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `bench overhead`.
#[derive(clap::Args)]
pub struct OverheadArgs {
    /// Directory of the results: `results.csv` (appended to, so that a rerun
    /// resumes) and `report.md`.
    #[arg(
        short = 'o',
        long = "output",
        visible_alias = "out",
        value_name = "DIR"
    )]
    out: std::path::PathBuf,
    /// Built-in workloads, `KIND[:SIZE]`, comma-separated (ep, cg, idle; sizes as
    /// in `bench workload`).
    #[arg(long, value_delimiter = ',', default_value = "ep")]
    workload: Vec<String>,
    /// Threads of the built-in workloads (default: every CPU this process may use).
    #[arg(long)]
    threads: Option<usize>,
    /// Another workload, `NAME=COMMAND` (run with `sh -c`; its time is the
    /// `solve_s` of a JSON line it prints, else its wall time). Repeatable.
    #[arg(long, value_name = "NAME=COMMAND")]
    command_workload: Vec<String>,
    /// A monitor: `none` (the baseline, always included), `quietwatt:MECH`
    /// (powercap, perf, msr, perf-stand-in, pread-stand-in), or `NAME=COMMAND`
    /// (another tool, started before the workload and stopped with SIGINT after it;
    /// `{hz}`, `{interval_ms}`, `{interval_s}` are replaced). Repeatable. Default:
    /// the first quietwatt mechanism that opens here, else quietwatt:perf-stand-in.
    #[arg(long, value_name = "SPEC")]
    monitor: Vec<String>,
    /// Sampling frequencies of the monitors, in hertz, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000")]
    freq: Vec<f64>,
    /// Repetitions of each combination.
    #[arg(long, default_value_t = 12)]
    reps: usize,
    /// Repetitions of a combination run back to back in each round.
    #[arg(long, default_value_t = 3)]
    per_round: usize,
    /// Seed of the shuffled order of each round (keep it to resume a plan).
    #[arg(long, default_value_t = experiment::DEFAULT_SEED)]
    seed: u64,
    /// Milliseconds a command monitor gets to start before the workload.
    #[arg(long, default_value_t = 200)]
    settle_ms: u64,
    /// Only analyse the results already in DIR; run nothing.
    #[arg(long)]
    report_only: bool,
}

/// The command of one run of a built-in kernel: `EXE bench workload KIND --json
/// --size N --threads T`, which prints the solve time the lab reads.
fn builtin_workload(exe: &[std::ffi::OsString], spec: workload::Spec) -> CommandFactory {
    let exe = exe.to_vec();
    CommandFactory::new(move |()| {
        let mut c = std::process::Command::new(&exe[0]);
        c.args(&exe[1..])
            .args(["bench", "workload", spec.kind.name(), "--json"])
            .arg("--size")
            .arg(spec.size.to_string())
            .arg("--threads")
            .arg(spec.threads.to_string());
        c
    })
}

fn hms(d: std::time::Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Runs (or resumes) an overhead plan and prints the statistics table.
pub fn overhead(env: &Environment, args: OverheadArgs) -> Result<ExitCode, Failure> {
    use std::io::IsTerminal;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::new(OUTPUT, format!("cannot create {}: {e}", args.out.display())))?;
    let csv = args.out.join("results.csv");
    let mut results = Results::open(&csv).map_err(|e| Failure::new(OUTPUT, e.to_string()))?;
    if !args.report_only {
        let threads = args.threads.unwrap_or_else(default_threads);
        // A built-in kernel runs in a child process, as every workload does, so
        // that its CPU time and exit are its own: this executable's `bench
        // workload`, whose command line only the CLI knows.
        let exe = crate::self_command()
            .ok_or_else(|| Failure::new(USAGE, "cannot find quietwatt's own executable"))?;
        let mut workloads = args
            .workload
            .iter()
            .filter(|w| !w.trim().is_empty())
            .map(|w| {
                let spec = experiment::parse_builtin(w.trim(), threads)?;
                Ok(Workload::builtin(&spec, builtin_workload(&exe, spec)))
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(Failure::usage)?;
        for cw in &args.command_workload {
            let (name, cmd) = cw
                .split_once('=')
                .filter(|(n, c)| !n.trim().is_empty() && !c.trim().is_empty())
                .ok_or_else(|| {
                    Failure::usage(format!("--command-workload '{cw}': give NAME=COMMAND"))
                })?;
            workloads.push(Workload::shell(name.trim(), cmd.trim()));
        }
        let mut monitors = args
            .monitor
            .iter()
            .map(|m| Monitor::parse(m))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Failure::usage)?;
        if monitors.is_empty() {
            let best = [Mechanism::Perf, Mechanism::Powercap, Mechanism::Msr]
                .into_iter()
                .find(|m| {
                    experiment::open_monitor_source(&env.root, QuietwattSource::Mechanism(*m))
                        .is_ok()
                })
                .map_or(QuietwattSource::PerfStandIn, QuietwattSource::Mechanism);
            monitors.push(Monitor::Quietwatt(best));
        }
        let plan = Plan::new(
            workloads,
            monitors,
            args.freq.clone(),
            args.reps,
            args.per_round,
            args.seed,
        )
        .map_err(|e| Failure::usage(e.to_string()))?;
        let mut executor = ProcessExecutor::new(env.root.clone());
        executor.settle = std::time::Duration::from_millis(args.settle_ms);
        let total = plan.schedule().len();
        eprintln!(
            "quietwatt: bench overhead: {} workload(s) x {} monitor(s) x {} frequenc(ies) ({} combinations with the baselines) x {} repetitions = {} runs in {} rounds{}; results in {}",
            plan.workloads.len(),
            plan.monitors.len(),
            plan.freqs.len(),
            plan.combos().len(),
            plan.reps,
            total,
            plan.rounds(),
            if env.is_emulated() { ", EMULATED RAPL" } else { "" },
            csv.display()
        );
        let tty = std::io::stderr().is_terminal();
        let mut progress = |p: &experiment::Progress| {
            let line = format!(
                "[{:>4}/{}] {} / {} @ {} Hz rep {}{}  elapsed {}  ETA {}",
                p.done + p.skipped,
                p.done + p.skipped + (p.todo - p.done),
                p.last.workload,
                p.last.monitor,
                p.last.freq_hz,
                p.last.rep,
                if p.last_ok { "" } else { " FAILED" },
                hms(p.elapsed),
                hms(p.eta)
            );
            if tty {
                eprint!("\r\x1b[2K{line}");
            } else {
                eprintln!("{line}");
            }
        };
        let skipped = total
            - plan
                .schedule()
                .iter()
                .filter(|s| !results.has(&plan.key(s)))
                .count();
        if skipped > 0 {
            eprintln!("quietwatt: resuming: {skipped} of {total} runs are already in the file");
        }
        // Ctrl-C ends the run in progress (the workload gets it too) without
        // writing it, stops the monitor, and leaves a file that a rerun resumes.
        crate::signals::install();
        let done = experiment::execute(
            &plan,
            &mut results,
            &mut executor,
            &crate::signals::STOP,
            &mut progress,
        )
        .map_err(|e| Failure::new(OUTPUT, e.to_string()))?;
        if tty {
            eprintln!();
        }
        if done.interrupted {
            eprintln!(
                "quietwatt: interrupted after {} run(s); the run in progress was not recorded. Run the same command again to resume.",
                done.done
            );
        }
    }
    let rows = experiment::analyze(&results.records);
    let md = experiment::markdown(&rows, &results.records);
    let mut figures = String::new();
    // Each plot as SVG (the report links it) and as PNG beside it.
    let mut plots = super::PlotFiles::default();
    for (w, svg) in experiment::boxplots(&results.records) {
        let name = format!("boxplot-{}.svg", experiment::file_slug(&w));
        let path = args.out.join(&name);
        plots
            .write(&svg, &path)
            .map_err(|e| Failure::new(OUTPUT, format!("cannot write {}: {e}", path.display())))?;
        figures.push_str(&format!("![{w}]({name})\n\n"));
    }
    let idle = experiment::idle_markdown(&results.records).unwrap_or_default();
    for (stem, svg) in experiment::idle_plots(&results.records) {
        let name = format!("{stem}.svg");
        let path = args.out.join(&name);
        plots
            .write(&svg, &path)
            .map_err(|e| Failure::new(OUTPUT, format!("cannot write {}: {e}", path.display())))?;
        figures.push_str(&format!("![{stem}]({name})\n\n"));
    }
    let report = args.out.join("report.md");
    std::fs::write(
        &report,
        format!(
            "# Overhead of monitoring\n\nFrom {}.\n\n{md}\n{idle}{figures}",
            csv.display()
        ),
    )
    .map_err(|e| Failure::new(OUTPUT, format!("cannot write {}: {e}", report.display())))?;
    println!("{md}");
    if !idle.is_empty() {
        println!("{idle}");
    }
    eprintln!("quietwatt: report written to {}", report.display());
    Ok(ExitCode::SUCCESS)
}
