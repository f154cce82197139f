//! What can go wrong, typed so that a caller can say what to do.

use std::path::PathBuf;

/// An attribution error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttributionError {
    /// The accounting program could not be loaded or read.
    #[error("the in-kernel accounting failed: {0}")]
    Bpf(String),
    /// Built without the `bpf` feature.
    #[error("this build has no in-kernel accounting (built without the `bpf` feature)")]
    Unavailable,
    /// A cgroup could not be created, joined or removed.
    #[error("cgroup {path}: {source}")]
    Cgroup {
        /// The cgroup's directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No cgroup v2 hierarchy is mounted.
    #[error("no cgroup v2 hierarchy is mounted (looked in /proc/self/mountinfo)")]
    NoCgroup2,
    /// The package topology could not be read.
    #[error("reading the CPU topology: {0}")]
    Topology(String),
}

/// A result with [`AttributionError`].
pub type Result<T> = std::result::Result<T, AttributionError>;
