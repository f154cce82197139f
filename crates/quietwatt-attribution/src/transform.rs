//! Attribution as a transform: each sample's package energy split among the
//! processes or cgroups that ran, by the context switches the accounting program
//! saw ([`Attribution`], a [`quietwatt::transform::Transform`]).
//!
//! The slices come through a [`SliceSource`] (the [`crate::Tracker`], or a test's
//! own), are cut at each sample's boundaries by the [`Timeline`], and the CPU time
//! of each entity on each package goes to the generic [`EnergySplitter`]. Nothing
//! here reads or writes a file: names are the row sink's business
//! ([`Attribution::name_of`] with the caller's [`Names`]), and the output is a
//! [`quietwatt::transform::RowSink`] ([`crate::LongFormatSink`]) or none at all
//! (`top`, `run --attribute`, an exporter read the totals).

use crate::model::IdlePower;
use crate::names::Names;
use crate::splitter::{EnergySplitter, EntityTotal, Row, Totals, Usage};
use crate::timeline::{By, Entity, Timeline};
use crate::{cpu_sockets, Result, Tracker};
use quietwatt::domain::DomainId;
use quietwatt::sink::Sample;
use quietwatt::transform::Transform;
use quietwatt::SysRoot;
use std::collections::BTreeMap;

/// Where slices come from: the accounting program, or a test's own.
pub trait SliceSource: Send {
    /// Sets what runs on each CPU now, then adds the closed slices since the last
    /// call (see [`crate::Tracker::drain`]).
    fn drain(&mut self, timeline: &mut Timeline);
    /// Slices lost before they reached user space (their time is unseen).
    fn dropped(&self) -> u64 {
        0
    }
}

impl SliceSource for Tracker {
    fn drain(&mut self, timeline: &mut Timeline) {
        Tracker::drain(self, timeline);
    }
    fn dropped(&self) -> u64 {
        Tracker::dropped(self)
    }
}

/// What an attribution is: the typed options a caller (the CLI's flags, Python)
/// gives once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Whom time is charged to.
    pub by: By,
    /// The idle power set apart before the split.
    pub idle: IdlePower,
}

impl Options {
    /// Charged to `by`, with `idle` set apart.
    pub fn new(by: By, idle: IdlePower) -> Options {
        Options { by, idle }
    }
}

/// The attribution transform: a sample in, one row per entity per package (and
/// the unattributed, total and DRAM rows) and running totals out.
pub struct Attribution {
    by: By,
    source: Box<dyn SliceSource>,
    timeline: Timeline,
    usage: Vec<Usage>,
    splitter: EnergySplitter<Entity>,
}

impl std::fmt::Debug for Attribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attribution")
            .field("by", &self.by)
            .field("idle", &self.splitter.idle())
            .finish_non_exhaustive()
    }
}

impl Attribution {
    /// Attributes by `by` with `idle` set apart, from the slices of `source`;
    /// `cpu_socket[cpu]` is each CPU's package (socket number), as the topology
    /// under the measured root says. No I/O: a test scripts `source`.
    pub fn new(
        by: By,
        idle: IdlePower,
        cpu_socket: Vec<Option<u32>>,
        source: Box<dyn SliceSource>,
    ) -> Attribution {
        Attribution {
            by,
            source,
            timeline: Timeline::new(),
            usage: Vec::new(),
            splitter: EnergySplitter::new(idle, cpu_socket),
        }
    }

    /// Loads the accounting program ([`Tracker::open`]: root, or CAP_BPF and
    /// CAP_PERFMON, and a kernel with BTF) and reads each CPU's package from the
    /// topology under `root`, the one the energy is read under.
    pub fn open(options: &Options, root: &SysRoot) -> Result<Attribution> {
        let tracker = Tracker::open()?;
        Attribution::on(options, root, Box::new(tracker))
    }

    /// As [`Attribution::open`], from slices of a source already opened (a
    /// [`Tracker::open_following`] a command's process tree, say).
    pub fn on(
        options: &Options,
        root: &SysRoot,
        source: Box<dyn SliceSource>,
    ) -> Result<Attribution> {
        Ok(Attribution::new(
            options.by,
            options.idle,
            cpu_sockets(root)?,
            source,
        ))
    }

    /// Whom time is charged to.
    pub fn by(&self) -> By {
        self.by
    }

    /// How the idle power is set apart.
    pub fn idle(&self) -> IdlePower {
        self.splitter.idle()
    }

