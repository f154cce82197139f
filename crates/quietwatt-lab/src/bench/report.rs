//! The rounds of one variant combined into one result, and the targets
//! checked on them.

use super::{BenchOptions, Target, Variant, VariantResult};
use quietwatt::overhead::Lateness;
use quietwatt_stats::median;

/// One variant's rounds as one result: counts and CPU summed over all samples,
/// the p50 lateness the median round's, the p99 and max the worst round's, and
/// the CPU ratio the median of the rounds' (each against its own round's floor,
/// so that a change of the machine's load between rounds cancels out).
pub(super) fn combine(rounds: Vec<VariantResult>, freq_hz: f64) -> VariantResult {
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
            // Whole nanoseconds: finite, so the median is there (rounds is not empty).
            p50_ns: median(
                &rounds
                    .iter()
                    .map(|r| r.lateness.p50_ns as f64)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(0.0) as u64,
            p99_ns: rounds.iter().map(|r| r.lateness.p99_ns).max().unwrap_or(0),
            max_ns: rounds.iter().map(|r| r.lateness.max_ns).max().unwrap_or(0),
        },
        cpu_per_sample_ns: weighted(&|r| r.cpu_per_sample_ns),
        writer_cpu_per_sample_ns: weighted(&|r| r.writer_cpu_per_sample_ns),
        process_cpu_per_sample_ns: weighted(&|r| r.process_cpu_per_sample_ns),
        cpu_ratio: median(&round_ratios),
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
#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt::ticker::Hertz;
    use std::time::Duration;

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
