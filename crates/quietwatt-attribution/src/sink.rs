//! The attributing sink: takes a recording's samples, splits each package's energy
//! among what ran, and writes one row per entity per sample in a long format.
//!
//! Columns (CSV header, or the keys of each JSON Lines object):
//! `t_ns` (CLOCK_MONOTONIC ns of the sample), `interval_ns`, `package`, `kind`
//! (`process`, `cgroup`, `unattributed`, `total`, `dram`), `id` (tgid, cgroup id,
//! or empty), `name`, `joules` (= `dynamic_j + idle_j`), `dynamic_j`, `idle_j`,
//! `cpu_ns`. For each `(t_ns, package)`, the `process`/`cgroup` rows plus the
//! `unattributed` row add up to the `total` row exactly (joules are whole µJ,
//! written with six decimals). `dram` rows carry the package's DRAM energy, which
//! is not split (see docs/attribution.md). `cpu_ns` of `unattributed` is the idle
//! task's time plus time the accounting did not see; of `total`, the package's
//! capacity (CPUs × interval).

use crate::model::{IdlePower, Model, Part, Split};
use crate::names::Names;
use crate::timeline::{By, Entity, Timeline, Usage};
use quietwatt::domain::{Domain, DomainId};
use quietwatt::sink::{Metadata, Sample, Sink};
use quietwatt::source::Channel;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// What each column holds, written into the output's metadata.
pub const COLUMNS: &str =
    "t_ns: CLOCK_MONOTONIC ns of the sample; interval_ns: since the previous \
sample; package: the socket; kind: process, cgroup, unattributed (idle CPUs and time not seen), \
total (the measured package energy) or dram (not split); id: tgid or cgroup id; name: comm or \
the cgroup's unit/container/path; joules = dynamic_j + idle_j, whole microjoules: per (t_ns, \
package) the process/cgroup rows plus unattributed equal total exactly; cpu_ns: CPU time in the \
interval (total: CPUs x interval)";

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

impl SliceSource for crate::Tracker {
    fn drain(&mut self, timeline: &mut Timeline) {
        crate::Tracker::drain(self, timeline);
    }
    fn dropped(&self) -> u64 {
        crate::Tracker::dropped(self)
    }
}

/// The output format of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongFormat {
    /// CSV with a header, metadata as leading `#` lines.
    Csv,
    /// JSON Lines, metadata as the first line (`{"meta": {...}}`).
    Jsonl,
}

/// One entity's totals over the recording.
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

/// Totals over the recording, all packages.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Per entity.
    pub entities: BTreeMap<Entity, EntityTotal>,
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
    /// Slices the kernel could not hand over (a full ring), known at the end: their
    /// CPU time went unattributed.
    pub dropped_slices: u64,
    /// With a fitted idle power, each package's at the end: (socket, watts, the
    /// intervals it rests on); empty otherwise or without a fit.
    pub fitted_idle: Vec<(u32, f64, u64)>,
}

impl Totals {
    /// The `n` entities that used the most energy (ties: the most CPU time, then
    /// the entity), and everything else added up as one "other": a bounded number
    /// of series however many processes or cgroups ran (what an exporter needs).
    /// The parts plus "other" add up to the entities' total exactly.
    pub fn top(&self, n: usize) -> (Vec<(Entity, EntityTotal)>, EntityTotal) {
        let mut all: Vec<(Entity, EntityTotal)> =
            self.entities.iter().map(|(e, t)| (*e, *t)).collect();
        all.sort_by(|a, b| {
            (b.1.total_uj(), b.1.cpu_ns)
                .cmp(&(a.1.total_uj(), a.1.cpu_ns))
                .then(a.0.cmp(&b.0))
        });
        let rest = all.split_off(n.min(all.len()));
        let other = rest.iter().map(|(_, t)| t).sum();
        (all, other)
    }

