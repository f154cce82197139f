//! From raw counter readings to corrected energy: wrap correction with each
//! mechanism's modulus, integer accumulation, conversion at the edge.
//!
//! | mechanism | wraps at |
//! |---|---|
//! | MSR | 2^32 raw steps (the register's 32-bit energy field) |
//! | powercap | `max_energy_range_uj` + 1 µJ |
//! | perf_event | 2^64 (the kernel accumulates into a 64-bit count) |

use crate::units::{EnergyUnit, Joules, Watts};
use serde::Serialize;
use std::time::Duration;

/// Where a counter wraps back to zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Wrap {
    /// The counter takes values `0..m` and continues at 0.
    Modulus(u64),
    /// A full 64-bit counter (perf_event).
    U64,
}

impl Wrap {
    /// The difference `new - old` as the counter moved forward, across at most one wrap.
    #[inline]
    pub fn delta(self, old: u64, new: u64) -> u64 {
        match self {
            Wrap::U64 => new.wrapping_sub(old),
            Wrap::Modulus(_) if new >= old => new - old,
            Wrap::Modulus(m) => m - old + new,
        }
    }

    /// Whether `raw` can be a reading of this counter.
    #[inline]
    pub fn admits(self, raw: u64) -> bool {
        match self {
            Wrap::U64 => true,
            Wrap::Modulus(m) => raw < m,
        }
    }

    /// The modulus as a number of steps (2^64 for [`Wrap::U64`]).
    pub fn steps(self) -> u128 {
        match self {
            Wrap::U64 => 1u128 << 64,
            Wrap::Modulus(m) => m as u128,
        }
    }

    /// The energy of one full turn of the counter.
    pub fn range(self, unit: EnergyUnit) -> Joules {
        unit.to_joules(self.steps())
    }

    /// How long the counter takes to wrap at `power`.
    pub fn period_at(self, unit: EnergyUnit, power: Watts) -> Duration {
        let secs = self.range(unit).0 / power.0.max(f64::MIN_POSITIVE);
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }
}

/// A reading that cannot come from the counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("raw value {value} is outside the counter's range 0..{modulus}")]
pub struct OutOfRange {
    /// The value read.
    pub value: u64,
    /// The counter's modulus.
    pub modulus: u64,
}

/// Accumulates one counter: integer steps, corrected for wraps.
#[derive(Debug, Clone)]
pub struct Counter {
    wrap: Wrap,
    unit: EnergyUnit,
    last: Option<u64>,
    total: u128,
    wraps: u64,
}

impl Counter {
    /// A counter that wraps at `wrap` and counts `unit` per step.
    pub fn new(wrap: Wrap, unit: EnergyUnit) -> Self {
        Counter {
            wrap,
            unit,
            last: None,
            total: 0,
            wraps: 0,
        }
    }

    /// Feeds a raw reading; returns the steps since the previous reading (0 for the first).
    #[inline]
    pub fn update(&mut self, raw: u64) -> Result<u64, OutOfRange> {
        if !self.wrap.admits(raw) {
            return Err(OutOfRange {
                value: raw,
                modulus: self.wrap.steps().min(u64::MAX as u128) as u64,
            });
        }
        let delta = match self.last {
            None => 0,
            Some(old) => {
                if raw < old {
                    self.wraps += 1;
                }
                self.wrap.delta(old, raw)
            }
        };
        self.last = Some(raw);
        self.total += delta as u128;
        Ok(delta)
    }

    /// Steps accumulated since the first reading.
    pub fn total_steps(&self) -> u128 {
        self.total
    }

    /// Energy accumulated since the first reading.
    pub fn total(&self) -> Joules {
        self.unit.to_joules(self.total)
    }

    /// Converts a number of steps of this counter to joules.
    pub fn joules(&self, steps: u64) -> Joules {
        self.unit.to_joules(steps as u128)
    }

    /// How many times the counter wrapped so far.
    pub fn wraps(&self) -> u64 {
        self.wraps
    }

    /// The counter's wrap.
    pub fn wrap(&self) -> Wrap {
        self.wrap
    }

    /// The counter's unit.
    pub fn unit(&self) -> EnergyUnit {
        self.unit
    }
}

/// Whether two wraps could hide in one sampling interval: true when, at `max_power`,
/// the counter can turn once or more during `period`, so the corrected delta (which
/// assumes at most one wrap) could be short by a whole range.
pub fn period_may_hide_wraps(
    wrap: Wrap,
    unit: EnergyUnit,
    max_power: Watts,
    period: Duration,
) -> bool {
    max_power.over(period).0 >= wrap.range(unit).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_is_corrected_with_the_mechanism_modulus() {
        // MSR: 32-bit field.
        let mut c = Counter::new(Wrap::Modulus(1 << 32), EnergyUnit::PowerOfTwo(16));
        c.update(u32::MAX as u64 - 9).unwrap();
        assert_eq!(c.update(5).unwrap(), 15);
        assert_eq!(c.wraps(), 1);
        // powercap: max_energy_range_uj + 1.
        let mut p = Counter::new(Wrap::Modulus(1_000_001), EnergyUnit::Microjoule);
        p.update(999_990).unwrap();
        assert_eq!(p.update(10).unwrap(), 21);
        // perf: 2^64.
        let mut q = Counter::new(Wrap::U64, EnergyUnit::Scale(2f64.powi(-32)));
        q.update(u64::MAX - 1).unwrap();
        assert_eq!(q.update(3).unwrap(), 5);
    }

    #[test]
    fn a_value_outside_the_range_is_an_error_not_a_zero() {
        let mut p = Counter::new(Wrap::Modulus(1000), EnergyUnit::Microjoule);
        p.update(10).unwrap();
        assert_eq!(
            p.update(1000),
            Err(OutOfRange {
                value: 1000,
                modulus: 1000
            })
        );
        assert_eq!(p.total_steps(), 0);
    }

    #[test]
    fn long_runs_accumulate_without_float_drift() {
        // A million readings of a 2^-16 J counter wrapping every 2^20 steps.
        let m = 1u64 << 20;
        let mut c = Counter::new(Wrap::Modulus(m), EnergyUnit::PowerOfTwo(16));
        let step = 12_345u64;
        let mut raw = 0u64;
        c.update(raw).unwrap();
        for _ in 0..1_000_000 {
            raw = (raw + step) % m;
            c.update(raw).unwrap();
        }
        let exact = 1_000_000u128 * step as u128;
        assert_eq!(c.total_steps(), exact);
        assert_eq!(c.total().0, exact as f64 / 65536.0);
        assert!(c.wraps() > 10_000);
    }

    #[test]
    fn wrap_warning_triggers_when_one_period_can_hold_a_full_range() {
        let wrap = Wrap::Modulus(65_532_610_988); // max_energy_range_uj + 1 at ESU 16
        let unit = EnergyUnit::Microjoule;
        // 65.5 kJ at 500 W wraps in ~131 s.
        assert!(!period_may_hide_wraps(
            wrap,
            unit,
            Watts(500.0),
            Duration::from_secs(100)
        ));
        assert!(period_may_hide_wraps(
            wrap,
            unit,
            Watts(500.0),
            Duration::from_secs(140)
        ));
        let p = wrap.period_at(unit, Watts(500.0)).as_secs_f64();
        assert!((p - 131.07).abs() < 0.01, "{p}");
    }
}
