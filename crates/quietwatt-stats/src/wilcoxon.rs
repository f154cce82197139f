//! The one-sided Wilcoxon rank-sum test (Mann-Whitney U): average ranks, the normal
//! approximation, the exact null distribution of U, and Holm-Bonferroni's
//! adjustment of the p-values of several such tests.

use crate::{check_finite, StatsError, EXACT_MAX_CELLS, MIN_SAMPLES};
use serde::Serialize;
use std::cmp::Ordering;
use std::fmt;

// ---------------------------------------------------------------------------
// Ranks and the normal distribution.

/// Average ranks (1-based) of `values`, and the sizes of the groups of tied values
/// (groups of one included, as SciPy's `rankdata(return_ties=True)` counts them).
pub(super) fn average_ranks(values: &[f64]) -> (Vec<f64>, Vec<usize>) {
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

/// The computation `method` resolves to for these sizes: `Auto` is exact only for
/// small, untied samples (SciPy's rule).
pub(super) fn choose(method: Method, n_x: usize, n_y: usize, tied: bool) -> Computed {
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
}