    /// The splitting core, with its totals.
    pub fn splitter(&self) -> &EnergySplitter<Entity> {
        &self.splitter
    }

    /// The totals so far (as [`Transform::totals`], without the trait in scope).
    pub fn totals(&self) -> &Totals<Entity> {
        self.splitter.totals()
    }

    /// Splits one sample into the totals only (no rows): for a consumer that reads
    /// the totals (a live view, an exporter, a block's share).
    pub fn feed(&mut self, sample: &Sample<'_>) {
        self.apply(sample, None);
    }

    /// Takes the per-entity totals out: what each entity used since the last take
    /// ([`EnergySplitter::take_entities`]).
    pub fn take_entities(&mut self) -> BTreeMap<Entity, EntityTotal> {
        self.splitter.take_entities()
    }

    /// Brings the totals' late figures up to now: the slices lost in the kernel
    /// and each package's fitted idle power (done at the end of a recording; an
    /// exporter calls it at each refresh).
    pub fn settle(&mut self) {
        let dropped = self.source.dropped();
        self.splitter.settle(dropped);
    }

    /// The name the accounting saw for process `tgid` (its latest slice's thread
    /// name), if any: a name for a process that has already exited.
    pub fn comm(&self, tgid: u32) -> Option<&str> {
        self.timeline.comm(tgid)
    }

    /// An entity's readable name: a process's from /proc through `names`, or the
    /// name the accounting saw for one that has exited; a cgroup's unit, container
    /// or path.
    pub fn name_of(&self, names: &mut Names, e: Entity) -> String {
        match e {
            Entity::Process(tgid) => names.process_or(tgid, self.comm(tgid)).to_string(),
            Entity::Cgroup(id) => names
                .cgroup(id)
                .map_or_else(|| format!("cgroup {id}"), |(_, n)| n.to_string()),
        }
    }
}

impl Transform for Attribution {
    type Row = Row<Entity>;
    type Totals = Totals<Entity>;

    fn begin(&mut self, channels: &[DomainId]) {
        self.splitter.set_channels(channels);
        self.usage = vec![Usage::default(); self.splitter.packages()];
    }

    fn apply(&mut self, sample: &Sample<'_>, rows: Option<&mut Vec<Row<Entity>>>) {
        let t1 = sample.t_ns;
        let t0 = t1.saturating_sub(sample.interval_ns);
        self.source.drain(&mut self.timeline);
        let splitter = &self.splitter;
        self.timeline.usage(
            t0,
            t1,
            self.by,
            |cpu| splitter.package_of(cpu),
            &mut self.usage,
        );
        self.splitter.apply(sample, &self.usage, rows);
        self.timeline.forget_before(t1);
    }

    fn totals(&self) -> &Totals<Entity> {
        self.splitter.totals()
    }

