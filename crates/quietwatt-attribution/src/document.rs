//! The attribution's totals as `record --attribute --json` prints them (its
//! `attribution` object, `docs/schemas/record.schema.json`): the package energy,
//! what was attributed and not, and the entities that used the most; and a
//! command's share of it (`run --attribute --json`'s `share`, [`CommandShare`]).

use crate::names::Names;
use crate::splitter::{EntityTotal, Totals};
use serde::Serialize;

/// Microjoules to joules.
fn j(uj: u64) -> f64 {
    uj as f64 / 1e6
}

/// A split's totals, with its top entities.
#[derive(Debug, Clone, Serialize)]
pub struct AttributionTotals {
    /// The package energy split, in joules.
    pub package_j: f64,
    /// The idle part of it.
    pub idle_part_j: f64,
    /// What was charged to an entity.
    pub attributed_j: f64,
    /// What was charged to none.
    pub unattributed_j: f64,
    /// DRAM energy over the same time.
    pub dram_j: f64,
    /// The intervals split.
    pub intervals: u64,
    /// Intervals whose CPU time and energy did not balance.
    pub unbalanced_intervals: u64,
    /// CPU slices lost in the kernel (their energy is in `unattributed_j`).
    pub dropped_slices: u64,
    /// The idle power fitted per package.
    pub fitted_idle_w: Vec<FittedIdle>,
    /// The entities that used the most, then `other` for the rest.
    pub entities: Vec<EntityEntry>,
}

/// The idle power fitted to one package.
#[derive(Debug, Clone, Serialize)]
pub struct FittedIdle {
    /// The package.
    pub package: u32,
    /// Its idle power, in watts.
    pub watts: f64,
    /// The intervals it was fitted over.
    pub intervals: u64,
}

/// One entity's share.
#[derive(Debug, Clone, Serialize)]
pub struct EntityEntry {
    /// `process`, `thread`, `cgroup`, ..., or `other`.
    pub kind: String,
    /// Its id (`null` for `other`).
    pub id: Option<String>,
    /// Its name.
    pub name: String,
    /// Its energy, in joules.
    pub joules: f64,
    /// The dynamic part of it.
    pub dynamic_j: f64,
    /// The idle part of it.
    pub idle_j: f64,
    /// Its CPU time, in seconds.
    pub cpu_s: f64,
}

impl EntityEntry {
    fn new(kind: &str, id: Option<String>, name: String, v: &EntityTotal) -> Self {
        EntityEntry {
            kind: kind.to_string(),
            id,
            name,
            joules: j(v.total_uj()),
            dynamic_j: j(v.dynamic_uj),
            idle_j: j(v.idle_uj),
            cpu_s: v.cpu_ns as f64 / 1e9,
        }
    }
}

impl AttributionTotals {
    /// `t` with its `n` entities that used the most (named through `names`), the
    /// rest summed as one `other` entry.
    pub fn top(t: &Totals, n: usize, names: &mut Names) -> Self {
        let (top, other) = t.top(n);
        let mut entities: Vec<EntityEntry> = top
            .iter()
            .map(|(e, v)| {
                let (id, name) = names.id_and_name(*e);
                EntityEntry::new(e.by_and_id().0.name(), Some(id), name, v)
            })
            .collect();
        if t.entities.len() > top.len() {
            entities.push(EntityEntry::new(
                "other",
                None,
                format!("{} others", t.entities.len() - top.len()),
                &other,
            ));
        }
        AttributionTotals {
            package_j: j(t.energy_uj),
            idle_part_j: j(t.idle_uj),
            attributed_j: j(t.accounted_uj() - t.unattributed.total_uj()),
            unattributed_j: j(t.unattributed.total_uj()),
            dram_j: j(t.dram_uj),
            intervals: t.intervals,
            unbalanced_intervals: t.unbalanced,
            dropped_slices: t.dropped_slices,
            fitted_idle_w: t
                .fitted_idle
                .iter()
                .map(|&(package, watts, intervals)| FittedIdle {
                    package,
                    watts,
                    intervals,
                })
                .collect(),
            entities,
        }
    }
}

/// A measured command's share of the energy, as `run --attribute --json` prints
/// it (its `share` object).
#[derive(Debug, Clone, Serialize)]
pub struct CommandShare {
    /// What was followed: `cgroup` or `process tree`.
    pub scope: &'static str,
    /// The command's energy, in joules.
    pub joules: f64,
    /// The dynamic part of it.
    pub dynamic_j: f64,
    /// The idle part of it.
    pub idle_j: f64,
    /// Its CPU time, in seconds.
    pub cpu_s: f64,
    /// The package energy over the same time.
    pub package_j: f64,
    /// How the idle power was set, in words.
    pub idle_power: String,
}

impl CommandShare {
    /// The share `c` of `t`, followed as `scope`, with the idle power `idle_power`.
    pub fn new(scope: &'static str, c: &EntityTotal, t: &Totals, idle_power: String) -> Self {
        CommandShare {
            scope,
            joules: j(c.total_uj()),
            dynamic_j: j(c.dynamic_uj),
            idle_j: j(c.idle_uj),
            cpu_s: c.cpu_ns as f64 / 1e9,
            package_j: j(t.energy_uj),
            idle_power,
        }
    }
}
