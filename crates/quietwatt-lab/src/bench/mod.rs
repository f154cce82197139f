//! The comparison of paper 002, Fig. 5, built in, against a floor measured in the
//! same run: the timerfd engine, two naive loops, and a minimal reference loop, on
//! the same source at the same rate.
//!
//! | variant | pacing | work per tick | I/O |
//! |---|---|---|---|
//! | `reference` | absolute deadlines on a timerfd | the source's reads only | none (the floor) |
//! | `timerfd` | absolute deadlines on a timerfd | reads, wrap correction, ring | writer thread (the engine) |
//! | `badsleep` | `sleep(period)` after each read | as the engine | writer thread |
//! | `badsleep-st` | `sleep(period)` after each read | as the engine, then convert and format | in the sampling loop |
//!
//! For each: the achieved rate (mean, and mean and minimum over whole 1-s windows),
//! missed deadlines, wake-up lateness, CPU per sample (of the loop's threads, and of
//! the whole process while it ran) and that CPU as a ratio of the reference's. On
//! a VM a timer wake-up costs far more than a counter read, so an absolute CPU
//! figure says more about the machine than about the loop: the ratio to a floor
//! measured minutes apart on the same machine is what can be compared. Where no
//! RAPL source opens, a stand-in source preads a real sysfs or procfs file per
//! channel, so every tick costs real syscalls.

use quietwatt::error::Result;
use quietwatt::overhead::Lateness;
use quietwatt::sampler::{self, Setup};
use quietwatt::source::Source;
use quietwatt::ticker::Hertz;
use serde::Serialize;
use std::num::NonZero;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

// The stand-in source: `bench sampler --stand-in` and the lab's `pread-stand-in`
// monitor, where no RAPL opens. Not energy, and no crate below the lab needs it.
mod stand_in;
pub use stand_in::StandIn;

// The loops, each measured the same way, and what their rounds add up to.
mod loops;
mod report;
use loops::run_variant;
use report::combine;
pub use report::{targets, CPU_RATIO_TARGET, FAST_SHARE_TARGET, P99_TARGET_NS, RATE_SHARE_TARGET};

/// The loops compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// The floor: timerfd deadlines and the source's reads, nothing else (no ring,
    /// no writer, no conversion, no output). What any reader of these counters at
    /// this rate must pay on this machine.
    Reference,
    /// The engine: timerfd deadlines, I/O on the writer thread.
    Timerfd,
    /// Relative sleep, I/O on the writer thread.
    Badsleep,
    /// Relative sleep, I/O in the sampling loop.
    BadsleepSt,
}

impl Variant {
    /// All, in the order they run and print: the floor first, then the engine right
    /// after it (the closer in time, the less the machine's load differs between the
    /// two figures the CPU ratio compares), then paper 002's naive loops.
    pub const ALL: [Variant; 4] = [
        Variant::Reference,
        Variant::Timerfd,
        Variant::Badsleep,
        Variant::BadsleepSt,
    ];

    /// Short name (paper 002's for the three loops of its figure).
    pub fn name(self) -> &'static str {
        match self {
            Variant::Reference => "reference",
            Variant::Timerfd => "timerfd",
            Variant::Badsleep => "badsleep",
            Variant::BadsleepSt => "badsleep-st",
        }
    }

    /// What it is.
    pub fn description(self) -> &'static str {
        match self {
            Variant::Reference => "timerfd + reads only (the floor)",
            Variant::Timerfd => "quietwatt: timerfd + ring + writer",
            Variant::Badsleep => "relative sleep + I/O thread",
            Variant::BadsleepSt => "relative sleep, I/O in the loop",
        }
    }
}

impl FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        let s = s.trim();
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s || (s == "engine" && *v == Variant::Timerfd))
            .ok_or_else(|| {
                format!(
                    "unknown variant '{s}': expected reference, timerfd (or engine), badsleep, badsleep-st"
                )
            })
    }
}

/// How to run the benchmark.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Target rate.
    pub freq: Hertz,
    /// How long each variant runs.
    pub duration: Duration,
    /// Which variants, run in [`Variant::ALL`]'s order whatever the order given.
    pub variants: Vec<Variant>,
    /// Pin every variant's loop to this CPU (default: where the source's counters
    /// are, as the engine does; else unpinned).
    pub cpu: Option<usize>,
    /// Times the chosen variants run, one after the other, each for `duration`: on
    /// a machine whose load changes, the median of several rounds' CPU ratios
    /// says more than one.
    pub rounds: usize,
    /// SCHED_FIFO for every variant's loop, as `--rt` gives the engine.
    pub realtime: bool,
}

