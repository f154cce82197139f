//! Statistics of a command measured several times (`perf stat -r`, hyperfine) and
//! of two commands compared: the mean with its spread and a 95 % interval that also
//! holds each run's measurement bound, the ratio of two means with its interval,
//! and Welch's t test with the lab's rank test beside it.
//!
//! How the measurement bound is folded in: every run's energy comes with a `±`
//! bound (the counter's step, its update interval, an interval lost to a reset; see
//! `quietwatt::meter::DomainEnergy::uncertainty_j`). The runs' spread already holds
//! the random part of those errors; what it cannot show is an error that every run
//! shares. The mean's error from the bounds is at most the mean of the bounds, so
//! the interval reported ([`Summary::ci`]) is the Student's t interval of the
//! runs' spread widened on each side by that mean bound: conservative, never
//! narrower than either part alone. What is summarised here (energies,
//! durations) cannot be negative: when no run's value is, the interval's lower end
//! is clamped at 0 rather than reaching below what is physically possible (a
//! wide interval over few runs of a small energy would).

use crate::{Alternative, Method};
use serde::Serialize;

/// The confidence level of every interval here.
pub const CONFIDENCE: f64 = 0.95;

/// The significance level of the comparisons' verdicts.
pub const ALPHA: f64 = 0.05;

/// One quantity (a domain's energy, the total, the duration) over the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Number of runs.
    pub n: usize,
    /// Mean over the runs.
    pub mean: f64,
    /// Sample standard deviation (n - 1 in the denominator; 0 for one run).
    pub std: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// The interval of the mean at [`CONFIDENCE`]: the Student's t interval of the
    /// spread, widened by [`Summary::measurement_bound`] on each side, its lower end
    /// at least 0 when no value is negative.
    pub ci: [f64; 2],
    /// The Student's t interval of the spread alone (`None` for one run).
    pub ci_spread: Option<[f64; 2]>,
    /// The mean of the runs' `±` measurement bounds (0 for durations).
    pub measurement_bound: f64,
    /// The confidence level of the intervals.
    pub confidence: f64,
    /// How many runs lie outside Tukey's far-out fences (q1 - 3 IQR, q3 + 3 IQR).
    pub outliers: usize,
}

impl Summary {
    /// Summarises `values` (one per run) with their measurement bounds `bounds`
    /// (same length; pass zeros for an exact quantity). `None` for no values or a
    /// value that is not finite.
    pub fn new(values: &[f64], bounds: &[f64]) -> Option<Summary> {
        let n = values.len();
        if n == 0 || bounds.len() != n || values.iter().chain(bounds).any(|x| !x.is_finite()) {
            return None;
        }
        let nf = n as f64;
        let mean = values.iter().sum::<f64>() / nf;
        let std = if n > 1 {
            (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (nf - 1.0)).sqrt()
        } else {
            0.0
        };
        let bound = bounds.iter().map(|b| b.abs()).sum::<f64>() / nf;
        let ci_spread = (n > 1).then(|| {
            let h = t_quantile(nf - 1.0) * std / nf.sqrt();
            [mean - h, mean + h]
        });
        let [lo, hi] = ci_spread.unwrap_or([mean, mean]);
        let floor = if values.iter().all(|v| *v >= 0.0) {
            0.0
        } else {
            f64::NEG_INFINITY
        };
        let outliers = crate::remove_outliers(values, crate::IQR_FACTOR)
            .map(|o| o.removed.len())
            .unwrap_or(0);
        Some(Summary {
            n,
            mean,
            std,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ci: [(lo - bound).max(floor), hi + bound],
            ci_spread,
            measurement_bound: bound,
            confidence: CONFIDENCE,
            outliers,
        })
    }

    /// Standard error of the mean from the spread.
    pub fn se(&self) -> f64 {
        self.std / (self.n as f64).sqrt()
    }
}

/// The two-sided `CONFIDENCE` quantile of Student's t with `df` degrees of freedom.
fn t_quantile(df: f64) -> f64 {
    let q = crate::student_t_quantile(0.5 + CONFIDENCE / 2.0, df.min(1e7));
    if q.is_finite() {
        q
    } else {
        crate::normal_quantile(0.5 + CONFIDENCE / 2.0)
    }
}

