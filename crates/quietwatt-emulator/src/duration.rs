//! Durations as text: `1.5s`, `500ms`, `250us`, `100ns` (a bare number is seconds),
//! parsed exactly (no floating point), and the serde form used in `config.json`.

use std::time::Duration;

/// Parses a duration: a decimal number and an optional unit `s`, `ms`, `us`, `ns`
/// (seconds when none). Exact to the nanosecond; finer digits are an error.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale): (&str, u128) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1)
    } else if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1_000)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1_000_000)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1_000_000_000)
    } else {
        (t, 1_000_000_000)
    };
    let number = number.trim();
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits_ok(int) || !digits_ok(frac) {
        return Err(format!(
            "'{text}' is not a duration (e.g. 1.5s, 500ms, 250us)"
        ));
    }
    let too_long = || format!("'{text}' is too long a duration");
    let mut ns: u128 = if int.is_empty() {
        0
    } else {
        int.parse::<u128>().map_err(|_| too_long())?
    };
    ns = ns.checked_mul(scale).ok_or_else(too_long)?;
    let mut place = scale;
    for b in frac.bytes() {
        place /= 10;
        let digit = u128::from(b - b'0');
        if place == 0 {
            if digit != 0 {
                return Err(format!("'{text}' is finer than a nanosecond"));
            }
            continue;
        }
        ns += digit * place;
    }
    let ns = u64::try_from(ns).map_err(|_| too_long())?;
    Ok(Duration::from_nanos(ns))
}

/// Writes a duration in the largest unit that keeps it exact: `1ms`, `1500ms`, `2s`.
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

/// serde for a [`Duration`] as text (`"1ms"`), via [`parse_duration`] and [`format_duration`].
pub(crate) mod text {
    use super::{format_duration, parse_duration};
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

/// serde for a [`Duration`] as seconds (a float), for reports.
pub(crate) mod secs {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_exactly() {
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("0.001"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert!(parse_duration("1.5ns").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration("99999999999999999999999s").is_err());
    }

    #[test]
    fn formats_in_the_largest_exact_unit() {
        for (d, s) in [
            (Duration::from_millis(1), "1ms"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_secs(2), "2s"),
            (Duration::from_nanos(1001), "1001ns"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(format_duration(d), s);
            assert_eq!(parse_duration(s), Ok(d));
        }
    }
}
