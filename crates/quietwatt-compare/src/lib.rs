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
//! - [`profiled`]: `compare --profile`: each run profiled ([`profiled::ProfileExecutor`]),
//!   each function's change of self energy with its interval and Holm-adjusted
//!   significance ([`profiled::function_changes`]), a differential energy flame graph.
//! - [`export`]: what every export writes from that one result: the Markdown table
//!   (with the verdicts), the CSV of runs, hyperfine's summary line, the per-run line.
//!
//! `quietwatt run -r N` is the scheduler with one command; `quietwatt compare` with
//! two or more. The command line adds only flags, wording and exit codes.
//!
//! # Example
//!
//! Two commands compared with a scripted executor (no process runs; the real one
//! is [`MeterExecutor`]): ten shuffled rounds, then hyperfine's summary line.
//!
//! ```
//! use quietwatt_compare::executor::Scripted;
//! use quietwatt_compare::{export, schedule, Comparison, MockExecutor, Plan};
//!
//! let runs = |joules: f64| (0..10).map(|i| Scripted::ok(joules + 0.01 * i as f64, 0.1)).collect();
//! let mut executor = MockExecutor::new(vec![runs(1.0), runs(2.0)]);
//! let plan = Plan { runs: 10, warmup: 1, seed: 7, ignore_failure: false };
//! let outcome = schedule(&mut executor, 2, &plan, &mut || false, &mut |_| {})
//!     .expect("scripted runs never fail");
//! let names = ["old".to_string(), "new".to_string()];
//! let comparison = Comparison::new(&names, &plan, &outcome, 0, None);
//! let line = &export::summary_lines(&comparison)[0];
//! assert!(line.starts_with("'new' used 1.9") && line.ends_with("the energy of 'old' [1.91, 2.00] (95 % CI)"), "{line}");
//! println!("{line}");
//! ```

#![deny(missing_docs)]

pub mod document;
pub mod executor;
pub mod export;
pub mod profiled;
pub mod result;
pub mod schedule;

pub use executor::{DomainRun, Executor, MeterExecutor, MockExecutor, Run};
pub use result::{CommandSummary, Compared, Comparison, Gate};
pub use schedule::{schedule, Event, Outcome, Plan, RunKind, ScheduleError};
