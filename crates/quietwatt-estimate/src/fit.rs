//! The least-squares fit of a domain's power on the model's inputs, and its
//! leave-one-out error: how far the model misses a point it was not fitted on.

/// A fitted plane `watts = idle_w + Σ coef[k] × x[k]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The power with every input at zero (no CPU busy), W.
    pub idle_w: f64,
    /// What one unit of each input adds, W, in the inputs' order.
    pub coef: Vec<f64>,
    /// The root mean square of the leave-one-out residuals, W: each point
    /// predicted by the plane fitted on the others.
    pub loo_rmse_w: f64,
    /// The largest leave-one-out residual, W.
    pub loo_max_w: f64,
}

impl Fitted {
    /// The power at `x`, W.
    pub fn at(&self, x: &[f64]) -> f64 {
        self.idle_w + self.coef.iter().zip(x).map(|(c, x)| c * x).sum::<f64>()
    }
}

/// Why a fit could not be made.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Unfit {
    /// Fewer points than the fit and its leave-one-out error need.
    TooFewPoints {
        /// The points given.
        points: usize,
        /// The least that would do.
        needed: usize,
    },
    /// Input `index` did not vary apart from the others (nor at all, for the
    /// first): its effect cannot be told from theirs.
    NotIdentifiable {
        /// Its index among the inputs.
        index: usize,
    },
}

/// How little of an input's variance may be left unexplained by the others
/// (1 − R²) for its coefficient to be fitted: below this, it moved in step with
/// them and its coefficient would fit noise.
pub const MIN_OWN_VARIANCE: f64 = 1e-3;

/// Ordinary least squares of `y` on the columns of `x` (one row per point,
/// every row as long), with an intercept, and the leave-one-out error.
pub fn fit(x: &[Vec<f64>], y: &[f64]) -> Result<Fitted, Unfit> {
    let p = x.first().map_or(0, Vec::len);
    // The fit, and each fit leaving a point out, need one point more than
    // parameters; three at least, as with one input.
    let needed = (p + 2).max(3);
    if y.len() < needed || x.len() != y.len() {
        return Err(Unfit::TooFewPoints {
            points: y.len(),
            needed,
        });
    }
    let all: Vec<usize> = (0..y.len()).collect();
    let (idle_w, coef) = ols(x, y, &all)?;
    let mut sq = 0.0;
    let mut max: f64 = 0.0;
    for i in 0..y.len() {
        let rest: Vec<usize> = all.iter().copied().filter(|&j| j != i).collect();
        let (a, b) = ols(x, y, &rest)?;
        let r = y[i] - (a + b.iter().zip(&x[i]).map(|(c, x)| c * x).sum::<f64>());
        sq += r * r;
        max = max.max(r.abs());
    }
    Ok(Fitted {
        idle_w,
        coef,
        loo_rmse_w: (sq / y.len() as f64).sqrt(),
        loo_max_w: max,
    })
}