/// Welch's unequal-variances t test of `b` against `a`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Welch {
    /// The test's name, for reports.
    pub test: &'static str,
    /// `(mean_b - mean_a) / sqrt(se_a² + se_b²)`; infinite when neither varies but
    /// the means differ.
    pub t: f64,
    /// Welch-Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// Welch's t test of `b` against `a`; `None` with fewer than two runs in either.
pub fn welch(a: &Summary, b: &Summary) -> Option<Welch> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    let (va, vb) = (a.se().powi(2), b.se().powi(2));
    let diff = b.mean - a.mean;
    let s = (va + vb).sqrt();
    let dfs = (a.n + b.n - 2) as f64;
    let (t, df) = if s == 0.0 {
        (
            if diff == 0.0 {
                0.0
            } else {
                diff.signum() * f64::INFINITY
            },
            dfs,
        )
    } else {
        let den = va.powi(2) / (a.n as f64 - 1.0) + vb.powi(2) / (b.n as f64 - 1.0);
        (
            diff / s,
            if den > 0.0 {
                (va + vb).powi(2) / den
            } else {
                dfs
            },
        )
    };
    let p_value = if t.is_infinite() {
        0.0
    } else {
        (2.0 * crate::student_t_sf(t.abs(), df)).min(1.0)
    };
    Some(Welch {
        test: "Welch's t test (two-sided)",
        t,
        df,
        p_value,
    })
}

/// The ratio of two means, `b / a`, with its interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ratio {
    /// `mean_b / mean_a`.
    pub estimate: f64,
    /// The interval at [`CONFIDENCE`]: on the log scale, `ln(b/a) ± t·s` with
    /// `s² = (se_a/mean_a)² + (se_b/mean_b)²` (the delta method) and Welch's
    /// degrees of freedom, then widened by both means' measurement bounds (the
    /// lower end divided by `(1 + bound_a/mean_a) / (1 - bound_b/mean_b)`, the
    /// upper multiplied by `(1 + bound_b/mean_b) / (1 - bound_a/mean_a)`).
    pub ci: [f64; 2],
    /// The confidence level.
    pub confidence: f64,
}

/// `b / a` with its interval; `None` unless both means are positive.
pub fn ratio(a: &Summary, b: &Summary) -> Option<Ratio> {
    if !(a.mean > 0.0 && b.mean > 0.0) {
        return None;
    }
    let ra = a.se() / a.mean;
    let rb = b.se() / b.mean;
    let s = (ra * ra + rb * rb).sqrt();
    let estimate = b.mean / a.mean;
    let (lo, hi) = if s > 0.0 && a.n > 1 && b.n > 1 {
        let den = ra.powi(4) / (a.n as f64 - 1.0) + rb.powi(4) / (b.n as f64 - 1.0);
        let df = if den > 0.0 {
            s.powi(4) / den
        } else {
            (a.n + b.n - 2) as f64
        };
        let h = t_quantile(df) * s;
        (estimate * (-h).exp(), estimate * h.exp())
    } else {
        (estimate, estimate)
    };
    let (ua, ub) = (a.measurement_bound / a.mean, b.measurement_bound / b.mean);
    let lower = lo * (1.0 - ub).max(0.0) / (1.0 + ua);
    let upper = if ua < 1.0 {
        hi * (1.0 + ub) / (1.0 - ua)
    } else {
        f64::INFINITY
    };
    Some(Ratio {
        estimate,
        ci: [lower, upper],
        confidence: CONFIDENCE,
    })
}

/// The Wilcoxon rank-sum (Mann-Whitney U) test of the lab, two-sided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankTest {
    /// The test's name, for reports.
    pub test: &'static str,
    /// The U statistic of `b` against `a`.
    pub u: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// The Hodges-Lehmann shift of `b` over `a` (the median of the differences
    /// `b_i - a_j`, in the values' unit) with its distribution-free 95 % interval.
    pub shift: Option<crate::Shift>,
}