    /// Σ entities + unattributed, µJ: equal to [`Totals::energy_uj`].
    pub fn accounted_uj(&self) -> u64 {
        self.entities
            .values()
            .map(EntityTotal::total_uj)
            .sum::<u64>()
            + self.unattributed.total_uj()
    }
}

/// A [`Sink`] that writes the attribution of each sample.
pub struct AttributionSink<W: Write + Send> {
    out: W,
    format: LongFormat,
    by: By,
    idle: IdlePower,
    source: Box<dyn SliceSource>,
    timeline: Timeline,
    /// One per package: a fitted idle power is each package's own.
    models: Vec<Model>,
    names: Names,
    /// The package of each CPU, as a socket number (index: CPU).
    cpu_socket: Vec<Option<u32>>,
    /// Per package: socket, its package channels, its DRAM channels.
    packages: Vec<(u32, Vec<usize>, Vec<usize>)>,
    /// CPUs per package.
    cpus: Vec<u32>,
    /// The index in `packages` of each CPU's package.
    cpu_pkg: Vec<Option<usize>>,
    /// Per channel: cumulative joules and the µJ already handed out.
    cum: Vec<(f64, u64)>,
    usage: Vec<Usage>,
    order: Vec<(Entity, u64)>,
    weights: Vec<u64>,
    split: Split,
    row: String,
    totals: Arc<Mutex<Totals>>,
}

impl<W: Write + Send> AttributionSink<W> {
    /// Attributes by `by` with `idle` set apart; `cpu_socket[cpu]` is each CPU's
    /// package (socket number), as the topology under the measured root says.
    pub fn new(
        out: W,
        format: LongFormat,
        by: By,
        idle: IdlePower,
        cpu_socket: Vec<Option<u32>>,
        source: Box<dyn SliceSource>,
        names: Names,
    ) -> AttributionSink<W> {
        AttributionSink {
            out,
            format,
            by,
            idle,
            source,
            timeline: Timeline::new(),
            models: Vec::new(),
            names,
            cpu_socket,
            packages: Vec::new(),
            cpus: Vec::new(),
            cpu_pkg: Vec::new(),
            cum: Vec::new(),
            usage: Vec::new(),
            order: Vec::new(),
            weights: Vec::new(),
            split: Split::default(),
            row: String::new(),
            totals: Arc::new(Mutex::new(Totals::default())),
        }
    }

    /// The totals, updated as samples are written; readable after the recording
    /// (the sink itself goes to the writer thread).
    pub fn totals(&self) -> Arc<Mutex<Totals>> {
        Arc::clone(&self.totals)
    }

