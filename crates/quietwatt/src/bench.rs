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

use crate::error::{Error, Result};
use crate::meter::{monotonic_ns, Meter};
use crate::overhead::{process_cpu_ns, LatencyHistogram, Lateness, SamplerCounts, ThreadUsage};
use crate::record::{record, EngineConfig};
use crate::root::SysRoot;
use crate::sampler::{self, Rate, Setup};
use crate::sink::{CsvSink, Metadata, OutputFile, Sample, Sink};
use crate::source::{Channel, Source};
use crate::ticker::{Hertz, Pacer, Pacing, TimerFd};
use crate::units::Joules;
use serde::Serialize;
use std::io;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

// The stand-in source is the crate's own (the `pread-stand-in` lab monitor, the
// tests) and public only with the `testing` feature: it is not energy.
mod stand_in;
#[cfg(any(test, feature = "testing"))]
pub use stand_in::StandIn;
#[cfg(not(any(test, feature = "testing")))]
pub(crate) use stand_in::StandIn;

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

/// Counts samples per 1-s window from the first, around another sink.
struct Windows<S> {
    inner: S,
    counter: WindowCounter,
}

/// Samples per whole second from the first sample: a preallocated array, so that
/// counting costs an increment wherever it runs.
#[derive(Debug, Clone)]
struct WindowCounter {
    first: Option<u64>,
    last: u64,
    samples: u64,
    counts: Vec<u64>,
}

impl WindowCounter {
    fn new(duration: Duration) -> WindowCounter {
        WindowCounter {
            first: None,
            last: 0,
            samples: 0,
            counts: vec![0; duration.as_secs() as usize + 2],
        }
    }

    #[inline]
    fn count(&mut self, t_ns: u64) {
        let first = *self.first.get_or_insert(t_ns);
        let k = ((t_ns - first) / 1_000_000_000) as usize;
        if let Some(c) = self.counts.get_mut(k) {
            *c += 1;
        }
        self.samples += 1;
        self.last = t_ns;
    }

    /// (rate over the span, mean of whole windows, min of whole windows, windows, span).
    fn rates(&self) -> (f64, f64, u64, usize, f64) {
        let first = self.first.unwrap_or(0);
        let span_ns = self.last.saturating_sub(first);
        let whole = (span_ns / 1_000_000_000) as usize;
        let w = &self.counts[..whole.min(self.counts.len())];
        let mean = if w.is_empty() {
            0.0
        } else {
            w.iter().sum::<u64>() as f64 / w.len() as f64
        };
        let rate = if span_ns > 0 {
            (self.samples.saturating_sub(1)) as f64 / (span_ns as f64 / 1e9)
        } else {
            0.0
        };
        (
            rate,
            mean,
            w.iter().copied().min().unwrap_or(0),
            w.len(),
            span_ns as f64 / 1e9,
        )
    }
}

impl<S: Sink> Sink for Windows<S> {
    fn begin(&mut self, meta: &Metadata, channels: &[Channel]) -> io::Result<()> {
        self.inner.begin(meta, channels)
    }
    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        self.counter.count(s.t_ns);
        self.inner.sample(s)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        self.inner.finish()
    }
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
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        notes,
    })
}

/// (steal, total) CPU ticks of the whole machine from `/proc/stat`'s first line.
fn steal() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<u64> = text
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    (f.len() == 8).then(|| (f[7], f.iter().sum()))
}

