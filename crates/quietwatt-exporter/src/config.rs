//! What an exporter is asked to do ([`ExporterConfig`]), what it says as it goes
//! ([`Notice`]) and why it could not start ([`Error`]).

use crate::collector::CollectError;
use quietwatt::inkernel::DEFAULT_DRAIN_HZ;
use quietwatt::{Domain, Hertz, Joules, Mechanism, Selection, SysRoot};
use std::time::Duration;

/// How long a failed domain waits before it is opened again, by default
/// ([`ExporterConfig::retry`]).
pub const RETRY: Duration = Duration::from_secs(10);

/// What an exporter reads and how often it publishes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExporterConfig {
    /// Where `/sys`, `/dev` and `/proc` are looked up.
    pub root: SysRoot,
    /// The mechanism to read; `None`: the best polled one that works here (perf,
    /// powercap or msr) and, when it is perf, those events sampled in the kernel
    /// where that works (ebpf, else perf-ring).
    pub mechanism: Option<Mechanism>,
    /// The domains to export.
    pub domains: Selection,
    /// Reads per second of each counter (taken by the kernel for ebpf and
    /// perf-ring), raised when a counter could wrap twice between reads.
    pub freq: Hertz,
    /// ebpf, perf-ring: how often the kernel's readings are collected.
    pub drain: Hertz,
    /// The exported values change at most this often.
    pub min_interval: Duration,
    /// Energies are rounded down to a multiple of this (above 0).
    pub resolution: Joules,
    /// How long a failed session waits before it is opened again ([`RETRY`]).
    pub retry: Duration,
    /// Whether the root is quietwatt's emulator (every energy series says so).
    pub emulated: bool,
    /// For tests and benchmarks on machines without RAPL: software counters of
    /// CPU 0 stand in for the RAPL events (cpu-clock as `package`, task-clock as
    /// `core`), read through `mechanism` perf, ebpf or perf-ring.
    pub stand_in: bool,
    /// The version `build_info` shows.
    pub version: String,
    /// Where nothing can measure (no RAPL, no permission) and no mechanism is
    /// named: estimate with this power model instead of serving no energy
    /// (every energy series then says `mechanism="estimate"` and
    /// `estimated="true"`).
    pub power_model: Option<quietwatt::fallback::ModelChoice>,
}

impl ExporterConfig {
    /// Every domain under `root`, at 10 Hz, published every second to the 10 mJ.
    pub fn new(root: SysRoot) -> ExporterConfig {
        ExporterConfig {
            root,
            mechanism: None,
            domains: Selection::default(),
            freq: Hertz::clamped(10.0),
            drain: Hertz::clamped(DEFAULT_DRAIN_HZ),
            min_interval: Duration::from_secs(1),
            resolution: Joules(0.01),
            retry: RETRY,
            emulated: false,
            stand_in: false,
            version: env!("CARGO_PKG_VERSION").to_string(),
            power_model: None,
        }
    }
}

/// What the exporter tells its caller as it goes (the caller words it).
#[derive(Debug)]
#[non_exhaustive]
pub enum Notice {
    /// Left to choose, the best polled mechanism here is not perf, so the kernel
    /// cannot sample the counters (ebpf and perf-ring read the perf RAPL events).
    PollingNotPerf(Mechanism),
    /// Every in-kernel mechanism was refused (each with why): perf is polled.
    InKernelRefused(Vec<(Mechanism, String)>),
    /// The kernel refused `mechanism`'s group: the same events are polled through
    /// perf instead.
    Fallback {
        /// perf-ring (or ebpf).
        mechanism: Mechanism,
        /// Why the kernel refused.
        reason: String,
    },
    /// The rate was raised so that no counter can wrap twice between reads.
    RateRaised {
        /// The rate asked for.
        from: Hertz,
        /// The rate used.
        to: Hertz,
    },
    /// A session's sampler failed: its domains are marked down (their energy kept)
    /// and opened again every [`ExporterConfig::retry`].
    DomainFailed {
        /// The domains it read.
        domains: Vec<Domain>,
        /// Why.
        error: String,
        /// Whether other sessions still serve the other domains.
        others_served: bool,
        /// How long until the next try.
        retry: Duration,
    },
    /// A failed session's domains are read again, counting on from where they
    /// stopped.
    DomainBack {
        /// The domains it reads.
        domains: Vec<Domain>,
    },
    /// A collector failed: it is no longer asked, the rest goes on.
    CollectorFailed {
        /// Its [`crate::Collector::name`].
        collector: String,
        /// Why.
        error: CollectError,
    },
}

/// Why an exporter could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine could not open or read the counters.
    #[error(transparent)]
    Engine(#[from] quietwatt::Error),
    /// A collector asked for the samples of a domain that is not read.
    #[error("{0} is not read by this exporter")]
    NotRead(Domain),
    /// The stand-ins are perf software counters: they need perf, ebpf or perf-ring.
    #[error("the stand-in counters are perf software events: read them with the perf, ebpf or perf-ring mechanism")]
    StandInNeedsPerf,
}

impl From<quietwatt::SourceError> for Error {
    fn from(e: quietwatt::SourceError) -> Error {
        Error::Engine(e.into())
    }
}
