//! The one versioned shape of every JSON document quietwatt prints or exports
//! (`docs/json.md`, JSON Schemas in `docs/schemas/`): each carries
//! `"schema": "quietwatt.<kind>/<version>"` and `"schema_version": <version>`
//! before its own fields. The version goes up only when a key is removed, renamed
//! or changes type; new keys may appear within a version.
//!
//! A document is a typed [`Document`] in the crate that owns its content (run and
//! record in the engine, list and doctor in the sources, attribution and compare in
//! theirs); the CLI and the Python package serialise the same types through
//! [`Stamped`], so that both emit the same keys.

use serde::Serialize;

/// The version of every kind's shape.
pub const VERSION: u32 = 1;

/// The `schema` value of `kind`: `quietwatt.run/1`.
pub fn schema_name(kind: &str) -> String {
    format!("quietwatt.{kind}/{VERSION}")
}

/// A typed document of one kind; `docs/schemas/<KIND>.schema.json` is its JSON
/// Schema. It must serialise as a JSON object (a struct or a map).
pub trait Document: Serialize {
    /// The kind: `run`, `record`, `list`, `doctor`, `repeat`, ...
    const KIND: &'static str;

    /// The document with `schema` and `schema_version` before its fields: what
    /// the CLI prints and Python receives.
    fn stamped(&self) -> Stamped<'_, Self>
    where
        Self: Sized,
    {
        Stamped::new(Self::KIND, self)
    }
}

/// `"schema"`, `"schema_version"`, then the fields of `T` (flattened): one
/// document as printed.
#[derive(Debug, Clone, Serialize)]
pub struct Stamped<'a, T: ?Sized> {
    /// `quietwatt.<kind>/<version>`.
    schema: String,
    /// [`VERSION`].
    schema_version: u32,
    /// The document's own fields.
    #[serde(flatten)]
    document: &'a T,
}

impl<'a, T: Serialize + ?Sized> Stamped<'a, T> {
    /// `document` stamped as `kind` (for the typed documents, [`Document::stamped`]).
    pub fn new(kind: &str, document: &'a T) -> Self {
        Stamped {
            schema: schema_name(kind),
            schema_version: VERSION,
            document,
        }
    }
}
