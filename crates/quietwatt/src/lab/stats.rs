//! The statistics of paper 002 (Section V-A4 and Appendices A and B): IQR outlier
//! removal with factor 3, the one-sided Wilcoxon rank-sum test (Mann-Whitney U),
//! Holm-Bonferroni adjustment, the Hodges-Lehmann location shift with its
//! distribution-free confidence interval, and the relative overhead in percent.
//!
//! Every function is checked against SciPy and statsmodels in
//! `tests/lab_stats.rs` (vectors made by `tests/vectors/make_stats_vectors.py`).
//!
//! Nothing here returns NaN or panics on user data: a question the data cannot
//! answer (too few samples, every value equal, a NaN in the input) is a
//! [`StatsError`], which reads as a sentence in a report.
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

use serde::Serialize;
use std::cmp::Ordering;
use std::fmt;

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

fn check_finite(values: &[f64]) -> Result<(), StatsError> {
    match values.iter().find(|v| !v.is_finite()) {
        Some(&value) => Err(StatsError::NotFinite { value }),
        None => Ok(()),
    }
}

fn sorted(values: &[f64]) -> Vec<f64> {
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
// Ranks and the normal distribution.

/// Average ranks (1-based) of `values`, and the sizes of the groups of tied values
/// (groups of one included, as SciPy's `rankdata(return_ties=True)` counts them).
fn average_ranks(values: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let mut j = i + 1;
        while j < order.len() && values[order[j]] == values[order[i]] {
            j += 1;
        }
        // Positions i..j (0-based) share the mean of ranks i+1..=j.
        let r = (i + 1 + j) as f64 / 2.0;
        for &k in &order[i..j] {
            ranks[k] = r;
        }
        ties.push(j - i);
        i = j;
    }
    (ranks, ties)
}

/// P(Z > z) for a standard normal Z, accurate in the far tail (erfc, not 1 - cdf).
pub fn normal_sf(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

/// The `p`-quantile of the standard normal (`p` in (0, 1)), by bisection on
/// [`normal_sf`]: called a few times per report, so exactness beats speed.
pub fn normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        // cdf(mid) = sf(-mid)
        if normal_sf(-mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

// ---------------------------------------------------------------------------
// The exact null distribution of U.

/// The null distribution of the Mann-Whitney U statistic for sample sizes `m` and
/// `n` without ties: the number of arrangements giving each U is the coefficient of
/// the Gaussian binomial `[m+n choose m]_q = prod_{i=1..m} (1 - q^{n+i}) / (1 - q^i)`.
///
/// Only the left half is tabulated: the distribution is symmetric about `m n / 2`,
/// and the left tail computed from small integers is exact, where a right tail
/// summed from large counts would lose the small p-values to rounding.
#[derive(Debug, Clone)]
pub struct UDistribution {
    mn: usize,
    /// `cum[k]` = P(U <= k) for k in 0..=mn/2.
    cum: Vec<f64>,
}

impl UDistribution {
    /// Tabulates the distribution for sizes `m` and `n` (both at least 1).
    pub fn new(m: usize, n: usize) -> Result<UDistribution, StatsError> {
        let too_large = || StatsError::ExactTooLarge { x: m, y: n };
        let mn = m.checked_mul(n).ok_or_else(too_large)?;
        if mn > EXACT_MAX_CELLS {
            return Err(too_large());
        }
        let (small, large) = (m.min(n), m.max(n));
        // C(m+n, m) as a float; past ~1e300 it would overflow.
        let total = (1..=small).fold(1.0f64, |acc, i| acc * (large + i) as f64 / i as f64);
        if !total.is_finite() {
            return Err(too_large());
        }
        let half = mn / 2;
        // Power series truncated after q^half: both steps below touch only lower
        // coefficients, so the truncation is exact.
        let mut c = vec![0.0f64; half + 1];
        c[0] = 1.0;
        for i in 1..=small {
            let a = large + i;
            for k in (a..=half).rev() {
                c[k] -= c[k - a];
            }
            for k in i..=half {
                c[k] += c[k - i];
            }
        }
        let mut cum = Vec::with_capacity(half + 1);
        let mut acc = 0.0;
        for v in c {
            acc += v;
            cum.push(acc / total);
        }
        Ok(UDistribution { mn, cum })
    }

    /// P(U <= k).
    pub fn cdf(&self, k: i64) -> f64 {
        if k < 0 {
            return 0.0;
        }
        let k = k as usize;
        if k >= self.mn {
            return 1.0;
        }
        match self.cum.get(k) {
            Some(&p) => p,
            // P(U <= k) = 1 - P(U >= k+1) = 1 - P(U <= mn - k - 1), by symmetry.
            None => 1.0 - self.cdf((self.mn - k - 1) as i64),
        }
    }

    /// P(U >= k), the mass at `k` included (SciPy's `_MWU.sf`).
    pub fn sf(&self, k: i64) -> f64 {
        // P(U >= k) = P(U <= mn - k) by symmetry.
        self.cdf(self.mn as i64 - k)
    }

    /// The smallest `q` with P(U <= q) >= p (R's `qwilcox`).
    pub fn quantile(&self, p: f64) -> usize {
        (0..=self.mn)
            .find(|&q| self.cdf(q as i64) >= p)
            .unwrap_or(self.mn)
    }
}

// ---------------------------------------------------------------------------
// The Mann-Whitney U test.

/// The alternative hypothesis about the treatment `x` against the baseline `y`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Alternative {
    /// `x` tends to be larger (a monitor slows the workload down): the paper's test.
    Greater,
    /// `x` tends to be smaller.
    Less,
    /// `x` and `y` differ in either direction.
    TwoSided,
}

/// How to compute the p-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// SciPy's choice: [`Computed::Exact`] when at least one sample has 8 values or
    /// fewer and no value is tied; [`Computed::Asymptotic`] otherwise (and also when
    /// the exact table would exceed [`EXACT_MAX_CELLS`], where SciPy would still
    /// tabulate: this only happens with one sample of 8 or fewer against more than a
    /// million).
    Auto,
    /// The exact null distribution. With ties, U (a half-integer then) is rounded
    /// down before the lookup, as SciPy does; the result is not tie-corrected.
    Exact,
    /// The normal approximation with tie correction of the variance and continuity
    /// correction of 0.5.
    Asymptotic,
}