/// The intercept and coefficients fitted on the points `rows`: the normal
/// equations of the standardised inputs, solved by elimination, an input
/// whose pivot (its variance the earlier inputs leave unexplained) is below
/// [`MIN_OWN_VARIANCE`] refused.
fn ols(x: &[Vec<f64>], y: &[f64], rows: &[usize]) -> Result<(f64, Vec<f64>), Unfit> {
    let p = x.first().map_or(0, Vec::len);
    let n = rows.len() as f64;
    let mean = |f: &dyn Fn(usize) -> f64| rows.iter().map(|&i| f(i)).sum::<f64>() / n;
    let mx: Vec<f64> = (0..p).map(|k| mean(&|i| x[i][k])).collect();
    let my = mean(&|i| y[i]);
    let sd: Vec<f64> = (0..p)
        .map(|k| mean(&|i| (x[i][k] - mx[k]).powi(2)).sqrt())
        .collect();
    if let Some(k) = sd.iter().position(|s| s.is_nan() || *s <= 1e-12) {
        return Err(Unfit::NotIdentifiable { index: k });
    }
    let z = |i: usize, k: usize| (x[i][k] - mx[k]) / sd[k];
    // The correlation matrix, augmented with the inputs' covariance with y.
    let mut a = vec![vec![0.0; p + 1]; p];
    for (j, row) in a.iter_mut().enumerate() {
        for (k, cell) in row.iter_mut().take(p).enumerate() {
            *cell = mean(&|i| z(i, j) * z(i, k));
        }
        row[p] = mean(&|i| z(i, j) * (y[i] - my));
    }
    // Elimination in the inputs' order: each pivot is then 1 − R² of its
    // input on those before it, so the input refused is the later one.
    for col in 0..p {
        if a[col][col] < MIN_OWN_VARIANCE {
            return Err(Unfit::NotIdentifiable { index: col });
        }
        let pivot = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot[col];
                for (cell, pv) in row.iter_mut().zip(&pivot).skip(col) {
                    *cell -= f * pv;
                }
            }
        }
    }
    let coef: Vec<f64> = (0..p).map(|k| a[k][p] / a[k][k] / sd[k]).collect();
    let idle = my - coef.iter().zip(&mx).map(|(c, m)| c * m).sum::<f64>();
    Ok((idle, coef))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(xs: &[f64]) -> Vec<Vec<f64>> {
        xs.iter().map(|x| vec![*x]).collect()
    }

    #[test]
    fn an_exact_line_is_recovered_with_no_error() {
        let x: Vec<f64> = (0..5).map(f64::from).collect();
        let y: Vec<f64> = x.iter().map(|x| 10.0 + 5.0 * x).collect();
        let l = fit(&one(&x), &y).unwrap();
        assert!((l.idle_w - 10.0).abs() < 1e-9 && (l.coef[0] - 5.0).abs() < 1e-9);
        assert!(l.loo_rmse_w < 1e-9);
    }

    #[test]
    fn noise_shows_in_the_leave_one_out_error() {
        let noise = [0.3, -0.2, 0.1, -0.4, 0.2, 0.0];
        let x: Vec<f64> = (0..6).map(f64::from).collect();
        let y: Vec<f64> = (0..6).map(|k| 10.0 + 5.0 * x[k] + noise[k]).collect();
        let l = fit(&one(&x), &y).unwrap();
        assert!((l.coef[0] - 5.0).abs() < 0.2, "{l:?}");
        // Larger than the in-sample residuals, smaller than the noise's range.
        assert!(l.loo_rmse_w > 0.15 && l.loo_rmse_w < 0.6, "{l:?}");
        assert!(l.loo_max_w >= l.loo_rmse_w);
    }

    #[test]
    fn one_load_level_has_no_slope() {
        assert_eq!(
            fit(&one(&[1.0, 1.0, 1.0]), &[5.0, 6.0, 5.5]),
            Err(Unfit::NotIdentifiable { index: 0 })
        );
        assert!(matches!(
            fit(&one(&[0.0, 1.0]), &[5.0, 6.0]),
            Err(Unfit::TooFewPoints { needed: 3, .. })
        ));
    }

    /// Busy CPUs, busy CPU × GHz and instructions: idle 10 W, 2 W per busy
    /// CPU, 1 W per busy GHz, 0.5 nJ per instruction (W per G/s).
    #[test]
    fn three_inputs_are_told_apart() {
        let mut x = Vec::new();
        for busy in [0.0, 1.0, 2.0] {
            for ghz in [1.5, 2.2, 3.0] {
                for ipc in [0.5, 2.0] {
                    x.push(vec![busy, busy * ghz, busy * ghz * ipc]);
                }
            }
        }
        let y: Vec<f64> = x
            .iter()
            .map(|r| 10.0 + 2.0 * r[0] + 1.0 * r[1] + 0.5 * r[2])
            .collect();
        let f = fit(&x, &y).unwrap();
        for (got, want) in f.coef.iter().zip([2.0, 1.0, 0.5]) {
            assert!((got - want).abs() < 1e-9, "{f:?}");
        }
        assert!((f.idle_w - 10.0).abs() < 1e-9 && f.loo_max_w < 1e-9);
    }

    /// At one frequency, busy × GHz is busy × a constant: not identifiable,
    /// and the input named is the later one.
    #[test]
    fn an_input_in_step_with_another_is_refused() {
        let x: Vec<Vec<f64>> = (0..6)
            .map(|b| vec![f64::from(b), 2.2 * f64::from(b)])
            .collect();
        let y: Vec<f64> = x.iter().map(|r| 10.0 + 4.2 * r[0]).collect();
        assert_eq!(fit(&x, &y), Err(Unfit::NotIdentifiable { index: 1 }));
    }
}
