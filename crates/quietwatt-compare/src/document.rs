//! The typed JSON documents of a series: [`RepeatDocument`] (`run -r N --json`,
//! `docs/schemas/repeat.schema.json`) and [`CompareDocument`] (`bench energy` /
//! `compare --json`, `docs/schemas/bench-energy.schema.json`), built from the one
//! [`Comparison`] and stamped through [`quietwatt::document`].

use crate::executor::Run;
use crate::result::{CommandSummary, Compared, Comparison, DomainSummary, Gate};
use quietwatt::document::{Document, RateFields};
use quietwatt::Rate;
use quietwatt_stats::repeat::Summary;
use serde::Serialize;

/// How the series was read, shared by both documents.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesContext {
    /// The mechanism's name.
    pub mechanism: &'static str,
    /// Whether the counters were the emulator's.
    pub emulated: bool,
    /// `true` where the figures are a power model's estimate (mechanism
    /// `estimate`), not measurements; absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    /// The rate every run used.
    #[serde(flatten)]
    pub rate: RateFields,
}

impl SeriesContext {
    /// Read through `mechanism` at `rate`.
    pub fn new(mechanism: &'static str, emulated: bool, rate: &Rate) -> Self {
        SeriesContext {
            mechanism,
            emulated,
            estimated: mechanism == quietwatt::Mechanism::Estimate.name(),
            rate: rate.into(),
        }
    }
}

/// A series cut short by a signal: the process exits with `exit_status`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stopped {
    /// 128 + the signal.
    pub exit_status: u8,
    /// The rounds asked for.
    pub runs_asked: u32,
}

fn stopped(c: &Comparison, exit_status: u8) -> Option<Stopped> {
    c.interrupted.map(|i| Stopped {
        exit_status,
        runs_asked: i.runs_asked,
    })
}

/// `run -r N --json`: one command's runs and their summaries.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatDocument<'a> {
    /// The command, one argument an entry.
    pub command: &'a [String],
    /// The total's energy, joules.
    pub energy_j: Option<&'a Summary>,
    /// The duration, seconds.
    pub duration_s: Option<&'a Summary>,
    /// Each domain's energy.
    pub domains: &'a [DomainSummary],
    /// Every measured run.
    pub per_run: &'a [Run],
    /// Runs measured whole.
    pub runs: u32,
    /// Warm-up runs.
    pub warmup: u32,
    /// How the intervals hold the measurement bounds.
    pub uncertainty_method: &'static str,
    /// How the series was read.
    #[serde(flatten)]
    pub context: SeriesContext,
    /// Set when a signal cut the series short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Stopped>,
}

impl<'a> RepeatDocument<'a> {
    /// The document of `only`, the one command of `c`, run as `command`;
    /// `exit_status` is what a stopped series exits with.
    pub fn new(
        c: &Comparison,
        only: &'a CommandSummary,
        command: &'a [String],
        context: SeriesContext,
        exit_status: u8,
    ) -> Self {
        RepeatDocument {
            command,
            energy_j: only.energy_j.as_ref(),
            duration_s: only.duration_s.as_ref(),
            domains: &only.domains,
            per_run: &only.per_run,
            runs: c.runs,
            warmup: c.warmup,
            uncertainty_method: c.uncertainty_method,
            context,
            interrupted: stopped(c, exit_status),
        }
    }
}

impl Document for RepeatDocument<'_> {
    const KIND: &'static str = "repeat";
}

/// `bench energy` / `compare --json`: every command, each against the reference,
/// and the gate.
#[derive(Debug, Clone, Serialize)]
pub struct CompareDocument<'a> {
    /// Rounds measured whole.
    pub runs: u32,
    /// Warm-up runs of each command.
    pub warmup: u32,
    /// The order, in words.
    pub order: &'a str,
    /// The order's seed.
    pub seed: u64,
    /// The reference's index.
    pub reference: usize,
    /// How the intervals hold the measurement bounds.
    pub uncertainty_method: &'static str,
    /// Each command.
    pub commands: &'a [CommandSummary],
    /// Each command but the reference against it.
    pub comparisons: &'a [Compared],
    /// The gate, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<&'a Gate>,
    /// The shell the commands ran in.
    pub shell: &'a str,
    /// The command run before each run (`null` when none).
    pub prepare: Option<&'a str>,
    /// How the series was read.
    #[serde(flatten)]
    pub context: SeriesContext,
    /// Set when a signal cut the series short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Stopped>,
    /// `--profile`: each function's change of self energy from the reference to
    /// the other command, most significant first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions: Option<&'a [crate::profiled::FunctionChange]>,
}

impl<'a> CompareDocument<'a> {
    /// The document of `c`, run in `shell` with `prepare` before each run;
    /// `exit_status` is what a stopped series exits with.
    pub fn new(
        c: &'a Comparison,
        shell: &'a str,
        prepare: Option<&'a str>,
        context: SeriesContext,
        exit_status: u8,
    ) -> Self {
        CompareDocument {
            runs: c.runs,
            warmup: c.warmup,
            order: &c.order,
            seed: c.seed,
            reference: c.reference,
            uncertainty_method: c.uncertainty_method,
            commands: &c.commands,
            comparisons: &c.comparisons,
            gate: c.gate.as_ref(),
            shell,
            prepare,
            context,
            interrupted: stopped(c, exit_status),
            functions: None,
        }
    }
}

impl Document for CompareDocument<'_> {
    const KIND: &'static str = "bench-energy";
}
