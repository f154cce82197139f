//! What a meter reports: each domain's energy with its uncertainty, the totals, the
//! counter events.

use super::{LONGEST_UPDATE, STALE_AFTER, UPDATE_INTERVAL};
use crate::counter::Counter;
use crate::domain::DomainId;
use crate::units::{Joules, Watts};
use serde::Serialize;
use std::time::Duration;

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
    /// Resets, steps back, jumps and ambiguous decreases of the counter (see
    /// `counter_events`).
    pub anomalies: u64,
    /// Of `anomalies`, the decreases that one wrap and a restart explained equally
    /// well (a reading late against a small counter's range): counted as the wrap,
    /// so the energy may be high by up to the range each, never short.
    pub ambiguous: u64,
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
    pub warnings: Vec<crate::Warning>,
}

/// One counter's energy, and its uncertainty: the counter's quantum (a difference of
/// two truncated readings), the energy of one update interval (each reading lags the
/// truth by up to one update), and the energy of the time whose energy was lost to a
/// reset or glitch (estimated at the counter's mean power).
/// `floor`: the least a reading may lag ([`crate::source::Source::update_interval`]).
pub(super) fn domain_energy(
    c: &Counter,
    id: DomainId,
    elapsed: Duration,
    floor: Duration,
    model_w: f64,
) -> DomainEnergy {
    let energy = c.total();
    let (intervals, _) = c.intervals();
    let t = elapsed.as_secs_f64();
    // Read faster than it updates: it updates no more often than the longest interval
    // over which it stood still (reads bunched by a loaded host stay short and change
    // nothing). Beyond LONGEST_UPDATE a still counter is a domain drawing nothing, not
    // a slow update.
    let update = c
        .longest_still()
        .min(LONGEST_UPDATE)
        .max(UPDATE_INTERVAL)
        .max(floor)
        .as_secs_f64();
    let counted = (t - c.lost().as_secs_f64()).max(0.0);
    let power = if counted > 0.0 {
        energy.0 / counted
    } else {
        0.0
    };
    let quantum = c.quantum();
    // Each interval lost to an anomaly is bounded by readings that lag by up to one
    // update each: one more update's energy per anomaly.
    // An ambiguous decrease (a wrap or a restart) is counted as a wrap: the truth
    // may be lower by what a restart would not have counted.
    let mut u = quantum.0
        + power * update * (1 + c.anomalies()) as f64
        + power * c.lost().as_secs_f64()
        + c.ambiguity().0
        + c.withheld().0;
    // Shorter than a counter can stand still: a counter that did not move had no
    // update inside the run, so its energy lies anywhere between 0 and what the
    // domain can draw over it (a 50 µs block once read 0 ± 1 µJ for 4-18 mJ
    // drawn); one that moved a few times lags at each read by up to one update
    // at the power between its updates, which the energy over the time the
    // updates certainly span bounds (the mean over the whole run, with one or two
    // updates, underestimates it: 0.020 ± 0.012 J read for 0.034 J drawn).
    if intervals > 0 && elapsed < STALE_AFTER {
        let short = if energy.0 == 0.0 {
            quantum.0 + c.plausible().power.0 * t
        } else {
            quantum.0 + energy.0 * update / (t - update).max(0.5 * update)
        };
        u = u.max(short);
    }
    // An estimate: the model's stated error of the power, over the whole span.
    u += model_w * t;
    let uncertainty = if intervals == 0 {
        Joules(0.0)
    } else {
        Joules(u)
    };
    DomainEnergy {
        socket: id.socket.0,
        die: id.die,
        domain: id.domain.name(),
        energy_j: energy,
        uncertainty_j: uncertainty,
        mean_power_w: energy.per(elapsed),
        power_uncertainty_w: uncertainty.per(elapsed),
        quantum_j: quantum,
        update_interval_s: update,
        wraps: c.wraps(),
        anomalies: c.anomalies(),
        ambiguous: c.ambiguous(),
    }
}
