//! The power around a wake-up (`bench wakeup`, paper 004 Fig. 5): energy read by
//! the caller while it waits for its next deadline, then averaged over every
//! wake-up on the wake-up's own clock (equivalent-time sampling).
//!
//! **Why it can work with RAPL.** A RAPL counter moves about once a millisecond,
//! far coarser than a wake-up (tens of µs). But its updates run on the hardware's
//! clock and the signals on ours, so over many wake-ups the update instants fall
//! at every phase relative to the signal. Each interval between two counter
//! changes has an exact energy; spread over the bins it covers relative to each
//! signal, and averaged, they give the profile convolved with one update interval
//! (a ~1 ms moving average of the true power): enough to see how long the power
//! stays up after a wake-up, not the 17 µs of the exit itself (paper 004 used a
//! 2 µs external meter for that).
//!
//! **Who reads.** The caller thread, between signals: it busy-waits anyway, on its
//! own CPU, so sampling there adds no wake-up and nothing on the callee's CPU
//! (with perf or MSR the read is local to the caller's CPU when that CPU is the
//! package's RAPL reader, CPU 0 by default), and also while it waits for the
//! callee to run, so that no gap in the reads sits at a fixed phase of the signal.
//! A counter change is placed halfway between the read that saw it and the read
//! before. The buffer is sized before the experiment; the loop allocates nothing.

use quietwatt::domain::total_members;
use quietwatt::meter::{monotonic_ns, Meter};
use quietwatt::units::Joules;
use quietwatt_stats::{excludes, weighted_mean_interval};
use serde::Serialize;
use std::time::Duration;

/// One interval between two changes of the total energy counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// CLOCK_MONOTONIC of the previous change (estimated: the midpoint between the
    /// read that saw it and the read before).
    pub from_ns: u64,
    /// CLOCK_MONOTONIC of this change (estimated likewise).
    pub to_ns: u64,
    /// The energy between them, joules.
    pub joules: f64,
}

/// Reads the energy counters while the caller waits.
#[derive(Debug)]
pub struct EnergySampler {
    meter: Meter,
    members: Vec<usize>,
    deltas: Vec<Joules>,
    intervals: Vec<Interval>,
    every_ns: u64,
    next_ns: u64,
    /// When the counter last changed: the midpoint between the sample that saw the
    /// change and the one before it (or the first sample's time).
    last_change_ns: Option<u64>,
    /// The previous sample's timestamp.
    prev_t: u64,
    pending_j: f64,
    slowest_ns: u64,
    samples: u64,
    dropped: u64,
    error: Option<String>,
    label: String,
}

impl EnergySampler {
    /// A sampler reading `meter` every `every`, with room for `seconds` of counter
    /// changes at up to 2 kHz (RAPL moves at ~1 kHz). `label` names the source in
    /// the report (mechanism, EMULATED).
    pub fn new(meter: Meter, every: Duration, seconds: f64, label: String) -> EnergySampler {
        let ids: Vec<_> = meter.channels().iter().map(|c| c.id).collect();
        let n = ids.len();
        let cap = (seconds.max(0.0) * 2000.0) as usize + 1024;
        EnergySampler {
            meter,
            members: total_members(&ids),
            deltas: vec![Joules(0.0); n],
            intervals: Vec::with_capacity(cap),
            every_ns: every.as_nanos().max(1) as u64,
            next_ns: 0,
            last_change_ns: None,
            prev_t: 0,
            pending_j: 0.0,
            slowest_ns: 0,
            samples: 0,
            dropped: 0,
            error: None,
            label,
        }
    }