/// Which computation a result came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Computed {
    /// The exact distribution.
    Exact,
    /// The normal approximation.
    Asymptotic,
}

impl fmt::Display for Computed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Computed::Exact => "exact",
            Computed::Asymptotic => "asymptotic",
        })
    }
}

fn choose(method: Method, n_x: usize, n_y: usize, tied: bool) -> Computed {
    match method {
        Method::Exact => Computed::Exact,
        Method::Asymptotic => Computed::Asymptotic,
        Method::Auto => {
            if (n_x > 8 && n_y > 8) || tied || n_x.saturating_mul(n_y) > EXACT_MAX_CELLS {
                Computed::Asymptotic
            } else {
                Computed::Exact
            }
        }
    }
}

/// The result of a Mann-Whitney U test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UTest {
    /// U of `x`: the number of pairs (x_i, y_j) with x_i > y_j, ties counting one half.
    pub u: f64,
    /// The p-value for the alternative.
    pub p_value: f64,
    /// The standardized statistic of the normal approximation (with continuity
    /// correction); `None` for the exact method.
    pub z: Option<f64>,
    /// How the p-value was computed.
    pub method: Computed,
    /// The alternative tested.
    pub alternative: Alternative,
    /// Whether any value appears more than once (in either group).
    pub tied: bool,
    /// Samples in `x`.
    pub n_x: usize,
    /// Samples in `y`.
    pub n_y: usize,
}

/// The Wilcoxon rank-sum (Mann-Whitney U) test of treatment `x` against baseline
/// `y`, as `scipy.stats.mannwhitneyu(x, y, alternative, method)` computes it.
/// Needs at least [`MIN_SAMPLES`] values in each group: fewer can never give a
/// p-value below 0.05 one-sided, and a report should say so rather than print one.
pub fn mann_whitney_u(
    x: &[f64],
    y: &[f64],
    alternative: Alternative,
    method: Method,
) -> Result<UTest, StatsError> {
    if x.len() < MIN_SAMPLES || y.len() < MIN_SAMPLES {
        check_finite(x)?;
        check_finite(y)?;
        return Err(StatsError::TooFewSamples {
            x: x.len(),
            y: y.len(),
            min: MIN_SAMPLES,
        });
    }
    mann_whitney_u_any_size(x, y, alternative, method)
}

