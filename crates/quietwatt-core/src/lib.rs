//! quietwatt's vocabulary, shared by the library, its emulator and its CLI: energy
//! units, sampling frequencies, RAPL domains and what a total adds up, and counters that turn raw readings
//! into exact integer totals, telling a wrap from a reset or a glitch.
//!
//! No I/O and no `unsafe`: everything here is arithmetic on values handed in, so the
//! emulator (the independent oracle the tests compare against) depends on this crate
//! alone, not on the readers it checks.
//!
//! # Example
//!
//! A 32-bit RAPL counter at 2^-16 J (65536 steps a joule) read every 10 ms: across
//! a wrap the advance is counted; a reading that steps back by half a joule is no
//! wrap (that would mean 65 kJ in 10 ms) and counts nothing.
//!
//! ```
//! use quietwatt_core::counter::{Counter, Plausible, StepKind, Wrap};
//! use quietwatt_core::{EnergyUnit, Joules, Watts};
//!
//! const J: u64 = 65_536;
//! let mut c = Counter::new(
//!     Wrap::Modulus(1 << 32),
//!     EnergyUnit::PowerOfTwo(16),
//!     Plausible::at(Watts(500.0)),
//! );
//! c.update((1 << 32) - J, 0).unwrap(); // 1 J before the wrap
//! assert_eq!(c.update(J, 10_000_000).unwrap().kind, StepKind::Wrap);
//! assert_eq!(c.total(), Joules(2.0));
//! c.update(40_000 * J, 20_000_000).unwrap(); // an implausible jump: not counted
//! assert_eq!(c.total(), Joules(2.0));
//! let s = c.update(40_000 * J - J / 2, 30_000_000).unwrap();
//! assert_eq!(s.kind, StepKind::BackStep);
//! assert_eq!(c.total(), Joules(2.0));
//! c.update(40_000 * J, 40_000_000).unwrap(); // rebased: counting goes on
//! assert_eq!(c.total(), Joules(2.5));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod counter;
pub mod document;
pub mod domain;
pub mod duration;
pub mod frequency;
pub mod units;

pub use counter::{Counter, Wrap};
pub use domain::{Domain, DomainId, Socket};
pub use frequency::Hertz;
pub use units::{EnergyUnit, Joules, Watts};
