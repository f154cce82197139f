//! Warnings: what did not stop a measurement but makes a figure doubtful or says
//! what was done instead of what was asked. Each has a kind, for a program to act
//! on, and a message, for a person; it displays and serializes as its message, so a
//! JSON document holds the same strings as before the kinds existed.

use serde::{Serialize, Serializer};
use std::fmt;
use std::ops::Deref;

/// What a [`Warning`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarningKind {
    /// A counter that reset, stepped back, jumped, froze, or reads more than the
    /// domain that contains it.
    Counter,
    /// What the total adds up: a psys counter that did not move, or that moved on
    /// more than one package, left out or counted once.
    Total,
    /// The counters' resolution (step, update interval) dominates a figure: the
    /// run is short or a counter is coarse.
    Resolution,
    /// The sampling rate: raised so that no counter can wrap twice between two
    /// reads, or a gap between reads long enough to hide a wrap.
    Rate,
    /// Readings merged or a sampling that stopped early: the figures end, or are
    /// coarser, where it says.
    Sampling,
    /// A request refused that did not stop the measurement: real-time priority,
    /// the sampler's CPU; or a mechanism that fell back to another.
    Setup,
    /// The kernel side of a buffered source (ebpf, perf-ring): throttling or gaps
    /// in its clock.
    KernelSide,
}

impl WarningKind {
    /// The kind's name, in kebab case.
    pub fn name(self) -> &'static str {
        match self {
            WarningKind::Counter => "counter",
            WarningKind::Total => "total",
            WarningKind::Resolution => "resolution",
            WarningKind::Rate => "rate",
            WarningKind::Sampling => "sampling",
            WarningKind::Setup => "setup",
            WarningKind::KernelSide => "kernel-side",
        }
    }
}

impl fmt::Display for WarningKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A warning: its [`WarningKind`] and its message. Displays, serializes and
/// dereferences as the message (`w.contains("wrap")`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// What it is about.
    pub kind: WarningKind,
    /// What happened and, where there is one, what to do about it.
    pub message: String,
}

impl Warning {
    /// A warning of `kind` saying `message`.
    pub fn new(kind: WarningKind, message: impl Into<String>) -> Warning {
        Warning {
            kind,
            message: message.into(),
        }
    }

    /// A [`WarningKind::Rate`] warning.
    pub fn rate(message: impl Into<String>) -> Warning {
        Warning::new(WarningKind::Rate, message)
    }

    /// A [`WarningKind::Setup`] warning.
    pub fn setup(message: impl Into<String>) -> Warning {
        Warning::new(WarningKind::Setup, message)
    }

    /// A [`WarningKind::KernelSide`] warning.
    pub fn kernel_side(message: impl Into<String>) -> Warning {
        Warning::new(WarningKind::KernelSide, message)
    }

    /// The message.
    pub fn as_str(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Deref for Warning {
    type Target = str;
    fn deref(&self) -> &str {
        &self.message
    }
}

impl AsRef<str> for Warning {
    fn as_ref(&self) -> &str {
        &self.message
    }
}

/// As its message: the documents' `warnings` are arrays of strings
/// (docs/schemas/run.schema.json, record.schema.json).
impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_and_serializes_as_its_message() {
        let w = Warning::rate("raised to 20 Hz");
        assert_eq!(w.to_string(), "raised to 20 Hz");
        assert_eq!(serde_json::to_string(&w).unwrap(), "\"raised to 20 Hz\"");
        assert_eq!(
            serde_json::to_string(&vec![w.clone()]).unwrap(),
            "[\"raised to 20 Hz\"]"
        );
        assert_eq!(w.kind, WarningKind::Rate);
        assert!(w.contains("20 Hz"));
    }
}
