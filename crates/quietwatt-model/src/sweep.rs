//! The runs of a model, interleaved as the overhead lab interleaves its runs
//! (`quietwatt_lab::experiment`): round after round, every (scenario, count) pair
//! once per round in an order shuffled anew each round (seeded), so that a drift
//! of the machine (temperature, another tenant of the VM) spreads over every
//! scenario instead of biasing the last one.

use super::energy::EnergyProbe;
use super::file::Run;
use super::{Measured, Scenario};
use crate::error::Result;
use quietwatt_stats::rng::XorShift;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The default seed of the shuffles.
pub const DEFAULT_SEED: u64 = 0x05EE_D003;

/// One scenario of a sweep: what to run, at which counts, how many executions per run.
pub struct Planned {
    /// The scenario.
    pub scenario: Box<dyn Scenario>,
    /// Counts per execution, swept.
    pub counts: Vec<u64>,
    /// Executions per measured run.
    pub batch: u32,
}

impl std::fmt::Debug for Planned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planned")
            .field("counts", &self.counts)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

/// One run to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Position in the schedule.
    pub seq: usize,
    /// The round (0-based).
    pub round: usize,
    /// Index of the scenario in the plan.
    pub scenario: usize,
    /// Count per execution.
    pub count: u64,
}

/// The whole schedule: `rounds` rounds, each every (scenario, count) pair once in
/// a fresh shuffled order.
pub fn schedule(counts: &[Vec<u64>], rounds: usize, seed: u64) -> Vec<Slot> {
    let pairs: Vec<(usize, u64)> = counts
        .iter()
        .enumerate()
        .flat_map(|(s, cs)| cs.iter().map(move |&c| (s, c)))
        .collect();
    let mut rng = XorShift::new(seed);
    let mut out = Vec::with_capacity(pairs.len() * rounds);
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..pairs.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for &i in &order {
            out.push(Slot {
                seq: out.len(),
                round,
                scenario: pairs[i].0,
                count: pairs[i].1,
            });
        }
    }
    out
}

/// Where a sweep stands after a run.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Runs done.
    pub done: usize,
    /// Runs in the schedule.
    pub total: usize,
    /// `scenario@count` of the run just done.
    pub last: String,
    /// Time since the sweep started.
    pub elapsed: Duration,
    /// Estimated time left (mean run time so far × runs left).
    pub eta: Duration,
}

/// Runs every slot of the schedule, handing each finished run to `on_run` (which
/// writes it to the model file at once). When `stop` is raised (Ctrl-C) the sweep
/// ends after the run in progress; returns whether it was stopped.
pub fn execute(
    plan: &mut [Planned],
    rounds: usize,
    seed: u64,
    probe: &mut EnergyProbe,
    stop: &AtomicBool,
    on_run: &mut dyn FnMut(Run, &Progress) -> Result<()>,
) -> Result<bool> {
    let counts: Vec<Vec<u64>> = plan.iter().map(|p| p.counts.clone()).collect();
    let slots = schedule(&counts, rounds, seed);
    let start = Instant::now();
    for (i, slot) in slots.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let p = &mut plan[slot.scenario];
        let name = p.scenario.spec().name;
        let m: Measured = p.scenario.run(slot.count, p.batch, probe)?;
        let run = Run {
            seq: slot.seq,
            round: slot.round,
            scenario: name.clone(),
            count: slot.count,
            batch: p.batch,
            events: m.events,
            counts: m.counts,
            seconds: m.seconds,
            wall_seconds: m.wall_seconds,
            joules: m.joules,
        };
        let elapsed = start.elapsed();
        let done = i + 1;
        let progress = Progress {
            done,
            total: slots.len(),
            last: format!("{name}@{}", slot.count),
            elapsed,
            eta: elapsed.mul_f64((slots.len() - done) as f64 / done as f64),
        };
        on_run(run, &progress)?;
    }
    Ok(false)
}

/// Executions per run so that the shortest run lasts `min_run`: one calibration
/// execution of `scenario` at `count` (its result is thrown away), capped at `max`.
pub fn calibrate_batch(
    scenario: &mut dyn Scenario,
    count: u64,
    min_run: Duration,
    max: u32,
) -> Result<u32> {
    let mut none = EnergyProbe::new(None);
    // Twice: the first execution also pays for warming caches and the allocator.
    scenario.run(count, 1, &mut none)?;
    let m = scenario.run(count, 1, &mut none)?;
    let per = m.wall_seconds.max(1e-7);
    Ok(((min_run.as_secs_f64() / per).ceil() as u32).clamp(1, max.max(1)))
}

/// `scenarios` planned at `counts`: `batch` executions per run when given, else as
/// many as [`calibrate_batch`] finds at `calibrate_at` (the smallest count), capped
/// at `max`. The plan of every family that calibrates its batch.
pub(crate) fn plan_each<S: Scenario + 'static>(
    scenarios: impl IntoIterator<Item = S>,
    counts: &[u64],
    batch: Option<u32>,
    calibrate_at: u64,
    min_run: Duration,
    max: u32,
) -> Result<Vec<Planned>> {
    scenarios
        .into_iter()
        .map(|mut s| {
            let b = match batch {
                Some(b) => b.max(1),
                None => calibrate_batch(&mut s, calibrate_at, min_run, max)?,
            };
            Ok(Planned {
                scenario: Box::new(s),
                counts: counts.to_vec(),
                batch: b,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_runs_once_per_round_in_a_shuffled_order() {
        let counts = vec![vec![1, 2, 3], vec![10, 20]];
        let s = schedule(&counts, 4, 7);
        assert_eq!(s.len(), 20);
        for round in 0..4 {
            let mut r: Vec<(usize, u64)> = s
                .iter()
                .filter(|x| x.round == round)
                .map(|x| (x.scenario, x.count))
                .collect();
            r.sort();
            assert_eq!(r, vec![(0, 1), (0, 2), (0, 3), (1, 10), (1, 20)]);
        }
        let order = |round| {
            s.iter()
                .filter(|x| x.round == round)
                .map(|x| (x.scenario, x.count))
                .collect::<Vec<_>>()
        };
        assert!((1..4).any(|r| order(r) != order(0)), "never reshuffled");
        assert_eq!(schedule(&counts, 4, 7), s, "the seed fixes the schedule");
    }
}
