//! Where and how quietwatt reads RAPL: the root the system files are found under
//! ([`root`]), the CPUs and packages ([`topology`]), the CPU model ([`cpuinfo`]) and
//! the kernel's unit quirks ([`quirks`]); the mechanisms behind one trait
//! ([`Source`]: [`powercap`], [`perf`], [`msr`], and the buffered [`inkernel`] ones);
//! what each needs on this machine ([`doctor`], [`probe`]); every mechanism that
//! opens read over one interval and compared (`quietwatt check`'s [`consistency`]);
//! and the errors of all of it ([`error`], typed, each saying what the caller can
//! do).
//!
//! Each mechanism discovers its domains from the system under a [`SysRoot`] (never a
//! hard-coded list) and reads raw counter values into a caller-provided buffer, so
//! the sampling loop allocates nothing.
//!
//! A source is [`Mode::Polled`] (powercap, perf, msr: the sampler reads it at each
//! tick) or [`Mode::Buffered`] (ebpf, perf-ring: the kernel reads the counters at its
//! own rate and queues the readings, which the sampler collects with
//! [`Source::drain`] about once a second). Both go through the same engine (the
//! `quietwatt` crate's recordings and sessions): one meter, one ring, one writer.
//! This crate sits between the system calls (`quietwatt-sys`) and that engine, and
//! knows nothing of sampling rates, rings or outputs.
//!
//! # Example
//!
//! ```
//! use quietwatt_sources::{open, Selection, SysRoot};
//!
//! // The best mechanism this machine offers, or why there is none.
//! match open(&SysRoot::default(), None, &Selection::all()) {
//!     Ok(mut source) => {
//!         let mut raw = vec![0; source.channels().len()];
//!         source.read(&mut raw).expect("a reading");
//!         for (c, r) in source.channels().iter().zip(&raw) {
//!             println!("{}: {r} steps of {:?}", c.id, c.unit);
//!         }
//!     }
//!     Err(e) => eprintln!("no RAPL here: {e} ({:?})", e.kind()),
//! }
//! ```
#![deny(missing_docs)]

pub mod choose;
pub mod consistency;
pub mod cpuinfo;
pub mod doctor;
pub mod error;
pub mod inkernel;
pub mod listing;
pub mod msr;
pub mod perf;
pub mod powercap;
pub mod quirks;
pub mod root;
pub mod topology;

pub use error::{Error, ErrorKind, Result};
pub use root::SysRoot;

use quietwatt_core::counter::{Counter, Plausible, Wrap};
use quietwatt_core::domain::{Domain, DomainId};
use quietwatt_core::units::{EnergyUnit, Watts};
use quietwatt_core::Hertz;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// A way of reading RAPL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Mechanism {
    /// powercap sysfs: `/sys/class/powercap/intel-rapl:*/energy_uj`.
    Powercap,
    /// perf_event_open on the `power` PMU, read from user space.
    Perf,
    /// `/dev/cpu/N/msr` register reads.
    Msr,
    /// A BPF program reading the perf events in the kernel.
    Ebpf,
    /// A perf sampling group drained from its mmap ring.
    PerfRing,
    /// The local reader service (`quietwatt serve --socket`): another process
    /// reads the counters and answers over a Unix socket, coarsened by its access
    /// policy (the `quietwatt-reader` crate's client). Opened by path, never by
    /// [`open`]: it is not in [`Mechanism::ALL`], and nothing here probes it.
    Socket,
    /// Not a measurement: a power model's estimate from what the machine shows
    /// (busy CPUs), where nothing can measure (the `quietwatt-estimate`
    /// crate). Chosen by a model file, never by [`open`]; every report says
    /// ESTIMATED ([`Source::estimate`]).
    Estimate,
}

impl Mechanism {
    /// Every mechanism, in order of preference when the user names none
    /// (paper 002: perf_event is the fastest and safest reader).
    pub const ALL: [Mechanism; 5] = [
        Mechanism::Perf,
        Mechanism::Powercap,
        Mechanism::Msr,
        Mechanism::Ebpf,
        Mechanism::PerfRing,
    ];

