//! What measuring costs: the CPU time and context switches of the sampler and writer
//! threads, the samples taken and the deadlines missed, how late each wake-up was.
//!
//! Every run accounts for itself, so that a figure of energy always comes with the
//! price quietwatt paid to get it (paper 000: RAPL tools cost from 0.25 % to 46 %).

use serde::Serialize;
use std::fmt;

pub use quietwatt_sys::clock::process_cpu_ns;
pub use quietwatt_sys::usage::ThreadUsage;

/// Sub-buckets per power of two: values are kept to within 1/32 (about 3 %).
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Enough buckets for any u64 nanoseconds.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// A fixed-size log-linear histogram of nanoseconds (as in HdrHistogram): recording
/// is a few integer operations and never allocates, so it can sit in the hot loop.
#[derive(Clone)]
pub struct LatencyHistogram {
    counts: [u64; BUCKETS],
    total: u64,
    max: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.summary())
    }
}

#[inline]
fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    ((msb - SUB_BITS + 1) as usize) * SUB as usize + ((v >> shift) & (SUB - 1)) as usize
}

/// The largest value that falls in bucket `i`.
fn bucket_high(i: usize) -> u64 {
    if (i as u64) < SUB {
        return i as u64;
    }
    let group = (i / SUB as usize) as u32; // >= 1
    let sub = (i % SUB as usize) as u64;
    let shift = group - 1;
    let low = (SUB + sub) << shift;
    low + ((1u64 << shift) - 1)
}

impl LatencyHistogram {
    /// An empty histogram.
    pub const fn new() -> LatencyHistogram {
        LatencyHistogram {
            counts: [0; BUCKETS],
            total: 0,
            max: 0,
        }
    }

    /// Counts one value.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.total += 1;
        self.max = self.max.max(ns);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest value recorded, exactly.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value below which a fraction `q` of the values fall (to within 3 %, and
    /// never above the maximum); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i).min(self.max);
            }
        }
        self.max
    }

    /// p50, p99 and max.
    pub fn summary(&self) -> Lateness {
        Lateness {
            wakeups: self.total,
            p50_ns: self.quantile(0.50),
            p99_ns: self.quantile(0.99),
            max_ns: self.max,
        }
    }
}

/// How late the sampler woke after each deadline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Lateness {
    /// Wake-ups measured.
    pub wakeups: u64,
    /// Median lateness, nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile, nanoseconds.
    pub p99_ns: u64,
    /// Worst, nanoseconds.
    pub max_ns: u64,
}

/// The self-accounting of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overhead {
    /// The sampler's wake-ups ([`SamplerCounts::wakes`]), for `wakeups_per_s`.
    #[serde(skip)]
    pub sampler_wakes: u64,
    /// Seconds from the sampler's first read to its last.
    pub duration_s: f64,
    /// Reads taken by the sampler (the priming read excluded).
    pub samples: u64,
    /// Samples handed to the output (fewer than `samples` only when a full ring
    /// merged some into the next one, or the output failed).
    pub written: u64,
    /// Deadlines that passed without a read; the next sample's energy covers them.
    pub missed_deadlines: u64,
    /// Samples merged into the next one because the ring to the writer was full.
    pub ring_full: u64,
    /// Reads tried again at once within their tick after a retryable error
    /// (EAGAIN, EINTR, EBUSY, ...: [`crate::RetryPolicy`]).
    pub read_retries: u64,
    /// Ticks skipped because every try of their read failed with a retryable
    /// error; counted in `missed_deadlines` too (the next sample covers them).
    pub skipped_ticks: u64,
    /// Times the adaptive rate changed.
    pub rate_changes: u64,
    /// Wake-up lateness of the sampler.
    pub lateness: Lateness,
    /// The sampler thread.
    pub sampler: ThreadUsage,
    /// The writer thread.
    pub writer: ThreadUsage,
    /// The thread that started the engine, while it waited for the end (it sleeps
    /// until woken; a recording at a rate slower than 4 Hz has it look for a stop
    /// 4 times a second).
    pub waiter: ThreadUsage,
    /// Times quietwatt's threads woke per second: the sampler's ticks and the
    /// writer's and waiter's voluntary context switches (a blocking read, such as
    /// one served by the FUSE emulator, is not a wake-up and is not counted).
    pub wakeups_per_s: f64,
    /// (sampler + writer + waiter CPU time) / samples, nanoseconds.
    pub cpu_per_sample_ns: f64,
    /// Sampler CPU time / samples, nanoseconds: the cost of one read on the hot path.
    pub sampler_cpu_per_sample_ns: f64,
    /// Sampler + writer + waiter CPU time as a percentage of one CPU over the run.
    pub cpu_percent: f64,
    /// The CPU the sampler was pinned to (`--cpu`, or where the counters are read).
    pub pinned_cpu: Option<usize>,
    /// The CPU the sampler's last read ran on.
    pub sampler_cpu: Option<usize>,
    /// Whether the sampler ran with SCHED_FIFO.
    pub realtime: bool,
    /// Whether the run was long enough for the per-second figures (`cpu_percent`,
    /// `wakeups_per_s`) to mean something: at least [`Overhead::MEANINGFUL_S`] and
    /// 10 samples. A 2 ms run's start-up cost is no rate.
    pub rates_meaningful: bool,
}