/// [`mann_whitney_u`] for any sample size from one value per group: for comparing
/// with other tools at sizes where the test has no power. Reports should use
/// [`mann_whitney_u`].
pub fn mann_whitney_u_any_size(
    x: &[f64],
    y: &[f64],
    alternative: Alternative,
    method: Method,
) -> Result<UTest, StatsError> {
    check_finite(x)?;
    check_finite(y)?;
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 {
        return Err(StatsError::TooFewSamples {
            x: n1,
            y: n2,
            min: 1,
        });
    }
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let (ranks, ties) = average_ranks(&all);
    let n = n1 + n2;
    if ties.len() == 1 {
        return Err(StatsError::AllTied { n });
    }
    let tied = ties.iter().any(|&t| t > 1);
    let r1: f64 = ranks[..n1].iter().sum();
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u1 = r1 - f1 * (f1 + 1.0) / 2.0;
    let u2 = f1 * f2 - u1;
    // SciPy computes every alternative as a survival function of one statistic.
    let (u, factor) = match alternative {
        Alternative::Greater => (u1, 1.0),
        Alternative::Less => (u2, 1.0),
        Alternative::TwoSided => (u1.max(u2), 2.0),
    };
    let computed = choose(method, n1, n2, tied);
    let (p, z) = match computed {
        Computed::Exact => {
            let dist = UDistribution::new(n1, n2)?;
            // U is a half-integer only with ties; SciPy truncates it to an integer.
            (dist.sf(u.floor() as i64), None)
        }
        Computed::Asymptotic => {
            let tie_term: f64 = ties.iter().map(|&t| (t as f64).powi(3) - t as f64).sum();
            let nf = n as f64;
            let s = (f1 * f2 / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)))).sqrt();
            // s > 0 whenever two values differ, which the AllTied check ensured.
            let z = (u - f1 * f2 / 2.0 - 0.5) / s;
            (normal_sf(z), Some(z))
        }
    };
    Ok(UTest {
        u: u1,
        p_value: (p * factor).clamp(0.0, 1.0),
        z,
        method: computed,
        alternative,
        tied,
        n_x: n1,
        n_y: n2,
    })
}

// ---------------------------------------------------------------------------
// Holm-Bonferroni.

/// Holm's step-down adjustment of a family of p-values, in the input order:
/// sorted ascending, the i-th (from 0) is multiplied by `m - i`, then made
/// non-decreasing by a running maximum and capped at 1 (statsmodels'
/// `multipletests(p, method="holm")[1]`). Reject H_i at level alpha when the
/// adjusted p is <= alpha. An empty family gives an empty result.
pub fn holm(p_values: &[f64]) -> Result<Vec<f64>, StatsError> {
    if let Some(&value) = p_values
        .iter()
        .find(|p| !p.is_finite() || !(0.0..=1.0).contains(*p))
    {
        return Err(StatsError::InvalidPValue { value });
    }
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    // Stable: equal p-values keep their order, as NumPy's argsort in statsmodels.
    order.sort_by(|&a, &b| {
        p_values[a]
            .partial_cmp(&p_values[b])
            .unwrap_or(Ordering::Equal)
    });
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0f64;
    for (i, &k) in order.iter().enumerate() {
        running = running.max(p_values[k] * (m - i) as f64);
        adjusted[k] = running.min(1.0);
    }
    Ok(adjusted)
}

// ---------------------------------------------------------------------------
// Hodges-Lehmann shift.

/// The Hodges-Lehmann estimate of the location shift between treatment and
/// baseline, with its confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shift {
    /// The median of the `n_x * n_y` differences `x_i - y_j`.
    pub estimate: f64,
    /// Lower bound of the two-sided interval.
    pub lower: f64,
    /// Upper bound of the two-sided interval.
    pub upper: f64,
    /// The confidence level asked for.
    pub confidence: f64,
    /// The level the interval actually has (the U distribution is discrete, so it
    /// is the nearest achievable level at or above the one asked, exactly for the
    /// exact method and approximately for the asymptotic one).
    pub achieved_confidence: f64,
    /// How the critical value was found.
    pub method: Computed,
}

