//! The one versioned shape of every JSON document quietwatt prints or exports
//! (`docs/json.md`, JSON Schemas in `docs/schemas/`): each carries
//! `"schema": "quietwatt.<kind>/<version>"` and `"schema_version": <version>`. The
//! version goes up only when a key is removed, renamed or changes type; new keys
//! may appear within a version.

/// The version of every kind's shape.
pub const VERSION: u32 = 1;

/// The `schema` value of `kind`: `quietwatt.run/1`.
pub fn name(kind: &str) -> String {
    format!("quietwatt.{kind}/{VERSION}")
}

/// Adds `"schema": "quietwatt.<kind>/1"` and `"schema_version": 1` to a JSON
/// object (anything else is left as it is). `docs/schemas/<kind>.schema.json` is
/// its JSON Schema.
pub fn stamp(v: &mut serde_json::Value, kind: &str) {
    if let Some(o) = v.as_object_mut() {
        o.insert("schema".into(), name(kind).into());
        o.insert("schema_version".into(), VERSION.into());
    }
}

/// `value` serialized, with `"schema"` added.
pub fn stamped<T: serde::Serialize>(value: &T, kind: &str) -> serde_json::Value {
    let mut v = serde_json::to_value(value).unwrap_or_default();
    stamp(&mut v, kind);
    v
}
