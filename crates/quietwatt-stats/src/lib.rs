//! quietwatt-stats: the statistics quietwatt's measurements are judged by, apart
//! from the engine that takes them. Pure Rust, no I/O, no system library: it builds
//! with a Rust toolchain only, and neither reads RAPL nor knows the engine's types
//! (its inputs are plain `f64` slices).
//!
//! At the crate root, the statistics of paper 002 (Section V-A4 and Appendices A
//! and B): IQR outlier removal with factor 3, the one-sided Wilcoxon rank-sum test
//! (Mann-Whitney U), Holm-Bonferroni adjustment, the Hodges-Lehmann location shift
//! with its distribution-free confidence interval, the relative overhead in
//! percent ([`compare`] is the paper's whole comparison), Student's t and weighted
//! means. Beside them:
//! - [`fit`]: least squares with intervals (the events' and the models' costs).
//! - [`repeat`]: the statistics of a command measured several times and of two
//!   commands compared (means, intervals holding each run's measurement bound,
//!   the ratio, Welch's t, the verdict and the gate of `quietwatt compare`).
//! - [`plot`]: box, line and scatter plots as SVG documents, written by hand.
//! - [`rng`]: a seeded XorShift for reproducible shuffles, bootstraps and sweeps.
//!
//! Every test is checked against SciPy and statsmodels in `tests/stats.rs`
//! (vectors made by `tests/vectors/make_stats_vectors.py`).
//!
//! Nothing here returns NaN or panics on user data: a question the data cannot
//! answer (too few samples, every value equal, a NaN in the input) is a
//! [`StatsError`], which reads as a sentence in a report.
//!
//! Its users are the crates above the engine (the overhead lab, the OS events, the
//! energy models, the command line and Python); the engine itself never needs
//! them, which is why they are a crate of their own.
//!
//! Conventions, so that figures can be compared with other tools:
//! - quantiles are linear interpolation between order statistics (R type 7, the
//!   default of R and NumPy), which is "the usual interquartile range" of the paper;
//! - `x` is the treatment (runs with a monitor) and `y` the baseline (no monitor);
//!   the shift is `x - y`, so a slowdown is a positive shift;
//! - [`mann_whitney_u`] follows `scipy.stats.mannwhitneyu(x, y, alternative=...,
//!   method=..., use_continuity=True)`; [`holm`] follows statsmodels'
//!   `multipletests(p, method="holm")`; [`hodges_lehmann`] follows R's
//!   `wilcox.test(x, y, conf.int = TRUE)` where R is exact (see there for where it
//!   differs).
//!
//! # Example
//!
//! ```
//! use quietwatt_stats::repeat::{gate, ratio, verdict, welch, GateOutcome, Summary};
//! use quietwatt_stats::{compare, fit};
//!
//! // Five runs of two commands: joules per run, each with its counter's ± bound.
//! let a = Summary::new(&[10.1, 10.3, 9.9, 10.0, 10.2], &[0.01; 5]).expect("finite values");
//! let b = Summary::new(&[12.0, 12.2, 11.9, 12.1, 12.3], &[0.01; 5]).expect("finite values");
//! let r = ratio(&a, &b).expect("positive means");
//! let v = verdict(welch(&a, &b).as_ref(), Some(&r));
//! println!("b / a = {:.2} [{:.2}, {:.2}]: {}", r.estimate, r.ci[0], r.ci[1], v.words());
//! // b is about 20 % above a: a gate of "at most 5 % above" fails.
//! assert_eq!(gate(v, &r, 5.0), GateOutcome::Regression);
//!
//! // The overhead lab's comparison: run times with a monitor against without.
//! let with = [1.02, 1.03, 1.01, 1.04, 1.02, 1.03];
//! let without = [1.00, 1.01, 0.99, 1.00, 1.01, 1.00];
//! let c = compare(&with, &without);
//! assert!(c.overhead_pct.is_some_and(|pct| pct > 0.0), "{c:?}");
//!
//! // Least squares with intervals: joules against events.
//! let f = fit::ols(&[1.0, 2.0, 3.0, 4.0], &[2.1, 3.9, 6.1, 8.0], "joules per event")
//!     .expect("enough points");
//! assert!((f.slope - 2.0).abs() < 0.1);
//! ```
#![deny(missing_docs)]

use serde::Serialize;

pub mod fit;
pub mod plot;
pub mod repeat;
pub mod rng;

