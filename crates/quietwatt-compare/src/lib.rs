//! Commands compared by their energy, as hyperfine compares their time.
//!
//! The parts, each testable without the others:
//!
//! - [`executor`]: the [`Executor`] trait (run one command once, measured, and
//!   return its typed [`Run`]), the real [`MeterExecutor`] (a fresh meter per run,
//!   through the engine's `command`), and [`MockExecutor`] (scripted energies and
//!   times, no process) for tests.
//! - [`schedule`]: the scheduler. Warm-up runs (unmeasured, discarded), then rounds
//!   in which every command runs once in an order shuffled with a seeded rng, so
//!   that a drift of the machine (temperature, frequency, other load) and the
//!   position in a round fall on every command alike; a callback per run (progress
//!   output); a stop request keeps the whole rounds completed.
//! - [`result`]: the typed, `Serialize` result ([`Comparison`]): each command's
//!   summaries (the engine's `repeat` statistics), each command against the
//!   reference (the ratio of energies with its interval, Welch's t test, the rank
//!   test, a verdict), and the CI gate (`--fail-if-more-than`).
//! - [`document`]: the typed, schema-stamped JSON documents of a series
//!   ([`document::RepeatDocument`], [`document::CompareDocument`]).
//! - [`export`]: what every export writes from that one result: the Markdown table
//!   (with the verdicts), the CSV of runs, hyperfine's summary line, the per-run line.
//!
//! `quietwatt run -r N` is the scheduler with one command; `quietwatt compare` with
//! two or more. The command line adds only flags, wording and exit codes.

#![deny(missing_docs)]

pub mod document;
pub mod executor;
pub mod export;
pub mod result;
pub mod schedule;

pub use executor::{DomainRun, Executor, MeterExecutor, MockExecutor, Run};
pub use result::{CommandSummary, Compared, Comparison, Gate};
pub use schedule::{schedule, Event, Outcome, Plan, RunKind, ScheduleError};