    /// The name used on the command line and in every output.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Powercap => "powercap",
            Mechanism::Perf => "perf",
            Mechanism::Msr => "msr",
            Mechanism::Ebpf => "ebpf",
            Mechanism::PerfRing => "perf-ring",
            Mechanism::Socket => "socket",
            Mechanism::Estimate => "estimate",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a mechanism.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown mechanism '{0}': expected one of powercap, perf, msr, ebpf, perf-ring")]
pub struct UnknownMechanism(pub String);

impl FromStr for Mechanism {
    type Err = UnknownMechanism;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| UnknownMechanism(s.to_string()))
    }
}

/// One counter a source reads: what it measures, how to convert it, where it wraps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Channel {
    /// The domain and socket.
    pub id: DomainId,
    /// Energy of one raw step.
    pub unit: EnergyUnit,
    /// Where the raw value wraps.
    pub wrap: Wrap,
    /// What is read (file, device and register), for errors and listings.
    pub origin: PathBuf,
    /// The most the domain can draw as the system states it (the largest powercap
    /// constraint of the zone, or of its package for a core, uncore or dram zone that
    /// states none), when it states it; `None`: the domain's documented default
    /// ([`Domain::max_plausible_power`]).
    pub limit: Option<Watts>,
}

impl Channel {
    /// How much a stated limit is exceeded, at most, over an interval: short-term
    /// limits (PL2, PL4) and their excursions sit above the long-term one; the largest
    /// stated limit is doubled.
    pub const LIMIT_MARGIN: f64 = 2.0;

    /// The power above which an advance of this counter is not physically plausible:
    /// twice the stated limit, or the domain's generous default.
    pub fn plausible_power(&self) -> Watts {
        match self.limit {
            Some(w) if w.0 > 0.0 => Watts(w.0 * Self::LIMIT_MARGIN),
            _ => self.id.domain.max_plausible_power(),
        }
    }

    /// A counter for this channel, guarded by its plausible power.
    pub fn counter(&self) -> Counter {
        Counter::new(self.wrap, self.unit, Plausible::at(self.plausible_power()))
    }
}

/// How a source's readings reach the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// The sampler reads every channel at each tick ([`Source::read`]).
    Polled,
    /// The kernel reads the counters `freq` times a second and queues the readings;
    /// the sampler wakes `drain` times a second and collects them
    /// ([`Source::drain`]). [`Source::read`] still reads the same counters now,
    /// from user space: the recording's first reading.
    Buffered {
        /// The kernel's sampling rate.
        freq: Hertz,
        /// How often the sampler drains the queue.
        drain: Hertz,
    },
}

/// One reading a buffered source hands over: the raw values of every channel (in
/// [`Source::channels`] order) at `t_ns`.
#[derive(Debug, Clone, Copy)]
pub struct Reading<'a> {
    /// CLOCK_MONOTONIC nanoseconds of the reading.
    pub t_ns: u64,
    /// One raw value per channel.
    pub raw: &'a [u64],
    /// Readings the kernel could not queue just before this one (a full ring): this
    /// reading's deltas hold their energy.
    pub lost: u64,
}

/// What [`Source::label`] says of a source whose counters are software events
/// standing in for RAPL (tests, benchmarks, `--stand-in` runs): its figures are
/// not energy, and no report may say they were read through a real mechanism.
pub const STAND_IN_LABEL: &str = "stand-in (software events, not energy)";

/// Figures that are a power model's estimate, not a measurement
/// ([`Mechanism::Estimate`]): every report says ESTIMATED with the model's
/// source, and each figure's uncertainty holds the model's stated error.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Estimated {
    /// Where the model comes from: its file, or the guess it is.
    pub model: String,
    /// The CPU it was made for.
    pub cpu: String,
    /// What it predicts from (`busy_cpus`, and `busy_cpu_ghz`,
    /// `instructions_gps`, `cycles_gps` where the fit used has them).
    pub inputs: Vec<String>,
    /// Each channel's stated error of the power, W, in the order of
    /// [`Source::channels`]: its energy's uncertainty holds this much per
    /// second.
    pub error_w: Vec<f64>,
    /// What the model cannot see.
    pub blind_to: Vec<String>,
}

impl Estimated {
    /// An estimate by `model` for `cpu` from `inputs`, stating `error_w` per
    /// channel, blind to `blind_to`.
    pub fn new(
        model: String,
        cpu: String,
        inputs: Vec<String>,
        error_w: Vec<f64>,
        blind_to: Vec<String>,
    ) -> Estimated {
        Estimated {
            model,
            cpu,
            inputs,
            error_w,
            blind_to,
        }
    }
}

