//! One entity's share of the package energy measured over a block: what
//! `quietwatt.measure(share=...)` reports beside the machine's figure. The block
//! is one interval of the same transform as a recording's split ([`Attribution`]):
//! the package energy between the block's first and last reading, split among what
//! ran on the package's CPUs meanwhile by CPU time, from the accounting program's
//! context switches.

use crate::model::IdlePower;
use crate::timeline::{By, Entity};
use crate::transform::{Attribution, Options};
use crate::{names, AttributionError, Names, Result};
use quietwatt::sink::Sample;
use quietwatt::transform::Transform;
use quietwatt::{DomainId, Joules, SysRoot};
use serde::Serialize;

/// Whose share: this process, or the cgroup it runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Whose {
    /// The process (every thread of it).
    Process(u32),
    /// The cgroup (v2) the process runs in, and every process in it.
    CgroupOf(u32),
}

/// A block's share being measured: the accounting program runs from
/// [`BlockShare::start`] to [`BlockShare::finish`].
pub struct BlockShare {
    attribution: Attribution,
    entity: Entity,
    what: String,
    idle: IdlePower,
}

impl std::fmt::Debug for BlockShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockShare")
            .field("entity", &self.entity)
            .finish()
    }
}

/// One entity's share of a block.
#[derive(Debug, Clone, Serialize)]
pub struct BlockShareReport {
    /// `process` or `cgroup`.
    pub scope: &'static str,
    /// Which: `process 1234 (python3)`, `cgroup /user.slice/...`.
    pub entity: String,
    /// Its share of the packages' energy (dynamic plus idle share), joules.
    pub energy_j: f64,
    /// Of which dynamic.
    pub dynamic_j: f64,
    /// Of which its share of the idle power.
    pub idle_j: f64,
    /// Its CPU time on the packages' CPUs over the block, seconds.
    pub cpu_s: f64,
    /// The packages' energy that was split, joules.
    pub package_j: f64,
    /// How the idle power was set apart.
    pub idle_power: String,
    /// DRAM is reported whole, not split: its energy is not tied to CPU time.
    pub dram: &'static str,
    /// Slices the kernel could not hand over (their time went unattributed).
    pub dropped_slices: u64,
}

impl BlockShare {
    /// Loads the accounting program (root, or CAP_BPF and CAP_PERFMON; a kernel
    /// with BTF: the error says which is missing) to follow `whose`; `root` is
    /// where the energy is read, whose topology maps CPUs to packages.
    pub fn start(root: &SysRoot, whose: Whose, idle: IdlePower) -> Result<BlockShare> {
        let (by, entity, what) = match whose {
            Whose::Process(pid) => (
                By::Process,
                Entity::Process(pid),
                format!("process {pid} ({})", Names::new().process(pid)),
            ),
            Whose::CgroupOf(pid) => {
                let rel = own_cgroup(pid)?;
                let dir = names::cgroup2_mount()?.join(rel.trim_start_matches('/'));
                let id = names::cgroup_id(&dir).map_err(|source| AttributionError::Cgroup {
                    path: dir.clone(),
                    source,
                })?;
                (By::Cgroup, Entity::Cgroup(id), format!("cgroup {rel}"))
            }
        };
        let attribution = Attribution::open(&Options::new(by, idle), root)?;
        Ok(BlockShare {
            attribution,
            entity,
            what,
            idle,
        })
    }

    /// The share of the energy `energy[i]` of `channels[i]` measured between the
    /// readings at `t0_ns` and `t1_ns` (CLOCK_MONOTONIC, the block's first and last).
    pub fn finish(
        mut self,
        channels: &[DomainId],
        energy: &[Joules],
        t0_ns: u64,
        t1_ns: u64,
    ) -> BlockShareReport {
        self.attribution.begin(channels);
        self.attribution.feed(&Sample {
            t_ns: t1_ns,
            interval_ns: t1_ns.saturating_sub(t0_ns),
            missed: 0,
            merged: 0,
            freq_hz: 0.0,
            marks: Default::default(),
            energy,
        });
        self.attribution.settle();
        let t = self.attribution.totals();
        let mine = t.entities.get(&self.entity).copied().unwrap_or_default();
        let j = |uj: u64| uj as f64 / 1e6;
        BlockShareReport {
            scope: match self.entity {
                Entity::Process(_) => "process",
                Entity::Cgroup(_) => "cgroup",
            },
            entity: self.what,
            energy_j: j(mine.total_uj()),
            dynamic_j: j(mine.dynamic_uj),
            idle_j: j(mine.idle_uj),
            cpu_s: mine.cpu_ns as f64 / 1e9,
            package_j: j(t.energy_uj),
            idle_power: self.idle.label(),
            dram: "not split (reported whole, for the machine)",
            dropped_slices: t.dropped_slices,
        }
    }
}

/// The cgroup v2 path of process `pid` (`/proc/PID/cgroup`'s `0::` line).
fn own_cgroup(pid: u32) -> Result<String> {
    let path = std::path::PathBuf::from(format!("/proc/{pid}/cgroup"));
    let text = std::fs::read_to_string(&path)
        .map_err(|source| AttributionError::Cgroup { path, source })?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
        .ok_or(AttributionError::NoCgroup2)
}
