//! quietwatt-lab, the overhead lab: measurements of measurement (papers 000 and
//! 002), so that a user can show on their own machine what monitoring costs and
//! whether it changed their result. It runs on the `quietwatt` engine and is used
//! by the command line (`quietwatt bench sampler|latency|workload|overhead`); the engine
//! never depends on it.
//!
//! - the papers' statistics (IQR outliers, one-sided Wilcoxon rank-sum,
//!   Holm-Bonferroni, Hodges-Lehmann shift) are [`quietwatt_stats`]: the events, the
//!   models and the command line use them too.
//! - [`bench`](mod@bench): the sampler's loop against a floor and naive loops
//!   (paper 002, Fig. 5: `quietwatt bench sampler`), and [`bench::StandIn`], a
//!   source that preads a real file where no RAPL opens.
//! - [`latency`]: the cost of each primitive a reader is built from (paper 002,
//!   Table III), timed with serialized rdtsc.
//! - [`workload`]: EP-like, CG-like and idle kernels that time their own solve.
//! - [`experiment`]: plans of workloads × monitors × frequencies × repetitions, run
//!   interleaved, recorded to a resumable CSV, analysed into the Appendix A table;
//!   its parts are [`plan`], [`results`], [`run`], [`analysis`], [`report`] and
//!   [`figures`], each re-exported there.
//! - [`figures`]: box plots of run time per monitor and frequency, and lines against
//!   the sampling frequency, as SVG (drawn by [`quietwatt_stats::plot`], which the energy
//!   models use too).
//! - `png` (the `png` cargo feature, on by default): those plots rasterized to PNG,
//!   for viewers that show no SVG.

//!
//! # Example
//!
//! ```
//! use quietwatt_lab::workload::{self, Kind, Spec};
//!
//! // A small EP-like solve, timed by itself (setup is not in `solve_s`).
//! let solved = workload::run(Spec { kind: Kind::Ep, size: 1 << 12, threads: 1 })
//!     .expect("a valid size and thread count");
//! println!("{}: {:.6} s ({})", solved.spec.kind, solved.solve_s, solved.detail);
//! assert!(solved.solve_s >= 0.0);
//! ```
#![deny(missing_docs)]

pub mod analysis;
pub mod bench;
pub mod experiment;
pub mod figures;
pub mod latency;
mod os;
pub mod plan;
#[cfg(feature = "png")]
pub mod png;
pub mod report;
pub mod results;
pub mod run;
pub mod workload;
