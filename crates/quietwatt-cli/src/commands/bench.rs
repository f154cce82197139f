//! `quietwatt bench ...`: measurements of quietwatt itself.
//!
//! `bench sampler` is paper 002's Fig. 5, built in: the timerfd engine against two
//! naive loops on the same source. (Later: `latency`, `overhead`, `wakeup`.)

use super::parse_duration;
use crate::emulated::Environment;
use crate::exit::{Failure, OUTPUT};
use quietwatt::{source, Hertz, Mechanism, Selection, Source};
use quietwatt_lab::bench::{self, BenchOptions, BenchReport, StandIn, Variant};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: Bench,
}

/// What to benchmark.
#[derive(clap::Subcommand)]
pub enum Bench {
    /// The engine against a minimal reference loop (the floor) and two
    /// relative-sleep loops (which lose ticks): achieved rate, missed deadlines,
    /// wake-up lateness, CPU per sample and its ratio to the floor, side by side,
    /// and whether the engine meets its targets.
    #[command(after_help = crate::help::BENCH_SAMPLER)]
    Sampler(SamplerArgs),
    /// The cost of each primitive a RAPL reader is built from (rdtsc, cpuid, a
    /// syscall, clock_gettime, one read per mechanism and domain), timed with
    /// serialized rdtsc: median, p99, 95 % CI.
    #[command(after_help = crate::help::BENCH_LATENCY)]
    Latency(super::lab::LatencyArgs),
    /// A built-in workload (ep, cg, idle) that prints its own solve time, as NAS
    /// benchmarks do: `quietwatt run -- quietwatt bench workload ep`.
    #[command(after_help = crate::help::BENCH_WORKLOAD)]
    Workload(super::lab::WorkloadArgs),
    /// The overhead of monitoring: workloads x monitors x
    /// frequencies x repetitions in interleaved rounds, a resumable CSV, and the
    /// Wilcoxon / Holm / location-shift table.
    #[command(after_help = crate::help::BENCH_OVERHEAD)]
    Overhead(super::lab::OverheadArgs),
    /// A caller/callee experiment: wake-up latency per idle
    /// state reached, two pinned threads, a futex signal at a fixed interval.
    #[command(after_help = crate::help::BENCH_WAKEUP)]
    Wakeup(super::events::WakeupArgs),
    /// The same as `quietwatt compare`: commands compared by their energy.
    #[command(after_help = crate::help::COMPARE)]
    Energy(Box<super::energy_bench::Args>),
}

impl Args {
    /// What can be refused before anything is mounted or run.
    pub fn check(&self) -> Result<(), Failure> {
        match &self.what {
            Bench::Energy(a) => a.check(),
            _ => Ok(()),
        }
    }
}

/// Arguments of `bench sampler`.
#[derive(clap::Args)]
pub struct SamplerArgs {
    /// Target samples per second.
    #[arg(short, long, default_value = "1000")]
    freq: Hertz,
    /// How long each variant runs: seconds, or with a unit (500ms, 2m).
    #[arg(long, default_value = "10", value_parser = parse_duration)]
    duration: Duration,
    /// Variants to run, comma-separated: reference, timerfd (the engine), badsleep,
    /// badsleep-st [default: all]. They always run in that order.
    #[arg(long, value_delimiter = ',')]
    variants: Vec<Variant>,
    /// Pin every variant's loop to this CPU (default: where the counters are read,
    /// as `record` does).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Run every variant's loop at SCHED_FIFO, as `record --rt` does.
    #[arg(long)]
    rt: bool,
    /// Run the variants this many times in turn, each for --duration: the CPU
    /// ratio is then the median of the rounds' ratios, each against the reference
    /// run just before (robust to a machine whose load changes).
    #[arg(long, default_value = "1", value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Mechanism to read (default: the best that works here, else the stand-in).
    #[arg(short, long)]
    mechanism: Option<Mechanism>,
    /// Use the stand-in source (a pread of a real file per channel) even where RAPL opens.
    #[arg(long)]
    stand_in: bool,
    /// Print one JSON object on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs the chosen benchmark.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    match args.what {
        Bench::Sampler(a) => sampler(env, a),
        Bench::Latency(a) => super::lab::latency(env, a),
        Bench::Workload(a) => super::lab::workload(a),
        Bench::Overhead(a) => super::lab::overhead(env, a),
        Bench::Wakeup(a) => super::events::wakeup(env, a),
        Bench::Energy(a) => super::energy_bench::run(env, *a),
    }
}