    /// Takes a sample if one is due at `now` (CLOCK_MONOTONIC ns). Called in the
    /// caller's spin loops; allocates nothing.
    #[inline]
    pub fn poll(&mut self, now: u64) {
        if self.error.is_some() || now < self.next_ns {
            return;
        }
        // No guard before the deadline: a read that overruns it only delays the signal
        // by one read (the signal's time is taken when it is sent), whereas a guard
        // leaves a gap before every signal, always at the same phase, which biases
        // the change instants there (measured against the emulator: -38 % in the bin
        // before the signal with a guard of two reads).
        if let Err(e) = self.meter.sample_joules(&mut self.deltas) {
            self.error = Some(e.to_string());
            return;
        }
        // A slow read (the emulator over FUSE: its server may wait for the callee's
        // CPU) returns a value taken near its end, not at its start: stamp the end.
        // For RAPL itself both ends are within a microsecond.
        let t = monotonic_ns();
        self.slowest_ns = self.slowest_ns.max(t.saturating_sub(now));
        self.samples += 1;
        self.next_ns = now + self.every_ns;
        let e: f64 = self.members.iter().map(|&i| self.deltas[i].0).sum();
        self.pending_j += e;
        // The counter moved somewhere between the previous read and this one.
        let changed_at = self.prev_t / 2 + t / 2;
        self.prev_t = t;
        match self.last_change_ns {
            None => self.last_change_ns = Some(t),
            Some(from) if e > 0.0 && changed_at > from => {
                if self.intervals.len() < self.intervals.capacity() {
                    self.intervals.push(Interval {
                        from_ns: from,
                        to_ns: changed_at,
                        joules: self.pending_j,
                    });
                } else {
                    self.dropped += 1;
                }
                self.pending_j = 0.0;
                self.last_change_ns = Some(changed_at);
            }
            Some(_) => {}
        }
    }

    /// The profile around `signals_ns`, `before` to `after` in bins of `bin`.
    pub fn profile(
        &self,
        signals_ns: &[u64],
        before: Duration,
        after: Duration,
        bin: Duration,
    ) -> PowerProfile {
        let mut bins = bin_profile(&self.intervals, signals_ns, before, after, bin);
        let (span_j, span_s) = self.intervals.iter().fold((0.0, 0.0), |(j, s), i| {
            (j + i.joules, s + (i.to_ns - i.from_ns) as f64 / 1e9)
        });
        let mean_w = (span_s > 0.0).then(|| span_j / span_s);
        let bins_len = bins.len();
        for b in &mut bins {
            b.significant = b.ci_w.zip(mean_w).map(|(ci, m)| excludes(ci, m));
        }
        let mut gaps: Vec<u64> = self.intervals.iter().map(|i| i.to_ns - i.from_ns).collect();
        gaps.sort_unstable();
        let update_us = gaps.get(gaps.len() / 2).map(|&g| g as f64 / 1e3);
        PowerProfile {
            source: self.label.clone(),
            bin_us: bin.as_secs_f64() * 1e6,
            bins,
            mean_w,
            samples: self.samples,
            changes: self.intervals.len(),
            update_us,
            slowest_read_us: self.slowest_ns as f64 / 1e3,
            dropped: self.dropped,
            error: self.error.clone(),
            method: "equivalent-time average: each interval between two counter changes, at its mean power, spread over the bins it covers relative to every signal; the result is the power profile averaged over one counter update interval".into(),
            interval: PowerProfile::interval(bins_len),
            true_w: None,
        }
    }
}

/// One bin of the profile.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProfileBin {
    /// Start, µs relative to the signal.
    pub from_us: f64,
    /// End, µs relative to the signal.
    pub to_us: f64,
    /// Mean power over every wake-up's bin, W; `None` where no data covered it.
    pub mean_w: Option<f64>,
    /// Seconds of data behind the mean (summed over wake-ups).
    pub covered_s: f64,
    /// Wake-ups with data in the bin: the samples its interval comes from.
    pub wakeups: usize,
    /// Confidence interval of `mean_w`, `[low, high]` W, from the spread of the
    /// wake-ups' own means in the bin (see [`PowerProfile::interval`]); `None` with
    /// fewer than [`MIN_WAKEUPS`] wake-ups.
    pub ci_w: Option<[f64; 2]>,
    /// Standard error of `mean_w`, W (`None` with `ci_w`).
    pub se_w: Option<f64>,
    /// Whether `ci_w` leaves out the profile's mean power (the baseline); `None`
    /// without an interval.
    pub significant: Option<bool>,
}

/// Fewest wake-ups with data in a bin for its interval: below it the spread of the
/// wake-ups says too little (and a Student interval of 2 or 3 values is wider than
/// the data).
pub const MIN_WAKEUPS: usize = 10;

/// The level every bin's interval holds jointly (see [`PowerProfile::interval`]).
pub const CONFIDENCE: f64 = 0.95;

