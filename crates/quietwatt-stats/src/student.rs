//! Student's t distribution and the intervals built on it (the confidence
//! intervals of a least-squares fit, a weighted mean's).

use crate::{check_finite, StatsError};
use serde::Serialize;

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
