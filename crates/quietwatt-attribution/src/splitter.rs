//! The splitting core: a whole sample's package energy split among whatever ran,
//! generic over what an entity is: a process or a cgroup ([`crate::Entity`]) for
//! attribution, a call stack for a profiler.
//!
//! [`EnergySplitter::apply`] takes one sample (the energy of every channel) and,
//! per package, how long each entity ran on the package's CPUs in the sample's
//! interval ([`Usage`]: from the sched_switch slices for attribution, from stack
//! samples weighted by their period for a profiler). Each package's energy is made
//! whole microjoules from its running total (rounding never accumulates) and split
//! by the [`crate::Model`] (idle part apart, dynamic by CPU time, idle share by CPU
//! time over the capacity, exact in integers). Out come [`Row`]s (each entity's
//! part, the unattributed rest, the measured total, DRAM, which is not split) and
//! running [`Totals`]. No I/O: the same sample and usage always give the same rows.
//!
//! For every sample and package, Σ entity rows + the unattributed row == the total
//! row == the package's µJ of the sample, exactly.

use crate::model::{IdlePower, Model, Part, Split};
use quietwatt::domain::{Domain, DomainId};
use quietwatt::sink::Sample;
use quietwatt::units::Joules;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// How long each entity, the idle task, and nothing seen ran on one package's CPUs
/// in one interval, ns. The weights the split goes by: CPU time for attribution;
/// for a profiler, its stack samples' periods (nanoseconds of CPU time each).
#[derive(Debug, Clone)]
pub struct Usage<K = crate::Entity> {
    /// ns per entity that ran.
    pub by_entity: HashMap<K, u64>,
    /// ns of the idle task.
    pub idle_ns: u64,
    /// ns no slice (or sample) covered.
    pub unseen_ns: u64,
}

impl<K> Default for Usage<K> {
    fn default() -> Self {
        Usage {
            by_entity: HashMap::new(),
            idle_ns: 0,
            unseen_ns: 0,
        }
    }
}

impl<K> Usage<K> {
    /// Empties it for the next interval (its memory kept).
    pub fn clear(&mut self) {
        self.by_entity.clear();
        self.idle_ns = 0;
        self.unseen_ns = 0;
    }
}

/// What a row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowKind<K> {
    /// An entity's part: its share of the dynamic and of the idle part.
    Entity(K),
    /// What no entity got: the dynamic part when nothing ran, the idle CPUs' and
    /// unseen time's share of the idle part.
    Unattributed,
    /// The measured package energy (dynamic: less the idle part; idle: the idle
    /// part).
    Total,
    /// The package's DRAM energy, not split (all of it in `dynamic_uj`).
    Dram,
}

/// One row of one sample and package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row<K> {
    /// CLOCK_MONOTONIC ns of the sample.
    pub t_ns: u64,
    /// ns since the previous sample.
    pub interval_ns: u64,
    /// The package (socket number).
    pub package: u32,
    /// Whose.
    pub kind: RowKind<K>,
    /// The energy, µJ.
    pub part: Part,
    /// CPU time in the interval, ns: an entity's; the idle task's plus the unseen
    /// for `Unattributed`; the package's capacity (CPUs × interval) for `Total`;
    /// 0 for `Dram`.
    pub cpu_ns: u64,
}

/// One entity's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EntityTotal {
    /// Dynamic energy, µJ.
    pub dynamic_uj: u64,
    /// Idle share, µJ.
    pub idle_uj: u64,
    /// CPU time, ns.
    pub cpu_ns: u64,
}

impl EntityTotal {
    /// Dynamic plus idle share, µJ.
    pub fn total_uj(&self) -> u64 {
        self.dynamic_uj + self.idle_uj
    }
}

impl std::ops::AddAssign<&EntityTotal> for EntityTotal {
    fn add_assign(&mut self, d: &EntityTotal) {
        self.dynamic_uj += d.dynamic_uj;
        self.idle_uj += d.idle_uj;
        self.cpu_ns += d.cpu_ns;
    }
}

