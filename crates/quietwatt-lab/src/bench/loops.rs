//! The loops compared: the engine and the naive sleep loop (through `record`),
//! the single-threaded naive loop and the floor, each counting its own samples per
//! second and its CPU the same way.

use super::{BenchOptions, Variant, VariantResult};
use quietwatt::error::{Error, Result, SetupStep};
use quietwatt::meter::{monotonic_ns, Meter};
use quietwatt::overhead::{process_cpu_ns, LatencyHistogram, Lateness, SamplerCounts, ThreadUsage};
use quietwatt::record::{record, EngineConfig};
use quietwatt::root::SysRoot;
use quietwatt::sampler::{self, Rate, Setup};
use quietwatt::sink::{CsvSink, Metadata, OutputFile, Sample, Sink};
use quietwatt::source::{Channel, Source};
use quietwatt::ticker::{Pacer, Pacing, TimerFd};
use quietwatt::units::Joules;
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

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

/// What the engine's variants record through: a meter on `source`, a CSV sink at
/// `path` that also counts the samples per second over `duration`, and the
/// recording's metadata at `rate`.
fn metered_csv(
    source: Box<dyn Source>,
    path: &Path,
    rate: &Rate,
    duration: Duration,
) -> io::Result<(Meter, Windows<CsvSink<OutputFile>>, Metadata)> {
    let meter = Meter::new(source);
    let sink = Windows {
        inner: CsvSink::new(OutputFile::create(path)?),
        counter: WindowCounter::new(duration),
    };
    let meta = Metadata::new(meter.label(), rate, &SysRoot::default());
    Ok((meter, sink, meta))
}

/// Runs one variant for the options' duration on `source`, writing its CSV to `path`
/// where it writes one, and returns its figures with the notes it raised.
pub(super) fn run_variant(
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
            let (mut meter, mut sink, meta) =
                metered_csv(source, path, &rate, duration).map_err(out_err)?;
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
            )
            .map_err(|s| s.error)?;
            let m = rec.measurement;
            warnings.extend(m.energy.warnings.into_iter().map(|w| w.message));
            let o = m.overhead.unwrap_or_default();
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
            let (mut meter, mut sink, meta) =
                metered_csv(source, path, &rate, duration).map_err(out_err)?;
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
    let timer = TimerFd::new().map_err(|source| Error::Setup {
        step: SetupStep::Timer,
        source,
    })?;
    let engine_err = |source| Error::Setup {
        step: SetupStep::Timer,
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
            .map_err(|source| Error::Setup {
                step: SetupStep::Thread("the reference loop"),
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
                let mut pacer = Pacer::start(None, t0, freq).map_err(|source| Error::Setup {
                    step: SetupStep::Timer,
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
            .map_err(|source| Error::Setup {
                step: SetupStep::Thread("the single-thread loop"),
                source,
            })?
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