impl BenchOptions {
    /// All variants at `freq` for `duration`, unpinned, normal priority.
    pub fn new(freq: Hertz, duration: Duration) -> BenchOptions {
        BenchOptions {
            freq,
            duration,
            variants: Variant::ALL.to_vec(),
            cpu: None,
            rounds: 1,
            realtime: false,
        }
    }
}

/// One variant's figures.
#[derive(Debug, Clone, Serialize)]
pub struct VariantResult {
    /// Which loop.
    pub variant: Variant,
    /// What it is.
    pub description: &'static str,
    /// Samples taken (and written, for the variants that write).
    pub samples: u64,
    /// Seconds from the first sample to the last.
    pub span_s: f64,
    /// (samples - 1) / span: the achieved rate.
    pub rate_mean: f64,
    /// The achieved rate as a fraction of the target.
    pub rate_share: f64,
    /// Mean of the samples counted in each whole 1-s window.
    pub rate_window_mean: f64,
    /// The lowest count of a whole 1-s window.
    pub rate_window_min: u64,
    /// Whole 1-s windows counted.
    pub windows: usize,
    /// Deadlines the timer saw pass (timerfd loops only; a relative sleep cannot know).
    pub missed_deadlines: u64,
    /// Wake-up lateness: after the deadline (timerfd), after the asked wake time (sleep).
    pub lateness: Lateness,
    /// CPU time of the loop's own threads (sampler and writer) per sample, nanoseconds.
    pub cpu_per_sample_ns: f64,
    /// The writer thread's share of `cpu_per_sample_ns` (0 where there is none).
    pub writer_cpu_per_sample_ns: f64,
    /// CPU time of the whole process while the variant ran (every thread, the
    /// orchestrating one and the self-accounting included) per sample,
    /// nanoseconds: the figure the ratio compares.
    pub process_cpu_per_sample_ns: f64,
    /// `process_cpu_per_sample_ns` over the reference loop's, when it ran (with
    /// several rounds: the median of the rounds' ratios).
    pub cpu_ratio: Option<f64>,
    /// Each round's ratio, against the reference loop run just before it.
    pub round_ratios: Vec<f64>,
    /// The CPU the loop was pinned to.
    pub pinned_cpu: Option<usize>,
    /// Whether the loop ran with SCHED_FIFO.
    pub realtime: bool,
    /// The machine's CPU time stolen by the hypervisor while the variant ran, as a
    /// percentage of all CPU time (`/proc/stat`'s steal; 0 on bare metal): a host
    /// busy with other guests makes wake-ups later and dearer, and this is the
    /// part of it a guest can see.
    pub steal_percent: f64,
}

/// One of the targets, checked on this run.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is measured.
    pub what: &'static str,
    /// The goal, in words (`>= 999.5 /s`).
    pub goal: String,
    /// What this run measured.
    pub value: String,
    /// Whether the goal is met.
    pub met: bool,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// What was read.
    pub source: String,
    /// Whether the source is the stand-in, not RAPL.
    pub stand_in: bool,
    /// Channels per read.
    pub channels: usize,
    /// The target rate.
    pub freq_hz: f64,
    /// Seconds each variant ran per round.
    pub duration_s: f64,
    /// Rounds of the variants.
    pub rounds: usize,
    /// One entry per variant, in the order they ran, its rounds combined.
    pub variants: Vec<VariantResult>,
    /// The targets for the engine, where the variants they compare ran.
    pub targets: Vec<Target>,
    /// The machine's 1-minute load average before the first variant and after the
    /// last: other work on the machine makes every figure worse.
    pub loadavg: [f64; 2],
    /// CPUs online.
    pub cpus: usize,
    /// Placement and priority notes (where the loops were pinned and why, refusals).
    pub notes: Vec<String>,
}

