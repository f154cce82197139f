//! The one rule for a safe sampling rate: read every counter before it can wrap
//! twice. A counter read once per period `p` loses whole ranges when it turns twice
//! within `p` (at 1 Hz, counters that turn every 0.25 s once gave 0.06 J for 60 J),
//! so a rate whose period is longer than the counters' safe period
//! ([`crate::Meter::max_safe_period`]: half the shortest time any counter takes to
//! turn once at its domain's highest plausible power) is raised to the slowest rate
//! that is safe.
//!
//! Every place that settles a rate asks here ([`safe_rate`], [`default_rate`]) and
//! only words the outcome its own way (a warning in a recording's JSON, a note on
//! stderr, a note in a session): what is safe is decided once.

use crate::ticker::Hertz;
use std::time::Duration;

/// The highest rate a *default* is raised to on its own ([`default_rate`]): far
/// above what real RAPL counters need (they turn after minutes); a faster floor
/// (tiny emulated counters) is still applied, with a warning, by [`safe_rate`].
pub const DEFAULT_CEILING_HZ: f64 = 10_000.0;

/// What [`safe_rate`] settled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SafeRate {
    /// The rate to sample at: the requested one, or the slowest safe one above it.
    pub rate: Hertz,
    /// Whether the requested rate was raised.
    pub raised: bool,
    /// Whether `rate` is safe: `false` only when even the highest rate accepted
    /// ([`crate::ticker::MAX_HZ`]) reads too slowly (the figures may then miss whole
    /// counter ranges, and the caller must say so).
    pub safe: bool,
}

/// The slowest rate whose period is at most `safe_period` (`None` without
/// counters), clamped to the accepted range: in whole hertz from 1 Hz up (a rate
/// a person reads back, "25 Hz", at most 1 Hz above the exact bound), exact below.
pub fn floor(safe_period: Option<Duration>) -> Option<Hertz> {
    safe_period.map(|p| {
        let exact = 1.0 / p.as_secs_f64().max(1e-9);
        if exact < 1.0 {
            // A hair above 1/p, so that the period computed back from it is not a
            // float's ulp longer than `p`.
            return Hertz::clamped(exact * (1.0 + 1e-9));
        }
        let whole = Hertz::clamped((exact * (1.0 - 1e-12)).ceil());
        if whole.period() <= p {
            whole
        } else {
            Hertz::clamped(whole.hz() + 1.0)
        }
    })
}

/// The rate to use for a `requested` rate when no counter may wrap twice within
/// `safe_period` (`None`: no counter, anything is safe): `requested` when its
/// period is at most `safe_period`, else [`floor`].
pub fn safe_rate(requested: Hertz, safe_period: Option<Duration>) -> SafeRate {
    let (Some(p), Some(f)) = (safe_period, floor(safe_period)) else {
        return SafeRate {
            rate: requested,
            raised: false,
            safe: true,
        };
    };
    if requested.period() <= p {
        return SafeRate {
            rate: requested,
            raised: false,
            safe: true,
        };
    }
    SafeRate {
        rate: f,
        raised: true,
        safe: f.period() <= p,
    }
}

/// A default rate: `default`, or faster where a counter could wrap twice within
/// its period, up to [`DEFAULT_CEILING_HZ`] (a default must not lose energy, nor
/// silently sample at 100 kHz).
pub fn default_rate(default: Hertz, safe_period: Option<Duration>) -> Hertz {
    let raised = safe_rate(default, safe_period).rate;
    if raised.hz() > DEFAULT_CEILING_HZ && default.hz() <= DEFAULT_CEILING_HZ {
        Hertz::clamped(DEFAULT_CEILING_HZ)
    } else {
        raised
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ticker::MAX_HZ;

    fn hz(f: f64) -> Hertz {
        Hertz::new(f).unwrap()
    }

    #[test]
    fn a_rate_fast_enough_is_kept() {
        let s = safe_rate(hz(10.0), Some(Duration::from_millis(100)));
        assert_eq!((s.rate, s.raised, s.safe), (hz(10.0), false, true));
        let s = safe_rate(hz(1.0), None);
        assert_eq!((s.rate, s.raised, s.safe), (hz(1.0), false, true));
    }

    #[test]
    fn a_slow_rate_is_raised_to_the_slowest_safe_one() {
        // Counters that can turn twice in 250 ms: 1 Hz would hide wraps.
        let p = Duration::from_millis(250);
        let s = safe_rate(hz(1.0), Some(p));
        assert!(s.raised && s.safe, "{s:?}");
        assert!(s.rate.period() <= p, "{s:?}");
        assert_eq!(s.rate.hz(), 4.0, "whole hertz: {s:?}");
        let s = safe_rate(hz(10.0), Some(Duration::from_millis(40)));
        assert_eq!(s.rate.hz(), 25.0, "{s:?}");
        let s = safe_rate(hz(1.0), Some(Duration::from_micros(3_333)));
        assert_eq!(s.rate.hz(), 301.0, "{s:?}");
        // Awkward periods too: the period computed back is never a hair too long.
        for ns in [1_000_003u64, 3_333_333, 7, 999_999_999] {
            let p = Duration::from_nanos(ns);
            let s = safe_rate(hz(0.001), Some(p));
            assert!(s.rate.period() <= p || !s.safe, "{ns} ns: {s:?}");
        }
    }

    #[test]
    fn a_period_no_rate_can_meet_is_said() {
        let s = safe_rate(hz(10.0), Some(Duration::from_nanos(1)));
        assert!(s.raised && !s.safe, "{s:?}");
        assert_eq!(s.rate.hz(), MAX_HZ);
    }

    #[test]
    fn a_default_is_raised_but_not_past_its_ceiling() {
        assert_eq!(default_rate(hz(10.0), None), hz(10.0));
        assert_eq!(
            default_rate(hz(10.0), Some(Duration::from_secs(60))),
            hz(10.0)
        );
        let r = default_rate(hz(10.0), Some(Duration::from_millis(10)));
        assert!((r.hz() - 100.0).abs() < 1e-6, "{r:?}");
        let r = default_rate(hz(10.0), Some(Duration::from_micros(1)));
        assert_eq!(r.hz(), DEFAULT_CEILING_HZ);
    }
}