impl<'a> std::iter::Sum<&'a EntityTotal> for EntityTotal {
    fn sum<I: Iterator<Item = &'a EntityTotal>>(it: I) -> EntityTotal {
        it.fold(EntityTotal::default(), |mut acc, t| {
            acc += t;
            acc
        })
    }
}

/// Totals over the samples split so far, all packages.
#[derive(Debug, Clone)]
pub struct Totals<K = crate::Entity> {
    /// Per entity (since the last [`EnergySplitter::take_entities`], if any).
    pub entities: BTreeMap<K, EntityTotal>,
    /// What no entity got.
    pub unattributed: Part,
    /// The measured package energy, µJ.
    pub energy_uj: u64,
    /// Of which the idle part, µJ.
    pub idle_uj: u64,
    /// DRAM energy (not split), µJ.
    pub dram_uj: u64,
    /// Package intervals split.
    pub intervals: u64,
    /// Intervals whose parts did not add up to the measured energy: always 0 (the
    /// split is exact); counted so that a test can say so of a real recording.
    pub unbalanced: u64,
    /// Slices (or samples) the kernel could not hand over (a full ring), as of the
    /// last settle: their CPU time went unattributed.
    pub dropped_slices: u64,
    /// With a fitted idle power, each package's as of the last settle: (socket,
    /// watts, the intervals it rests on); empty otherwise or without a fit.
    pub fitted_idle: Vec<(u32, f64, u64)>,
}

impl<K> Default for Totals<K> {
    fn default() -> Self {
        Totals {
            entities: BTreeMap::new(),
            unattributed: Part::default(),
            energy_uj: 0,
            idle_uj: 0,
            dram_uj: 0,
            intervals: 0,
            unbalanced: 0,
            dropped_slices: 0,
            fitted_idle: Vec::new(),
        }
    }
}

impl<K: Clone + Ord> Totals<K> {
    /// The `n` entities that used the most energy (ties: the most CPU time, then
    /// the entity), and everything else added up as one "other": a bounded number
    /// of series however many processes or cgroups ran (what an exporter needs).
    /// The parts plus "other" add up to the entities' total exactly.
    pub fn top(&self, n: usize) -> (Vec<(K, EntityTotal)>, EntityTotal) {
        let mut all: Vec<(K, EntityTotal)> =
            self.entities.iter().map(|(e, t)| (e.clone(), *t)).collect();
        all.sort_by(|a, b| {
            (b.1.total_uj(), b.1.cpu_ns)
                .cmp(&(a.1.total_uj(), a.1.cpu_ns))
                .then(a.0.cmp(&b.0))
        });
        let rest = all.split_off(n.min(all.len()));
        let other = rest.iter().map(|(_, t)| t).sum();
        (all, other)
    }
}

impl<K> Totals<K> {
    /// Σ entities + unattributed, µJ: equal to [`Totals::energy_uj`] (while no
    /// entity totals were taken out).
    pub fn accounted_uj(&self) -> u64 {
        self.entities
            .values()
            .map(EntityTotal::total_uj)
            .sum::<u64>()
            + self.unattributed.total_uj()
    }
}

/// One package as the channels lay it out.
#[derive(Debug, Clone, Default)]
struct Package {
    socket: u32,
    /// Its package channels, DRAM channels (indexes into a sample's energies).
    pkg: Vec<usize>,
    dram: Vec<usize>,
    /// Its CPUs.
    cpus: u32,
}

/// Splits samples, keeping the totals (see the module's documentation).
#[derive(Debug)]
pub struct EnergySplitter<K = crate::Entity> {
    idle: IdlePower,
    /// Each CPU's package (socket number), indexed by CPU.
    cpu_socket: Vec<Option<u32>>,
    packages: Vec<Package>,
    /// The index in `packages` of each CPU's package.
    cpu_pkg: Vec<Option<usize>>,
    /// One per package: a fitted idle power is each package's own.
    models: Vec<Model>,
    /// Per channel: cumulative joules and the µJ already handed out.
    cum: Vec<(f64, u64)>,
    order: Vec<(K, u64)>,
    weights: Vec<u64>,
    split: Split,
    totals: Totals<K>,
}