    /// Lays out the split for samples whose energies are of `channels`, in this
    /// order (what [`Sink::begin`] does, without writing a header): for a consumer
    /// that hands samples to [`Sink::sample`] itself, such as an exporter.
    pub fn set_channels(&mut self, channels: &[DomainId]) {
        let mut sockets: Vec<u32> = channels
            .iter()
            .filter(|c| c.domain == Domain::Package)
            .map(|c| c.socket.0)
            .collect();
        sockets.sort_unstable();
        sockets.dedup();
        self.packages = sockets
            .iter()
            .map(|&s| {
                let of = |d: Domain| {
                    channels
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| c.socket.0 == s && c.domain == d)
                        .map(|(i, _)| i)
                        .collect::<Vec<_>>()
                };
                (s, of(Domain::Package), of(Domain::Dram))
            })
            .collect();
        self.cpus = sockets
            .iter()
            .map(|&s| self.cpu_socket.iter().filter(|c| **c == Some(s)).count() as u32)
            .collect();
        self.cpu_pkg = self
            .cpu_socket
            .iter()
            .map(|so| so.and_then(|so| sockets.iter().position(|&p| p == so)))
            .collect();
        self.models = sockets.iter().map(|_| Model::new(self.idle)).collect();
        self.cum = vec![(0.0, 0); channels.len()];
        self.usage = vec![Usage::default(); self.packages.len()];
    }

    /// Brings the totals' kernel-side figures up to now: the slices lost in the
    /// kernel and each package's fitted idle power (done at the end of a recording;
    /// an exporter calls it at each refresh).
    pub fn settle(&self) {
        let dropped = self.source.dropped();
        let fitted: Vec<(u32, f64, u64)> = self
            .packages
            .iter()
            .zip(&self.models)
            .filter_map(|((socket, _, _), m)| m.fitted_idle().map(|(w, n)| (*socket, w, n)))
            .collect();
        let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        t.dropped_slices = dropped;
        t.fitted_idle = fitted;
    }

    fn uj(&mut self, chans: &[usize], energy: &[quietwatt::units::Joules]) -> u64 {
        let mut sum = 0;
        for &c in chans {
            let (cum, given) = &mut self.cum[c];
            *cum += energy.get(c).map_or(0.0, |j| j.0.max(0.0));
            // Rounded on the running total, so that rounding never accumulates.
            let now = (*cum * 1e6).round() as u64;
            sum += now.saturating_sub(*given);
            *given = (*given).max(now);
        }
        sum
    }

    #[allow(clippy::too_many_arguments)]
    fn put_row(
        &mut self,
        t_ns: u64,
        interval_ns: u64,
        socket: u32,
        kind: &str,
        id: Option<u64>,
        name: &str,
        part: Part,
        cpu_ns: u64,
    ) {
        let j = |uj: u64| format!("{}.{:06}", uj / 1_000_000, uj % 1_000_000);
        let id_s = id.map(|i| i.to_string()).unwrap_or_default();
        let r = &mut self.row;
        match self.format {
            LongFormat::Csv => {
                let name = if name.contains([',', '"', '\n']) {
                    format!("\"{}\"", name.replace('"', "\"\"").replace('\n', " "))
                } else {
                    name.to_string()
                };
                let _ = writeln!(
                    r,
                    "{t_ns},{interval_ns},{socket},{kind},{id_s},{name},{},{},{},{cpu_ns}",
                    j(part.total_uj()),
                    j(part.dynamic_uj),
                    j(part.idle_uj)
                );
            }
            LongFormat::Jsonl => {
                let id_v = id.map_or("null".to_string(), |i| i.to_string());
                let name = serde_json::to_string(name).unwrap_or_else(|_| "\"?\"".into());
                let _ = writeln!(
                    r,
                    "{{\"t_ns\":{t_ns},\"interval_ns\":{interval_ns},\"package\":{socket},\
                     \"kind\":\"{kind}\",\"id\":{id_v},\"name\":{name},\"joules\":{},\
                     \"dynamic_j\":{},\"idle_j\":{},\"cpu_ns\":{cpu_ns}}}",
                    j(part.total_uj()),
                    j(part.dynamic_uj),
                    j(part.idle_uj)
                );
            }
        }
    }

    /// An entity's readable name: a process's from /proc, or the name the
    /// accounting saw for one that has exited; a cgroup's unit, container or path.
    pub fn name_of(&mut self, e: Entity) -> String {
        match e {
            Entity::Process(tgid) => self
                .names
                .process_or(tgid, self.timeline.comm(tgid))
                .to_string(),
            Entity::Cgroup(id) => self
                .names
                .cgroup(id)
                .map_or_else(|| format!("cgroup {id}"), |(_, n)| n.to_string()),
        }
    }
}