/// Counters read by another process on this one's behalf (the local reader
/// service, `Mechanism::Socket`), and what it granted: in every report beside
/// the figures (`"via"` in the JSON documents), so that readings coarsened by
/// a policy are never taken for the counters read here.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Via {
    /// The service's socket.
    pub socket: PathBuf,
    /// The mechanism the service reads the counters with (`powercap`, `perf`...).
    pub mechanism: String,
    /// Whether the service reads quietwatt's emulator, not RAPL.
    pub emulated: bool,
    /// The user id the kernel named to the service (`SO_PEERCRED`).
    pub uid: u32,
    /// The finest interval between two different readings granted, s.
    pub interval_s: f64,
    /// Each energy is rounded down to a multiple of this, µJ.
    pub resolution_uj: u64,
    /// Whether finer was asked for, and the policy coarsened it.
    pub coarsened: bool,
}

impl Via {
    /// What a service at `socket` granted.
    pub fn new(
        socket: PathBuf,
        mechanism: String,
        emulated: bool,
        uid: u32,
        interval_s: f64,
        resolution_uj: u64,
        coarsened: bool,
    ) -> Via {
        Via {
            socket,
            mechanism,
            emulated,
            uid,
            interval_s,
            resolution_uj,
            coarsened,
        }
    }
}

/// A mechanism opened on a set of channels, ready to be read again and again.
pub trait Source: Send {
    /// Which mechanism this is; for a stand-in (software events or files read in
    /// place of RAPL, in tests and benchmarks), the mechanism it costs the same as,
    /// which is what placement and cost reasoning need. See [`Source::label`].
    fn mechanism(&self) -> Mechanism;

    /// What reports and file metadata call this source: the mechanism's name, or
    /// for a stand-in a name of its own, so that no figure measured on a stand-in
    /// is labelled with a real mechanism.
    fn label(&self) -> &'static str {
        self.mechanism().name()
    }

    /// The channels, in the order [`Source::read`] fills its buffer.
    fn channels(&self) -> &[Channel];

    /// Reads every channel's raw value into `out` (`out.len() == channels().len()`).
    /// Called on the hot path: no allocation.
    fn read(&mut self, out: &mut [u64]) -> Result<()>;

    /// Things found while opening that are not errors (duplicate zones, absent
    /// registers, unit quirks applied), for listings.
    fn notes(&self) -> &[String] {
        &[]
    }

    /// The CPU of each counter [`Source::read`] reads, one entry per read (a CPU
    /// read twice appears twice); empty when no read is tied to a CPU (sysfs files,
    /// emulated devices). A perf event or an MSR of another CPU is read through an
    /// inter-processor interrupt, 80 times the cost of a local read on the
    /// project's VM, so the engine's sampler runs where these are.
    fn read_cpus(&self) -> Vec<u32> {
        Vec::new()
    }

    /// How far a reading may lag the energy it stands for, when that is more
    /// than the counters' own update (about 1 ms): a source whose values change
    /// only every so often (the reader service, by its policy's interval and
    /// the age of its readings). The meter counts at least this much of each
    /// domain's energy as each figure's timing uncertainty. `None` (the
    /// default): RAPL's own update, as the meter sees it.
    fn update_interval(&self) -> Option<Duration> {
        None
    }

    /// Where the counters are read by another process on this one's behalf
    /// (the reader service): every report says so. `None` (the default): read
    /// here.
    fn via(&self) -> Option<&Via> {
        None
    }

    /// Where the figures are a model's estimate, not a measurement: what
    /// model, and the error it states. `None` (the default): measured.
    fn estimate(&self) -> Option<&Estimated> {
        None
    }

    /// Polled (the default) or buffered in the kernel.
    fn mode(&self) -> Mode {
        Mode::Polled
    }

    /// Buffered sources: starts the kernel's sampling; called once, just before the
    /// recording's first [`Source::read`]. Nothing to do for a polled source.
    fn start(&mut self) -> Result<()> {
        Ok(())
    }

    /// Buffered sources: hands every reading queued since the last drain to `f`, in
    /// time order, each after the recording's first [`Source::read`]. With `last`,
    /// it first reads the counters from user space (the recording's last reading),
    /// stops the kernel's sampling, hands what was queued before that reading, and
    /// that reading last. Called on the hot path: no allocation. A polled source has
    /// nothing queued.
    fn drain(&mut self, last: bool, f: &mut dyn FnMut(&Reading<'_>)) -> Result<()> {
        let _ = (last, f);
        Ok(())
    }

    /// Buffered sources: what the kernel side did (samples taken, dropped, drains,
    /// the clock's gaps), for the self-accounting; `None` for a polled source.
    fn kernel_side(&self) -> Option<crate::inkernel::KernelSide> {
        None
    }
}