fn sampler(env: &Environment, args: SamplerArgs) -> Result<ExitCode, Failure> {
    let root = env.root.clone();
    let real = if args.stand_in {
        Err("--stand-in".to_string())
    } else {
        source::open(&root, args.mechanism, &Selection::all()).map_err(|_| {
            format!(
                "no RAPL mechanism opens under {}; `quietwatt doctor` says why",
                root.dir().display()
            )
        })
    };
    let (label, stand_in) = match &real {
        Ok(s) => (
            format!(
                "{} under {} ({} channel(s)){}",
                s.mechanism(),
                root.dir().display(),
                s.channels().len(),
                if env.is_emulated() { ", EMULATED" } else { "" }
            ),
            false,
        ),
        Err(why) => {
            let s = StandIn::open(&root, 2)?;
            (
                format!(
                    "STAND-IN, not RAPL: one pread of {} per channel, 2 channels, synthetic counters ({why})",
                    s.path().display()
                ),
                true,
            )
        }
    };
    let mechanism = args.mechanism;
    let mut open = move || -> quietwatt::Result<Box<dyn Source>> {
        if stand_in {
            Ok(Box::new(StandIn::open(&root, 2)?))
        } else {
            Ok(source::open(&root, mechanism, &Selection::all())?)
        }
    };
    drop(real);
    let dir = tempfile::Builder::new()
        .prefix("quietwatt-bench-")
        .tempdir()
        .map_err(|e| {
            Failure::new(
                OUTPUT,
                format!("cannot create a directory for the benchmark's files: {e}"),
            )
        })?;
    let mut opts = BenchOptions::new(args.freq, args.duration);
    if !args.variants.is_empty() {
        opts.variants = args.variants;
    }
    opts.cpu = args.cpu;
    opts.realtime = args.rt;
    opts.rounds = args.rounds as usize;
    let n = Variant::ALL
        .iter()
        .filter(|v| opts.variants.contains(v))
        .count();
    eprintln!(
        "quietwatt: bench sampler: {} for {:.1} s per variant, {n} variant(s) one after the other, {} round(s) (about {:.0} s)\n  source: {label}",
        args.freq,
        args.duration.as_secs_f64(),
        opts.rounds,
        args.duration.as_secs_f64() * (n * opts.rounds) as f64
    );
    let report = bench::sampler(&mut open, label, stand_in, &opts, dir.path())?;
    if args.json {
        let v = crate::schema::stamped(&report, "bench-sampler");
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(r: &BenchReport) {
    let us = |ns: u64| ns as f64 / 1e3;
    println!();
    println!(
        "target {} Hz, {} s per variant{}, {} channel(s) per read; rate = samples per second",
        r.freq_hz,
        r.duration_s,
        if r.rounds > 1 {
            format!(" x {} rounds", r.rounds)
        } else {
            String::new()
        },
        r.channels
    );
    println!("source: {}", r.source);
    println!(
        "machine: {} CPU(s), 1-min load average {:.2} before, {:.2} after (other work makes every figure worse)",
        r.cpus, r.loadavg[0], r.loadavg[1]
    );
    for n in &r.notes {
        println!("note: {n}");
    }
    println!();
    println!(
        "{:<12} {:<36} {:>8} {:>14} {:>7} {:>24} {:>10} {:>10} {:>8} {:>6}",
        "variant",
        "loop",
        "rate",
        "1-s windows",
        "missed",
        "wake-up lateness (us)",
        "CPU/sample",
        "process",
        "ratio",
        "steal"
    );
    println!(
        "{:<12} {:<36} {:>8} {:>14} {:>7} {:>24} {:>10} {:>10} {:>8} {:>6}",
        "", "", "mean", "mean / min", "", "p50 / p99 / max", "loop (us)", "(us)", "vs ref", "(%)"
    );
    for v in &r.variants {
        println!(
            "{:<12} {:<36} {:>8.1} {:>14} {:>7} {:>24} {:>10.2} {:>10.2} {:>8} {:>6.2}",
            v.variant.name(),
            v.description,
            v.rate_mean,
            format!("{:.1} / {}", v.rate_window_mean, v.rate_window_min),
            v.missed_deadlines,
            format!(
                "{:.1} / {:.1} / {:.1}",
                us(v.lateness.p50_ns),
                us(v.lateness.p99_ns),
                us(v.lateness.max_ns)
            ),
            v.cpu_per_sample_ns / 1e3,
            v.process_cpu_per_sample_ns / 1e3,
            v.cpu_ratio
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "-".into()),
            v.steal_percent
        );
    }
    println!();
    println!("missed: deadlines a timerfd saw pass (a relative sleep cannot know it fell behind: its rate shows it)");
    println!("lateness: after the deadline (timerfd); after the asked wake time (sleep)");
    println!("CPU/sample: the loop's threads (sampler + writer); process: every thread while the variant ran;");
    println!("ratio: process CPU per sample over the reference loop's, measured in this run");
    println!("steal: CPU time the hypervisor gave to other guests (a busy host makes wake-ups later and dearer)");
    if r.rounds > 1 {
        println!(
            "rounds: counts and CPU summed over the rounds; p50 the median round's, p99 and max the worst round's;"
        );
        println!(
            "  ratio the median of the rounds' ratios, each against its own round's reference:"
        );
        for v in r
            .variants
            .iter()
            .filter(|v| v.variant != Variant::Reference)
        {
            let list: Vec<String> = v.round_ratios.iter().map(|x| format!("{x:.3}")).collect();
            println!("  {:<12} {}", v.variant.name(), list.join(" "));
        }
    }
    if !r.targets.is_empty() {
        println!();
        println!("targets for quietwatt's engine (timerfd):");
        for t in &r.targets {
            println!(
                "  {:<4} {:<28} {:>12}   goal {}",
                if t.met { "MET" } else { "MISS" },
                t.what,
                t.value,
                t.goal
            );
        }
        if r.freq_hz <= 1000.0 && r.duration_s * (r.rounds as f64) < 60.0 {
            println!("  (the 1 kHz targets hold over 60 s runs: --duration 60)");
        }
    }
}