/// The rank test of `b` against `a`, with the Hodges-Lehmann shift; `None` with
/// fewer than [`crate::MIN_SAMPLES`] runs in either (it could never be significant).
pub fn rank_test(a: &[f64], b: &[f64]) -> Option<RankTest> {
    crate::mann_whitney_u(b, a, Alternative::TwoSided, Method::Auto)
        .ok()
        .map(|u| RankTest {
            test: "Wilcoxon rank-sum (Mann-Whitney U, two-sided)",
            u: u.u,
            p_value: u.p_value,
            shift: crate::hodges_lehmann(b, a, 0.95, Method::Auto).ok(),
        })
}

/// What a comparison of `b` with `a` concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// `b` costs significantly more.
    More,
    /// `b` costs significantly less.
    Less,
    /// No significant difference.
    NoSignificantDifference,
}

impl Verdict {
    /// The verdict in words: "significantly more", ...
    pub fn words(self) -> &'static str {
        match self {
            Verdict::More => "significantly more",
            Verdict::Less => "significantly less",
            Verdict::NoSignificantDifference => "no significant difference",
        }
    }
}

/// The verdict on `b` against `a`: significant when Welch's two-sided p-value is
/// below [`ALPHA`] *and* the ratio's interval (which holds the measurement bounds)
/// leaves out 1, so that a difference smaller than the counters can resolve is
/// never called significant.
pub fn verdict(welch: Option<&Welch>, ratio: Option<&Ratio>) -> Verdict {
    match (welch, ratio) {
        (Some(w), Some(r)) if w.p_value < ALPHA => {
            if r.ci[0] > 1.0 {
                Verdict::More
            } else if r.ci[1] < 1.0 {
                Verdict::Less
            } else {
                Verdict::NoSignificantDifference
            }
        }
        _ => Verdict::NoSignificantDifference,
    }
}

/// What a gate "no more than `pct` % above the reference" concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GateOutcome {
    /// The ratio's interval lies wholly at or below the limit.
    Pass,
    /// Significantly more, and the ratio's interval lies wholly above the limit.
    Regression,
    /// The interval straddles the limit: the runs cannot tell.
    Inconclusive,
}