    fn finish(&mut self) {
        self.settle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Part;
    use crate::splitter::RowKind;
    use crate::timeline::{Running, Slice};
    use quietwatt::domain::Domain;
    use quietwatt::units::Joules;

    /// Process 10 runs on CPU 0 from the start; process 20 on CPU 1 for the first
    /// half of each millisecond from the first on, and the idle task the other
    /// half; CPU 2 is another package's, and idle.
    struct Script {
        next_ms: u64,
    }

    impl SliceSource for Script {
        fn drain(&mut self, t: &mut Timeline) {
            let comm = *b"worker\0\0\0\0\0\0\0\0\0\0";
            t.set_running(
                0,
                Running {
                    start_ns: 1,
                    cgid: 100,
                    idle_from_ns: 0,
                    tgid: 10,
                },
            );
            let ms = self.next_ms;
            self.next_ms += 1;
            let start = ms * 1_000_000;
            t.push(Slice {
                start_ns: start,
                end_ns: start + 500_000,
                cgid: 200,
                tgid: 20,
                cpu: 1,
                comm,
            });
            t.push(Slice {
                start_ns: start + 500_000,
                end_ns: start + 1_000_000,
                cgid: 0,
                tgid: 0,
                cpu: 1,
                comm: [0; 16],
            });
            t.set_running(
                2,
                Running {
                    start_ns: 1,
                    cgid: 0,
                    idle_from_ns: 0,
                    tgid: 0,
                },
            );
        }
        fn dropped(&self) -> u64 {
            2
        }
    }

    fn attribution(by: By, idle: IdlePower) -> Attribution {
        let mut a = Attribution::new(
            by,
            idle,
            vec![Some(0), Some(0), Some(1)],
            Box::new(Script { next_ms: 1 }),
        );
        a.begin(&[
            DomainId::new(0, Domain::Package),
            DomainId::new(1, Domain::Package),
        ]);
        a
    }

    fn one_ms(a: &mut Attribution, ms: u64, rows: Option<&mut Vec<Row<Entity>>>) {
        let energy = [Joules(0.014), Joules(0.003)];
        a.apply(
            &Sample {
                t_ns: (ms + 1) * 1_000_000,
                interval_ns: 1_000_000,
                missed: 0,
                merged: 0,
                freq_hz: 1000.0,
                marks: Default::default(),
                energy: &energy,
            },
            rows,
        );
    }

    /// 14 mJ a millisecond on package 0 with 10 W idle: process 10 held a CPU the
    /// whole time, process 20 half of it: the 4 mJ dynamic part 2:1 (2667 and 1333
    /// µJ, largest remainder), the 10 mJ idle part by CPU time over 2 CPU-ms; every
    /// interval conserved; package 1 idled: its 3 mJ stay unattributed.
    #[test]
    fn each_sample_is_split_by_cpu_time_and_conserved() {
        let mut a = attribution(By::Process, IdlePower::Configured(10.0));
        let mut rows = Vec::new();
        for ms in 1..=5 {
            rows.clear();
            one_ms(&mut a, ms, Some(&mut rows));
            let kinds: Vec<RowKind<Entity>> = rows.iter().map(|r| r.kind).collect();
            assert_eq!(
                kinds,
                [
                    RowKind::Entity(Entity::Process(10)),
                    RowKind::Entity(Entity::Process(20)),
                    RowKind::Unattributed,
                    RowKind::Total,
                    RowKind::Unattributed,
                    RowKind::Total,
                ]
            );
            assert_eq!(
                (rows[0].part, rows[0].cpu_ns),
                (
                    Part {
                        dynamic_uj: 2_667,
                        idle_uj: 5_000
                    },
                    1_000_000
                )
            );
            assert_eq!(
                (rows[1].part, rows[1].cpu_ns),
                (
                    Part {
                        dynamic_uj: 1_333,
                        idle_uj: 2_500
                    },
                    500_000
                )
            );
            assert_eq!(rows[2].part.total_uj(), 2_500, "the idle half of CPU 1");
            assert_eq!(rows[2].cpu_ns, 500_000);
            for p in [0, 1] {
                let of = |k: RowKind<Entity>| -> u64 {
                    rows.iter()
                        .filter(|r| r.package == p && (r.kind == k))
                        .map(|r| r.part.total_uj())
                        .sum()
                };
                let entities: u64 = rows
                    .iter()
                    .filter(|r| r.package == p && matches!(r.kind, RowKind::Entity(_)))
                    .map(|r| r.part.total_uj())
                    .sum();
                assert_eq!(
                    entities + of(RowKind::Unattributed),
                    of(RowKind::Total),
                    "ms {ms}, package {p}"
                );
            }
            assert_eq!(rows[5].part.total_uj(), 3_000);
            assert_eq!(rows[4].part.total_uj(), 3_000, "nothing ran on package 1");
        }
        a.finish();
        let t = a.totals();
        assert_eq!((t.energy_uj, t.accounted_uj()), (85_000, 85_000));
        assert_eq!(t.entities[&Entity::Process(20)].cpu_ns, 2_500_000);
        assert_eq!(t.dropped_slices, 2, "the source's losses, at the end");
        assert_eq!(a.comm(20), Some("worker"), "the name the accounting saw");
    }

    #[test]
    fn by_cgroup_the_same_time_goes_to_the_cgroups() {
        let mut a = attribution(By::Cgroup, IdlePower::None);
        a.feed(&Sample {
            t_ns: 2_000_000,
            interval_ns: 1_000_000,
            missed: 0,
            merged: 0,
            freq_hz: 1000.0,
            marks: Default::default(),
            energy: &[Joules(0.003), Joules(0.0)],
        });
        let e = a.take_entities();
        assert_eq!(e[&Entity::Cgroup(100)].dynamic_uj, 2_000);
        assert_eq!(e[&Entity::Cgroup(200)].dynamic_uj, 1_000);
        assert!(a.totals().entities.is_empty(), "taken out");
        assert_eq!(a.totals().energy_uj, 3_000);
    }
}
