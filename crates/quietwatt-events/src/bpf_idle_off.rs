//! `power:cpu_idle` seen by a BPF program: not in this build, which left out the
//! `bpf` cargo feature. [`BpfIdle::open`] says so, and C-state entries come from
//! perf counting and cpuidle sysfs only; with the feature this module loads
//! `src/bpf/cpu_idle.bpf.c`.

use super::cpuidle::CpuidleStates;
use super::{Channel, EventsError, Result};

/// The BPF program on `power:cpu_idle`, which this build cannot load: no value of
/// this type exists.
#[derive(Debug)]
pub enum BpfIdle {}

impl BpfIdle {
    /// Always fails: quietwatt was built without its `bpf` feature.
    pub fn open(_cpus: &[u32], _cpuidle: &CpuidleStates) -> Result<(BpfIdle, Vec<Channel>)> {
        Err(EventsError::Bpf(
            "quietwatt was built without its `bpf` feature".into(),
        ))
    }

    /// The attach point in use (with the feature, an `AttachKind`).
    pub fn kind(&self) -> &'static str {
        match *self {}
    }

    /// Values one [`BpfIdle::snapshot`] fills.
    pub fn slots(&self) -> usize {
        match *self {}
    }

    /// Copies every slot's current value into `out`.
    pub fn snapshot(&self, _out: &mut [u64]) -> std::io::Result<()> {
        match *self {}
    }

    /// Idle entries of `cpu` so far.
    pub fn entries(&self, _cpu: u32) -> u64 {
        match *self {}
    }

    /// The idle state `cpu` is in right now by the tracepoint.
    pub fn idle_state(&self, _cpu: u32) -> Option<u32> {
        match *self {}
    }

    /// One line for the notes.
    pub fn describe(&self) -> String {
        match *self {}
    }
}
