//! Sampling frequencies: a checked [`Hertz`] and its period.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The highest sampling frequency accepted: RAPL updates about every millisecond, and
/// beyond 100 kHz a read costs more than the period.
pub const MAX_HZ: f64 = 100_000.0;

/// A sampling frequency in hertz, in (0, 100 kHz].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Hertz(f64);

/// A frequency outside (0, 100 kHz] or not a number.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "invalid frequency '{0}': give a number of hertz above 0 and at most 100000 (e.g. 1000 or 2kHz)"
)]
pub struct InvalidFrequency(pub String);

impl Hertz {
    /// A checked frequency.
    pub fn new(hz: f64) -> Result<Hertz, InvalidFrequency> {
        if hz.is_finite() && hz > 0.0 && hz <= MAX_HZ {
            Ok(Hertz(hz))
        } else {
            Err(InvalidFrequency(hz.to_string()))
        }
    }

    /// `hz` brought into (0, 100 kHz] (a NaN becomes the maximum): for rates computed
    /// from rates already checked.
    pub fn clamped(hz: f64) -> Hertz {
        if hz.is_nan() {
            return Hertz(MAX_HZ);
        }
        Hertz(hz.clamp(f64::MIN_POSITIVE, MAX_HZ))
    }

    /// The value in hertz.
    pub fn hz(self) -> f64 {
        self.0
    }

    /// The sampling period.
    pub fn period(self) -> Duration {
        Duration::from_secs_f64(1.0 / self.0)
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
        for bad in ["0", "-1", "100001", "nan", "inf", "fast", ""] {
            assert!(bad.parse::<Hertz>().is_err(), "{bad} accepted");
        }
    }
}
