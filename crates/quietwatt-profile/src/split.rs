//! Energy per stack, conserved in integer µJ. Pure: no I/O, the same input always
//! gives the same split.
//!
//! **The model.** Each energy interval of a package (`start_ns`, `end_ns`], its
//! measured µJ) is split among the stack samples taken in it (`start_ns < time_ns
//! <= end_ns`: a sample closes the period it weighs, as an interval closes the
//! energy it measured) on that package's CPUs, in proportion to each sample's
//! period (ns of CPU time for cpu-clock, cycles for cycles). The split is
//! attribution's ([`quietwatt_attribution::Model`]): an idle part set apart by
//! the idle power (none, configured or fitted; labelled by
//! [`IdlePower::label`]), the dynamic part by weight, the idle part by weight over
//! the package's capacity (CPUs × interval); both exact in integers (largest
//! remainder). So for every interval Σ stacks + unattributed == its µJ exactly, and
//! an interval with no sample on the package is wholly unattributed (idle or
//! unseen).
//!
//! **Limits.** Within an interval every CPU of a package is taken to draw the
//! same power per unit of weight (in truth a core's power depends on what it runs
//! and on its frequency: two stacks of equal weight get equal µJ even if one ran
//! hotter). With cycles as the weight,
//! a high-IPC stack weighs what its cycles say, not its instructions'
//! energy. A configured or fitted idle power shares the idle part by weight over
//! capacity in ns: meaningful for cpu-clock's ns periods, not for cycles (use
//! [`IdlePower::None`] there). Intervals of one package should not overlap: a
//! sample in two weighs in both. DRAM is not split here: the caller reports it
//! beside the package's.
//!
//! [`quietwatt_attribution::Model`] is used rather than
//! [`quietwatt_attribution::EnergySplitter`]: the splitter takes the engine's
//! samples (joules per channel, one interval for every package, re-rounded to
//! µJ), while a profile's intervals are per package, in µJ, each with its own
//! bounds.

use crate::stack::{StackId, StackSample};
use quietwatt_attribution::{IdlePower, Model, Part, Split};
use std::collections::{BTreeMap, HashMap};

/// One package's energy over one interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnergyInterval {
    /// The package (socket number).
    pub package: u32,
    /// CLOCK_MONOTONIC ns where it starts (exclusive).
    pub start_ns: u64,
    /// CLOCK_MONOTONIC ns where it ends (inclusive).
    pub end_ns: u64,
    /// The energy measured, µJ.
    pub energy_uj: u64,
}

/// One stack's part of one interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackPart {
    /// Whose.
    pub stack: StackId,
    /// Its energy, µJ (dynamic and idle share).
    pub part: Part,
    /// Its samples in the interval.
    pub samples: u64,
    /// Their periods added.
    pub weight: u64,
}

/// One interval, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntervalSplit {
    /// The interval.
    pub interval: EnergyInterval,
    /// Each stack sampled in it on the package's CPUs, by stack id.
    pub stacks: Vec<StackPart>,
    /// What no stack got: all of it when no sample fell in the interval.
    pub unattributed: Part,
    /// Of the energy, the idle part set apart.
    pub idle_uj: u64,
}

impl IntervalSplit {
    /// Σ stacks + unattributed, µJ: the interval's energy, exactly.
    pub fn accounted_uj(&self) -> u64 {
        self.stacks.iter().map(|s| s.part.total_uj()).sum::<u64>() + self.unattributed.total_uj()
    }
}

/// One stack's energy over the whole profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackTotal {
    /// Dynamic energy, µJ.
    pub dynamic_uj: u64,
    /// Idle share, µJ.
    pub idle_uj: u64,
    /// Samples that carried it.
    pub samples: u64,
    /// Their periods added.
    pub weight: u64,
}

impl StackTotal {
    /// Dynamic plus idle share, µJ.
    pub fn total_uj(&self) -> u64 {
        self.dynamic_uj + self.idle_uj
    }
}

/// The whole profile's energy by stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackEnergy {
    /// Each stack's energy.
    pub stacks: BTreeMap<StackId, StackTotal>,
    /// What no stack got, µJ.
    pub unattributed: Part,
    /// The measured energy, µJ.
    pub measured_uj: u64,
    /// Of which the idle part, µJ.
    pub idle_uj: u64,
    /// Intervals split.
    pub intervals: u64,
    /// Of which with no sample on their package (wholly unattributed).
    pub empty_intervals: u64,
    /// Samples in no interval of their CPU's package (or on a CPU of no package):
    /// their weight got no energy.
    pub samples_outside: u64,
    /// How the idle part was set apart.
    pub idle_label: String,
}