impl Overhead {
    /// The shortest run whose self-cost is stated as a rate, seconds.
    pub const MEANINGFUL_S: f64 = 1.0;

    /// Puts the sampler's and writer's figures together.
    pub fn new(sampler: &SamplerCounts, writer: ThreadUsage, written: u64) -> Overhead {
        let duration_ns = sampler.last_ns.saturating_sub(sampler.first_ns);
        let mut o = Overhead {
            duration_s: duration_ns as f64 / 1e9,
            samples: sampler.samples,
            sampler_wakes: sampler.wakes,
            written,
            missed_deadlines: sampler.missed,
            ring_full: sampler.ring_full,
            read_retries: sampler.read_retries,
            skipped_ticks: sampler.skipped_ticks,
            rate_changes: sampler.rate_changes,
            lateness: sampler.lateness.summary(),
            sampler: sampler.usage,
            writer,
            waiter: ThreadUsage::default(),
            wakeups_per_s: 0.0,
            cpu_per_sample_ns: 0.0,
            sampler_cpu_per_sample_ns: 0.0,
            cpu_percent: 0.0,
            pinned_cpu: sampler.pinned_cpu,
            sampler_cpu: sampler.last_cpu,
            realtime: sampler.realtime,
            rates_meaningful: false,
        };
        o.derive();
        o
    }

    /// Adds the waiting thread's usage (the one that started the engine).
    pub fn with_waiter(mut self, waiter: ThreadUsage) -> Overhead {
        self.waiter = waiter;
        self.derive();
        self
    }

    /// The per-sample, per-second and percentage figures from the counts.
    fn derive(&mut self) {
        let all = self.sampler.plus(self.writer).plus(self.waiter);
        let per = |cpu: u64| {
            if self.samples > 0 {
                cpu as f64 / self.samples as f64
            } else {
                0.0
            }
        };
        self.cpu_per_sample_ns = per(all.cpu_ns);
        self.sampler_cpu_per_sample_ns = per(self.sampler.cpu_ns);
        let (pct, wakeups) = if self.duration_s > 0.0 {
            let woke = self.sampler_wakes
                + self.writer.voluntary_switches
                + self.waiter.voluntary_switches;
            (
                all.cpu_ns as f64 / (self.duration_s * 1e9) * 100.0,
                woke as f64 / self.duration_s,
            )
        } else {
            (0.0, 0.0)
        };
        self.cpu_percent = pct;
        self.wakeups_per_s = wakeups;
        self.rates_meaningful = self.duration_s >= Self::MEANINGFUL_S && self.samples >= 10;
    }
}