/// The 1-minute load average, or NaN where `/proc/loadavg` cannot be read.
fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Runs the chosen variants one after the other, each on a fresh source from
/// `open`, each that writes writing its CSV under `out_dir`.
pub fn sampler(
    open: &mut dyn FnMut() -> Result<Box<dyn Source>>,
    source: String,
    stand_in: bool,
    opts: &BenchOptions,
    out_dir: &Path,
) -> Result<BenchReport> {
    let chosen: Vec<Variant> = Variant::ALL
        .into_iter()
        .filter(|v| opts.variants.contains(v))
        .collect();
    let mut per_variant: Vec<Vec<VariantResult>> = vec![Vec::new(); chosen.len()];
    let mut notes = Vec::new();
    let mut channels = 0;
    let load_before = loadavg();
    for _ in 0..opts.rounds.max(1) {
        let mut round = Vec::new();
        for &v in &chosen {
            let source = open()?;
            channels = source.channels().len();
            // The same placement for every variant: where the engine puts its
            // sampler (the counters' CPU, or --cpu; else unpinned, as `record`).
            let (cpu, placement) = sampler::placement(&source.read_cpus(), opts.cpu);
            let setup = Setup {
                cpu,
                cpu_from_counters: opts.cpu.is_none(),
                realtime: opts.realtime,
                ..Setup::default()
            };
            let path = out_dir.join(format!("bench-{}.csv", v.name()));
            let (result, warnings) = run_variant(v, source, &path, opts, &setup)?;
            for n in placement.into_iter().chain(warnings) {
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
            round.push(result);
        }
        // Each round's ratio against its own floor, measured seconds before.
        let floor = round
            .iter()
            .find(|r| r.variant == Variant::Reference)
            .map(|r| r.process_cpu_per_sample_ns);
        if let Some(floor) = floor.filter(|&f| f > 0.0) {
            for r in &mut round {
                r.cpu_ratio = Some(r.process_cpu_per_sample_ns / floor);
            }
        }
        for (all, r) in per_variant.iter_mut().zip(round) {
            all.push(r);
        }
    }
    let variants: Vec<VariantResult> = per_variant
        .into_iter()
        .map(|r| combine(r, opts.freq.hz()))
        .collect();
    let targets = targets(&variants, opts);
    Ok(BenchReport {
        source,
        stand_in,
        channels,
        freq_hz: opts.freq.hz(),
        duration_s: opts.duration.as_secs_f64(),
        rounds: opts.rounds.max(1),
        variants,
        targets,
        loadavg: [load_before, loadavg()],
        cpus: std::thread::available_parallelism().map_or(0, NonZero::get),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt::root::SysRoot;

    #[test]
    fn every_variant_runs_and_counts_its_samples() {
        let dir = tempfile::tempdir().unwrap();
        let mut open =
            || -> Result<Box<dyn Source>> { Ok(Box::new(StandIn::open(&SysRoot::default(), 2)?)) };
        let opts = BenchOptions::new(Hertz::new(200.0).unwrap(), Duration::from_millis(1200));
        let r = sampler(&mut open, "stand-in".into(), true, &opts, dir.path()).unwrap();
        let names: Vec<&str> = r.variants.iter().map(|v| v.variant.name()).collect();
        assert_eq!(names, ["reference", "timerfd", "badsleep", "badsleep-st"]);
        for v in &r.variants {
            // Correctness, not speed: samples arrived, one whole window was counted,
            // CPU was accounted and compared with the floor.
            assert!(v.samples > 100, "{v:?}");
            assert_eq!(v.windows, 1, "{v:?}");
            assert!(v.cpu_per_sample_ns > 0.0, "{v:?}");
            assert!(v.process_cpu_per_sample_ns > 0.0, "{v:?}");
            assert!(v.cpu_ratio.is_some_and(|x| x > 0.0), "{v:?}");
            if v.variant == Variant::Reference {
                assert_eq!(v.cpu_ratio, Some(1.0));
                assert!(!dir.path().join("bench-reference.csv").exists());
                continue;
            }
            // Every variant that writes has one row per sample and channel.
            let csv =
                std::fs::read_to_string(dir.path().join(format!("bench-{}.csv", v.variant.name())))
                    .unwrap();
            let rows = csv.lines().filter(|l| !l.starts_with('#')).count() - 1;
            assert_eq!(rows as u64, v.samples * 2, "{}", v.variant.name());
        }
        // At 200 Hz: rate, missed, lateness and the CPU ratio are checked.
        let what: Vec<&str> = r.targets.iter().map(|t| t.what).collect();
        assert_eq!(
            what,
            [
                "achieved rate",
                "missed deadlines",
                "p99 wake-up lateness",
                "CPU per sample vs reference"
            ]
        );
    }
}
