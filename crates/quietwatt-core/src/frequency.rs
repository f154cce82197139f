//! Sampling frequencies: a checked [`Hertz`] and its period.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The highest sampling frequency accepted: RAPL updates about every millisecond, and
/// beyond 100 kHz a read costs more than the period.
pub const MAX_HZ: f64 = 100_000.0;

/// The lowest sampling frequency accepted: one read every 1000 s. Slower reads say
/// nothing a start and an end read would not, and RAPL counters can wrap between
/// them at a few hundred watts.
pub const MIN_HZ: f64 = 0.001;

/// A sampling frequency in hertz, in [1 mHz, 100 kHz].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Hertz(f64);

/// A frequency outside [1 mHz, 100 kHz] or not a number.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid frequency '{0}': give a number of hertz from 0.001 to 100000 (e.g. 1000 or 2kHz)")]
pub struct InvalidFrequency(pub String);

impl Hertz {
    /// A checked frequency.
    pub fn new(hz: f64) -> Result<Hertz, InvalidFrequency> {
        if hz.is_finite() && (MIN_HZ..=MAX_HZ).contains(&hz) {
            Ok(Hertz(hz))
        } else {
            Err(InvalidFrequency(hz.to_string()))
        }
    }

    /// `hz` brought into [1 mHz, 100 kHz] (a NaN becomes the maximum): for rates
    /// computed from rates already checked.
    pub fn clamped(hz: f64) -> Hertz {
        if hz.is_nan() {
            return Hertz(MAX_HZ);
        }
        Hertz(hz.clamp(MIN_HZ, MAX_HZ))
    }

    /// The value in hertz.
    pub fn hz(self) -> f64 {
        self.0
    }

    /// The sampling period.
    pub fn period(self) -> Duration {
        // In range by construction; saturating all the same, never a panic.
        Duration::try_from_secs_f64(1.0 / self.0).unwrap_or(Duration::MAX)
    }
}

impl FromStr for Hertz {
    type Err = InvalidFrequency;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let (num, mult) = if let Some(k) = t.strip_suffix("kHz").or_else(|| t.strip_suffix("khz")) {
            (k, 1000.0)
        } else {
            (
                t.strip_suffix("Hz")
                    .or_else(|| t.strip_suffix("hz"))
                    .unwrap_or(t),
                1.0,
            )
        };
        let hz: f64 = num
            .trim()
            .parse()
            .map_err(|_| InvalidFrequency(s.to_string()))?;
        Hertz::new(hz * mult).map_err(|_| InvalidFrequency(s.to_string()))
    }
}

impl fmt::Display for Hertz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} Hz", self.0)
    }
}

/// A frequency's period in whole nanoseconds (at least 1).
pub fn period_ns(freq: Hertz) -> u64 {
    (1e9 / freq.hz()).round().max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_are_checked() {
        assert_eq!("1000".parse::<Hertz>().unwrap().hz(), 1000.0);
        assert_eq!("2kHz".parse::<Hertz>().unwrap().hz(), 2000.0);
        assert_eq!(
            "0.5".parse::<Hertz>().unwrap().period(),
            Duration::from_secs(2)
        );
        for bad in [
            "0", "-1", "100001", "nan", "inf", "fast", "", "1e-20", "0.0009", "1e-400",
        ] {
            assert!(bad.parse::<Hertz>().is_err(), "{bad} accepted");
        }
        // The slowest rate's period is representable; a clamped tiny rate too.
        assert_eq!(
            "0.001".parse::<Hertz>().unwrap().period(),
            Duration::from_secs(1000)
        );
        assert_eq!(Hertz::clamped(1e-300).period(), Duration::from_secs(1000));
    }
}
