//! Ordinary least squares of one quantity (seconds or joules per execution) against
//! one count (events per execution), with what paper 003 reports of a fit (slope,
//! intercept, R²) and what it leaves out: the residuals and confidence intervals
//! from Student's t, so that a per-event cost comes with its uncertainty.

use crate::student_t_quantile;
use serde::{Deserialize, Serialize};

/// The confidence level of every interval in a model.
pub const CONFIDENCE: f64 = 0.95;

/// A straight line `y = intercept + slope * x` fitted by least squares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Points fitted.
    pub n: usize,
    /// Change of y per unit of x (the cost of one event, in y's unit).
    pub slope: f64,
    /// y at x = 0 (what an execution costs without the events).
    pub intercept: f64,
    /// Confidence interval of the slope, `[low, high]`, at [`Fit::confidence`].
    pub slope_ci: [f64; 2],
    /// Confidence interval of the intercept.
    pub intercept_ci: [f64; 2],
    /// Standard error of the slope.
    pub slope_se: f64,
    /// Degrees of freedom of the residuals (n - 2).
    pub df: usize,
    /// Coefficient of determination; 1 when the points lie on the line.
    pub r2: f64,
    /// Observed minus fitted y, in the order of the points given.
    pub residuals: Vec<f64>,
    /// The level of the intervals (0.95).
    pub confidence: f64,
}

/// Measured data that a least-squares fit cannot use (too few runs, one count only,
/// a value that is not a number).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot fit {what}: {why}")]
pub struct FitError {
    /// The fit (scenario and quantity).
    pub what: String,
    /// Why.
    pub why: String,
}