/// Which domains to measure: all of them, or those named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection(Option<Vec<Domain>>);

impl Selection {
    /// Every domain the machine exposes.
    pub fn all() -> Self {
        Selection(None)
    }

    /// Only these domains (on every socket).
    pub fn only(domains: Vec<Domain>) -> Self {
        Selection(Some(domains))
    }

    /// Keeps the channels this selection names; an asked domain that the machine does
    /// not expose is an error listing what it does expose.
    pub fn apply<T>(&self, items: Vec<T>, id: impl Fn(&T) -> DomainId) -> Result<Vec<T>> {
        let Some(wanted) = &self.0 else {
            return Ok(items);
        };
        for w in wanted {
            if !items.iter().any(|i| id(i).domain == *w) {
                let mut avail: Vec<&str> = items.iter().map(|i| id(i).domain.name()).collect();
                avail.sort();
                avail.dedup();
                return Err(Error::UnknownDomain {
                    asked: w.name().to_string(),
                    available: avail.join(", "),
                });
            }
        }
        Ok(items
            .into_iter()
            .filter(|i| wanted.contains(&id(i).domain))
            .collect())
    }
}

/// What a mechanism can do on this machine.
#[derive(Debug)]
pub struct Probe {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// Its channels, or why it cannot be used.
    pub result: Result<Vec<Channel>>,
    /// Things worth knowing that are not errors (duplicate zones left out, ...).
    pub notes: Vec<String>,
    /// Whether any of its counters changed within [`LIVENESS_WINDOW`]: `Some(false)`
    /// for counters that open and read but never move (a hypervisor exposing RAPL
    /// without backing it); `None` when it did not open or the watch failed.
    pub moves: Option<bool>,
}

impl Probe {
    /// Whether the mechanism can measure: it opens, reads, and its counters move.
    pub fn measures(&self) -> bool {
        self.result.is_ok() && self.moves == Some(true)
    }
}

/// Tries every mechanism under `root` and reports what each can read.
pub fn probe_all(root: &SysRoot) -> Vec<Probe> {
    Mechanism::ALL.into_iter().map(|m| probe(root, m)).collect()
}

/// Tries one mechanism: discovers its domains, reads each once, and watches the
/// counters for up to [`LIVENESS_WINDOW`] (returning at the first change).
pub fn probe(root: &SysRoot, mechanism: Mechanism) -> Probe {
    if matches!(mechanism, Mechanism::Ebpf | Mechanism::PerfRing) {
        // Loads, attaches and reads once, without sampling. It reads the `power`
        // PMU's events, so whether they move is perf's answer.
        let (result, notes) = crate::inkernel::probe(root, mechanism);
        let moves = result.is_ok().then(|| {
            open_one(root, Mechanism::Perf, &Selection::all())
                .and_then(|mut s| watch(s.as_mut(), LIVENESS_WINDOW))
                .ok()
        });
        return Probe {
            mechanism,
            result,
            notes,
            moves: moves.flatten(),
        };
    }
    match open_one(root, mechanism, &Selection::all()) {
        Ok(mut s) => {
            let mut buf = vec![0u64; s.channels().len()];
            let result = s.read(&mut buf).map(|()| s.channels().to_vec());
            let moves = result
                .is_ok()
                .then(|| watch(s.as_mut(), LIVENESS_WINDOW).ok())
                .flatten();
            Probe {
                mechanism,
                result,
                notes: s.notes().to_vec(),
                moves,
            }
        }
        Err(e) => Probe {
            mechanism,
            result: Err(e),
            notes: Vec::new(),
            moves: None,
        },
    }
}