impl<W: Write + Send> Sink for AttributionSink<W> {
    fn begin(&mut self, meta: &Metadata, channels: &[Channel]) -> io::Result<()> {
        let ids: Vec<DomainId> = channels.iter().map(|c| c.id).collect();
        self.set_channels(&ids);
        let by = self.by.name();
        // The recording's own column notes describe the energy rows this file replaces.
        let mut fields = meta.fields_except("units");
        fields.push(("units".into(), COLUMNS.into()));
        fields.push(("attribution".into(), by.into()));
        fields.push(("idle_power".into(), self.idle.label()));
        fields.push(("attribution_weight".into(), crate::weight_label().into()));
        fields.push((
            "attribution_model".into(),
            "each package interval's energy less its idle part is split by CPU time among \
             what ran on its CPUs; the idle part by CPU time over the package's capacity; \
             DRAM is not split (docs/attribution.md)"
                .into(),
        ));
        let mut head = String::new();
        match self.format {
            LongFormat::Csv => {
                for (k, v) in &fields {
                    let _ = writeln!(head, "# {k}: {}", v.replace('\n', " "));
                }
                head.push_str(
                    "t_ns,interval_ns,package,kind,id,name,joules,dynamic_j,idle_j,cpu_ns\n",
                );
            }
            LongFormat::Jsonl => {
                let m: serde_json::Map<String, serde_json::Value> = fields
                    .into_iter()
                    .map(|(k, v)| (k, serde_json::Value::String(v)))
                    .collect();
                let _ = writeln!(head, "{}", serde_json::json!({ "meta": m }));
            }
        }
        self.out.write_all(head.as_bytes())?;
        self.out.flush()
    }

    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        let t1 = s.t_ns;
        let t0 = t1.saturating_sub(s.interval_ns);
        self.source.drain(&mut self.timeline);
        let mut usage = std::mem::take(&mut self.usage);
        let cpu_pkg = &self.cpu_pkg;
        self.timeline.usage(
            t0,
            t1,
            self.by,
            |c| cpu_pkg.get(c as usize).copied().flatten(),
            &mut usage,
        );
        self.row.clear();
        for (p, u) in usage.iter().enumerate() {
            let (socket, pkg, dram) = self.packages[p].clone();
            let e = self.uj(&pkg, s.energy);
            let dram_uj = self.uj(&dram, s.energy);
            self.order.clear();
            self.order
                .extend(u.by_entity.iter().map(|(e, ns)| (*e, *ns)));
            self.order.sort_unstable();
            self.weights.clear();
            self.weights.extend(self.order.iter().map(|(_, ns)| *ns));
            let mut split = std::mem::take(&mut self.split);
            self.models[p].split(e, s.interval_ns, self.cpus[p], &self.weights, &mut split);
            {
                let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
                t.intervals += 1;
                t.energy_uj += e;
                t.idle_uj += split.idle_uj;
                t.dram_uj += dram_uj;
                t.unattributed.dynamic_uj += split.unattributed.dynamic_uj;
                t.unattributed.idle_uj += split.unattributed.idle_uj;
                if split.accounted_uj() != e {
                    t.unbalanced += 1;
                }
                for ((ent, ns), part) in self.order.iter().zip(&split.parts) {
                    *t.entities.entry(*ent).or_default() += &EntityTotal {
                        dynamic_uj: part.dynamic_uj,
                        idle_uj: part.idle_uj,
                        cpu_ns: *ns,
                    };
                }
            }
            let order = std::mem::take(&mut self.order);
            for ((ent, ns), part) in order.iter().zip(&split.parts) {
                let (by, id) = ent.by_and_id();
                let name = self.name_of(*ent);
                self.put_row(
                    t1,
                    s.interval_ns,
                    socket,
                    by.name(),
                    Some(id),
                    &name,
                    *part,
                    *ns,
                );
            }
            self.order = order;
            let un = split.unattributed;
            let un_ns = u.idle_ns + u.unseen_ns;
            self.put_row(
                t1,
                s.interval_ns,
                socket,
                "unattributed",
                None,
                "",
                un,
                un_ns,
            );
            let capacity = s.interval_ns.saturating_mul(u64::from(self.cpus[p]));
            let total = Part {
                dynamic_uj: e - split.idle_uj,
                idle_uj: split.idle_uj,
            };
            self.put_row(
                t1,
                s.interval_ns,
                socket,
                "total",
                None,
                "",
                total,
                capacity,
            );
            if !dram.is_empty() {
                let d = Part {
                    dynamic_uj: dram_uj,
                    idle_uj: 0,
                };
                self.put_row(t1, s.interval_ns, socket, "dram", None, "", d, 0);
            }
            self.split = split;
        }
        self.usage = usage;
        self.timeline.forget_before(t1);
        self.out.write_all(self.row.as_bytes())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.settle();
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{Running, Slice};
    use quietwatt::counter::Wrap;
    use quietwatt::domain::DomainId;
    use quietwatt::sink::ClockAnchor;
    use quietwatt::units::{EnergyUnit, Joules};
    use std::sync::Arc;

