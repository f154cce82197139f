//! The least-squares line of a domain's power on the busy CPUs, and its
//! leave-one-out error: how far the model misses a point it was not fitted on.

/// A fitted line `watts = idle_w + per_busy_cpu_w × busy_cpus`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    /// The power with no CPU busy, W.
    pub idle_w: f64,
    /// What each busy CPU adds, W.
    pub per_busy_cpu_w: f64,
    /// The root mean square of the leave-one-out residuals, W: each point
    /// predicted by the line fitted on the others.
    pub loo_rmse_w: f64,
    /// The largest leave-one-out residual, W.
    pub loo_max_w: f64,
}

impl Line {
    /// The power at `busy_cpus`, W.
    pub fn at(&self, busy_cpus: f64) -> f64 {
        self.idle_w + self.per_busy_cpu_w * busy_cpus
    }
}

/// Ordinary least squares over `(busy_cpus, watts)` points. `None` with fewer
/// than three points or fewer than two distinct loads (no slope, no error).
pub fn fit(points: &[(f64, f64)]) -> Option<Line> {
    let (idle_w, per_busy_cpu_w) = ols(points)?;
    let mut sq = 0.0;
    let mut max: f64 = 0.0;
    for i in 0..points.len() {
        let rest: Vec<(f64, f64)> = points
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, p)| *p)
            .collect();
        let (a, b) = ols(&rest)?;
        let r = points[i].1 - (a + b * points[i].0);
        sq += r * r;
        max = max.max(r.abs());
    }
    (points.len() >= 3).then(|| Line {
        idle_w,
        per_busy_cpu_w,
        loo_rmse_w: (sq / points.len() as f64).sqrt(),
        loo_max_w: max,
    })
}

fn ols(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx < 1e-9 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_line_is_recovered_with_no_error() {
        let pts: Vec<_> = (0..5).map(|k| (k as f64, 10.0 + 5.0 * k as f64)).collect();
        let l = fit(&pts).unwrap();
        assert!((l.idle_w - 10.0).abs() < 1e-9 && (l.per_busy_cpu_w - 5.0).abs() < 1e-9);
        assert!(l.loo_rmse_w < 1e-9);
    }

    #[test]
    fn noise_shows_in_the_leave_one_out_error() {
        let noise = [0.3, -0.2, 0.1, -0.4, 0.2, 0.0];
        let pts: Vec<_> = (0..6)
            .map(|k| (k as f64, 10.0 + 5.0 * k as f64 + noise[k]))
            .collect();
        let l = fit(&pts).unwrap();
        assert!((l.per_busy_cpu_w - 5.0).abs() < 0.2, "{l:?}");
        // Larger than the in-sample residuals, smaller than the noise's range.
        assert!(l.loo_rmse_w > 0.15 && l.loo_rmse_w < 0.6, "{l:?}");
        assert!(l.loo_max_w >= l.loo_rmse_w);
    }

    #[test]
    fn one_load_level_has_no_slope() {
        assert!(fit(&[(1.0, 5.0), (1.0, 6.0), (1.0, 5.5)]).is_none());
        assert!(fit(&[(0.0, 5.0), (1.0, 6.0)]).is_none());
    }
}
