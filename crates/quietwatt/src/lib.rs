//! quietwatt: energy of CPUs and DRAM through RAPL, read correctly (units, wraps,
//! domain hierarchy, timing) and cheaply.
//!
//! The crate is organised one module per concept. The first three live in the
//! `quietwatt-core` crate (no I/O, no unsafe; the emulator depends on it alone) and
//! are re-exported here under the same paths:
//! - [`domain`]: RAPL domains, sockets, which domain contains which, totals.
//! - [`units`]: joules, watts, and the size of one raw counter step.
//! - [`counter`]: raw readings to wrap-corrected integer totals, with resets and
//!   glitches told apart from wraps.
//! - [`root`]: the directory `/sys`, `/dev` and `/proc` are looked up under.
//! - [`topology`]: online CPUs and their packages.
//! - [`cpuinfo`]: vendor, family and model from `/proc/cpuinfo`.
//! - [`quirks`]: the energy-unit exceptions of some CPU models, as one table.
//! - [`source`]: the mechanisms that read RAPL (powercap, perf_event, MSR), behind one trait.
//! - [`meter`]: a source plus its counters, sampled into corrected energy.
//! - [`ticker`]: rates, absolute deadlines, the timerfd pacer.
//! - [`sampler`]: the sampler thread: timerfd ticks, fixed-size records into a lock-free ring.
//! - [`retry`]: what the sampling loops do with a read error that may pass (retry, skip the tick, give up).
//! - [`writer`]: the writer thread: drains the ring, converts to joules, feeds a sink.
//! - [`sink`]: output formats (CSV, JSON Lines) behind one trait, and their metadata.
//! - [`transform`]: I/O-free stages between the meter and the sinks (sample in,
//!   rows and totals out), run by the writer as a sink ([`transform::Transformed`]).
//! - [`document`]: the typed, schema-stamped JSON documents of `run` and `record`
//!   (the stamp itself is `quietwatt-core`'s).
//! - [`record`]: the two threads started and stopped together; [`command`]: the same
//!   around a child process.
//! - [`inkernel`]: the ebpf and perf-ring mechanisms, which sample in the kernel and are
//!   drained in batches into the same records and sinks.
//! - [`adaptive`]: the sampling rate that follows the machine's load.
//! - [`safe_rate`]: the one rule for a safe rate (no counter may wrap twice between
//!   two reads), asked by record, session and the CLI.
//! - [`overhead`]: what measuring costs, accounted on every run.
//! - [`session`]: a region of a program measured from inside it (start/stop reads, or
//!   a sampler thread), with snapshots, samples and named windows.
//!
//! This crate does one job: measure. The system calls live in `quietwatt-sys`;
//! `check`'s cross-check of the mechanisms is the sources'
//! (`quietwatt::source::consistency`). The statistics, repeated runs compared, the
//! SVG plots and the seeded generator are `quietwatt-stats`, which needs nothing of
//! the engine. The sampler's benchmark against its floor (`bench sampler`) is the
//! overhead lab's (`quietwatt-lab`), as are its experiments; OS events and traces
//! (`quietwatt-events`) and the energy models of OS events (`quietwatt-model`) are
//! crates of their own too. Those crates depend on this one, never the reverse.
//!
//! Cargo features (see the crate's `Cargo.toml`), all off by default, so that
//! `cargo add quietwatt` reads powercap, msr, perf and perf-ring with a Rust
//! toolchain only: `bpf` builds the ebpf mechanism, with libbpf and clang (the CLI
//! and the Python wheel ask for it); `parquet` the Parquet sink; `testing` exposes
//! the software stand-ins for RAPL used by tests and benchmarks.
//!
//! # Example
//!
//! ```
//! use quietwatt::{Hertz, Session, SessionConfig};
//!
//! fn region() -> Result<(), quietwatt::Error> {
//!     // A closure between two readings: no thread, the cheapest measurement.
//!     let (sum, report) = quietwatt::measure(SessionConfig::from_env(), || {
//!         (0..1_000_000u64).sum::<u64>()
//!     })?;
//!     println!("{sum}: {:?} ± {:?} ({})", report.total(), report.total_uncertainty(),
//!         report.energy.total_rule);
//!
//!     // A long region guarded by a sampler thread at 200 Hz, with a named window.
//!     let rate = Hertz::new(200.0).expect("a valid rate");
//!     let session = Session::start(SessionConfig::from_env().rate(rate))?;
//!     session.begin_window("phase 1")?;
//!     std::thread::sleep(std::time::Duration::from_millis(20));
//!     let phase = session.end_window("phase 1")?;
//!     let so_far = session.snapshot()?;
//!     let rows = session.drain_samples(); // (t_ns, joules per channel) since the start
//!     let report = session.stop()?; // also on drop: the thread is always joined
//!     println!("{:?} of {:?} in {} rows", phase.total(), so_far.total(), rows.len());
//!     // The JSON object of `quietwatt run --json`.
//!     println!("{}", serde_json::to_string(&report).expect("a report serializes"));
//!     Ok(())
//! }
//!
//! // Runs on any machine: without RAPL the session says why it cannot start.
//! if let Err(e) = region() {
//!     eprintln!("{e}");
//! }
//! ```
#![deny(missing_docs)]

pub use quietwatt_core::{counter, domain, duration, frequency, units};

pub mod error;
pub use quietwatt_sources::{cpuinfo, doctor, quirks, root, topology};

pub use counter::{Counter, Wrap};
pub use domain::{Domain, DomainId, Socket};
pub use error::{Error, ErrorKind, Result, SetupStep, SourceError};
pub use root::SysRoot;
pub use units::{EnergyUnit, Joules, Watts};

pub mod adaptive;
pub mod command;
pub mod document;
pub mod fallback;
pub mod measurement;
pub mod meter;
pub mod overhead;
pub mod record;
pub mod retry;
pub mod safe_rate;
pub mod sampler;
pub mod session;
pub mod sink;
/// The labelled estimate where nothing can measure (`quietwatt-estimate`):
/// the power model, its calibration sweep and the estimating source.
pub use quietwatt_estimate as estimate;

/// The local reader service's client and protocol (`quietwatt-reader`): what a
/// [`Session`] reads through when it cannot open the counters itself.
pub use quietwatt_reader as reader;
/// The mechanisms (the `quietwatt-sources` crate, under the path it always had).
pub use quietwatt_sources as source;
/// The buffered mechanisms live with the others, in `source`; the old path stays.
pub use source::inkernel;
pub mod kernel_figures;
pub mod ticker;
pub mod transform;
pub mod warning;
pub mod writer;

pub use measurement::Measurement;
pub use meter::{EnergyReport, Meter};
pub use overhead::Overhead;
pub use record::{EngineConfig, Recording, Stopped};
pub use retry::RetryPolicy;
pub use sampler::{FreqArg, Rate};
pub use session::{measure, SampleRow, Session, SessionConfig};
pub use sink::{Format, Metadata, Sink};
pub use source::{Mechanism, Selection, Source};
pub use ticker::Hertz;
pub use warning::{Warning, WarningKind};
