//! What a meter reports: each domain's energy with its uncertainty, the totals, the
//! counter events.

use crate::units::{Joules, Watts};
use serde::Serialize;

/// The energy of each domain over a measurement.
#[derive(Debug, Clone, Serialize)]
pub struct DomainEnergy {
    /// The package.
    pub socket: u32,
    /// The die, on multi-die parts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub die: Option<u32>,
    /// The domain name (`package`, `core`, `uncore`, `dram`, `psys`).
    pub domain: &'static str,
    /// Energy in joules.
    pub energy_j: Joules,
    /// ± bound on `energy_j`: the counter's quantum, one update interval's energy, and
    /// the energy of intervals lost to resets or glitches (at the mean power).
    pub uncertainty_j: Joules,
    /// Mean power in watts.
    pub mean_power_w: Watts,
    /// ± bound on `mean_power_w` (`uncertainty_j` over the duration).
    pub power_uncertainty_w: Watts,
    /// The counter's smallest step as observed (1 J for psys on Sapphire Rapids).
    pub quantum_j: Joules,
    /// The update interval assumed (1 ms) or observed (the longest interval over which
    /// the counter stood still, up to 250 ms), seconds.
    pub update_interval_s: f64,
    /// How many times the counter wrapped (corrected).
    pub wraps: u64,
    /// Resets, steps back and jumps of the counter (see `counter_events`).
    pub anomalies: u64,
}

/// A total with a finer resolution than psys, offered beside a psys total.
#[derive(Debug, Clone, Serialize)]
pub struct FinerTotal {
    /// What it adds up.
    pub rule: String,
    /// Energy in joules.
    pub energy_j: Joules,
    /// ± bound.
    pub uncertainty_j: Joules,
}

/// A reset, backward step or implausible jump, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct CounterEventReport {
    /// The counter (`socket/domain`).
    pub domain: String,
    /// Seconds from the first reading.
    pub t_s: f64,
    /// `reset`, `backstep`, `jump` or `ambiguous`.
    pub kind: &'static str,
    /// The raw reading before.
    pub from_raw: u64,
    /// The raw reading after.
    pub to_raw: u64,
    /// Energy counted for the interval.
    pub counted_j: Joules,
    /// The most the domain could plausibly draw over the interval.
    pub plausible_j: Joules,
    /// The new reading as energy: what a restart from 0 would have counted (the
    /// low end of an `ambiguous` interval's energy).
    pub restart_j: Joules,
}

/// A measurement's result.
#[derive(Debug, Clone, Serialize)]
pub struct EnergyReport {
    /// The mechanism read.
    pub mechanism: &'static str,
    /// Seconds between the first and last reading.
    pub duration_s: f64,
    /// Per-domain energy.
    pub domains: Vec<DomainEnergy>,
    /// The total, counting each joule once (see `total_rule`); `None` when nothing
    /// selected can be totalled (a psys that does not move, alone).
    pub total_energy_j: Option<Joules>,
    /// ± bound on the total (the members' uncertainties added).
    pub total_uncertainty_j: Option<Joules>,
    /// Mean total power.
    pub total_power_w: Option<Watts>,
    /// ± bound on the mean total power.
    pub total_power_uncertainty_w: Option<Watts>,
    /// What the total adds up, e.g. `package + dram`, `core + uncore`, `psys`.
    pub total_rule: String,
    /// With a psys total coarser than the run needs: packages + dram, finer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finer_total: Option<FinerTotal>,
    /// Resets, steps back and jumps of the counters.
    pub counter_events: Vec<CounterEventReport>,
    /// Things that make a figure doubtful.
    pub warnings: Vec<String>,
}