/// What `bench wakeup` reports of the power around a wake-up.
#[derive(Debug, Clone, Serialize)]
pub struct PowerProfile {
    /// The energy source (mechanism, and EMULATED when it is).
    pub source: String,
    /// Bin width, µs.
    pub bin_us: f64,
    /// The bins, in time order.
    pub bins: Vec<ProfileBin>,
    /// Mean power over everything sampled, W (the baseline to compare bins with).
    pub mean_w: Option<f64>,
    /// Reads taken.
    pub samples: u64,
    /// Counter changes seen.
    pub changes: usize,
    /// Median time between two counter changes, µs (the source's resolution).
    pub update_us: Option<f64>,
    /// The slowest read, µs.
    pub slowest_read_us: f64,
    /// Changes not kept because the buffer was full.
    pub dropped: u64,
    /// A read that failed (sampling stopped there).
    pub error: Option<String>,
    /// How the bins are computed.
    pub method: String,
    /// How each bin's interval is computed.
    pub interval: String,
    /// The true power in every bin, W, where it is known: measured against an
    /// emulator of constant power, its configured total. `None` on real hardware.
    pub true_w: Option<f64>,
}

impl PowerProfile {
    /// How each bin's interval is computed, for `bins` bins: in words, for the report.
    pub fn interval(bins: usize) -> String {
        format!(
            "{:.0} % simultaneous intervals (Bonferroni over the {bins} bins, so that a flat profile leaves its mean out of any bin 1 time in 20): Student's t on the spread of each wake-up's own mean power in the bin (weighted by the time it covers), wake-ups taken as independent; fewer than {MIN_WAKEUPS} wake-ups in a bin give no interval",
            CONFIDENCE * 100.0
        )
    }
}

/// The per-bin level that makes `bins` intervals hold jointly at [`CONFIDENCE`].
pub fn per_bin_confidence(bins: usize) -> f64 {
    1.0 - (1.0 - CONFIDENCE) / bins.max(1) as f64
}

