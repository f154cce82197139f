//! A 95 % interval on a function's energy: how sure a profile is of each figure
//! it prints.
//!
//! A function's self energy has two uncertainties:
//!
//! - **Sampling.** The stacks are samples: a function that ran a share `p` of
//!   the time gets `k` of the `n` samples, binomially. Its share of the samples,
//!   `k / n`, is given the Wilson score interval at 95 % (`z` = 1.96), which
//!   stays inside 0..1 and is honest with few samples (the normal
//!   approximation's interval collapses to nothing at `k` = 0 or `n`). The
//!   function's energy is scaled by the interval's ends over `k / n`: its µJ
//!   come from the intervals its samples fell in, which the split weighs by
//!   energy, so the point estimate is its µJ, not `k / n` of the total, and the
//!   interval moves it by the share's relative uncertainty. With 4× the samples
//!   the interval is about half as wide.
//! - **Measurement.** The measured package energy has its own ± bound (the
//!   counter's quantum, one update interval, lost intervals:
//!   `DomainEnergy::uncertainty_j`), relative `u`. It is a bound, not a
//!   standard deviation, so it is not added in quadrature: the sampling
//!   interval's ends are widened by it, `low × (1 − u)` and `high × (1 + u)`.
//!
//! What it does not state: systematic errors of the model (energy follows the
//! samples' weights: cycles or CPU time, see [`crate::split`]), samples lost to
//! the kernel's ring (warned of), code without frame pointers (warned of).

use serde::Serialize;

/// The normal quantile of a two-sided 95 % interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of a binomial proportion `k / n` at quantile `z`
/// (0 to 1 both ends); `(0, 1)` without samples.
pub fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k.min(n) as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At k = 0 and k = n the ends are exactly 0 and 1 (rounding would miss them).
    let lo = if k == 0.0 {
        0.0
    } else {
        (centre - half).max(0.0)
    };
    let hi = if k == n {
        1.0
    } else {
        (centre + half).min(1.0)
    };
    (lo, hi)
}

/// A 95 % interval on a function's energy, µJ, with what it rests on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EnergyRange {
    /// Its low end, µJ (rounded down).
    pub low_uj: u64,
    /// Its high end, µJ (rounded up).
    pub high_uj: u64,
    /// The stack samples the function is the leaf of.
    pub samples: u64,
    /// The stack samples of every stack that got energy.
    pub of_samples: u64,
}

/// The 95 % interval of `energy_uj`, the energy of the `k` of `n` samples one
/// function is the leaf of, the measured energy having a relative ± bound of
/// `measured_rel` (0 when none is known). The module doc gives the method.
pub fn energy_range(energy_uj: u64, k: u64, n: u64, measured_rel: f64) -> EnergyRange {
    let u = if measured_rel.is_finite() {
        measured_rel.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let e = energy_uj as f64;
    let (low, high) = if k == 0 || n == 0 {
        // No sample: the energy is not from sampling (nothing to scale); only the
        // measurement's bound applies.
        (e, e)
    } else {
        let p = k.min(n) as f64 / n as f64;
        let (lo, hi) = wilson(k, n, Z95);
        (e * lo / p, e * hi / p)
    };
    EnergyRange {
        low_uj: (low * (1.0 - u)).floor().max(0.0) as u64,
        high_uj: (high * (1.0 + u)).ceil() as u64,
        samples: k,
        of_samples: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_a_worked_value_and_stays_in_bounds() {
        // 50 of 100: 0.4038 to 0.5962 (the textbook value).
        let (lo, hi) = wilson(50, 100, Z95);
        assert!(
            (lo - 0.4038).abs() < 1e-3 && (hi - 0.5962).abs() < 1e-3,
            "{lo} {hi}"
        );
        let (lo, hi) = wilson(0, 10, Z95);
        assert_eq!(lo, 0.0);
        assert!(hi > 0.2 && hi < 0.35, "{hi}");
        let (lo, hi) = wilson(10, 10, Z95);
        assert!(lo > 0.65 && lo < 0.8, "{lo}");
        assert_eq!(hi, 1.0);
        assert_eq!(wilson(0, 0, Z95), (0.0, 1.0));
    }

    #[test]
    fn the_interval_holds_the_estimate_and_narrows_with_more_samples() {
        // The same share (a quarter) and energy, from 100 and from 1600 samples.
        let few = energy_range(250_000, 25, 100, 0.0);
        let many = energy_range(250_000, 400, 1600, 0.0);
        for r in [few, many] {
            assert!(r.low_uj <= 250_000 && 250_000 <= r.high_uj, "{r:?}");
        }
        let width = |r: EnergyRange| (r.high_uj - r.low_uj) as f64;
        // 16× the samples: about a quarter of the width.
        let ratio = width(many) / width(few);
        assert!(ratio > 0.2 && ratio < 0.3, "{ratio}: {few:?} {many:?}");
        assert_eq!((many.samples, many.of_samples), (400, 1600));
    }

    #[test]
    fn the_measured_bound_widens_both_ends() {
        let bare = energy_range(1_000_000, 500, 1000, 0.0);
        let bound = energy_range(1_000_000, 500, 1000, 0.02);
        assert!(bound.low_uj < bare.low_uj && bound.high_uj > bare.high_uj);
        assert_eq!(bound.low_uj, (bare.low_uj as f64 * 0.98).floor() as u64);
        // Without samples only the measured bound applies.
        let none = energy_range(1_000, 0, 0, 0.1);
        assert_eq!((none.low_uj, none.high_uj), (900, 1_100));
        // A bad bound is ignored, not propagated.
        let nan = energy_range(1_000, 5, 10, f64::NAN);
        assert!(nan.low_uj > 0 && nan.high_uj < u64::MAX);
    }
}
