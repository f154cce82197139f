//! Physical quantities with their unit in the type, and the exact size of one
//! raw counter step per mechanism.

use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// An amount of energy in joules.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize)]
#[serde(transparent)]
pub struct Joules(pub f64);

/// A power in watts.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize)]
#[serde(transparent)]
pub struct Watts(pub f64);

impl Joules {
    /// Mean power over `elapsed`; zero for an empty interval rather than infinity.
    pub fn per(self, elapsed: Duration) -> Watts {
        let s = elapsed.as_secs_f64();
        if s > 0.0 {
            Watts(self.0 / s)
        } else {
            Watts(0.0)
        }
    }
}

impl Watts {
    /// Energy spent at this power during `elapsed`.
    pub fn over(self, elapsed: Duration) -> Joules {
        Joules(self.0 * elapsed.as_secs_f64())
    }
}

impl std::ops::Add for Joules {
    type Output = Joules;
    fn add(self, o: Joules) -> Joules {
        Joules(self.0 + o.0)
    }
}

impl std::iter::Sum for Joules {
    fn sum<I: Iterator<Item = Joules>>(iter: I) -> Joules {
        iter.fold(Joules(0.0), |a, b| a + b)
    }
}

impl fmt::Display for Joules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6} J", self.0)
    }
}

impl fmt::Display for Watts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} W", self.0)
    }
}

/// The energy of one raw counter step, as each mechanism defines it.
///
/// Kept symbolic so that totals stay integers (raw steps) until they are shown,
/// and the conversion happens once, at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum EnergyUnit {
    /// powercap's `energy_uj`: one microjoule.
    Microjoule,
    /// The MSR energy-status unit: 2^-n joule (n = ESU bits 12:8 of the unit register,
    /// or a fixed quirk value).
    PowerOfTwo(u8),
    /// A decimal scale in joules per step, e.g. perf's `.scale` file.
    Scale(f64),
}

impl EnergyUnit {
    /// Joules in one raw step.
    pub fn joules_per_step(self) -> f64 {
        match self {
            EnergyUnit::Microjoule => 1e-6,
            EnergyUnit::PowerOfTwo(n) => (-(n as f64)).exp2(),
            EnergyUnit::Scale(s) => s,
        }
    }

    /// Converts a count of raw steps to joules.
    pub fn to_joules(self, steps: u128) -> Joules {
        match self {
            // Integer split keeps full precision for totals beyond 2^53 µJ.
            EnergyUnit::Microjoule => {
                Joules((steps / 1_000_000) as f64 + (steps % 1_000_000) as f64 / 1e6)
            }
            EnergyUnit::PowerOfTwo(n) => {
                let whole = steps >> n;
                let frac = steps & ((1u128 << n) - 1);
                Joules(whole as f64 + frac as f64 * (-(n as f64)).exp2())
            }
            EnergyUnit::Scale(s) => Joules(steps as f64 * s),
        }
    }
}

impl fmt::Display for EnergyUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnergyUnit::Microjoule => write!(f, "1 uJ"),
            EnergyUnit::PowerOfTwo(n) => {
                write!(f, "2^-{n} J ({:.3} uJ)", self.joules_per_step() * 1e6)
            }
            EnergyUnit::Scale(s) => write!(f, "{s:e} J"),
        }
    }
}

/// Decimal places that show a value with its uncertainty `u` to two significant
/// digits of `u` (the digits the uncertainty supports): `12.048 ± 0.024`, not
/// `12.047943 ± 0.023996`. Six for a zero or unknown uncertainty; at most nine.
pub fn decimals_for(u: f64) -> usize {
    if !(u.is_finite() && u > 0.0) {
        return 6;
    }
    (1 - u.log10().floor() as i64).clamp(0, 9) as usize
}

#[cfg(test)]
mod tests {

    #[test]
    fn decimals_follow_the_uncertainty() {
        assert_eq!(decimals_for(0.023996), 3);
        assert_eq!(decimals_for(0.002), 4);
        assert_eq!(decimals_for(0.5), 2);
        assert_eq!(decimals_for(3.0), 1);
        assert_eq!(decimals_for(25.0), 0);
        assert_eq!(decimals_for(0.0), 6);
        assert_eq!(decimals_for(f64::NAN), 6);
        assert_eq!(decimals_for(1e-15), 9);
        assert_eq!(
            format!("{:.*}", decimals_for(0.020008), 15.759969),
            "15.760"
        );
    }
    use super::*;

    #[test]
    fn power_of_two_unit_converts_exactly() {
        assert_eq!(
            EnergyUnit::PowerOfTwo(16).to_joules(65536 * 3 + 32768),
            Joules(3.5)
        );
        assert_eq!(EnergyUnit::Microjoule.to_joules(2_500_000), Joules(2.5));
    }

    #[test]
    fn microjoule_totals_beyond_f64_mantissa_keep_their_last_digit() {
        // 2^60 µJ: a float sum of µJ steps would have lost the low digits long before.
        let steps: u128 = (1u128 << 60) + 1;
        let j = EnergyUnit::Microjoule.to_joules(steps);
        assert!((j.0 - 1_152_921_504_606.847).abs() < 1e-3);
    }

    #[test]
    fn mean_power_of_empty_interval_is_zero() {
        assert_eq!(Joules(5.0).per(Duration::ZERO), Watts(0.0));
        assert_eq!(Joules(5.0).per(Duration::from_secs(2)), Watts(2.5));
    }
}
