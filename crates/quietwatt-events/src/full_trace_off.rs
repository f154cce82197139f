//! The full trace (`--full-trace`): not in this build, which left out the `bpf`
//! cargo feature. [`FullTrace::open`] says so; with the feature this module loads
//! `src/bpf/event_trace.bpf.c`.

use super::{EventsError, Groups, Result};

/// The default size of the ring: 8 MiB (as with the feature, for the options).
pub const DEFAULT_RING_BYTES: usize = 8 << 20;

/// The trace program, which this build cannot load: no value of this type exists.
#[derive(Debug)]
pub enum FullTrace {}

impl FullTrace {
    /// Always fails: quietwatt was built without its `bpf` feature.
    pub fn open(_groups: Groups, _cpus: &[u32], _ring_bytes: usize) -> Result<FullTrace> {
        Err(EventsError::Bpf(
            "the full trace needs quietwatt's `bpf` feature, which this build left out".into(),
        ))
    }

    /// Appends a row per traced event to `out`; returns the rows written.
    pub fn drain(&mut self, _out: &mut Vec<u8>) -> u64 {
        match *self {}
    }

    /// Events handed over so far.
    pub fn traced(&self) -> u64 {
        match *self {}
    }

    /// Events the kernel could not record because the ring was full.
    pub fn dropped(&self) -> Result<u64> {
        match *self {}
    }

    /// One line for the notes: what is traced.
    pub fn describe(&self) -> &str {
        match *self {}
    }

    /// Records of a kind quietwatt does not know.
    pub fn unknown(&self) -> u64 {
        match *self {}
    }
}
