//! The typed result of a comparison, which every export writes.

use crate::executor::Run;
use crate::schedule::{Outcome, Plan};
use quietwatt_stats::repeat::{self, GateOutcome, RankTest, Ratio, Summary, Verdict, Welch};
use serde::Serialize;

/// How the measurement bound is folded into the intervals, for reports.
pub const UNCERTAINTY_METHOD: &str = "the 95 % interval of the mean is Student's t over the runs' \
spread, widened on each side by the mean of the runs' ± measurement bounds (the bound on the \
mean's measurement error)";

/// One domain's energy over the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainSummary {
    /// The package.
    pub socket: u32,
    /// The domain's name.
    pub domain: String,
    /// Its energy, joules (`None` when a run's figure is not finite).
    pub energy_j: Option<Summary>,
}

/// One command's runs and their summaries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandSummary {
    /// The command as shown.
    pub command: String,
    /// The total's energy, joules (`None` when the domains cannot be totalled).
    pub energy_j: Option<Summary>,
    /// The duration, seconds.
    pub duration_s: Option<Summary>,
    /// Each domain's energy.
    pub domains: Vec<DomainSummary>,
    /// Every measured run.
    pub per_run: Vec<Run>,
}

impl CommandSummary {
    /// Summarises `runs` of `command`.
    pub fn new(command: &str, runs: &[Run]) -> CommandSummary {
        let totals: Option<Vec<(f64, f64)>> = runs.iter().map(Run::total).collect();
        let energy_j = totals.and_then(|t| {
            let (v, u): (Vec<f64>, Vec<f64>) = t.into_iter().unzip();
            Summary::new(&v, &u)
        });
        let durations: Vec<f64> = runs.iter().map(|r| r.duration_s).collect();
        let duration_s = Summary::new(&durations, &vec![0.0; durations.len()]);
        let domains = runs
            .first()
            .map(|first| {
                first
                    .domains
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        // Every run has the same domains (one meter's channels).
                        let (v, u): (Vec<f64>, Vec<f64>) = runs
                            .iter()
                            .filter_map(|r| r.domains.get(i))
                            .map(|d| (d.energy_j, d.uncertainty_j))
                            .unzip();
                        DomainSummary {
                            socket: d.socket,
                            domain: d.domain.clone(),
                            energy_j: (v.len() == runs.len())
                                .then(|| Summary::new(&v, &u))
                                .flatten(),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        CommandSummary {
            command: command.to_string(),
            energy_j,
            duration_s,
            domains,
            per_run: runs.to_vec(),
        }
    }

    /// Each run's total energy, where every run has one.
    fn totals(&self) -> Option<Vec<f64>> {
        self.per_run.iter().map(|r| r.total_energy_j).collect()
    }
}

/// One command against the reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compared {
    /// The command's index.
    pub command: usize,
    /// The reference's index.
    pub reference: usize,
    /// Its energy over the reference's, with the interval.
    pub energy_ratio: Option<Ratio>,
    /// The standard deviation of that ratio, propagated from both commands'
    /// standard deviations (hyperfine's `±`).
    pub energy_ratio_std: Option<f64>,
    /// Its time over the reference's.
    pub duration_ratio: Option<Ratio>,
    /// Welch's t test of its energy against the reference's.
    pub welch: Option<Welch>,
    /// The rank test, with the Hodges-Lehmann shift.
    pub rank_test: Option<RankTest>,
    /// What the tests conclude.
    pub verdict: Verdict,
    /// The gate's verdict on this command, when a gate was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateOutcome>,
    /// The significance level of the verdict.
    pub significance_level: f64,
}

/// The CI gate: no command may cost more than `1 + pct/100` times the reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    /// The limit, percent above the reference.
    pub fail_if_more_than_pct: f64,
    /// Whether a command costs surely more.
    pub failed: bool,
    /// Those commands.
    pub failed_commands: Vec<usize>,
    /// Whether the runs cannot tell for a command.
    pub inconclusive: bool,
    /// Those commands.
    pub inconclusive_commands: Vec<usize>,
    /// Whether an undecided gate passes.
    pub pass_inconclusive: bool,
}

impl Gate {
    /// The gate's overall outcome: a regression beats an undecided command.
    pub fn outcome(&self) -> GateOutcome {
        if self.failed {
            GateOutcome::Regression
        } else if self.inconclusive {
            GateOutcome::Inconclusive
        } else {
            GateOutcome::Pass
        }
    }
}

/// A series cut short by a stop request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Interrupted {
    /// The rounds asked for.
    pub runs_asked: u32,
}

/// The result of a comparison (or of one command's repeated runs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Rounds measured whole.
    pub runs: u32,
    /// Warm-up runs of each command.
    pub warmup: u32,
    /// The order, in words.
    pub order: String,
    /// The order's seed.
    pub seed: u64,
    /// The reference's index.
    pub reference: usize,
    /// How the intervals hold the measurement bounds.
    pub uncertainty_method: &'static str,
    /// Each command.
    pub commands: Vec<CommandSummary>,
    /// Each command but the reference against it.
    pub comparisons: Vec<Compared>,
    /// The gate, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
    /// Set when a stop request cut the series short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
}

