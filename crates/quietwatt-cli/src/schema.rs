//! The one versioned shape of every JSON document quietwatt prints or exports
//! (`docs/json.md`, JSON Schemas in `docs/schemas/`): each carries
//! `"schema": "quietwatt.<kind>/<version>"` and `"schema_version": <version>`. The
//! typed documents and the stamp are the library's ([`quietwatt::document`]); what
//! is here serves the documents still built in the CLI.

use quietwatt::document::{Document, Stamped};

/// A typed document stamped, as one line of JSON.
pub fn to_json<D: Document>(doc: &D) -> String {
    // Documents are numbers, strings and maps with string keys: this cannot fail.
    serde_json::to_string(&doc.stamped()).unwrap_or_default()
}

/// A typed document stamped, as a JSON value (for `--export-json`).
pub fn value<D: Document>(doc: &D) -> serde_json::Value {
    serde_json::to_value(doc.stamped()).unwrap_or_default()
}

/// `value` serialized, with `"schema"` added.
pub fn stamped<T: serde::Serialize>(value: &T, kind: &str) -> serde_json::Value {
    serde_json::to_value(Stamped::new(kind, value)).unwrap_or_default()
}
