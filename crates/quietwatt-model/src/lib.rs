//! quietwatt-model: energy models of OS events, by the method of paper 003 (Lanoë, Guillot, Senn):
//! generate scenarios with a known number of one event, measure time and energy of
//! each run, regress both on the event count, and read the cost of one event from
//! the slope less the slope of a baseline scenario that does the same work without
//! the event. Then use the costs to attribute part of a command's energy to its
//! events, and check the model on an application it was not fitted on. It runs on
//! the `quietwatt` engine (its meter, its OS events, its statistics) and is used by
//! the command line (`quietwatt model`, `quietwatt run --model`); the engine never
//! depends on it.
//!
//! Modules, one concept each:
//! - [`counters`]: perf software counters on one task (faults, context switches),
//!   and whether the TLB dimension can be counted here;
//! - [`energy`]: the engine's meter read around one measured interval;
//! - [`scenario`]: the page-fault scenarios (NPF, ODPA, COW);
//! - [`ctxswitch`]: a pipe ping-pong between two threads on one CPU, and its
//!   no-switch baseline;
//! - [`wakeup`]: wake-ups from idle, by the caller/callee experiment of
//!   [`quietwatt_events::wakeup`];
//! - [`sweep`]: the interleaved schedule of runs (round after round, shuffled);
//! - least squares with intervals is [`quietwatt_stats::fit`], which the events
//!   crate's summaries use too;
//! - [`costs`]: runs to fits to per-event costs;
//! - [`file`](mod@file): the model as data (JSON), written as it grows;
//! - [`attribution`]: a command's events priced with a model;
//! - [`validate`]: the paper's validation on a built-in application kernel.
//! - [`error`]: what can go wrong (a scenario, a model file, a fit, or the
//!   measurement itself), each with what the caller can do about it.
//!
//! # Example
//!
//! ```no_run
//! use quietwatt_model::{Family, Model};
//!
//! // A model written by `quietwatt model all -o model.json`.
//! let model = Model::load(std::path::Path::new("model.json"))?;
//! for family in Family::ALL {
//!     if let Some(f) = model.family(family) {
//!         for c in &f.costs {
//!             println!("{}: {:.3e} s per event", family.name(), c.seconds_per_event);
//!         }
//!     }
//! }
//! # Ok::<(), quietwatt_model::Error>(())
//! ```
#![deny(missing_docs)]

pub mod attribution;
pub mod costs;
pub mod counters;
pub mod ctxswitch;
pub mod energy;
pub mod error;
pub mod file;
pub mod plot;
pub mod scenario;
pub mod sweep;
pub mod validate;
pub mod wakeup;

pub use energy::EnergyProbe;
pub use error::{Error, Result};
pub use file::Model;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The page size of this machine, in bytes (4096 where sysconf fails, which it
/// does not on Linux).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// What a scenario's x axis is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XAxis {
    /// The events measured by perf in each run (the scenarios that cause them).
    Measured,
    /// The count the scenario was asked for: a baseline does the same work without
    /// the event, so its x is the number of events the same sweep point causes in
    /// the other scenarios (its measured count stays near 0 and is recorded).
    Intended,
}

/// What a scenario is, as a model file records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioSpec {
    /// Short name (`npf`, `odpa`, `cow`, `pingpong`, ...).
    pub name: String,
    /// What one execution does.
    pub description: String,
    /// Whether this is the family's baseline (the same work without the event).
    pub baseline: bool,
    /// What the fit's x is.
    pub x: XAxis,
    /// The perf event (or other counter) that counts the modelled event.
    pub counted: String,
    /// What one unit of the sweep's count is (a page, a switch, a wake-up).
    pub unit: String,
}

