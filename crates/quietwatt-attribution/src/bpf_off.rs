//! Without the `bpf` feature: the same API, which says it is unavailable.

use crate::error::{AttributionError, Result};
use crate::timeline::Timeline;

/// The program's cost as the kernel measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cost {
    /// Runs (context switches seen) while statistics were on.
    pub runs: u64,
    /// Time spent in the program over those runs, ns.
    pub run_time_ns: u64,
}

impl Cost {
    /// Mean ns per context switch (0 when none was seen).
    pub fn per_switch_ns(&self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            self.run_time_ns as f64 / self.runs as f64
        }
    }
}

/// The accounting program: unavailable in this build.
#[derive(Debug)]
pub struct Tracker(());

impl Tracker {
    /// Always [`AttributionError::Unavailable`].
    pub fn open() -> Result<Tracker> {
        Err(AttributionError::Unavailable)
    }
    /// Always [`AttributionError::Unavailable`].
    pub fn open_with(_stats: bool) -> Result<Tracker> {
        Err(AttributionError::Unavailable)
    }
    /// Always [`AttributionError::Unavailable`].
    pub fn open_following(_root: u32) -> Result<(Tracker, Descendants)> {
        Err(AttributionError::Unavailable)
    }
    /// Nothing to drain.
    pub fn drain(&mut self, _timeline: &mut Timeline) {}
    /// 0.
    pub fn slices(&self) -> u64 {
        0
    }
    /// 0.
    pub fn dropped(&self) -> u64 {
        0
    }
    /// `None`.
    pub fn cost(&self) -> Option<Cost> {
        None
    }
}

/// The processes a root started: unavailable in this build.
#[derive(Debug)]
pub struct Descendants(());

impl Descendants {
    /// `pid` alone.
    pub fn of(&self, pid: u32) -> Vec<u32> {
        vec![pid]
    }
    /// `false`.
    pub fn full(&self) -> bool {
        false
    }
}