/// The median of `v` (the mean of the middle two for an even count); 0 when empty.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One variant's rounds as one result: counts and CPU summed over all samples,
/// the p50 lateness the median round's, the p99 and max the worst round's, and
/// the CPU ratio the median of the rounds' (each against its own round's floor,
/// so that a change of the machine's load between rounds cancels out).
fn combine(rounds: Vec<VariantResult>, freq_hz: f64) -> VariantResult {
    let first = rounds[0].clone();
    if rounds.len() == 1 {
        let mut r = first;
        r.round_ratios = r.cpu_ratio.into_iter().collect();
        return r;
    }
    let samples: u64 = rounds.iter().map(|r| r.samples).sum();
    let span_s: f64 = rounds.iter().map(|r| r.span_s).sum();
    let intervals: u64 = rounds.iter().map(|r| r.samples.saturating_sub(1)).sum();
    let rate_mean = if span_s > 0.0 {
        intervals as f64 / span_s
    } else {
        0.0
    };
    let windows: usize = rounds.iter().map(|r| r.windows).sum();
    let weighted = |f: &dyn Fn(&VariantResult) -> f64| {
        let n: f64 = rounds.iter().map(|r| r.samples as f64).sum();
        if n > 0.0 {
            rounds.iter().map(|r| f(r) * r.samples as f64).sum::<f64>() / n
        } else {
            0.0
        }
    };
    let round_ratios: Vec<f64> = rounds.iter().filter_map(|r| r.cpu_ratio).collect();
    VariantResult {
        samples,
        span_s,
        rate_mean,
        rate_share: rate_mean / freq_hz,
        rate_window_mean: if windows > 0 {
            rounds
                .iter()
                .map(|r| r.rate_window_mean * r.windows as f64)
                .sum::<f64>()
                / windows as f64
        } else {
            0.0
        },
        rate_window_min: rounds.iter().map(|r| r.rate_window_min).min().unwrap_or(0),
        windows,
        missed_deadlines: rounds.iter().map(|r| r.missed_deadlines).sum(),
        lateness: Lateness {
            wakeups: rounds.iter().map(|r| r.lateness.wakeups).sum(),
            p50_ns: median(rounds.iter().map(|r| r.lateness.p50_ns as f64).collect()) as u64,
            p99_ns: rounds.iter().map(|r| r.lateness.p99_ns).max().unwrap_or(0),
            max_ns: rounds.iter().map(|r| r.lateness.max_ns).max().unwrap_or(0),
        },
        cpu_per_sample_ns: weighted(&|r| r.cpu_per_sample_ns),
        writer_cpu_per_sample_ns: weighted(&|r| r.writer_cpu_per_sample_ns),
        process_cpu_per_sample_ns: weighted(&|r| r.process_cpu_per_sample_ns),
        cpu_ratio: (!round_ratios.is_empty()).then(|| median(round_ratios.clone())),
        round_ratios,
        steal_percent: rounds.iter().map(|r| r.steal_percent).sum::<f64>() / rounds.len() as f64,
        ..first
    }
}

/// Highest CPU per sample the engine may cost, as a multiple of the floor's.
pub const CPU_RATIO_TARGET: f64 = 1.15;
/// At up to 1 kHz: the achieved rate, as a fraction of the target (999.5 of 1000).
pub const RATE_SHARE_TARGET: f64 = 0.9995;
/// At up to 1 kHz: the p99 wake-up lateness, nanoseconds.
pub const P99_TARGET_NS: u64 = 100_000;
/// Above 1 kHz: the share of the samples that must be taken.
pub const FAST_SHARE_TARGET: f64 = 0.99;

/// The targets for the engine (the `timerfd` variant) on this run: at up to
/// 1 kHz the rate, no missed deadline and the p99 lateness; above, the share of
/// samples taken; at any rate the CPU per sample against the floor.
pub fn targets(variants: &[VariantResult], opts: &BenchOptions) -> Vec<Target> {
    let Some(e) = variants.iter().find(|r| r.variant == Variant::Timerfd) else {
        return Vec::new();
    };
    let hz = opts.freq.hz();
    let mut t = Vec::new();
    if hz <= 1000.0 {
        t.push(Target {
            what: "achieved rate",
            goal: format!(">= {:.1} /s", hz * RATE_SHARE_TARGET),
            value: format!("{:.1} /s", e.rate_mean),
            met: e.rate_share >= RATE_SHARE_TARGET,
        });
        t.push(Target {
            what: "missed deadlines",
            goal: "0 (idle machine)".into(),
            value: e.missed_deadlines.to_string(),
            met: e.missed_deadlines == 0,
        });
        t.push(Target {
            what: "p99 wake-up lateness",
            goal: format!("<= {} us", P99_TARGET_NS / 1000),
            value: format!("{:.1} us", e.lateness.p99_ns as f64 / 1e3),
            met: e.lateness.p99_ns <= P99_TARGET_NS,
        });
    } else {
        t.push(Target {
            what: "samples taken",
            goal: format!(">= {:.0} %", FAST_SHARE_TARGET * 100.0),
            value: format!("{:.2} %", e.rate_share * 100.0),
            met: e.rate_share >= FAST_SHARE_TARGET,
        });
    }
    if let Some(ratio) = e.cpu_ratio {
        t.push(Target {
            what: "CPU per sample vs reference",
            goal: format!("<= {CPU_RATIO_TARGET:.2} x"),
            value: format!("{ratio:.3} x"),
            met: ratio <= CPU_RATIO_TARGET,
        });
    }
    t
}