// The rank tests, the location shift and Student's t are apart from the data's
// preparation (quantiles, outliers) and the paper's whole comparison, which uses them.
mod shift;
mod student;
mod wilcoxon;
pub use shift::{hodges_lehmann, relative_pct, Shift};
pub use student::{
    excludes, incomplete_beta, student_t_quantile, student_t_sf, weighted_mean_interval,
    MeanInterval,
};
pub use wilcoxon::{
    holm, mann_whitney_u, mann_whitney_u_any_size, normal_quantile, normal_sf, Alternative,
    Computed, Method, UDistribution, UTest,
};

/// The paper's outlier fence: a value outside `[q1 - 3 IQR, q3 + 3 IQR]` is dropped.
/// (Tukey's "far out" fence; the common 1.5 would drop real slow runs of a noisy
/// machine, which are the very effect under study.)
pub const IQR_FACTOR: f64 = 3.0;

/// Fewest samples per group for a test or a shift. With 3 and 3 the smallest
/// possible one-sided p-value is 1/C(6,3) = 0.05, so no result could ever be
/// significant at 5 %; from 4 and 4 (1/70 = 0.014) it can.
pub const MIN_SAMPLES: usize = 4;

/// The confidence level of the shift's interval in reports.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

/// The largest `n_x * n_y` whose exact U distribution is computed: the table takes
/// `n_x * n_y / 2` floats and `min(n_x, n_y) * n_x * n_y / 2` operations. Beyond it
/// the normal approximation is as accurate as anyone needs.
pub const EXACT_MAX_CELLS: usize = 10_000_000;

/// Why a statistic could not be computed from the data given.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
#[serde(tag = "error", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StatsError {
    /// A group has fewer samples than the statistic needs.
    #[error("too few samples ({x} and {y}; at least {min} in each group)")]
    TooFewSamples {
        /// Samples in the treatment group.
        x: usize,
        /// Samples in the baseline group.
        y: usize,
        /// The least per group.
        min: usize,
    },
    /// Every value of both groups is the same: ranks carry no information.
    #[error("all {n} values are equal: nothing to rank")]
    AllTied {
        /// Values in both groups together.
        n: usize,
    },
    /// A value is NaN or infinite (a failed run recorded as a number?).
    #[error("a value is not a finite number: {value}")]
    NotFinite {
        /// The value found.
        value: f64,
    },
    /// A p-value given to [`holm`] is not a probability.
    #[error("{value} is not a p-value (expected a number in [0, 1])")]
    InvalidPValue {
        /// The value found.
        value: f64,
    },
    /// A confidence level outside (0, 1).
    #[error("confidence level {value} is not in (0, 1)")]
    InvalidConfidence {
        /// The value given.
        value: f64,
    },
    /// The exact distribution was asked for samples too large to tabulate.
    #[error("the exact distribution for {x} and {y} samples is too large to tabulate; use the normal approximation")]
    ExactTooLarge {
        /// Samples in the treatment group.
        x: usize,
        /// Samples in the baseline group.
        y: usize,
    },
}

pub(crate) fn check_finite(values: &[f64]) -> Result<(), StatsError> {
    match values.iter().find(|v| !v.is_finite()) {
        Some(&value) => Err(StatsError::NotFinite { value }),
        None => Ok(()),
    }
}

pub(crate) fn sorted(values: &[f64]) -> Vec<f64> {
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

// ---------------------------------------------------------------------------
// Quantiles and outliers.

/// The `q`-quantile of already sorted, finite values by linear interpolation
/// (R type 7, NumPy's default). `None` when `sorted` is empty or `q` is outside [0, 1].
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// The median; `None` when `values` is empty or holds a non-finite value.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    quantile_sorted(&sorted(values), 0.5)
}

/// The fences of an outlier filter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fences {
    /// First quartile.
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
    /// Lowest kept value allowed: `q1 - factor * (q3 - q1)`.
    pub low: f64,
    /// Highest kept value allowed: `q3 + factor * (q3 - q1)`.
    pub high: f64,
}

/// A sample split into the values kept and the outliers dropped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outliers {
    /// Values inside the fences, in their original order.
    pub kept: Vec<f64>,
    /// Values outside the fences, in their original order.
    pub removed: Vec<f64>,
    /// The fences; `None` for an empty sample.
    pub fences: Option<Fences>,
}

/// Drops the values outside `[q1 - factor * IQR, q3 + factor * IQR]` (the fences
/// themselves are kept). The paper's factor is [`IQR_FACTOR`]. An empty sample is
/// returned empty; a sample of one value keeps it.
pub fn remove_outliers(values: &[f64], factor: f64) -> Result<Outliers, StatsError> {
    check_finite(values)?;
    let s = sorted(values);
    let (Some(q1), Some(q3)) = (quantile_sorted(&s, 0.25), quantile_sorted(&s, 0.75)) else {
        return Ok(Outliers {
            kept: Vec::new(),
            removed: Vec::new(),
            fences: None,
        });
    };
    let iqr = q3 - q1;
    let fences = Fences {
        q1,
        q3,
        low: q1 - factor * iqr,
        high: q3 + factor * iqr,
    };
    let (kept, removed) = values
        .iter()
        .partition(|&&v| v >= fences.low && v <= fences.high);
    Ok(Outliers {
        kept,
        removed,
        fences: Some(fences),
    })
}