impl StackEnergy {
    /// Σ stacks + unattributed, µJ: [`StackEnergy::measured_uj`] exactly.
    pub fn accounted_uj(&self) -> u64 {
        self.stacks.values().map(StackTotal::total_uj).sum::<u64>() + self.unattributed.total_uj()
    }
}

/// Splits each interval's energy among the stack samples on its package's CPUs
/// (see the module's documentation). `cpu_package[cpu]` is each CPU's package;
/// `samples` in any order. Returns each interval's split, in the order given,
/// and the totals.
pub fn split_energy(
    intervals: &[EnergyInterval],
    samples: &[StackSample],
    cpu_package: &[Option<u32>],
    idle: IdlePower,
) -> (Vec<IntervalSplit>, StackEnergy) {
    let mut sorted: Vec<&StackSample> = samples.iter().collect();
    sorted.sort_by_key(|s| s.time_ns);
    let package_of = |cpu: u32| cpu_package.get(cpu as usize).copied().flatten();
    let mut cpus: HashMap<u32, u32> = HashMap::new();
    for p in cpu_package.iter().flatten() {
        *cpus.entry(*p).or_default() += 1;
    }
    let mut models: HashMap<u32, Model> = HashMap::new();
    let mut split = Split::default();
    let mut used = vec![false; sorted.len()];
    let mut total = StackEnergy {
        idle_label: idle.label(),
        ..StackEnergy::default()
    };
    let mut out = Vec::with_capacity(intervals.len());
    let mut by_stack: BTreeMap<StackId, (u64, u64)> = BTreeMap::new();
    for iv in intervals {
        by_stack.clear();
        let from = sorted.partition_point(|s| s.time_ns <= iv.start_ns);
        let to = sorted.partition_point(|s| s.time_ns <= iv.end_ns).max(from);
        for (i, s) in sorted[from..to].iter().enumerate() {
            if package_of(s.cpu) == Some(iv.package) {
                used[from + i] = true;
                let e = by_stack.entry(s.stack).or_default();
                e.0 += 1;
                e.1 = e.1.saturating_add(s.period);
            }
        }
        let weights: Vec<u64> = by_stack.values().map(|&(_, w)| w).collect();
        let model = models.entry(iv.package).or_insert_with(|| Model::new(idle));
        let n = cpus.get(&iv.package).copied().unwrap_or(1);
        model.split(
            iv.energy_uj,
            iv.end_ns.saturating_sub(iv.start_ns),
            n,
            &weights,
            &mut split,
        );
        let stacks: Vec<StackPart> = by_stack
            .iter()
            .zip(&split.parts)
            .map(|((&stack, &(samples, weight)), &part)| StackPart {
                stack,
                part,
                samples,
                weight,
            })
            .collect();
        for s in &stacks {
            let t = total.stacks.entry(s.stack).or_default();
            t.dynamic_uj += s.part.dynamic_uj;
            t.idle_uj += s.part.idle_uj;
            t.samples += s.samples;
            t.weight = t.weight.saturating_add(s.weight);
        }
        total.unattributed.dynamic_uj += split.unattributed.dynamic_uj;
        total.unattributed.idle_uj += split.unattributed.idle_uj;
        total.measured_uj += iv.energy_uj;
        total.idle_uj += split.idle_uj;
        total.intervals += 1;
        total.empty_intervals += u64::from(stacks.is_empty());
        out.push(IntervalSplit {
            interval: *iv,
            stacks,
            unattributed: split.unattributed,
            idle_uj: split.idle_uj,
        });
    }
    total.samples_outside = used.iter().filter(|u| !**u).count() as u64;
    (out, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: u64, cpu: u32, period: u64, stack: u32) -> StackSample {
        StackSample {
            time_ns: t,
            pid: 1,
            tid: 1,
            cpu,
            period,
            stack: StackId(stack),
        }
    }

    fn iv(package: u32, start_ns: u64, end_ns: u64, energy_uj: u64) -> EnergyInterval {
        EnergyInterval {
            package,
            start_ns,
            end_ns,
            energy_uj,
        }
    }

    /// Two packages of two CPUs each: 0 and 1 on package 0, 2 and 3 on package 1.
    const TOPO: [Option<u32>; 4] = [Some(0), Some(0), Some(1), Some(1)];

    fn check(splits: &[IntervalSplit], total: &StackEnergy) {
        for s in splits {
            assert_eq!(s.accounted_uj(), s.interval.energy_uj, "{s:?}");
        }
        assert_eq!(total.accounted_uj(), total.measured_uj);
        let measured: u64 = splits.iter().map(|s| s.interval.energy_uj).sum();
        assert_eq!(total.measured_uj, measured);
    }

    #[test]
    fn awkward_intervals_are_each_conserved_exactly() {
        let intervals = [
            // No sample at all: all unattributed.
            iv(0, 0, 1_000, 1_000),
            // One sample: all of it.
            iv(0, 1_000, 2_000, 777),
            // Three equal weights over 100 µJ: 34 + 33 + 33.
            iv(0, 2_000, 3_000, 100),
            // Only a sample on package 1's CPU 2 falls in it: package 0 gets none.
            iv(0, 3_000, 4_000, 50),
            // Package 1's interval over the same time takes that sample.
            iv(1, 3_000, 4_000, 31),
            // Weights 1:2 over 10 µJ: 3 and 7 (the floor 3, 6; the remainder .67 of
            // the heavier gets the last µJ).
            iv(0, 4_000, 5_000, 10),
            // Zero energy with samples.
            iv(1, 5_000, 6_000, 0),
        ];
        let samples = [
            sample(1_500, 0, 1_000, 7),
            sample(2_100, 0, 300, 1),
            sample(2_200, 1, 300, 2),
            sample(2_300, 0, 300, 3),
            sample(3_500, 2, 1_000, 4),
            sample(4_500, 0, 100, 5),
            sample(4_600, 1, 200, 6),
            sample(5_500, 3, 10, 8),
            // In no interval: after the last.
            sample(9_000, 0, 5, 9),
            // On a CPU of no package.
            sample(1_200, 9, 5, 9),
        ];
        let (splits, total) = split_energy(&intervals, &samples, &TOPO, IdlePower::None);
        check(&splits, &total);
        let uj = |i: usize| -> Vec<(u32, u64)> {
            splits[i]
                .stacks
                .iter()
                .map(|s| (s.stack.0, s.part.total_uj()))
                .collect()
        };
        assert_eq!((uj(0), splits[0].unattributed.total_uj()), (vec![], 1_000));
        assert_eq!(uj(1), vec![(7, 777)]);
        assert_eq!(uj(2), vec![(1, 34), (2, 33), (3, 33)]);
        assert_eq!((uj(3), splits[3].unattributed.total_uj()), (vec![], 50));
        assert_eq!(uj(4), vec![(4, 31)]);
        assert_eq!(uj(5), vec![(5, 3), (6, 7)]);
        assert_eq!(uj(6), vec![(8, 0)]);
        assert_eq!((total.empty_intervals, total.samples_outside), (2, 2));
        assert_eq!(total.stacks[&StackId(7)].total_uj(), 777);
    }

    #[test]
    fn a_sample_on_an_interval_boundary_belongs_to_the_interval_it_closes() {
        let intervals = [iv(0, 0, 1_000, 10), iv(0, 1_000, 2_000, 20)];
        let (splits, total) = split_energy(
            &intervals,
            &[sample(1_000, 0, 1, 1)],
            &TOPO,
            IdlePower::None,
        );
        check(&splits, &total);
        assert_eq!(splits[0].stacks.len(), 1);
        assert!(splits[1].stacks.is_empty());
    }

    #[test]
    fn a_configured_idle_power_is_set_apart_and_shared_by_weight_over_capacity() {
        // 1 µs at 2 W idle per package = 2 µJ... use 1 ms: 2000 µJ of 5000 idle.
        let intervals = [iv(0, 0, 1_000_000, 5_000)];
        let samples = [sample(500_000, 0, 1_000_000, 1)];
        let (splits, total) = split_energy(&intervals, &samples, &TOPO, IdlePower::Configured(2.0));
        check(&splits, &total);
        // One CPU of two busy the whole ms: all 3000 µJ dynamic, half the idle part.
        assert_eq!(splits[0].idle_uj, 2_000);
        assert_eq!(
            splits[0].stacks[0].part,
            Part {
                dynamic_uj: 3_000,
                idle_uj: 1_000
            }
        );
        assert_eq!(
            splits[0].unattributed,
            Part {
                dynamic_uj: 0,
                idle_uj: 1_000
            }
        );
        assert!(total.idle_label.starts_with("configured"));
    }

    /// Random intervals, samples and weights, none or fitted idle: every interval
    /// conserved exactly.
    #[test]
    fn random_profiles_are_conserved_on_every_interval() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for idle in [
            IdlePower::None,
            IdlePower::Fitted,
            IdlePower::Configured(3.3),
        ] {
            let mut intervals = Vec::new();
            for p in 0..2 {
                let mut t = 0;
                for _ in 0..200 {
                    let dt = next() % 2_000_000;
                    intervals.push(iv(p, t, t + dt, next() % 50_000));
                    t += dt;
                }
            }
            let samples: Vec<StackSample> = (0..3_000)
                .map(|_| {
                    sample(
                        next() % 300_000_000,
                        (next() % 5) as u32,
                        next() % 3_000_000,
                        (next() % 40) as u32,
                    )
                })
                .collect();
            let (splits, total) = split_energy(&intervals, &samples, &TOPO, idle);
            check(&splits, &total);
        }
    }
}