/// The Hodges-Lehmann shift of treatment `x` over baseline `y` (the median of all
/// pairwise differences `x_i - y_j`) with the distribution-free two-sided interval
/// `[d_(k), d_(N-k+1)]` of the sorted differences `d`, `N = n_x n_y`, where `k` is
/// the Mann-Whitney critical value:
/// - exact ([`Method`] chosen as for the test): `k = qwilcox((1 - confidence) / 2)`,
///   raised to 1 if 0; the same interval and estimate as R's
///   `wilcox.test(x, y, conf.int = TRUE)` when R is exact (no ties, both samples
///   under 50);
/// - asymptotic: `k = ceil(N/2 - 0.5 - z σ)` with `σ² = N (n_x + n_y + 1) / 12` and
///   `z` the normal `(1 + confidence) / 2` quantile, at least 1 (Hollander and
///   Wolfe's large-sample interval). R instead inverts the tie-corrected z
///   statistic numerically and reports the root as the estimate, so its figures
///   differ slightly here.
///
/// Needs at least [`MIN_SAMPLES`] values per group.
pub fn hodges_lehmann(
    x: &[f64],
    y: &[f64],
    confidence: f64,
    method: Method,
) -> Result<Shift, StatsError> {
    check_finite(x)?;
    check_finite(y)?;
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(StatsError::InvalidConfidence { value: confidence });
    }
    let (n1, n2) = (x.len(), y.len());
    if n1 < MIN_SAMPLES || n2 < MIN_SAMPLES {
        return Err(StatsError::TooFewSamples {
            x: n1,
            y: n2,
            min: MIN_SAMPLES,
        });
    }
    let mut diffs: Vec<f64> = x
        .iter()
        .flat_map(|&a| y.iter().map(move |&b| a - b))
        .collect();
    diffs.sort_by(f64::total_cmp);
    let big_n = diffs.len();
    let estimate = quantile_sorted(&diffs, 0.5).unwrap_or(0.0);
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let (_, ties) = average_ranks(&all);
    let tied = ties.iter().any(|&t| t > 1);
    let alpha = 1.0 - confidence;
    let mut computed = choose(method, n1, n2, tied);
    let exact = match computed {
        Computed::Exact => Some(UDistribution::new(n1, n2)?),
        Computed::Asymptotic => None,
    };
    let (k, achieved) = match &exact {
        Some(dist) => {
            let k = dist.quantile(alpha / 2.0).max(1);
            (k, 1.0 - 2.0 * dist.cdf(k as i64 - 1))
        }
        None => {
            computed = Computed::Asymptotic;
            let mu = big_n as f64 / 2.0;
            let sigma = (big_n as f64 * (n1 + n2 + 1) as f64 / 12.0).sqrt();
            let z = normal_quantile(1.0 - alpha / 2.0);
            let k = (mu - 0.5 - z * sigma).ceil().max(1.0) as usize;
            // P(U <= k - 1) by the same approximation.
            let tail = normal_sf(-((k as f64 - 1.0 + 0.5 - mu) / sigma));
            (k, 1.0 - 2.0 * tail)
        }
    };
    // k <= N/2 + 1 always (k is below the median of U), so both indices are valid
    // and ordered; min() guards the degenerate N = 1 that MIN_SAMPLES excludes.
    let lo = (k - 1).min(big_n - 1);
    let hi = (big_n - k).max(lo);
    Ok(Shift {
        estimate,
        lower: diffs[lo],
        upper: diffs[hi],
        confidence,
        achieved_confidence: achieved,
        method: computed,
    })
}

/// `shift` as a percentage of `baseline` (the paper's "1.5 to 3.4 seconds, that
/// is, 0.5 % to 1.2 %"); `None` when the baseline is zero or either is not finite.
pub fn relative_pct(shift: f64, baseline: f64) -> Option<f64> {
    let r = shift / baseline * 100.0;
    (baseline != 0.0 && r.is_finite()).then_some(r)
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

// ---------------------------------------------------------------------------
// Student's t distribution (the confidence intervals of a least-squares fit).

/// The regularized incomplete beta function I_x(a, b), by the continued fraction
/// of its definition evaluated with the modified Lentz method (converges fast for
/// x < (a + 1) / (a + b + 2); the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) covers the
/// rest). `a, b > 0`, `x` in [0, 1]; NaN outside.
pub fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if !(a > 0.0 && b > 0.0 && (0.0..=1.0).contains(&x)) {
        return f64::NAN;
    }
    if x == 0.0 || x == 1.0 {
        return x;
    }
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(1.0 - x, b, a);
    }
    // x^a (1-x)^b / (a B(a, b)), in logs so that large a, b do not overflow.
    let ln_front =
        a * x.ln() + b * (1.0 - x).ln() + libm::lgamma(a + b) - libm::lgamma(a) - libm::lgamma(b);
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0f64, 1.0 - (a + b) * x / (a + 1.0));
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..=500 {
        let m = m as f64;
        // The even and the odd term of the fraction.
        for num in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = 1.0 + num / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    ln_front.exp() * f / a
}

