//! A RAPL device that real programs read as if it were `/`.
//!
//! [`Emulator::mount`] mounts one FUSE filesystem at a directory and serves, from
//! memory, the kernel's RAPL interfaces with the exact layouts of a real machine:
//! CPU topology (`sys/devices/system/cpu`), `proc/cpuinfo`, powercap zones
//! (`sys/devices/virtual/powercap`, `sys/class/powercap` links), MSRs
//! (`dev/cpu/N/msr`) and the perf PMU description (`sys/devices/power`). Every
//! counter read is computed when it happens from an exact ground truth (the
//! integral of a configured power profile), so a test can compare what a reader
//! measured with what was really served ([`Emulator::served`]) and drawn
//! ([`Emulator::truth`]), across wraps, unit quirks and injected faults: access
//! errors, vanishing zones, frozen or garbage counters, and *steps* (a counter
//! reset, a backward step, an implausible jump; [`Emulator::steps`] tells when
//! each took effect, and [`Served`] bounds what a correct reader may lose to
//! them). psys is served as on Sapphire/Emerald Rapids servers: on the psys
//! master package's CPUs only, 0 elsewhere, or 0 everywhere when the BIOS
//! disabled it ([`EmulatorConfig::with_psys_master`],
//! [`EmulatorConfig::with_psys_disabled`]).
//!
//! Point a reader at it with a root directory (`quietwatt --root DIR`), or run
//! any program in a private mount namespace where the emulator is grafted over
//! the standard paths: `sh DIR/.quietwatt-emulator/enter.sh COMMAND` (see the
//! crate README).
//!
//! Modules, one per concept:
//! - [`config`]: what to emulate ([`EmulatorConfig`]), power profiles and traces.
//! - `units`: RAPL energy units and per-model quirks.
//! - `truth`: the exact energy, raw counts, and the record of served values.
//! - [`fault`]: faults to inject ([`Fault`]).
//! - [`follow`]: a package power that follows this machine's real load
//!   ([`LoadFollowing`]), the known truth of attribution tests; with
//!   `per_ghz_w`, also each busy CPU's emulated frequency.
//! - [`cpufreq`]: emulated CPU frequencies ([`CpuFreq`]): each CPU's
//!   `cpufreq/` as acpi-cpufreq shows it, its limits writable by root.
//! - `layout`: the tree of files served; `cpuinfo`: `/proc/cpuinfo`.
//! - [`msr`]: the register file behind `/dev/cpu/N/msr`.
//! - `namespace`: the `enter.sh` script.
//! - `fs`: the FUSE glue; `emulator`: the mounted handle.
#![deny(missing_docs)]

mod child;
pub mod config;
pub mod cpufreq;
mod cpuinfo;
pub mod duration;
mod emulator;
pub mod error;
pub mod fault;
pub mod follow;
mod fs;
mod layout;
pub mod msr;
mod namespace;
mod shared;
mod truth;
mod units;
mod vendor;

pub use child::ChildEmulator;
pub use config::{
    DomainWatts, Domains, EmulatorConfig, LoadStep, PowerProfile, Trace, TracePoint, Vendor,
};
pub use cpufreq::CpuFreq;
pub use emulator::{serves, Emulator, FS_NAME};
pub use error::{Error, Result};
pub use fault::{Fault, FaultKind, Microjoules};
pub use follow::LoadFollowing;
pub use shared::{CounterStep, DomainTruth, FollowedSocket, TruthReport};
pub use truth::{Mechanism, Served};