impl fmt::Display for Overhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |ns: u64| ns as f64 / 1e3;
        if self.rates_meaningful {
            writeln!(
                f,
                "  quietwatt's own cost: {:.3} % of one CPU, {:.2} us of CPU per sample ({:.2} us in the sampler)",
                self.cpu_percent,
                self.cpu_per_sample_ns / 1e3,
                self.sampler_cpu_per_sample_ns / 1e3
            )?;
        } else {
            let all = self.sampler.plus(self.writer).plus(self.waiter);
            writeln!(
                f,
                "  quietwatt's own cost: {:.3} ms of CPU over {:.3} s and {} samples: too short a run for a share of a CPU or a rate per second to mean anything (measure at least {} s)",
                all.cpu_ns as f64 / 1e6,
                self.duration_s,
                self.samples,
                Self::MEANINGFUL_S
            )?;
        }
        writeln!(
            f,
            "    sampler: {:.3} ms CPU, {} voluntary / {} involuntary context switches{}{}",
            self.sampler.cpu_ns as f64 / 1e6,
            self.sampler.voluntary_switches,
            self.sampler.involuntary_switches,
            self.pinned_cpu
                .map(|c| format!(", pinned to CPU {c}"))
                .unwrap_or_default(),
            if self.realtime { ", SCHED_FIFO" } else { "" }
        )?;
        writeln!(
            f,
            "    writer:  {:.3} ms CPU, {} voluntary / {} involuntary context switches",
            self.writer.cpu_ns as f64 / 1e6,
            self.writer.voluntary_switches,
            self.writer.involuntary_switches
        )?;
        writeln!(
            f,
            "    waiting: {:.3} ms CPU, {} voluntary context switches{}",
            self.waiter.cpu_ns as f64 / 1e6,
            self.waiter.voluntary_switches,
            if self.rates_meaningful {
                format!("; {:.1} wake-ups/s in all", self.wakeups_per_s)
            } else {
                String::new()
            }
        )?;
        writeln!(
            f,
            "    {} samples ({} written), {} deadline(s) missed, {} merged on a full ring{}{}",
            self.samples,
            self.written,
            self.missed_deadlines,
            self.ring_full,
            if self.rate_changes > 0 {
                format!(", {} rate change(s)", self.rate_changes)
            } else {
                String::new()
            },
            if self.read_retries + self.skipped_ticks > 0 {
                format!(
                    ", {} read(s) retried, {} tick(s) skipped on transient errors",
                    self.read_retries, self.skipped_ticks
                )
            } else {
                String::new()
            }
        )?;
        write!(
            f,
            "    wake-up lateness: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            us(self.lateness.p50_ns),
            us(self.lateness.p99_ns),
            us(self.lateness.max_ns)
        )
    }
}

/// The sampler's own counters, kept in the loop without allocation.
#[derive(Debug, Clone, Default)]
pub struct SamplerCounts {
    /// Reads after the priming one.
    pub samples: u64,
    /// Times the sampler woke to read: once a tick when it polls, once a drain
    /// when the kernel samples (then far fewer than `samples`).
    pub wakes: u64,
    /// Deadlines that passed without a read.
    pub missed: u64,
    /// Samples merged into the next because the ring was full.
    pub ring_full: u64,
    /// Reads tried again at once after a retryable error (see [`crate::retry`]).
    pub read_retries: u64,
    /// Ticks with no sample: every try of their read failed with a retryable
    /// error (also counted in `missed`: the next sample spans them).
    pub skipped_ticks: u64,
    /// Adaptive rate changes.
    pub rate_changes: u64,
    /// Wake-up lateness.
    pub lateness: LatencyHistogram,
    /// The sampler thread's usage over the run.
    pub usage: ThreadUsage,
    /// CLOCK_MONOTONIC of the priming read.
    pub first_ns: u64,
    /// CLOCK_MONOTONIC of the last read.
    pub last_ns: u64,
    /// The CPU the sampler was pinned to.
    pub pinned_cpu: Option<usize>,
    /// The CPU of the sampler's last read.
    pub last_cpu: Option<usize>,
    /// Whether SCHED_FIFO was granted.
    pub realtime: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_three_percent() {
        let mut h = LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 100); // 100 ns .. 1 ms, uniform
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.035, "{p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.035, "{p99}");
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert_eq!(LatencyHistogram::new().quantile(0.5), 0);
        // Small values are exact, huge ones do not overflow.
        let mut e = LatencyHistogram::new();
        e.record(7);
        e.record(u64::MAX);
        assert_eq!(e.quantile(0.5), 7);
        assert_eq!(e.quantile(1.0), u64::MAX);
    }

    #[test]
    fn every_value_lands_in_a_bucket_that_holds_it() {
        for v in [0u64, 1, 31, 32, 33, 63, 64, 1000, 123_456_789, u64::MAX / 3] {
            let b = bucket(v);
            assert!(b < BUCKETS);
            assert!(bucket_high(b) >= v, "{v}");
            assert!(b == 0 || bucket_high(b - 1) < v, "{v}");
        }
    }

    #[test]
    fn thread_usage_grows_with_work() {
        let a = ThreadUsage::current();
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let d = ThreadUsage::current().since(a);
        assert!(d.cpu_ns > 0);
    }
}