impl<K: Clone + Ord + Hash> EnergySplitter<K> {
    /// Splits with `idle` set apart; `cpu_socket[cpu]` is each CPU's package
    /// (socket number), as the topology under the measured root says. Nothing is
    /// laid out until [`EnergySplitter::set_channels`].
    pub fn new(idle: IdlePower, cpu_socket: Vec<Option<u32>>) -> EnergySplitter<K> {
        EnergySplitter {
            idle,
            cpu_socket,
            packages: Vec::new(),
            cpu_pkg: Vec::new(),
            models: Vec::new(),
            cum: Vec::new(),
            order: Vec::new(),
            weights: Vec::new(),
            split: Split::default(),
            totals: Totals::default(),
        }
    }

    /// Lays out the split for samples whose energies are of `channels`, in this
    /// order: one package per socket with a package channel.
    pub fn set_channels(&mut self, channels: &[DomainId]) {
        let mut sockets: Vec<u32> = channels
            .iter()
            .filter(|c| c.domain == Domain::Package)
            .map(|c| c.socket.0)
            .collect();
        sockets.sort_unstable();
        sockets.dedup();
        let of = |s: u32, d: Domain| -> Vec<usize> {
            channels
                .iter()
                .enumerate()
                .filter(|(_, c)| c.socket.0 == s && c.domain == d)
                .map(|(i, _)| i)
                .collect()
        };
        self.packages = sockets
            .iter()
            .map(|&s| Package {
                socket: s,
                pkg: of(s, Domain::Package),
                dram: of(s, Domain::Dram),
                cpus: self.cpu_socket.iter().filter(|c| **c == Some(s)).count() as u32,
            })
            .collect();
        self.cpu_pkg = self
            .cpu_socket
            .iter()
            .map(|so| so.and_then(|so| sockets.iter().position(|&p| p == so)))
            .collect();
        self.models = sockets.iter().map(|_| Model::new(self.idle)).collect();
        self.cum = vec![(0.0, 0); channels.len()];
    }

    /// The packages laid out: [`EnergySplitter::apply`] wants one [`Usage`] each.
    pub fn packages(&self) -> usize {
        self.packages.len()
    }

    /// The index (into the usage [`EnergySplitter::apply`] takes) of `cpu`'s
    /// package; `None` for a CPU of no package measured.
    pub fn package_of(&self, cpu: u32) -> Option<usize> {
        self.cpu_pkg.get(cpu as usize).copied().flatten()
    }

    /// How the idle power is set apart.
    pub fn idle(&self) -> IdlePower {
        self.idle
    }

    /// Splits one sample: `usage[p]` is what ran on package `p`'s CPUs over the
    /// sample's interval (a missing one: nothing seen). The totals take it in; its
    /// rows are appended to `rows` when given, per package: the entities in their
    /// order, the unattributed rest, the total, and DRAM where the package has it.
    pub fn apply(
        &mut self,
        sample: &Sample<'_>,
        usage: &[Usage<K>],
        mut rows: Option<&mut Vec<Row<K>>>,
    ) {
        let (t_ns, interval_ns) = (sample.t_ns, sample.interval_ns);
        for p in 0..self.packages.len() {
            let pack = &self.packages[p];
            let e = whole_uj(&mut self.cum, &pack.pkg, sample.energy);
            let dram_uj = whole_uj(&mut self.cum, &pack.dram, sample.energy);
            let u = usage.get(p);
            self.order.clear();
            if let Some(u) = u {
                self.order
                    .extend(u.by_entity.iter().map(|(k, ns)| (k.clone(), *ns)));
            }
            self.order.sort_unstable();
            self.weights.clear();
            self.weights.extend(self.order.iter().map(|(_, ns)| *ns));
            self.models[p].split(e, interval_ns, pack.cpus, &self.weights, &mut self.split);
            let split = &self.split;
            let t = &mut self.totals;
            t.intervals += 1;
            t.energy_uj += e;
            t.idle_uj += split.idle_uj;
            t.dram_uj += dram_uj;
            t.unattributed.dynamic_uj += split.unattributed.dynamic_uj;
            t.unattributed.idle_uj += split.unattributed.idle_uj;
            if split.accounted_uj() != e {
                t.unbalanced += 1;
            }
            for ((k, ns), part) in self.order.iter().zip(&split.parts) {
                let total = EntityTotal {
                    dynamic_uj: part.dynamic_uj,
                    idle_uj: part.idle_uj,
                    cpu_ns: *ns,
                };
                match t.entities.get_mut(k) {
                    Some(v) => *v += &total,
                    None => {
                        t.entities.insert(k.clone(), total);
                    }
                }
            }
            let Some(rows) = rows.as_deref_mut() else {
                continue;
            };
            let row = |kind, part, cpu_ns| Row {
                t_ns,
                interval_ns,
                package: pack.socket,
                kind,
                part,
                cpu_ns,
            };
            for ((k, ns), part) in self.order.iter().zip(&split.parts) {
                rows.push(row(RowKind::Entity(k.clone()), *part, *ns));
            }
            let un_ns = u.map_or(0, |u| u.idle_ns + u.unseen_ns);
            rows.push(row(RowKind::Unattributed, split.unattributed, un_ns));
            let total = Part {
                dynamic_uj: e - split.idle_uj,
                idle_uj: split.idle_uj,
            };
            let capacity = interval_ns.saturating_mul(u64::from(pack.cpus));
            rows.push(row(RowKind::Total, total, capacity));
            if !pack.dram.is_empty() {
                let d = Part {
                    dynamic_uj: dram_uj,
                    idle_uj: 0,
                };
                rows.push(row(RowKind::Dram, d, 0));
            }
        }
    }