/// Spreads each interval's mean power over the bins `[-before, after)` it covers
/// relative to each signal, weighted by the overlap; returns the weighted means.
pub fn bin_profile(
    intervals: &[Interval],
    signals_ns: &[u64],
    before: Duration,
    after: Duration,
    bin: Duration,
) -> Vec<ProfileBin> {
    let (b, a) = (before.as_nanos() as i64, after.as_nanos() as i64);
    let w = bin.as_nanos().max(1) as i64;
    let n = ((a + b) as f64 / w as f64).ceil().max(0.0) as usize;
    let mut sorted = signals_ns.to_vec();
    sorted.sort_unstable();
    // Per signal and bin: energy-weighted sum and time covered, so that each
    // wake-up's own mean in a bin is a sample for the bin's interval.
    let mut sum = vec![0.0f64; n * sorted.len()];
    let mut cover = vec![0.0f64; n * sorted.len()];
    for iv in intervals {
        let dur = iv.to_ns.saturating_sub(iv.from_ns);
        if dur == 0 {
            continue;
        }
        let watts = iv.joules / (dur as f64 / 1e9);
        // Signals whose window [s - before, s + after) meets the interval.
        let lo = sorted.partition_point(|&s| (s as i64) + a <= iv.from_ns as i64);
        for (j, &s) in sorted
            .iter()
            .enumerate()
            .skip(lo)
            .take_while(|&(_, &s)| (s as i64) - b < iv.to_ns as i64)
        {
            let (x0, x1) = (iv.from_ns as i64 - s as i64, iv.to_ns as i64 - s as i64);
            for k in 0..n {
                let (b0, b1) = (-b + k as i64 * w, (-b + (k as i64 + 1) * w).min(a));
                let overlap = (x1.min(b1) - x0.max(b0)).max(0) as f64 / 1e9;
                sum[j * n + k] += watts * overlap;
                cover[j * n + k] += overlap;
            }
        }
    }
    let level = per_bin_confidence(n);
    (0..n)
        .map(|k| {
            let (mut means, mut weights) = (Vec::new(), Vec::new());
            let (mut s_k, mut c_k) = (0.0, 0.0);
            for j in 0..sorted.len() {
                let (s, c) = (sum[j * n + k], cover[j * n + k]);
                if c > 0.0 {
                    means.push(s / c);
                    weights.push(c);
                    s_k += s;
                    c_k += c;
                }
            }
            let interval = (means.len() >= MIN_WAKEUPS)
                .then(|| weighted_mean_interval(&means, &weights, level).ok())
                .flatten();
            ProfileBin {
                from_us: (-b + k as i64 * w) as f64 / 1e3,
                to_us: ((-b + (k as i64 + 1) * w).min(a)) as f64 / 1e3,
                mean_w: (c_k > 0.0).then(|| s_k / c_k),
                covered_s: c_k,
                wakeups: means.len(),
                ci_w: interval.map(|i| i.ci),
                se_w: interval.map(|i| i.se),
                significant: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Intervals of `step_ns` from `t0` to `t1` of a power `p(t)` (integrated finely).
    fn sampled(t0: u64, t1: u64, step_ns: u64, p: impl Fn(u64) -> f64) -> Vec<Interval> {
        let mut v = Vec::new();
        let mut t = t0;
        while t + step_ns <= t1 {
            let j: f64 = (0..100)
                .map(|k| p(t + k * step_ns / 100) * step_ns as f64 / 100.0 / 1e9)
                .sum();
            v.push(Interval {
                from_ns: t,
                to_ns: t + step_ns,
                joules: j,
            });
            t += step_ns;
        }
        v
    }

    #[test]
    fn a_constant_power_gives_a_flat_profile_at_that_power() {
        let iv = sampled(0, 1_000_000_000, 977_000, |_| 24.0);
        let signals: Vec<u64> = (1..90).map(|k| k * 10_333_333).collect();
        let bins = bin_profile(
            &iv,
            &signals,
            Duration::from_millis(2),
            Duration::from_millis(4),
            Duration::from_micros(250),
        );
        assert_eq!(bins.len(), 24);
        assert_eq!((bins[0].from_us, bins[23].to_us), (-2000.0, 4000.0));
        for b in &bins {
            let w = b.mean_w.expect("every bin covered");
            assert!((w - 24.0).abs() < 1e-9, "{b:?}");
            // 89 signals × 250 µs each.
            assert!((b.covered_s - 89.0 * 250e-6).abs() < 1e-9, "{b:?}");
        }
    }

    /// Intervals of a power `p(t)` between counter changes every ~977 µs whose
    /// instants are known only to a read: each placed up to ±`jitter_ns` off (slow
    /// reads), seeded, so that every interval's power is off by up to tens of %.
    fn jittered(seed: u64, jitter_ns: u64, p: impl Fn(u64) -> f64) -> Vec<Interval> {
        let mut rng = quietwatt_stats::rng::XorShift::new(seed);
        let true_t: Vec<u64> = (0..1000u64).map(|k| 1_000_000 + k * 977_000).collect();
        let seen: Vec<u64> = true_t
            .iter()
            .map(|&t| t + rng.below(2 * jitter_ns as usize) as u64 - jitter_ns)
            .collect();
        (1..true_t.len())
            .map(|k| Interval {
                from_ns: seen[k - 1],
                to_ns: seen[k],
                joules: (0..100)
                    .map(|i| {
                        let step = (true_t[k] - true_t[k - 1]) / 100;
                        p(true_t[k - 1] + i * step) * step as f64 / 1e9
                    })
                    .sum(),
            })
            .collect()
    }

    #[test]
    fn around_a_constant_power_every_bins_interval_contains_it() {
        // 24 W, read with ±200 µs errors on each change: single bins wander by
        // several %, and their (simultaneous) intervals must all hold 24 W; the
        // same seeds every run.
        let signals: Vec<u64> = (1..170).map(|k| k * 5_300_000).collect();
        for seed in 1..=5 {
            let iv = jittered(seed, 200_000, |_| 24.0);
            let bins = bin_profile(
                &iv,
                &signals,
                Duration::from_millis(2),
                Duration::from_millis(3),
                Duration::from_micros(250),
            );
            for b in &bins {
                let ci = b.ci_w.expect("169 wake-ups per bin: an interval");
                assert!(ci[0] <= 24.0 && 24.0 <= ci[1], "seed {seed}: {b:?}");
                assert!(b.wakeups >= MIN_WAKEUPS && ci[1] > ci[0], "{b:?}");
            }
            let wobble = bins
                .iter()
                .map(|b| (b.mean_w.unwrap() - 24.0).abs())
                .fold(0.0, f64::max);
            assert!(
                wobble > 0.05,
                "the jitter moved no bin ({wobble} W): a test with no noise"
            );
        }
    }

    #[test]
    fn a_pulse_is_significant_and_the_quiet_bins_hold_their_true_power() {
        // 10 W, 30 W for 1 ms after each signal, read with ±50 µs errors.
        let signals: Vec<u64> = (1..130).map(|k| k * 7_300_000).collect();
        let p = |t: u64| {
            let k = t / 7_300_000;
            if (1..130).contains(&k) && t - k * 7_300_000 < 1_000_000 {
                30.0
            } else {
                10.0
            }
        };
        let iv = jittered(7, 50_000, p);
        let mean = iv.iter().map(|i| i.joules).sum::<f64>()
            / iv.iter()
                .map(|i| (i.to_ns - i.from_ns) as f64 / 1e9)
                .sum::<f64>();
        let bins = bin_profile(
            &iv,
            &signals,
            Duration::from_millis(2),
            Duration::from_millis(4),
            Duration::from_micros(250),
        );
        let at = |us: f64| {
            bins.iter()
                .find(|b| b.from_us <= us && us < b.to_us)
                .unwrap()
        };
        // In the pulse: above the run's mean power, significantly.
        let pulse = at(400.0).ci_w.unwrap();
        assert!(pulse[0] > mean, "{pulse:?} vs mean {mean} W");
        // Far from it (more than one update interval away), the interval holds the
        // true 10 W, which is below the mean: those bins differ from it, rightly.
        for us in [-1900.0, -1100.0, 2600.0, 3800.0] {
            let ci = at(us).ci_w.unwrap();
            assert!(ci[0] <= 10.0 && 10.0 <= ci[1], "at {us} µs: {ci:?}");
            assert!(excludes(ci, mean), "at {us} µs: {ci:?} vs mean {mean} W");
        }
    }

    #[test]
    fn a_bin_with_too_few_wake_ups_has_no_interval() {
        let iv = jittered(3, 50_000, |_| 24.0);
        let signals: Vec<u64> = (1..=5).map(|k| k * 50_000_000).collect();
        let bins = bin_profile(
            &iv,
            &signals,
            Duration::from_millis(1),
            Duration::from_millis(1),
            Duration::from_micros(250),
        );
        for b in &bins {
            assert_eq!(b.wakeups, 5);
            assert!(
                b.mean_w.is_some() && b.ci_w.is_none() && b.se_w.is_none(),
                "{b:?}"
            );
        }
    }

    #[test]
    fn a_pulse_after_each_signal_comes_back_where_it_was() {
        // 10 W, and 30 W for 1 ms after each signal; signals every 7.3 ms.
        let signals: Vec<u64> = (1..130).map(|k| k * 7_300_000).collect();
        let p = |t: u64| {
            let k = t / 7_300_000;
            let on = (1..130).contains(&k) && t - k * 7_300_000 < 1_000_000;
            if on {
                30.0
            } else {
                10.0
            }
        };
        // Fine intervals (10 µs): the profile must show the pulse sharply.
        let iv = sampled(0, 1_000_000_000, 10_000, p);
        let bins = bin_profile(
            &iv,
            &signals,
            Duration::from_millis(1),
            Duration::from_millis(3),
            Duration::from_micros(250),
        );
        for b in &bins {
            let w = b.mean_w.unwrap();
            let want = if b.from_us >= 0.0 && b.to_us <= 1000.0 {
                30.0
            } else {
                10.0
            };
            assert!((w - want).abs() < 0.2, "{b:?}: want {want} W");
        }
        // Coarse intervals (0.977 ms, RAPL-like, at every phase): a smoothed pulse
        // whose energy above the baseline is kept: 20 W × 1 ms = 20 mJ.
        let iv = sampled(0, 1_000_000_000, 977_000, p);
        let bins = bin_profile(
            &iv,
            &signals,
            Duration::from_millis(2),
            Duration::from_millis(4),
            Duration::from_micros(250),
        );
        let excess: f64 = bins
            .iter()
            .map(|b| (b.mean_w.unwrap() - 10.0) * (b.to_us - b.from_us) / 1e6)
            .sum();
        assert!((excess - 0.020).abs() < 0.002, "excess {excess} J");
        let at = |us: f64| {
            bins.iter()
                .find(|b| b.from_us <= us && us < b.to_us)
                .unwrap()
        };
        assert!(at(400.0).mean_w.unwrap() > 18.0, "{:?}", at(400.0));
        assert!(at(-1900.0).mean_w.unwrap() < 10.5 && at(3500.0).mean_w.unwrap() < 10.5);
    }
}
