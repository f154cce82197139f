//! Durations as text, one grammar for the CLI's flags and the emulator's configs and
//! fault specs: a decimal number and an optional unit, `ns`, `us` (or `µs`), `ms`,
//! `s`, `m` or `h`; a bare number is seconds (`10`, `2.5`, `1.5s`, `500ms`, `2m`).
//!
//! Parsed exactly, without floating point: `0.1s` is 100 000 000 ns, not the nearest
//! double. An exponent is accepted (`1e-3s`, as a float parser would); digits finer
//! than a nanosecond, a sign other than `+`, `inf` and `NaN` are errors that say so.
//!
//! ```
//! use quietwatt_core::duration::{format_duration, parse_duration};
//! use std::time::Duration;
//!
//! assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
//! assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
//! assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
//! assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
//! assert!(parse_duration("-1s").is_err());
//! ```

use std::fmt;
use std::time::Duration;

const NS_PER_S: u128 = 1_000_000_000;

/// The units and their nanoseconds; a unit must match whole (`ms` is not `m`).
const UNITS: [(&str, u128); 7] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", NS_PER_S),
    ("m", 60 * NS_PER_S),
    ("h", 3_600 * NS_PER_S),
];

/// A text that is not a duration: the text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration '{text}': {problem}")]
pub struct InvalidDuration {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub problem: DurationProblem,
}

/// What is wrong with a duration's text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DurationProblem {
    /// Nothing but white space.
    Empty,
    /// Not a decimal number with a known unit.
    NotANumber,
    /// A number with a unit this grammar does not know (the unit as written).
    UnknownUnit(String),
    /// A minus sign: durations are not negative.
    Negative,
    /// More than `Duration` holds (about 584 942 417 years).
    TooLong,
    /// Non-zero digits below a nanosecond.
    FinerThanNanosecond,
    /// Zero where a positive duration is needed ([`parse_positive_duration`]).
    Zero,
}

/// What the grammar accepts, said in each error.
const GRAMMAR: &str = "give a number with a unit ns, us, ms, s, m or h, e.g. 1.5s, 500ms or 2m \
                       (a bare number is seconds)";

impl fmt::Display for DurationProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationProblem::Empty => write!(f, "it is empty: {GRAMMAR}"),
            DurationProblem::NotANumber => write!(f, "not a number: {GRAMMAR}"),
            DurationProblem::UnknownUnit(u) => write!(f, "unknown unit '{u}': {GRAMMAR}"),
            DurationProblem::Negative => write!(f, "a duration cannot be negative: {GRAMMAR}"),
            DurationProblem::TooLong => f.write_str("too long a duration to represent"),
            DurationProblem::FinerThanNanosecond => {
                f.write_str("finer than a nanosecond: give at most 9 decimals of seconds")
            }
            DurationProblem::Zero => write!(f, "it must be more than zero: {GRAMMAR}"),
        }
    }
}

/// Parses a duration (the grammar is in the [module docs](self)). Zero is a duration.
pub fn parse_duration(text: &str) -> Result<Duration, InvalidDuration> {
    parse(text).map_err(|problem| InvalidDuration {
        text: text.to_string(),
        problem,
    })
}

/// [`parse_duration`], refusing zero: for a measurement's length or a period.
pub fn parse_positive_duration(text: &str) -> Result<Duration, InvalidDuration> {
    match parse_duration(text)? {
        Duration::ZERO => Err(InvalidDuration {
            text: text.to_string(),
            problem: DurationProblem::Zero,
        }),
        d => Ok(d),
    }
}

fn parse(text: &str) -> Result<Duration, DurationProblem> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DurationProblem::Empty);
    }
    if let Some(rest) = t.strip_prefix('-') {
        // "-0" is still written as a negative: say so rather than accept it.
        return Err(
            if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                DurationProblem::Negative
            } else {
                DurationProblem::NotANumber
            },
        );
    }
    let t = t.strip_prefix('+').unwrap_or(t);
    // The number ends at the first character that cannot be part of it; what follows
    // (after optional spaces) is the unit.
    let number_len = number_prefix_len(t);
    let (number, unit) = t.split_at(number_len);
    let unit = unit.trim_start();
    let scale = if unit.is_empty() {
        NS_PER_S
    } else {
        UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|&(_, scale)| scale)
            .ok_or_else(|| {
                if number.is_empty() {
                    DurationProblem::NotANumber
                } else {
                    DurationProblem::UnknownUnit(unit.to_string())
                }
            })?
    };
    let ns = exact_nanos(number, scale)?;
    let secs = u64::try_from(ns / NS_PER_S).map_err(|_| DurationProblem::TooLong)?;
    // The remainder is below 10^9: it fits.
    let nanos = (ns % NS_PER_S) as u32;
    Ok(Duration::new(secs, nanos))
}

/// The length of the longest prefix of `t` made of digits, one `.`, and an exponent
/// (`e`/`E`, an optional sign, digits) after at least one digit.
fn number_prefix_len(t: &str) -> usize {
    let b = t.as_bytes();
    let mut i = 0;
    let mut digits = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits > 0 && i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > start {
            i = j;
        }
    }
    i
}

/// `number` (digits, an optional fraction and exponent) times `scale` nanoseconds,
/// exactly.
fn exact_nanos(number: &str, scale: u128) -> Result<u128, DurationProblem> {
    let (mantissa, exponent) = match number.find(['e', 'E']) {
        Some(at) => (&number[..at], &number[at + 1..]),
        None => (number, ""),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(DurationProblem::NotANumber);
    }
    // An exponent beyond ±10^6 is far outside any duration; its digits alone say so.
    let exponent: i64 = if exponent.is_empty() {
        0
    } else {
        exponent.parse().unwrap_or(if exponent.starts_with('-') {
            i64::MIN / 2
        } else {
            i64::MAX / 2
        })
    };
    // The value is digits × 10^power × scale, with digits the mantissa without its point.
    let digits = int.trim_start_matches('0').to_string() + frac;
    let digits = digits.trim_start_matches('0');
    let power = exponent.saturating_sub(frac.len() as i64);
    if digits.is_empty() {
        return Ok(0);
    }
    // Trailing zeros move into the power, so "1.50000000000" is as exact as "1.5".
    let trimmed = digits.trim_end_matches('0');
    let power = power.saturating_add((digits.len() - trimmed.len()) as i64);
    if trimmed.len() > 39 {
        // More significant digits than u128 holds: either too long or too fine.
        return Err(if power >= 0 {
            DurationProblem::TooLong
        } else {
            DurationProblem::FinerThanNanosecond
        });
    }
    let value: u128 = trimmed.parse().map_err(|_| DurationProblem::TooLong)?;
    let mut ns = value.checked_mul(scale).ok_or(DurationProblem::TooLong)?;
    if power >= 0 {
        for _ in 0..power {
            ns = ns.checked_mul(10).ok_or(DurationProblem::TooLong)?;
        }
    } else {
        for _ in 0..power.unsigned_abs() {
            if ns % 10 != 0 {
                return Err(DurationProblem::FinerThanNanosecond);
            }
            ns /= 10;
        }
    }
    Ok(ns)
}

/// Writes a duration in the largest unit that keeps it exact: `1ms`, `1500ms`, `2s`
/// (never `m` or `h`, so that a config reads the same in every version).
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0s".to_string()
    } else if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests;