/// The gate's outcome for a comparison's `verdict` and `ratio`, with the limit
/// `1 + pct / 100`.
pub fn gate(verdict: Verdict, ratio: &Ratio, pct: f64) -> GateOutcome {
    let limit = 1.0 + pct / 100.0;
    if verdict == Verdict::More && ratio.ci[0] > limit {
        GateOutcome::Regression
    } else if ratio.ci[1] > limit {
        GateOutcome::Inconclusive
    } else {
        GateOutcome::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_passes_fails_or_says_it_cannot_tell() {
        let r = |lo: f64, hi: f64| Ratio {
            estimate: (lo + hi) / 2.0,
            ci: [lo, hi],
            confidence: CONFIDENCE,
        };
        assert_eq!(
            gate(Verdict::More, &r(1.6, 1.9), 50.0),
            GateOutcome::Regression
        );
        assert_eq!(gate(Verdict::Less, &r(0.5, 0.9), 50.0), GateOutcome::Pass);
        assert_eq!(
            gate(Verdict::NoSignificantDifference, &r(0.9, 1.4), 50.0),
            GateOutcome::Pass
        );
        // The tester's case: 1.30 [0.30, 5.62] against 50 % once passed silently.
        assert_eq!(
            gate(Verdict::NoSignificantDifference, &r(0.30, 5.62), 50.0),
            GateOutcome::Inconclusive
        );
        // Significantly more, but not surely by more than the limit.
        assert_eq!(
            gate(Verdict::More, &r(1.2, 1.8), 50.0),
            GateOutcome::Inconclusive
        );
    }

    #[test]
    fn summary_by_hand() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, s = sqrt(32/7); t(0.975, 7) = 2.364624.
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let s = Summary::new(&v, &[0.5; 8]).unwrap();
        assert_eq!((s.n, s.mean, s.min, s.max), (8, 5.0, 2.0, 9.0));
        assert!((s.std - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        let h = 2.364624251592785 * s.std / 8f64.sqrt();
        let [lo, hi] = s.ci_spread.unwrap();
        assert!((lo - (5.0 - h)).abs() < 1e-6 && (hi - (5.0 + h)).abs() < 1e-6);
        assert!((s.ci[0] - (lo - 0.5)).abs() < 1e-12 && (s.ci[1] - (hi + 0.5)).abs() < 1e-12);
        assert_eq!(s.outliers, 0);
    }

    #[test]
    fn an_energy_interval_never_reaches_below_zero() {
        // Three runs of a small, noisy energy: the t interval alone reaches below 0.
        let s = Summary::new(&[0.01, 0.2, 0.02], &[0.05; 3]).unwrap();
        assert!(s.ci_spread.unwrap()[0] < 0.0);
        assert_eq!(s.ci[0], 0.0);
        assert!(s.ci[1] > s.max);
        // A quantity with negative values keeps its interval as computed.
        let d = Summary::new(&[-0.1, 0.2, 0.02], &[0.0; 3]).unwrap();
        assert_eq!(d.ci[0], d.ci_spread.unwrap()[0]);
    }

    #[test]
    fn one_run_has_only_its_bound() {
        let s = Summary::new(&[3.0], &[0.1]).unwrap();
        assert_eq!(s.std, 0.0);
        assert_eq!(s.ci_spread, None);
        assert_eq!(s.ci, [2.9, 3.1]);
        assert!(Summary::new(&[], &[]).is_none());
        assert!(Summary::new(&[f64::NAN], &[0.0]).is_none());
    }

    #[test]
    fn welch_by_hand() {
        // a: mean 3, s² 2.5, n 5; b: mean 7, s² 14, n 6: t = 4 / sqrt(0.5 + 14/6),
        // df = (0.5 + 14/6)² / (0.5²/4 + (14/6)²/5).
        let a = Summary::new(&[1.0, 2.0, 3.0, 4.0, 5.0], &[0.0; 5]).unwrap();
        let b = Summary::new(&[2.0, 4.0, 6.0, 8.0, 10.0, 12.0], &[0.0; 6]).unwrap();
        let w = welch(&a, &b).unwrap();
        let v: f64 = 0.5 + 14.0 / 6.0;
        let df = v * v / (0.25 / 4.0 + (14.0f64 / 6.0).powi(2) / 5.0);
        assert!((w.t - 4.0 / v.sqrt()).abs() < 1e-12, "{w:?}");
        assert!((w.df - df).abs() < 1e-9, "{w:?}");
        assert!(w.p_value > 0.04 && w.p_value < 0.06, "{w:?}");
        assert!((welch(&b, &a).unwrap().t + w.t).abs() < 1e-12);
    }

    #[test]
    fn ratio_and_verdict() {
        let a = Summary::new(&[1.0, 1.1, 0.9, 1.0], &[0.01; 4]).unwrap();
        let b = Summary::new(&[3.0, 3.1, 2.9, 3.0], &[0.01; 4]).unwrap();
        let r = ratio(&a, &b).unwrap();
        assert!((r.estimate - 3.0).abs() < 1e-12);
        assert!(r.ci[0] < 3.0 && r.ci[1] > 3.0 && r.ci[0] > 2.0, "{r:?}");
        let w = welch(&a, &b).unwrap();
        assert_eq!(verdict(Some(&w), Some(&r)), Verdict::More);
        let back = ratio(&b, &a).unwrap();
        assert_eq!(verdict(welch(&b, &a).as_ref(), Some(&back)), Verdict::Less);
        // Identical constant runs: no difference, p = 1.
        let c = Summary::new(&[2.0; 4], &[0.0; 4]).unwrap();
        let w = welch(&c, &c).unwrap();
        assert_eq!(w.p_value, 1.0);
        assert_eq!(
            verdict(Some(&w), ratio(&c, &c).as_ref()),
            Verdict::NoSignificantDifference
        );
        // A difference inside the measurement bounds is not significant.
        let x = Summary::new(&[1.0; 4], &[0.2; 4]).unwrap();
        let y = Summary::new(&[1.1; 4], &[0.2; 4]).unwrap();
        let w = welch(&x, &y).unwrap();
        assert_eq!(w.p_value, 0.0);
        assert_eq!(
            verdict(Some(&w), ratio(&x, &y).as_ref()),
            Verdict::NoSignificantDifference
        );
    }

    #[test]
    fn rank_test_needs_four_runs() {
        assert!(rank_test(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).is_none());
        let r = rank_test(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        // 1 / C(8,4) = 1/70, two-sided 2/70.
        assert!((r.p_value - 2.0 / 70.0).abs() < 1e-12, "{r:?}");
    }
}