/// The gate asked for: `--fail-if-more-than PCT`, `--pass-inconclusive`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateRule {
    /// The limit, percent above the reference.
    pub pct: f64,
    /// Let an undecided gate pass.
    pub pass_inconclusive: bool,
}

impl Comparison {
    /// Summarises `outcome` of `commands` run as `plan` said, each against the
    /// `reference`, with the `gate` if any.
    pub fn new(
        commands: &[String],
        plan: &Plan,
        outcome: &Outcome,
        reference: usize,
        gate: Option<GateRule>,
    ) -> Comparison {
        let summaries: Vec<CommandSummary> = commands
            .iter()
            .zip(&outcome.runs)
            .map(|(c, r)| CommandSummary::new(c, r))
            .collect();
        let mut comparisons = Vec::new();
        if let Some(base) = summaries.get(reference) {
            // A command without a total (nothing selected can be totalled) is
            // not compared: there is no energy to compare.
            for (i, s) in summaries
                .iter()
                .enumerate()
                .filter(|&(i, s)| i != reference && s.energy_j.is_some() && base.energy_j.is_some())
            {
                comparisons.push(compare(base, s, i, reference, gate.map(|g| g.pct)));
            }
        }
        let gate = gate.map(|g| {
            let with = |o: GateOutcome| -> Vec<usize> {
                comparisons
                    .iter()
                    .filter(|c| c.gate == Some(o))
                    .map(|c| c.command)
                    .collect()
            };
            let (failed, undecided) = (
                with(GateOutcome::Regression),
                with(GateOutcome::Inconclusive),
            );
            Gate {
                fail_if_more_than_pct: g.pct,
                failed: !failed.is_empty(),
                failed_commands: failed,
                inconclusive: !undecided.is_empty(),
                inconclusive_commands: undecided,
                pass_inconclusive: g.pass_inconclusive,
            }
        });
        Comparison {
            runs: outcome.rounds,
            warmup: plan.warmup,
            order: format!(
                "interleaved: each round runs every command once, in an order shuffled with seed {}",
                plan.seed
            ),
            seed: plan.seed,
            reference,
            uncertainty_method: UNCERTAINTY_METHOD,
            commands: summaries,
            comparisons,
            gate,
            interrupted: outcome.interrupted.map(|runs_asked| Interrupted { runs_asked }),
        }
    }

    /// The comparison of command `i` with the reference, if it was compared.
    pub fn against_reference(&self, i: usize) -> Option<&Compared> {
        self.comparisons.iter().find(|c| c.command == i)
    }
}

impl Compared {
    /// `b` (command `i`) against `a` (command `reference`), with the gate's
    /// verdict when `gate_pct` is given: what [`Comparison::new`] computes for
    /// each command, for callers that have their own runs (Python's `compare`).
    pub fn new(
        a: &CommandSummary,
        b: &CommandSummary,
        i: usize,
        reference: usize,
        gate_pct: Option<f64>,
    ) -> Compared {
        compare(a, b, i, reference, gate_pct)
    }
}

/// `b` (command `i`) against `a` (the reference).
fn compare(
    a: &CommandSummary,
    b: &CommandSummary,
    i: usize,
    reference: usize,
    pct: Option<f64>,
) -> Compared {
    let (ea, eb) = (a.energy_j.as_ref(), b.energy_j.as_ref());
    let welch = ea.zip(eb).and_then(|(x, y)| repeat::welch(x, y));
    let energy_ratio = ea.zip(eb).and_then(|(x, y)| repeat::ratio(x, y));
    let rank_test = a
        .totals()
        .zip(b.totals())
        .and_then(|(x, y)| repeat::rank_test(&x, &y));
    let verdict = repeat::verdict(welch.as_ref(), energy_ratio.as_ref());
    let duration_ratio = a
        .duration_s
        .as_ref()
        .zip(b.duration_s.as_ref())
        .and_then(|(x, y)| repeat::ratio(x, y));
    let gate = pct
        .zip(energy_ratio.as_ref())
        .map(|(p, r)| repeat::gate(verdict, r, p));
    Compared {
        command: i,
        reference,
        energy_ratio_std: ea.zip(eb).and_then(|(x, y)| ratio_std(x, y)),
        energy_ratio,
        duration_ratio,
        welch,
        rank_test,
        verdict,
        gate,
        significance_level: repeat::ALPHA,
    }
}

/// The standard deviation of `b.mean / a.mean` by propagating both standard
/// deviations (hyperfine's `±` on its "times faster"); `None` unless both means
/// are positive.
fn ratio_std(a: &Summary, b: &Summary) -> Option<f64> {
    (a.mean > 0.0 && b.mean > 0.0).then(|| {
        let r = b.mean / a.mean;
        r * ((a.std / a.mean).powi(2) + (b.std / b.mean).powi(2)).sqrt()
    })
}
