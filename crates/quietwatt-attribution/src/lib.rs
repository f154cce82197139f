//! Who used the energy: each package interval's energy split among the processes
//! or cgroups that ran on its CPUs, at context-switch granularity, with nothing
//! lost or counted twice.
//!
//! - [`split`]: exact integer splitting (largest remainder).
//! - [`model`]: how one interval is split: the idle part set apart
//!   ([`IdlePower`]), the dynamic part by CPU time, the idle part by CPU time over
//!   the package's capacity; conserved exactly ([`Split::accounted_uj`]).
//! - [`splitter`]: a whole sample split, generic over what an entity is (a process
//!   or cgroup here, a call stack for a profiler): sample and CPU time per package
//!   in, [`Row`]s and [`Totals`] out, no I/O ([`EnergySplitter`]).
//! - [`transform`]: attribution as an engine transform ([`Attribution`], a
//!   [`quietwatt::transform::Transform`]): the slices cut at each sample, the
//!   splitter fed; what `top`, `run --attribute` and the exporter read the totals
//!   of, with no output.
//! - [`timeline`]: who ran on each CPU when ([`Slice`], [`Running`]), and each
//!   entity's CPU time in any interval.
//! - `Tracker` (feature `bpf`): the accounting program on `sched_switch`, which
//!   reports each slice with its process and cgroup, stamped in the kernel on the
//!   energy samples' clock. Without the feature it reports itself unavailable.
//! - [`names`]: process and cgroup names (systemd units, containers), and cgroups
//!   quietwatt creates ([`OwnCgroup`]).
//! - [`sink`]: the long format, a row sink of the transform ([`LongFormatSink`]);
//!   with the transform, a recording's sink ([`Attributed`], [`open_sink`]).
//! - [`block`]: one entity's share of a block's package energy ([`BlockShare`]),
//!   for Python's `measure(share=...)`.
//! - [`bounded`]: per-entity counters of bounded number for an exporter (the
//!   heaviest lately, and "other"), monotone and conserved ([`Bounded`]).
//! - [`exporter`]: the split as a collector of `quietwatt-exporter`, over
//!   [`bounded`] and the [`sink`]'s totals.
//!
//! The model and its limits: `docs/attribution.md`.
//!
//! # Example
//!
//! Split 15 mJ measured over 1 ms on a two-CPU package whose idle power is 10 W,
//! between a process that ran the whole millisecond and one that ran a quarter:
//!
//! ```
//! use quietwatt_attribution::{IdlePower, Model, Split};
//!
//! let mut model = Model::new(IdlePower::Configured(10.0));
//! let mut split = Split::default();
//! model.split(15_000, 1_000_000, 2, &[1_000_000, 250_000], &mut split);
//! assert_eq!(split.idle_uj, 10_000);
//! // The 5 mJ dynamic part by CPU time: 4 mJ and 1 mJ.
//! assert_eq!(split.parts[0].dynamic_uj, 4_000);
//! assert_eq!(split.parts[1].dynamic_uj, 1_000);
//! // Nothing lost, nothing counted twice.
//! assert_eq!(split.accounted_uj(), 15_000);
//! ```
#![deny(missing_docs)]

pub mod block;
pub mod bounded;
#[cfg(feature = "bpf")]
mod bpf;
#[cfg(not(feature = "bpf"))]
#[path = "bpf_off.rs"]
mod bpf;
pub mod document;
pub mod error;
pub mod exporter;
pub mod kubernetes;
pub mod model;
pub mod names;
pub mod sink;
pub mod split;
pub mod splitter;
pub mod timeline;
pub mod transform;
pub mod tree;

pub use block::{BlockShare, BlockShareReport, Whose};
pub use bounded::Bounded;
pub use bpf::{Cost, Descendants, Tracker};
pub use document::AttributionTotals;
pub use error::{AttributionError, Result};
pub use kubernetes::{PodDirectory, PodIdentity};
/// The sink before the transform stage: the exporter's until it uses [`Attribution`].
pub use model::{IdlePower, Model, Part, Split};
pub use names::{Names, OwnCgroup};
pub use sink::{open_sink, Attributed, LongFormat, LongFormatSink};
pub use splitter::{EnergySplitter, EntityTotal, Row, RowKind, Totals, Usage};
pub use timeline::{By, Entity, Running, Slice, Timeline};
pub use transform::{Attribution, Options, SliceSource};

/// Whether this machine has a hardware PMU that counts cycles (a CPU-cycles perf
/// event opens on CPU 0): where it does, cycles could weight the share instead of
/// CPU time (not implemented: the project's VM has no PMU to test it on).
pub fn cycles_available() -> bool {
    // PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES.
    quietwatt_sys::perf::open_counting_event(0, 0, 0).is_ok()
}

/// How the split weighs what ran, for the output's metadata: CPU time, and whether
/// a PMU that could weight by cycles was detected.
pub fn weight_label() -> &'static str {
    if cycles_available() {
        "CPU time (a hardware PMU counting cycles was detected; weighting by cycles is not implemented)"
    } else {
        "CPU time (no hardware PMU here: cycles cannot weight the share)"
    }
}

/// Each CPU's package (socket number), indexed by CPU, from the topology under
/// `root` (the one the energy is read under).
pub fn cpu_sockets(root: &quietwatt::SysRoot) -> Result<Vec<Option<u32>>> {
    let topo = quietwatt::topology::Topology::read(root)
        .map_err(|e| AttributionError::Topology(e.to_string()))?;
    let mut out = Vec::new();
    for c in topo.cpus() {
        let i = c.id as usize;
        if out.len() <= i {
            out.resize(i + 1, None);
        }
        out[i] = Some(c.package.0);
    }
    Ok(out)
}