/// P(T > t) for Student's t with `df` degrees of freedom (`df > 0`).
pub fn student_t_sf(t: f64, df: f64) -> f64 {
    // P(|T| > |t|) = I_{df/(df+t^2)}(df/2, 1/2); half of it is one tail. Near
    // t = 0 that argument rounds to 1, so the complement is taken from
    // t^2/(df+t^2), which keeps its digits there.
    let y = t * t / (df + t * t);
    let two_tailed = if y < 0.5 {
        1.0 - incomplete_beta(y, 0.5, df / 2.0)
    } else {
        incomplete_beta(df / (df + t * t), df / 2.0, 0.5)
    };
    if t >= 0.0 {
        0.5 * two_tailed
    } else {
        1.0 - 0.5 * two_tailed
    }
}

/// The `p`-quantile of Student's t with `df` degrees of freedom (`p` in (0, 1)), by
/// bisection on [`student_t_sf`]; NaN for a `p` or `df` outside the domain.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0 && df > 0.0) {
        return f64::NAN;
    }
    // Wide enough for df = 1 down to p = 1e-12 (the Cauchy quantile is ~3e11).
    let (mut lo, mut hi) = (-1e13f64, 1e13f64);
    for _ in 0..400 {
        let mid = 0.5 * (lo + hi);
        // cdf(mid) = 1 - sf(mid)
        if 1.0 - student_t_sf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-13 * hi.abs().max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Whether `ci` leaves out `null`: the estimate it belongs to is then significant at
/// the interval's level (an interval that contains `null` cannot tell the estimate
/// from it). A NaN bound leaves nothing out.
pub fn excludes(ci: [f64; 2], null: f64) -> bool {
    null < ci[0] || null > ci[1]
}

/// A weighted mean with the interval its values' spread gives.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanInterval {
    /// `sum(w x) / sum(w)`.
    pub mean: f64,
    /// Standard error of the mean.
    pub se: f64,
    /// Values with a positive weight.
    pub n: usize,
    /// Degrees of freedom of the interval (n - 1).
    pub df: usize,
    /// `[low, high]` at `confidence`.
    pub ci: [f64; 2],
    /// The level of `ci`.
    pub confidence: f64,
}

/// The weighted mean of `values` (weights `weights`, same length, non-negative)
/// with its confidence interval from their spread: Student's t with n - 1 degrees of
/// freedom on the ratio estimator's standard error,
/// `se^2 = n / (n - 1) * sum(w^2 (x - mean)^2) / sum(w)^2` (with equal weights, the
/// textbook `s / sqrt(n)`). Treats the values as independent draws: values that
/// move together make the interval too narrow. Needs 2 values with a positive
/// weight at least.
pub fn weighted_mean_interval(
    values: &[f64],
    weights: &[f64],
    confidence: f64,
) -> Result<MeanInterval, StatsError> {
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(StatsError::InvalidConfidence { value: confidence });
    }
    check_finite(values)?;
    check_finite(weights)?;
    let pairs: Vec<(f64, f64)> = values
        .iter()
        .zip(weights)
        .filter(|(_, &w)| w > 0.0)
        .map(|(&x, &w)| (x, w))
        .collect();
    let n = pairs.len();
    if n < 2 {
        return Err(StatsError::TooFewSamples { x: n, y: n, min: 2 });
    }
    let sw: f64 = pairs.iter().map(|p| p.1).sum();
    let mean = pairs.iter().map(|(x, w)| w * x).sum::<f64>() / sw;
    let ss: f64 = pairs.iter().map(|(x, w)| (w * (x - mean)).powi(2)).sum();
    let nf = n as f64;
    let se = (nf / (nf - 1.0) * ss).sqrt() / sw;
    let t = student_t_quantile(0.5 + confidence / 2.0, nf - 1.0);
    Ok(MeanInterval {
        mean,
        se,
        n,
        df: n - 1,
        ci: [mean - t * se, mean + t * se],
        confidence,
    })
}

#[cfg(test)]
mod t_tests {
    use super::*;