/// Fits `y` against `x` (same length, at least 3 points, at least 2 distinct x).
/// `what` names the fit in an error.
pub fn ols(x: &[f64], y: &[f64], what: &str) -> Result<Fit, FitError> {
    let fail = |why: String| FitError {
        what: what.to_string(),
        why,
    };
    if x.len() != y.len() {
        return Err(fail(format!(
            "{} x values but {} y values",
            x.len(),
            y.len()
        )));
    }
    let n = x.len();
    if n < 3 {
        // Two points always lie on a line: no residual, no interval.
        return Err(fail(format!(
            "{n} run(s); at least 3 are needed for an interval"
        )));
    }
    if let Some(v) = x.iter().chain(y).find(|v| !v.is_finite()) {
        return Err(fail(format!("a value is not a finite number ({v})")));
    }
    let nf = n as f64;
    let mx = x.iter().sum::<f64>() / nf;
    let my = y.iter().sum::<f64>() / nf;
    let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let syy: f64 = y.iter().map(|v| (v - my).powi(2)).sum();
    if sxx <= 0.0 || sxx <= f64::EPSILON * x.iter().map(|v| v * v).sum::<f64>() {
        return Err(fail(
            "every run has the same event count: sweep over several counts".into(),
        ));
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let residuals: Vec<f64> = x
        .iter()
        .zip(y)
        .map(|(a, b)| b - (intercept + slope * a))
        .collect();
    let sse: f64 = residuals.iter().map(|r| r * r).sum();
    let df = n - 2;
    let s2 = sse / df as f64;
    let slope_se = (s2 / sxx).sqrt();
    let intercept_se = (s2 * (1.0 / nf + mx * mx / sxx)).sqrt();
    let t = student_t_quantile(0.5 + CONFIDENCE / 2.0, df as f64);
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    Ok(Fit {
        n,
        slope,
        intercept,
        slope_ci: [slope - t * slope_se, slope + t * slope_se],
        intercept_ci: [intercept - t * intercept_se, intercept + t * intercept_se],
        slope_se,
        df,
        r2,
        residuals,
        confidence: CONFIDENCE,
    })
}

/// The heteroskedasticity-robust standard error of `fit`'s slope (HC3, MacKinnon and
/// White 1985: each squared residual inflated by its leverage, `e_i^2 / (1 - h_i)^2`),
/// for points whose noise grows with x (a busy window has both more events and
/// noisier reads), where the classical error is too small. `x` are the fitted
/// points' x, in the order of `fit.residuals`. NaN when a point has leverage 1.
pub fn hc3_slope_se(fit: &Fit, x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
    let meat: f64 = x
        .iter()
        .zip(&fit.residuals)
        .map(|(v, e)| {
            let d = v - mx;
            let h = 1.0 / n + d * d / sxx;
            d * d * e * e / ((1.0 - h) * (1.0 - h))
        })
        .sum();
    meat.sqrt() / sxx
}

/// The difference of two independent slopes (a scenario's less its baseline's, as
/// paper 003 prices an event) with its interval: standard errors added in
/// quadrature, degrees of freedom by Welch-Satterthwaite.
pub fn slope_difference(a: &Fit, b: &Fit) -> (f64, [f64; 2]) {
    let d = a.slope - b.slope;
    let (va, vb) = (a.slope_se.powi(2), b.slope_se.powi(2));
    let se = (va + vb).sqrt();
    if se == 0.0 {
        return (d, [d, d]);
    }
    let df = (va + vb).powi(2) / (va * va / a.df as f64 + vb * vb / b.df as f64);
    let t = student_t_quantile(0.5 + CONFIDENCE / 2.0, df.max(1.0));
    (d, [d - t * se, d + t * se])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_on_a_line_give_back_its_slope_and_intercept_exactly() {
        // 51 µs per event and 80 ms without: the paper's ODPA-like line.
        let x: Vec<f64> = (0..10).map(|i| (i * 1024) as f64).collect();
        let y: Vec<f64> = x.iter().map(|v| 0.080 + 51e-6 * v).collect();
        let f = ols(&x, &y, "t").unwrap();
        assert!((f.slope - 51e-6).abs() < 1e-15, "{}", f.slope);
        assert!((f.intercept - 0.080).abs() < 1e-12, "{}", f.intercept);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        assert!(f.residuals.iter().all(|r| r.abs() < 1e-12));
        assert!((f.slope_ci[1] - f.slope_ci[0]).abs() < 1e-12);
        assert_eq!((f.n, f.df), (10, 8));
    }

    #[test]
    fn noisy_points_give_the_textbook_intervals() {
        // By hand: mean x 3, mean y 5.98, Sxx 10, Sxy 19.3, so slope 1.93 and
        // intercept 0.19; residuals -0.12, 0.45, -0.48, 0.09, 0.06 (SSE 0.459).
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [2.0, 4.5, 5.5, 8.0, 9.9];
        let f = ols(&x, &y, "t").unwrap();
        assert!((f.slope - 1.93).abs() < 1e-12, "{}", f.slope);
        assert!((f.intercept - 0.19).abs() < 1e-12, "{}", f.intercept);
        // se = sqrt(SSE / (n - 2) / Sxx).
        let se = (0.459f64 / 3.0 / 10.0).sqrt();
        assert!((f.slope_se - se).abs() < 1e-12);
        let t = 3.182446305284263; // t(0.975, 3)
        assert!((f.slope_ci[0] - (1.93 - t * se)).abs() < 1e-6);
        assert!((f.slope_ci[1] - (1.93 + t * se)).abs() < 1e-6);
        let syy: f64 = {
            let m = y.iter().sum::<f64>() / 5.0;
            y.iter().map(|v| (v - m).powi(2)).sum()
        };
        assert!((f.r2 - (1.0 - 0.459 / syy)).abs() < 1e-12);
        let sum: f64 = f.residuals.iter().sum();
        assert!(sum.abs() < 1e-12);
    }

    /// A standard normal draw (Box-Muller) from the lab's seeded generator.
    fn normal(rng: &mut crate::rng::XorShift) -> f64 {
        let u = 1.0 - rng.unit(); // (0, 1]: ln never sees 0
        let v = rng.unit();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    #[test]
    fn the_95_percent_interval_of_a_slope_covers_the_true_slope_about_95_times_in_100() {
        // 200 seeded data sets of 8 points on y = 3 + 0.7 x plus N(0, 0.5) noise:
        // a calibrated 95 % interval covers 0.7 in about 190 (binomial sd 3); fewer
        // than 170 means it is too narrow, more than 198 that it is far too wide.
        // Seeded: the same 200 sets every run.
        let mut rng = crate::rng::XorShift::new(0x0005_EED0_FF17);
        let x: Vec<f64> = (1..=8).map(|i| i as f64).collect();
        let mut covered = 0;
        let mut significant = 0;
        for _ in 0..200 {
            let y: Vec<f64> = x
                .iter()
                .map(|v| 3.0 + 0.7 * v + 0.5 * normal(&mut rng))
                .collect();
            let f = ols(&x, &y, "t").unwrap();
            assert!(f.slope_ci[0] <= f.slope && f.slope <= f.slope_ci[1]);
            if f.slope_ci[0] <= 0.7 && 0.7 <= f.slope_ci[1] {
                covered += 1;
            }
            if crate::excludes(f.slope_ci, 0.0) {
                significant += 1;
            }
        }
        assert!(
            (170..=198).contains(&covered),
            "{covered} of 200 intervals cover the slope"
        );
        // A slope of 0.7 against noise 0.5 over x in 1..8 is clear: nearly every set
        // tells it from 0.
        assert!(significant >= 190, "{significant} of 200 significant");
        // And with no slope at all, about 5 in 100 are (falsely) significant.
        let mut false_positive = 0;
        for _ in 0..200 {
            let y: Vec<f64> = x.iter().map(|_| 3.0 + 0.5 * normal(&mut rng)).collect();
            let f = ols(&x, &y, "t").unwrap();
            if crate::excludes(f.slope_ci, 0.0) {
                false_positive += 1;
            }
        }
        assert!(
            false_positive <= 20,
            "{false_positive} of 200 flat sets significant"
        );
    }

    #[test]
    fn the_robust_error_is_the_textbook_hc3() {
        // The textbook points: residuals -0.12, 0.45, -0.48, 0.09, 0.06, x - mean
        // -2..2, Sxx 10, leverage h = 1/5 + d^2/10: 0.6, 0.3, 0.2, 0.3, 0.6.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let f = ols(&x, &[2.0, 4.5, 5.5, 8.0, 9.9], "t").unwrap();
        let meat = 4.0 * 0.0144 / 0.16 + 0.2025 / 0.49 + 0.0 + 0.0081 / 0.49 + 4.0 * 0.0036 / 0.16;
        let want = f64::sqrt(meat) / 10.0;
        assert!(
            (hc3_slope_se(&f, &x) - want).abs() < 1e-12,
            "{}",
            hc3_slope_se(&f, &x)
        );
    }

    #[test]
    fn data_that_cannot_be_fitted_says_why() {
        let e = ols(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0], "npf time").unwrap_err();
        assert!(e.to_string().contains("same event count"), "{e}");
        let e = ols(&[1.0, 2.0], &[1.0, 2.0], "x").unwrap_err();
        assert!(e.to_string().contains("at least 3"), "{e}");
        let e = ols(&[1.0, 2.0, f64::NAN], &[1.0, 2.0, 3.0], "x").unwrap_err();
        assert!(e.to_string().contains("finite"), "{e}");
    }

    #[test]
    fn a_cost_is_the_difference_of_slopes() {
        let x: Vec<f64> = (1..=8).map(|i| i as f64).collect();
        let a = ols(
            &x,
            &x.iter().map(|v| 3.0 * v + 1.0).collect::<Vec<_>>(),
            "a",
        )
        .unwrap();
        let b = ols(
            &x,
            &x.iter().map(|v| 1.0 * v + 5.0).collect::<Vec<_>>(),
            "b",
        )
        .unwrap();
        let (d, ci) = slope_difference(&a, &b);
        assert!((d - 2.0).abs() < 1e-12);
        assert!((ci[0] - 2.0).abs() < 1e-9 && (ci[1] - 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_interval_of_a_cost_is_welchs() {
        // The textbook points, and the same points tilted by 0.5 per event: equal
        // residuals, so equal slope errors se; the difference has error se * sqrt(2)
        // and Welch-Satterthwaite gives (2 se^2)^2 / (2 se^4 / 3) = 6 degrees of freedom.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [2.0, 4.5, 5.5, 8.0, 9.9];
        let tilted: Vec<f64> = x.iter().zip(&y).map(|(x, y)| y + 0.5 * x).collect();
        let a = ols(&x, &y, "a").unwrap();
        let b = ols(&x, &tilted, "b").unwrap();
        let (d, ci) = slope_difference(&a, &b);
        assert!((d + 0.5).abs() < 1e-12, "{d}");
        let se = (0.459f64 / 3.0 / 10.0).sqrt() * 2f64.sqrt();
        let t = 2.446911851144969; // t(0.975, 6)
        assert!((ci[0] - (-0.5 - t * se)).abs() < 1e-6, "{ci:?}");
        assert!((ci[1] - (-0.5 + t * se)).abs() < 1e-6, "{ci:?}");
    }
}