/// What one measured run gave: totals over its `batch` executions.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The modelled events counted during the interval.
    pub events: u64,
    /// Every counter read, by name (`minor-faults`, `context-switches`, ...).
    pub counts: BTreeMap<String, u64>,
    /// The time the model prices, in seconds (wall-clock time of the interval,
    /// except where the scenario says otherwise, e.g. wake-up latency).
    pub seconds: f64,
    /// Wall-clock time of the interval, in seconds.
    pub wall_seconds: f64,
    /// Energy per channel of the probe over the interval, in joules (empty without
    /// an energy source).
    pub joules: Vec<f64>,
}

/// A scenario that can be run at a count.
pub trait Scenario {
    /// What it is.
    fn spec(&self) -> ScenarioSpec;
    /// Runs `batch` executions at `count` inside one measured interval.
    fn run(&mut self, count: u64, batch: u32, probe: &mut EnergyProbe) -> Result<Measured>;
}

/// The event families a model can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Page faults: NPF, ODPA, COW.
    Pagefault,
    /// Context switches: a pipe ping-pong on one CPU against a no-switch baseline.
    Ctxswitch,
    /// Wake-ups of an idle CPU.
    Wakeup,
}

impl Family {
    /// Every family, in the order `model all` runs them.
    pub const ALL: [Family; 3] = [Family::Pagefault, Family::Ctxswitch, Family::Wakeup];

    /// The name on the command line and in the file.
    pub fn name(self) -> &'static str {
        match self {
            Family::Pagefault => "pagefault",
            Family::Ctxswitch => "ctxswitch",
            Family::Wakeup => "wakeup",
        }
    }
}

/// Measures one family into `model`: adds its entry, runs the interleaved sweep,
/// calls `save` after every run (so an interruption keeps what is done) and
/// `progress` after every run, then fits and saves once more. Returns whether
/// `stop` ended the sweep early (the fits then use the runs done).
#[allow(clippy::too_many_arguments)]
pub fn measure(
    model: &mut file::Model,
    family: Family,
    mut plan: Vec<sweep::Planned>,
    rounds: usize,
    seed: u64,
    probe: &mut EnergyProbe,
    stop: &std::sync::atomic::AtomicBool,
    save: &mut dyn FnMut(&file::Model) -> Result<()>,
    progress: &mut dyn FnMut(&sweep::Progress),
) -> Result<bool> {
    model.families.retain(|f| f.family != family);
    model.families.push(file::FamilyModel {
        family,
        scenarios: plan
            .iter()
            .map(|p| file::PlannedScenario {
                spec: p.scenario.spec(),
                counts: p.counts.clone(),
                batch: p.batch,
            })
            .collect(),
        rounds,
        seed,
        runs: Vec::new(),
        complete: false,
        fits: Vec::new(),
        costs: Vec::new(),
        notes: family_notes(family),
    });
    let idx = model.families.len() - 1;
    save(model)?;
    let channels = model.energy.channels.len();
    let total = model.energy.total_members.clone();
    let interrupted = sweep::execute(&mut plan, rounds, seed, probe, stop, &mut |run, p| {
        model.families[idx].runs.push(run);
        save(model)?;
        progress(p);
        Ok(())
    })?;
    let f = &mut model.families[idx];
    f.complete = !interrupted;
    costs::analyze(f, channels, &total);
    save(model)?;
    Ok(interrupted)
}

/// What a reader of each family's figures must know.
fn family_notes(family: Family) -> Vec<String> {
    match family {
        Family::Pagefault => vec![
            "time is the wall-clock time of the writes (faults included); npf's x is the pages it writes, the faults the same sweep point causes in odpa and cow".into(),
        ],
        Family::Ctxswitch => vec![
            "time is the wall-clock time of the exchanges; both threads are pinned to one CPU, so a switch is a pure context switch (no idle exit); the baseline does the same pipe reads and writes in one thread".into(),
        ],
        Family::Wakeup => vec![
            "time is the wake-up latency (signal to the woken thread running), summed over the run; the wall-clock time of a run is fixed by design, so its energy slope is what a wake-up adds to an otherwise idle CPU".into(),
        ],
    }
}