    #[test]
    fn a_mean_interval_is_the_textbook_one() {
        // By hand: 2, 4, 4, 4, 5, 5, 7, 9: mean 5, s^2 = 32 / 7, se = sqrt(32/7/8),
        // t(0.975, 7) = 2.364624251592785.
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let m = weighted_mean_interval(&v, &[1.0; 8], 0.95).unwrap();
        let se = (32.0f64 / 7.0 / 8.0).sqrt();
        assert!(
            (m.mean - 5.0).abs() < 1e-12 && (m.se - se).abs() < 1e-12,
            "{m:?}"
        );
        assert_eq!((m.n, m.df), (8, 7));
        let t = 2.364624251592785;
        assert!((m.ci[0] - (5.0 - t * se)).abs() < 1e-9, "{m:?}");
        assert!((m.ci[1] - (5.0 + t * se)).abs() < 1e-9, "{m:?}");
        // Scaling every weight changes nothing; a zero weight drops its value.
        let w = weighted_mean_interval(
            &[v.as_slice(), &[100.0]].concat(),
            &[[3.0; 8].as_slice(), &[0.0]].concat(),
            0.95,
        )
        .unwrap();
        assert!((w.mean - m.mean).abs() < 1e-12 && (w.se - m.se).abs() < 1e-12);
        assert!(matches!(
            weighted_mean_interval(&[1.0, 2.0], &[1.0, 0.0], 0.95),
            Err(StatsError::TooFewSamples { .. })
        ));
        assert!(excludes(m.ci, 10.0) && !excludes(m.ci, 5.0));
    }

    #[test]
    fn t_quantiles_match_published_tables() {
        // scipy.stats.t.ppf(0.975, df) for df = 1, 2, 10, 30, 1000.
        for (df, q) in [
            (1.0, 12.706204736174698),
            (2.0, 4.302652729749464),
            (10.0, 2.2281388519862744),
            (30.0, 2.0422724563012378),
            (1000.0, 1.9623390808264074),
        ] {
            let got = student_t_quantile(0.975, df);
            assert!((got - q).abs() < 1e-7 * q, "df {df}: {got} vs {q}");
        }
        let median = student_t_quantile(0.5, 7.0);
        assert!(median.abs() < 1e-9, "{median}");
        assert!((student_t_sf(2.2281388519862744, 10.0) - 0.025).abs() < 1e-10);
        assert!(student_t_quantile(1.5, 3.0).is_nan());
    }

    #[test]
    fn incomplete_beta_matches_closed_forms() {
        // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1-x)^b.
        for x in [0.01, 0.3, 0.5, 0.77, 0.999] {
            assert!((incomplete_beta(x, 1.0, 1.0) - x).abs() < 1e-13);
            assert!((incomplete_beta(x, 3.0, 1.0) - x.powi(3)).abs() < 1e-13);
            assert!((incomplete_beta(x, 1.0, 4.0) - (1.0 - (1.0 - x).powi(4))).abs() < 1e-13);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u_distribution_matches_a_brute_force_count() {
        // All C(7,3) = 35 ways to place 3 x-values among 7: U counts pairs x > y.
        let (m, n) = (3usize, 4usize);
        let mut counts = vec![0u32; m * n + 1];
        for mask in 0u32..(1 << (m + n)) {
            if mask.count_ones() as usize != m {
                continue;
            }
            // Bit i set: position i (ascending) is an x. U = sum over x of the y's below it.
            let mut u = 0;
            let mut ys_below = 0;
            for i in 0..(m + n) {
                if mask & (1 << i) != 0 {
                    u += ys_below;
                } else {
                    ys_below += 1;
                }
            }
            counts[u] += 1;
        }
        let d = UDistribution::new(m, n).expect("small");
        let mut acc = 0.0;
        for (k, &c) in counts.iter().enumerate() {
            acc += c as f64 / 35.0;
            assert!((d.cdf(k as i64) - acc).abs() < 1e-12, "cdf({k})");
        }
        assert_eq!(d.cdf(-1), 0.0);
        assert_eq!(d.sf(0), 1.0);
        assert!((d.sf(12) - 1.0 / 35.0).abs() < 1e-15);
    }

    #[test]
    fn normal_quantile_inverts_the_survival_function() {
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-12);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_sf(1.959_963_984_540_054) - 0.025).abs() < 1e-15);
    }

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