/// How long a probe watches a mechanism's counters. RAPL updates them about every
/// millisecond and every domain draws some power, so 50 ms without a change in any
/// of them means they are not backed by hardware (a hypervisor that exposes the
/// RAPL events or registers and returns a constant, as this project's VM does for
/// `power/energy-psys`).
pub const LIVENESS_WINDOW: Duration = Duration::from_millis(50);

/// Whether any of `source`'s counters changes within `within` (polled every
/// millisecond; returns at the first change).
fn watch(source: &mut dyn Source, within: Duration) -> Result<bool> {
    let n = source.channels().len();
    let (mut first, mut now) = (vec![0u64; n], vec![0u64; n]);
    source.read(&mut first)?;
    let until = Instant::now() + within;
    loop {
        std::thread::sleep(Duration::from_millis(1));
        source.read(&mut now)?;
        if now != first {
            return Ok(true);
        }
        if Instant::now() >= until {
            return Ok(false);
        }
    }
}

/// Opens `mechanism` (or the best working one when `None`) on the selected domains.
pub fn open(
    root: &SysRoot,
    mechanism: Option<Mechanism>,
    selection: &Selection,
) -> Result<Box<dyn Source>> {
    match mechanism {
        Some(m) => open_one(root, m, selection),
        None => {
            let mut first_err = None;
            // Chosen for the user: the polled ones (the in-kernel mechanisms read the
            // same perf events as perf, at a cost only worth it when asked for).
            for m in [Mechanism::Perf, Mechanism::Powercap, Mechanism::Msr] {
                match open_one(root, m, selection) {
                    // Chosen for the user: it must measure something (a hypervisor can
                    // expose RAPL events that always read 0). Up to 50 ms, only here.
                    Ok(mut s) => match watch(s.as_mut(), LIVENESS_WINDOW) {
                        Ok(true) => return Ok(s),
                        Ok(false) => {
                            first_err.get_or_insert(Error::NoDomains {
                                mechanism: m.name(),
                                root: root.dir().to_path_buf(),
                                why: format!(
                                    "its {} counter(s) did not change in {} ms: they are not backed by RAPL hardware (a hypervisor exposing constant RAPL events); asking for the {} mechanism by name reads them anyway",
                                    s.channels().len(),
                                    LIVENESS_WINDOW.as_millis(),
                                    m.name()
                                ),
                            });
                        }
                        Err(e) => {
                            first_err.get_or_insert(e);
                        }
                    },
                    // A domain that exists nowhere is the user's error, not the mechanism's.
                    Err(e @ Error::UnknownDomain { .. }) => return Err(e),
                    Err(e) => {
                        if first_err.is_none() && !matches!(e, Error::MechanismUnavailable { .. }) {
                            first_err = Some(e);
                        }
                    }
                }
            }
            Err(first_err.unwrap_or_else(|| Error::NoDomains {
                mechanism: "any mechanism",
                root: root.dir().to_path_buf(),
                why: "no mechanism could open a RAPL counter".into(),
            }))
        }
    }
}

fn open_one(root: &SysRoot, m: Mechanism, selection: &Selection) -> Result<Box<dyn Source>> {
    match m {
        Mechanism::Powercap => Ok(Box::new(powercap::Powercap::open(root, selection)?)),
        Mechanism::Perf => Ok(Box::new(perf::PerfEvents::open(root, selection)?)),
        Mechanism::Msr => Ok(Box::new(msr::Msr::open(root, selection)?)),
        // Buffered in the kernel, at the default rates (`inkernel::open` takes others).
        Mechanism::Ebpf | Mechanism::PerfRing => crate::inkernel::open_source(root, m, selection),
        // A process of its own, found by its socket's path (quietwatt-reader).
        Mechanism::Socket => Err(Error::MechanismUnavailable {
            mechanism: m.name(),
            why: "the reader service is read through its socket: give --socket PATH (or QUIETWATT_SOCKET)".into(),
        }),
        // Not a reading of counters: a model, given by its file.
        Mechanism::Estimate => Err(Error::MechanismUnavailable {
            mechanism: m.name(),
            why: "an estimate needs a power model: give --power-model FILE (or QUIETWATT_POWER_MODEL), made by `quietwatt calibrate` on a machine with RAPL".into(),
        }),
    }
}
