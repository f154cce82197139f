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

use crate::domain::total_members;
use crate::meter::{monotonic_ns, Meter};
use crate::units::Joules;
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
        let bins = bin_profile(&self.intervals, signals_ns, before, after, bin);
        let (span_j, span_s) = self.intervals.iter().fold((0.0, 0.0), |(j, s), i| {
            (j + i.joules, s + (i.to_ns - i.from_ns) as f64 / 1e9)
        });
        let mut gaps: Vec<u64> = self.intervals.iter().map(|i| i.to_ns - i.from_ns).collect();
        gaps.sort_unstable();
        let update_us = gaps.get(gaps.len() / 2).map(|&g| g as f64 / 1e3);
        PowerProfile {
            source: self.label.clone(),
            bin_us: bin.as_secs_f64() * 1e6,
            bins,
            mean_w: (span_s > 0.0).then(|| span_j / span_s),
            samples: self.samples,
            changes: self.intervals.len(),
            update_us,
            slowest_read_us: self.slowest_ns as f64 / 1e3,
            dropped: self.dropped,
            error: self.error.clone(),
            method: "equivalent-time average: each interval between two counter changes, at its mean power, spread over the bins it covers relative to every signal; the result is the power profile averaged over one counter update interval".into(),
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
}

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
    let mut sum = vec![0.0f64; n];
    let mut cover = vec![0.0f64; n];
    let mut sorted = signals_ns.to_vec();
    sorted.sort_unstable();
    for iv in intervals {
        let dur = iv.to_ns.saturating_sub(iv.from_ns);
        if dur == 0 {
            continue;
        }
        let watts = iv.joules / (dur as f64 / 1e9);
        // Signals whose window [s - before, s + after) meets the interval.
        let lo = sorted.partition_point(|&s| (s as i64) + a <= iv.from_ns as i64);
        for &s in sorted[lo..]
            .iter()
            .take_while(|&&s| (s as i64) - b < iv.to_ns as i64)
        {
            let (x0, x1) = (iv.from_ns as i64 - s as i64, iv.to_ns as i64 - s as i64);
            for (k, (sum_k, cover_k)) in sum.iter_mut().zip(cover.iter_mut()).enumerate() {
                let (b0, b1) = (-b + k as i64 * w, (-b + (k as i64 + 1) * w).min(a));
                let overlap = (x1.min(b1) - x0.max(b0)).max(0) as f64 / 1e9;
                *sum_k += watts * overlap;
                *cover_k += overlap;
            }
        }
    }
    (0..n)
        .map(|k| ProfileBin {
            from_us: (-b + k as i64 * w) as f64 / 1e3,
            to_us: ((-b + (k as i64 + 1) * w).min(a)) as f64 / 1e3,
            mean_w: (cover[k] > 0.0).then(|| sum[k] / cover[k]),
            covered_s: cover[k],
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