/// What one loop measured about itself.
struct LoopFigures {
    missed: u64,
    lateness: Lateness,
    /// CPU time of the loop's threads.
    cpu_ns: u64,
    /// Of which the writer thread's.
    writer_cpu_ns: u64,
    samples: u64,
    pinned_cpu: Option<usize>,
    realtime: bool,
}

fn run_variant(
    v: Variant,
    source: Box<dyn Source>,
    path: &Path,
    opts: &BenchOptions,
    setup: &Setup,
) -> Result<(VariantResult, Vec<String>)> {
    let out_err = |source| Error::Output {
        path: path.to_path_buf(),
        source,
    };
    let freq = opts.freq;
    let duration = opts.duration;
    let rate = Rate::Fixed(freq);
    let mut warnings = Vec::new();
    let steal_before = steal();
    let process_before = process_cpu_ns();
    let (figures, counter) = match v {
        Variant::Reference => reference(source, opts, setup, &mut warnings)?,
        Variant::Timerfd | Variant::Badsleep => {
            let mut meter = Meter::new(source);
            let file = OutputFile::create(path).map_err(out_err)?;
            let mut sink = Windows {
                inner: CsvSink::new(file),
                counter: WindowCounter::new(duration),
            };
            let meta = Metadata::new(meter.mechanism().name(), &rate, &SysRoot::default());
            let mut config = EngineConfig::new(rate);
            config.duration = Some(duration);
            config.cpu = opts.cpu;
            config.realtime = setup.realtime;
            config.pacing = if v == Variant::Timerfd {
                Pacing::TimerFd
            } else {
                Pacing::RelativeSleep
            };
            let rec = record(
                &mut meter,
                &mut sink,
                path,
                &meta,
                &config,
                &AtomicBool::new(false),
            )?;
            if let Some(e) = rec.error {
                return Err(e);
            }
            warnings.extend(rec.warnings);
            let o = rec.overhead;
            (
                LoopFigures {
                    missed: o.missed_deadlines,
                    lateness: o.lateness,
                    cpu_ns: o.sampler.cpu_ns + o.writer.cpu_ns,
                    writer_cpu_ns: o.writer.cpu_ns,
                    samples: o.samples,
                    pinned_cpu: o.pinned_cpu,
                    realtime: o.realtime,
                },
                sink.counter,
            )
        }
        Variant::BadsleepSt => {
            let mut meter = Meter::new(source);
            let file = OutputFile::create(path).map_err(out_err)?;
            let mut sink = Windows {
                inner: CsvSink::new(file),
                counter: WindowCounter::new(duration),
            };
            let meta = Metadata::new(meter.mechanism().name(), &rate, &SysRoot::default());
            sink.begin(&meta, meter.channels()).map_err(out_err)?;
            let f = single_thread(&mut meter, &mut sink, opts, setup, path, &mut warnings)?;
            (f, sink.counter)
        }
    };
    let process_ns = process_cpu_ns().saturating_sub(process_before);
    let steal_percent = match (steal_before, steal()) {
        (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => {
            s1.saturating_sub(s0) as f64 / (t1 - t0) as f64 * 100.0
        }
        _ => 0.0,
    };
    let (rate_mean, window_mean, window_min, windows, span) = counter.rates();
    let per = |ns: u64| {
        if figures.samples > 0 {
            ns as f64 / figures.samples as f64
        } else {
            0.0
        }
    };
    Ok((
        VariantResult {
            variant: v,
            description: v.description(),
            samples: counter.samples,
            span_s: span,
            rate_mean,
            rate_share: rate_mean / freq.hz(),
            rate_window_mean: window_mean,
            rate_window_min: window_min,
            windows,
            missed_deadlines: figures.missed,
            lateness: figures.lateness,
            cpu_per_sample_ns: per(figures.cpu_ns),
            writer_cpu_per_sample_ns: per(figures.writer_cpu_ns),
            process_cpu_per_sample_ns: per(process_ns),
            cpu_ratio: None,
            round_ratios: Vec::new(),
            pinned_cpu: figures.pinned_cpu,
            realtime: figures.realtime,
            steal_percent,
        },
        warnings,
    ))
}

/// The floor: on its own thread (as the engine's sampler), pinned and prioritised
/// as the engine's, a timerfd with absolute deadlines and the source's raw reads.
/// Nothing else: no counter correction, no ring, no writer, no output. Its lateness
/// and window counts are kept as the engine keeps its own (a clock read and a few
/// integer operations), so that the two differ only by what quietwatt adds.
fn reference(
    mut source: Box<dyn Source>,
    opts: &BenchOptions,
    setup: &Setup,
    warnings: &mut Vec<String>,
) -> Result<(LoopFigures, WindowCounter)> {
    let freq = opts.freq;
    let end_after = opts.duration.as_nanos() as u64;
    let mut counter = WindowCounter::new(opts.duration);
    let timer = TimerFd::new().map_err(|source| Error::Engine {
        what: "create a timerfd".into(),
        source,
    })?;
    let engine_err = |source| Error::Engine {
        what: "arm the reference loop's timer".into(),
        source,
    };
    let out = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("quietwatt-reference".into())
            .spawn_scoped(s, || -> Result<(LoopFigures, Vec<String>)> {
                let mut counts = SamplerCounts::default();
                let w = sampler::prepare(setup, &mut counts)?;
                let mut raw = vec![0u64; source.channels().len()];
                let mut lateness = LatencyHistogram::new();
                source.read(&mut raw)?;
                let t0 = monotonic_ns();
                let end = t0 + end_after;
                let usage = ThreadUsage::current();
                let mut pacer = Pacer::start(Some(&timer), t0, freq).map_err(engine_err)?;
                let (mut missed, mut samples) = (0u64, 0u64);
                loop {
                    let wake = pacer.wait();
                    missed += wake.missed;
                    lateness.record(wake.late_ns);
                    let t = monotonic_ns();
                    source.read(&mut raw)?;
                    counter.count(t);
                    samples += 1;
                    if t >= end {
                        break;
                    }
                }
                std::hint::black_box(&raw);
                let cpu_ns = ThreadUsage::current().since(usage).cpu_ns;
                Ok((
                    LoopFigures {
                        missed,
                        lateness: lateness.summary(),
                        cpu_ns,
                        writer_cpu_ns: 0,
                        samples,
                        pinned_cpu: counts.pinned_cpu,
                        realtime: counts.realtime,
                    },
                    w,
                ))
            })
            .map_err(|source| Error::Engine {
                what: "start the reference loop".into(),
                source,
            })?
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })?;
    warnings.extend(out.1);
    Ok((out.0, counter))
}