// ---------------------------------------------------------------------------
// The paper's whole comparison.

/// A treatment group compared with the baseline by the paper's protocol: outliers
/// dropped in each group ([`IQR_FACTOR`]), then the one-sided test "the treatment
/// is slower" ([`Alternative::Greater`], [`Method::Auto`]) and the shift with its
/// 95 % interval. Holm's adjustment is applied afterwards over a family of these.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Treatment values before outlier removal.
    pub n_x_raw: usize,
    /// Baseline values before outlier removal.
    pub n_y_raw: usize,
    /// Treatment values kept.
    pub n_x: usize,
    /// Baseline values kept.
    pub n_y: usize,
    /// Median of the kept treatment values.
    pub median_x: Option<f64>,
    /// Median of the kept baseline values.
    pub median_y: Option<f64>,
    /// The test, or why there is none.
    pub test: Result<UTest, StatsError>,
    /// The shift, or why there is none.
    pub shift: Result<Shift, StatsError>,
    /// The shift as a percentage of the baseline median.
    pub overhead_pct: Option<f64>,
    /// The shift's interval as percentages of the baseline median.
    pub overhead_ci_pct: Option<(f64, f64)>,
}

/// Compares treatment `x` with baseline `y` by the paper's protocol (see
/// [`Comparison`]).
pub fn compare(x: &[f64], y: &[f64]) -> Comparison {
    let (ox, oy) = (
        remove_outliers(x, IQR_FACTOR),
        remove_outliers(y, IQR_FACTOR),
    );
    let (kx, ky) = match (&ox, &oy) {
        (Ok(a), Ok(b)) => (a.kept.clone(), b.kept.clone()),
        // A non-finite value: let the test report it.
        _ => (x.to_vec(), y.to_vec()),
    };
    let test = mann_whitney_u(&kx, &ky, Alternative::Greater, Method::Auto);
    let shift = hodges_lehmann(&kx, &ky, DEFAULT_CONFIDENCE, Method::Auto);
    let median_y = median(&ky);
    let pct = |v: f64| median_y.and_then(|b| relative_pct(v, b));
    let overhead_pct = shift.as_ref().ok().and_then(|s| pct(s.estimate));
    let overhead_ci_pct = shift
        .as_ref()
        .ok()
        .and_then(|s| Some((pct(s.lower)?, pct(s.upper)?)));
    Comparison {
        n_x_raw: x.len(),
        n_y_raw: y.len(),
        n_x: kx.len(),
        n_y: ky.len(),
        median_x: median(&kx),
        median_y,
        test,
        shift,
        overhead_pct,
        overhead_ci_pct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degenerate_inputs_are_typed_errors() {
        let g = Alternative::Greater;
        assert!(matches!(
            mann_whitney_u(&[], &[], g, Method::Auto),
            Err(StatsError::TooFewSamples { .. })
        ));
        assert!(matches!(
            mann_whitney_u(&[1.0; 5], &[1.0; 6], g, Method::Auto),
            Err(StatsError::AllTied { n: 11 })
        ));
        assert!(matches!(
            mann_whitney_u(&[1.0, 2.0, f64::NAN, 3.0], &[1.0; 4], g, Method::Auto),
            Err(StatsError::NotFinite { .. })
        ));
        assert!(matches!(
            hodges_lehmann(&[1.0, 2.0, 3.0, 4.0], &[1.0; 4], 1.0, Method::Auto),
            Err(StatsError::InvalidConfidence { .. })
        ));
        assert!(matches!(
            holm(&[0.1, f64::NAN]),
            Err(StatsError::InvalidPValue { .. })
        ));
        assert_eq!(holm(&[]), Ok(vec![]));
        let c = compare(&[], &[1.0]);
        assert!(c.test.is_err() && c.shift.is_err() && c.overhead_pct.is_none());
    }

    #[test]
    fn identical_groups_give_no_shift_and_no_evidence() {
        let v = [10.0, 10.5, 11.0, 9.5, 10.2];
        let c = compare(&v, &v);
        let s = c.shift.expect("shift");
        assert_eq!(s.estimate, 0.0);
        assert!(s.lower <= 0.0 && s.upper >= 0.0);
        assert!(c.test.expect("test").p_value > 0.4);
        assert_eq!(c.overhead_pct, Some(0.0));
    }
}