    /// Above any pid_max (2^22): no live process has it, so its name is the one
    /// the accounting saw.
    const GONE: u32 = 4_000_000_000;

    /// Slices a test scripts: process GONE runs on CPU 0 throughout, CPU 1 idles.
    struct Scripted {
        given: bool,
    }

    impl SliceSource for Scripted {
        fn drain(&mut self, t: &mut Timeline) {
            if !self.given {
                self.given = true;
                let comm = *b"busy\0\0\0\0\0\0\0\0\0\0\0\0";
                t.push(Slice {
                    start_ns: 0,
                    end_ns: 1_000,
                    cgid: 1,
                    tgid: GONE,
                    cpu: 0,
                    comm,
                });
                t.set_running(
                    0,
                    Running {
                        start_ns: 1_000,
                        cgid: 1,
                        idle_from_ns: 0,
                        tgid: GONE,
                    },
                );
                t.push(Slice {
                    start_ns: 0,
                    end_ns: 1_000,
                    cgid: 1,
                    tgid: 0,
                    cpu: 1,
                    comm,
                });
                t.set_running(
                    1,
                    Running {
                        start_ns: 1_000,
                        cgid: 1,
                        idle_from_ns: 0,
                        tgid: 0,
                    },
                );
            }
        }
        fn dropped(&self) -> u64 {
            5
        }
    }

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn channel(domain: Domain) -> Channel {
        Channel {
            id: DomainId::new(0, domain),
            unit: EnergyUnit::Microjoule,
            wrap: Wrap::PERF,
            origin: "/test".into(),
            limit: None,
        }
    }