/// The naive loop: sleep, read, convert, format and write, all in one thread.
fn single_thread(
    meter: &mut Meter,
    sink: &mut dyn Sink,
    opts: &BenchOptions,
    setup: &Setup,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<LoopFigures> {
    let out_err = |source| Error::Output {
        path: path.to_path_buf(),
        source,
    };
    let freq = opts.freq;
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("quietwatt-badsleep".into())
            .spawn_scoped(s, || -> Result<LoopFigures> {
                let mut counts = SamplerCounts::default();
                warnings.extend(sampler::prepare(setup, &mut counts)?);
                let usage = ThreadUsage::current();
                let mut energy = vec![Joules(0.0); meter.channels().len()];
                let mut hist = LatencyHistogram::new();
                let (t0, _) = meter.sample()?;
                let end = t0 + opts.duration.as_nanos() as u64;
                let mut pacer = Pacer::start(None, t0, freq).map_err(|source| Error::Engine {
                    what: "start the pacer".into(),
                    source,
                })?;
                let (mut prev, mut samples) = (t0, 0u64);
                loop {
                    hist.record(pacer.wait().late_ns);
                    let t = meter.sample_joules(&mut energy)?;
                    sink.sample(&Sample {
                        t_ns: t,
                        interval_ns: t - prev,
                        missed: 0,
                        merged: 0,
                        freq_hz: freq.hz(),
                        marks: meter.marks(),
                        energy: &energy,
                    })
                    .map_err(out_err)?;
                    samples += 1;
                    prev = t;
                    if t >= end {
                        break;
                    }
                }
                sink.finish().map_err(out_err)?;
                Ok(LoopFigures {
                    missed: 0,
                    lateness: hist.summary(),
                    cpu_ns: ThreadUsage::current().since(usage).cpu_ns,
                    writer_cpu_ns: 0,
                    samples,
                    pinned_cpu: counts.pinned_cpu,
                    realtime: counts.realtime,
                })
            })
            .map_err(|source| Error::Engine {
                what: "start the single-thread loop".into(),
                source,
            })?
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn rounds_sum_counts_and_take_the_median_ratio() {
        let round = |samples: u64, span_s: f64, p99_ns: u64, ratio: f64| VariantResult {
            variant: Variant::Timerfd,
            description: "",
            samples,
            span_s,
            rate_mean: (samples - 1) as f64 / span_s,
            rate_share: 0.0,
            rate_window_mean: samples as f64 / span_s,
            rate_window_min: samples - 10,
            windows: span_s as usize,
            missed_deadlines: 1,
            lateness: Lateness {
                wakeups: samples,
                p50_ns: p99_ns / 2,
                p99_ns,
                max_ns: p99_ns * 2,
            },
            cpu_per_sample_ns: ratio * 10.0,
            writer_cpu_per_sample_ns: 1.0,
            process_cpu_per_sample_ns: ratio * 10.0,
            cpu_ratio: Some(ratio),
            round_ratios: Vec::new(),
            pinned_cpu: Some(1),
            realtime: false,
            steal_percent: 0.0,
        };
        let c = combine(
            vec![
                round(1001, 1.0, 50, 1.0),
                round(1001, 1.0, 90, 3.0),
                round(2001, 2.0, 70, 1.1),
            ],
            1000.0,
        );
        assert_eq!((c.samples, c.windows, c.missed_deadlines), (4003, 4, 3));
        assert!((c.rate_mean - 1000.0).abs() < 1e-9 && (c.rate_share - 1.0).abs() < 1e-12);
        assert_eq!(c.rate_window_min, 991);
        assert_eq!((c.lateness.p50_ns, c.lateness.p99_ns), (35, 90));
        // One bad round does not make the ratio: the median does.
        assert_eq!(c.cpu_ratio, Some(1.1));
        assert_eq!(c.round_ratios, [1.0, 3.0, 1.1]);
        assert_eq!(c.pinned_cpu, Some(1));
        // Weighted by samples: (10 * 1001 + 30 * 1001 + 11 * 2001) / 4003.
        let want = (10.0 * 1001.0 + 30.0 * 1001.0 + 11.0 * 2001.0) / 4003.0;
        assert!((c.cpu_per_sample_ns - want).abs() < 1e-9);
    }

    #[test]
    fn targets_follow_the_rate_and_judge_the_engine_only() {
        let result = |variant, rate_share: f64, missed, p99_ns, ratio| VariantResult {
            variant,
            description: "",
            samples: 1000,
            span_s: 1.0,
            rate_mean: rate_share * 10_000.0,
            rate_share,
            rate_window_mean: 0.0,
            rate_window_min: 0,
            windows: 1,
            missed_deadlines: missed,
            lateness: Lateness {
                wakeups: 1000,
                p50_ns: 0,
                p99_ns,
                max_ns: p99_ns,
            },
            cpu_per_sample_ns: 1.0,
            writer_cpu_per_sample_ns: 0.0,
            process_cpu_per_sample_ns: 1.0,
            cpu_ratio: Some(ratio),
            round_ratios: vec![ratio],
            pinned_cpu: None,
            realtime: false,
            steal_percent: 0.0,
        };
        let fast = BenchOptions::new(Hertz::new(10_000.0).unwrap(), Duration::from_secs(1));
        // A bad reference does not fail the engine; only the engine is judged.
        let v = [
            result(Variant::Reference, 0.5, 99, 999_999, 1.0),
            result(Variant::Timerfd, 0.991, 90, 500_000, 1.149),
        ];
        let t = targets(&v, &fast);
        assert_eq!(t.len(), 2);
        assert!(t.iter().all(|t| t.met), "{t:?}");
        let v = [result(Variant::Timerfd, 0.989, 0, 0, 1.151)];
        assert!(targets(&v, &fast).iter().all(|t| !t.met));
        // At 1 kHz and below: one missed deadline or a p99 over 100 us misses.
        let slow = BenchOptions::new(Hertz::new(1000.0).unwrap(), Duration::from_secs(60));
        let v = [result(Variant::Timerfd, 0.9996, 1, 100_001, 1.0)];
        let met: Vec<bool> = targets(&v, &slow).iter().map(|t| t.met).collect();
        assert_eq!(met, [true, false, false, true]);
        assert!(targets(&[], &slow).is_empty());
    }
}