    /// The totals so far.
    pub fn totals(&self) -> &Totals<K> {
        &self.totals
    }

    /// Takes the per-entity totals out (they start again from nothing): what each
    /// entity used since the last take. An exporter or a live view takes them at
    /// each refresh, so that memory follows the entities active lately, not every
    /// one that ever ran. The other totals keep counting.
    pub fn take_entities(&mut self) -> BTreeMap<K, EntityTotal> {
        std::mem::take(&mut self.totals.entities)
    }

    /// Each package's fitted idle power so far: (socket, watts, the intervals it
    /// rests on); empty unless the idle power is fitted and has a fit.
    pub fn fitted_idle(&self) -> Vec<(u32, f64, u64)> {
        self.packages
            .iter()
            .zip(&self.models)
            .filter_map(|(p, m)| m.fitted_idle().map(|(w, n)| (p.socket, w, n)))
            .collect()
    }

    /// Brings the late figures into the totals: what the source lost before it
    /// reached user space (`dropped`), and each package's fitted idle power.
    pub fn settle(&mut self, dropped: u64) {
        self.totals.dropped_slices = dropped;
        self.totals.fitted_idle = self.fitted_idle();
    }
}

/// The whole µJ that `chans` add since the last call, rounded on their running
/// total, so that rounding never accumulates.
fn whole_uj(cum: &mut [(f64, u64)], chans: &[usize], energy: &[Joules]) -> u64 {
    let mut sum = 0;
    for &c in chans {
        let Some((total, given)) = cum.get_mut(c) else {
            continue;
        };
        *total += energy.get(c).map_or(0.0, |j| j.0.max(0.0));
        let now = (*total * 1e6).round() as u64;
        sum += now.saturating_sub(*given);
        *given = (*given).max(now);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A call stack as a profiler might key it: an interned id.
    type Stack = u64;

    fn sample(t_ns: u64, interval_ns: u64, energy: &[Joules]) -> Sample<'_> {
        Sample {
            t_ns,
            interval_ns,
            missed: 0,
            merged: 0,
            freq_hz: 0.0,
            marks: Default::default(),
            energy,
        }
    }

    /// Two packages of two CPUs each, package and DRAM channels.
    fn two_packages(idle: IdlePower) -> EnergySplitter<Stack> {
        let mut s = EnergySplitter::new(idle, vec![Some(0), Some(0), Some(1), Some(1)]);
        s.set_channels(&[
            DomainId::new(0, Domain::Package),
            DomainId::new(0, Domain::Dram),
            DomainId::new(1, Domain::Package),
            DomainId::new(1, Domain::Dram),
        ]);
        s
    }

    #[test]
    fn the_layout_follows_the_channels_and_the_topology() {
        let s = two_packages(IdlePower::None);
        assert_eq!(s.packages(), 2);
        assert_eq!(
            (0..5).map(|c| s.package_of(c)).collect::<Vec<_>>(),
            [Some(0), Some(0), Some(1), Some(1), None]
        );
    }

    /// Keys of any kind: stacks here. One package busy, the other idle; the idle
    /// part set apart is 10 W × 1 ms per package.
    #[test]
    fn stacks_get_their_share_and_the_idle_part_is_set_apart() {
        let mut s = two_packages(IdlePower::Configured(10.0));
        let mut busy = Usage::default();
        busy.by_entity.insert(7, 1_000_000);
        busy.by_entity.insert(3, 500_000);
        busy.idle_ns = 500_000;
        let idle = Usage {
            idle_ns: 2_000_000,
            ..Usage::default()
        };
        let energy = [Joules(0.016), Joules(0.002), Joules(0.008), Joules(0.001)];
        let mut rows = Vec::new();
        s.apply(
            &sample(5_000_000, 1_000_000, &energy),
            &[busy, idle],
            Some(&mut rows),
        );
        let kinds: Vec<(u32, RowKind<Stack>)> = rows.iter().map(|r| (r.package, r.kind)).collect();
        assert_eq!(
            kinds,
            [
                (0, RowKind::Entity(3)),
                (0, RowKind::Entity(7)),
                (0, RowKind::Unattributed),
                (0, RowKind::Total),
                (0, RowKind::Dram),
                (1, RowKind::Unattributed),
                (1, RowKind::Total),
                (1, RowKind::Dram),
            ]
        );
        // Package 0: 16 mJ, 10 mJ idle; the 6 mJ dynamic by CPU time 1:2; the idle
        // part by CPU time over the 2 ms capacity: 1/4, 1/2, and 1/4 unattributed.
        assert_eq!(
            rows[0].part,
            Part {
                dynamic_uj: 2_000,
                idle_uj: 2_500
            }
        );
        assert_eq!(
            rows[1].part,
            Part {
                dynamic_uj: 4_000,
                idle_uj: 5_000
            }
        );
        assert_eq!(
            rows[2].part,
            Part {
                dynamic_uj: 0,
                idle_uj: 2_500
            }
        );
        assert_eq!((rows[2].cpu_ns, rows[3].cpu_ns), (500_000, 2_000_000));
        assert_eq!(rows[3].part.total_uj(), 16_000);
        assert_eq!(rows[4].part.dynamic_uj, 2_000, "DRAM is not split");
        // Package 1: 8 mJ below the idle power's 10 mJ: all of it idle, and all of
        // it unattributed (nothing ran).
        assert_eq!(rows[5].part.total_uj(), 8_000);
        assert_eq!(
            rows[6].part,
            Part {
                dynamic_uj: 0,
                idle_uj: 8_000
            }
        );
        let t = s.totals();
        assert_eq!((t.energy_uj, t.idle_uj, t.dram_uj), (24_000, 18_000, 3_000));
        assert_eq!(t.accounted_uj(), 24_000);
        assert_eq!(t.entities[&7].total_uj(), 9_000);
        // Taken out, the entity totals start again; the rest keeps counting.
        assert_eq!(s.take_entities().len(), 2);
        assert!(s.totals().entities.is_empty());
        assert_eq!(s.totals().energy_uj, 24_000);
    }

    #[test]
    fn without_rows_the_totals_are_the_same() {
        let mut with = two_packages(IdlePower::None);
        let mut without = two_packages(IdlePower::None);
        let mut u = Usage::default();
        u.by_entity.insert(1, 300);
        let energy = [Joules(0.001); 4];
        let mut rows = Vec::new();
        with.apply(
            &sample(1_000, 1_000, &energy),
            &[u.clone()],
            Some(&mut rows),
        );
        without.apply(&sample(1_000, 1_000, &energy), &[u], None);
        assert_eq!(with.totals().entities, without.totals().entities);
        assert_eq!(with.totals().energy_uj, without.totals().energy_uj);
        // A missing usage is a package where nothing was seen.
        assert_eq!(rows.iter().filter(|r| r.package == 1).count(), 3);
    }

    #[test]
    fn top_n_plus_other_is_bounded_and_adds_up() {
        let mut t: Totals = Totals::default();
        for i in 0..100u32 {
            t.entities.insert(
                crate::Entity::Process(i),
                EntityTotal {
                    dynamic_uj: u64::from(i) * 10,
                    idle_uj: 1,
                    cpu_ns: 5,
                },
            );
        }
        let (top, other) = t.top(3);
        let ids: Vec<crate::Entity> = top.iter().map(|(e, _)| *e).collect();
        assert_eq!(
            ids,
            [
                crate::Entity::Process(99),
                crate::Entity::Process(98),
                crate::Entity::Process(97)
            ]
        );
        let all: u64 = t.entities.values().map(EntityTotal::total_uj).sum();
        let got: u64 = top.iter().map(|(_, e)| e.total_uj()).sum::<u64>() + other.total_uj();
        assert_eq!(got, all);
        assert_eq!(other.cpu_ns, 97 * 5);
        let (top, other) = t.top(1000);
        assert_eq!((top.len(), other), (100, EntityTotal::default()));
    }

    fn usage_strategy() -> impl Strategy<Value = Vec<(u64, u64)>> {
        prop::collection::vec((0u64..6, 0u64..3_000_000), 0..8)
    }

    proptest! {
        /// Every interval of every package: the stacks' rows plus the unattributed
        /// row equal the total row, which is the package's µJ of the sample (its
        /// running total rounded), exactly; the idle part never exceeds it; and the
        /// totals add up to the measured energy, whatever the idle power.
        #[test]
        fn every_interval_is_conserved_exactly(
            idle in prop_oneof![
                Just(IdlePower::None),
                (0.0f64..50.0).prop_map(IdlePower::Configured),
                Just(IdlePower::Fitted),
            ],
            samples in prop::collection::vec(
                (1u64..5_000_000, 0.0f64..0.05, 0.0f64..0.05, usage_strategy(), usage_strategy()),
                1..60,
            ),
        ) {
            let mut s = two_packages(idle);
            let mut t_ns = 0;
            let mut cum = [0.0f64; 2];
            let mut given = [0u64; 2];
            let mut rows = Vec::new();
            for (dt, e0, e1, u0, u1) in samples {
                t_ns += dt;
                let energy = [Joules(e0), Joules(0.0), Joules(e1), Joules(0.0)];
                let usage: Vec<Usage<Stack>> = [u0, u1]
                    .iter()
                    .map(|u| Usage {
                        by_entity: u.iter().copied().collect(),
                        idle_ns: 1,
                        unseen_ns: 0,
                    })
                    .collect();
                rows.clear();
                s.apply(&sample(t_ns, dt, &energy), &usage, Some(&mut rows));
                for (p, e) in [e0, e1].into_iter().enumerate() {
                    cum[p] += e;
                    let now = (cum[p] * 1e6).round() as u64;
                    let measured = now - given[p];
                    given[p] = now;
                    let socket = p as u32;
                    let mine = || rows.iter().filter(move |r| r.package == socket);
                    let parts: u64 = mine()
                        .filter(|r| matches!(r.kind, RowKind::Entity(_) | RowKind::Unattributed))
                        .map(|r| r.part.total_uj())
                        .sum();
                    let total: Vec<&Row<Stack>> =
                        mine().filter(|r| r.kind == RowKind::Total).collect();
                    prop_assert_eq!(total.len(), 1);
                    prop_assert_eq!(total[0].part.total_uj(), measured);
                    prop_assert_eq!(parts, measured);
                    prop_assert!(total[0].part.idle_uj <= measured);
                }
            }
            let t = s.totals();
            prop_assert_eq!(t.unbalanced, 0);
            prop_assert_eq!(t.accounted_uj(), t.energy_uj);
            prop_assert_eq!(t.energy_uj, given[0] + given[1]);
        }
    }
}