    /// One busy CPU of two at 15 W with 10 W idle: the busy process gets the 5 W
    /// dynamic part and half the idle part; the rows add up; DRAM is not split; the
    /// kernel's lost slices reach the totals at the end.
    #[test]
    fn rows_split_and_conserve_a_scripted_interval() {
        let buf = Buf::default();
        let mut sink = AttributionSink::new(
            buf.clone(),
            LongFormat::Csv,
            By::Process,
            IdlePower::Configured(10.0),
            vec![Some(0), Some(0)],
            Box::new(Scripted { given: false }),
            Names::under(None),
        );
        let meta = Metadata {
            fields: vec![
                ("tool".into(), "test".into()),
                ("units".into(), "old".into()),
            ],
            anchor: ClockAnchor {
                unix_ns: 0,
                monotonic_ns: 0,
            },
        };
        sink.begin(&meta, &[channel(Domain::Package), channel(Domain::Dram)])
            .unwrap();
        for i in 1..=3u64 {
            let energy = [Joules(0.015), Joules(0.004)];
            sink.sample(&Sample {
                t_ns: 1_000 + i * 1_000_000,
                interval_ns: 1_000_000,
                missed: 0,
                merged: 0,
                freq_hz: 1000.0,
                marks: Default::default(),
                energy: &energy,
            })
            .unwrap();
        }
        sink.finish().unwrap();
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("# idle_power: configured: 10 W per package"));
        assert!(
            !text.contains("# units: old"),
            "the energy rows' notes are replaced"
        );
        let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            rows[0],
            "t_ns,interval_ns,package,kind,id,name,joules,dynamic_j,idle_j,cpu_ns"
        );
        assert_eq!(
            rows[1],
            "1001000,1000000,0,process,4000000000,busy,0.010000,0.005000,0.005000,1000000"
        );
        assert_eq!(
            rows[2],
            "1001000,1000000,0,unattributed,,,0.005000,0.000000,0.005000,1000000"
        );
        assert_eq!(
            rows[3],
            "1001000,1000000,0,total,,,0.015000,0.005000,0.010000,2000000"
        );
        assert_eq!(
            rows[4],
            "1001000,1000000,0,dram,,,0.004000,0.004000,0.000000,0"
        );
        assert_eq!(rows.len(), 1 + 3 * 4);
        let t = sink.totals().lock().unwrap().clone();
        assert_eq!(
            (t.energy_uj, t.accounted_uj(), t.dram_uj),
            (45_000, 45_000, 12_000)
        );
        assert_eq!(t.entities[&Entity::Process(GONE)].total_uj(), 30_000);
        assert_eq!(t.dropped_slices, 5);
    }

    #[test]
    fn top_n_plus_other_is_bounded_and_adds_up() {
        let mut t = Totals::default();
        for i in 0..100u32 {
            t.entities.insert(
                Entity::Process(i),
                EntityTotal {
                    dynamic_uj: u64::from(i) * 10,
                    idle_uj: 1,
                    cpu_ns: 5,
                },
            );
        }
        let (top, other) = t.top(3);
        let ids: Vec<Entity> = top.iter().map(|(e, _)| *e).collect();
        assert_eq!(
            ids,
            [
                Entity::Process(99),
                Entity::Process(98),
                Entity::Process(97)
            ]
        );
        let all: u64 = t.entities.values().map(EntityTotal::total_uj).sum();
        let got: u64 = top.iter().map(|(_, e)| e.total_uj()).sum::<u64>() + other.total_uj();
        assert_eq!(got, all);
        assert_eq!(other.cpu_ns, 97 * 5);
        let (top, other) = t.top(1000);
        assert_eq!((top.len(), other), (100, EntityTotal::default()));
    }

    /// JSON Lines: the metadata on the first line, then one object per row, each
    /// parsing, with the same figures as the CSV.
    #[test]
    fn jsonl_rows_parse_and_carry_the_same_split() {
        let buf = Buf::default();
        let mut sink = AttributionSink::new(
            buf.clone(),
            LongFormat::Jsonl,
            By::Process,
            IdlePower::Configured(10.0),
            vec![Some(0), Some(0)],
            Box::new(Scripted { given: false }),
            Names::under(None),
        );
        let meta = Metadata {
            fields: vec![("tool".into(), "test".into())],
            anchor: ClockAnchor {
                unix_ns: 0,
                monotonic_ns: 0,
            },
        };
        sink.begin(&meta, &[channel(Domain::Package)]).unwrap();
        let energy = [Joules(0.015)];
        sink.sample(&Sample {
            t_ns: 1_001_000,
            interval_ns: 1_000_000,
            missed: 0,
            merged: 0,
            freq_hz: 1000.0,
            marks: Default::default(),
            energy: &energy,
        })
        .unwrap();
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["meta"]["attribution"], "process");
        assert_eq!(lines[1]["kind"], "process");
        assert_eq!(lines[1]["id"], u64::from(GONE));
        assert_eq!(lines[1]["name"], "busy");
        assert_eq!(lines[1]["joules"].as_f64(), Some(0.01));
        assert_eq!(lines[2]["kind"], "unattributed");
        assert!(lines[2]["id"].is_null());
        assert_eq!(lines[3]["kind"], "total");
        assert_eq!(lines[3]["cpu_ns"], 2_000_000);
        assert_eq!(lines.len(), 4, "no dram rows without a DRAM channel");
    }
}
