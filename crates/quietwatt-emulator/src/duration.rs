//! Durations as text in quietwatt-core's one grammar (`1.5s`, `500ms`, `250us`,
//! `2m`; a bare number is seconds), and the serde forms used in `config.json` and
//! the reports.

pub use quietwatt_core::duration::{format_duration, parse_duration, InvalidDuration};

/// serde for a [`Duration`](std::time::Duration) as text (`"1ms"`), via [`parse_duration`] and [`format_duration`].
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

/// serde for a [`Duration`](std::time::Duration) as seconds (a float), for reports.
pub(crate) mod secs {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}
