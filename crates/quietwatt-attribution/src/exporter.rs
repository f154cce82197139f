//! The exporter's collector of the package energy split among cgroups or
//! processes at each context switch ([`AttributionCollector`], what `serve
//! --attribute` registers), as counters of bounded number: the entities that used
//! the most lately, and `other`.
//!
//! The split runs on the exporter's thread at each refresh, over the samples the
//! package's session took since the last one (the accounting program's slices
//! wait in the kernel's ring meanwhile). The totals per entity are taken out of
//! the split at each refresh and added to a [`Bounded`] set, so memory follows
//! the entities active lately, not every process that ever ran.
//!
//! It is a thin layer over the [`Attribution`] transform (no rows, no output):
//! the split itself is the transform's.
//!
//! | family | type | labels |
//! |---|---|---|
//! | `quietwatt_attributed_energy_joules_total` | counter | `by`, `id`, `name` (a pod's: `pod_uid`, `container_id`, `namespace`, `pod`), `part`, and `estimated="true"` where the package energy is a model's estimate |
//! | `quietwatt_attributed_cpu_seconds_total` | counter | `by`, `id`, `name` (a pod's, as above) |
//! | `quietwatt_unattributed_energy_joules_total` | counter | `part` (and `estimated`, as above) |
//! | `quietwatt_attribution_dropped_slices_total` | counter | none |

use crate::{
    Attribution, Bounded, By, Entity, EntityTotal, IdlePower, Names, PodDirectory, PodIdentity,
};
use quietwatt::session::SampleRow;
use quietwatt::sink::Sample;
use quietwatt::transform::Transform;
use quietwatt::{Domain, DomainId, Hertz};
use quietwatt_exporter::{CollectError, Collector, Family, Kind, Unit, Value};
use std::path::PathBuf;
use std::time::Duration;

/// How long "lately" lasts: an entity's energy counts half as much for choosing the
/// exported set after this long.
const HALF_LIFE: Duration = Duration::from_secs(30);

/// The package energy split among processes or cgroups since the exporter started:
/// a bounded set of entities and `other`, which with the unattributed part add up
/// to the package energy that was split.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributionFigures {
    /// What the energy is split by: `process` or `cgroup` (the `by` label).
    pub by: &'static str,
    /// One series per entity exported, and `other` for the rest.
    pub series: Vec<AttributedSeries>,
    /// Dynamic energy no entity got (only the idle task ran), joules.
    pub unattributed_dynamic_j: f64,
    /// The share of the idle part that went to idle CPUs and time not seen, joules.
    pub unattributed_idle_j: f64,
    /// Context-switch slices lost in the kernel (their energy is unattributed).
    pub dropped_slices: u64,
    /// Whether an idle power (configured or fitted) sets the idle part apart.
    /// Without one, nothing tells idle energy from the rest: each series is
    /// exported once as `part="unsplit"`, never as `dynamic` (which would call the
    /// idle power dynamic).
    pub idle_split: bool,
    /// Whether the package energy split is a power model's estimate: every
    /// energy series then says `estimated="true"`, as the package's does.
    pub estimated: bool,
}

/// One entity's (or `other`'s) part of the package energy.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributedSeries {
    /// The tgid or cgroup id (`id` label); `other` for everything else.
    pub id: String,
    /// The process's or cgroup's readable name (`name` label).
    pub name: String,
    /// Its share of the energy above the package's idle power, joules.
    pub dynamic_j: f64,
    /// Its share of the package's idle energy, joules.
    pub idle_j: f64,
    /// CPU time it ran, seconds.
    pub cpu_seconds: f64,
    /// A cgroup's pod and container (`pod_uid`, `container_id`, `namespace`,
    /// `pod` labels), when it is a Kubernetes pod's.
    pub pod: Option<PodIdentity>,
}

/// How the collector splits and bounds.
#[derive(Debug, Clone)]
pub struct CollectorOptions {
    /// Processes or cgroups.
    pub by: By,
    /// The idle power the sink sets apart (whether the parts are `dynamic` and
    /// `idle`, or `unsplit`).
    pub idle: IdlePower,
    /// How many entities get series of their own (the rest is `other`).
    pub top: usize,
    /// The exporter's refresh period (the set is chosen over refreshes).
    pub refresh: Duration,
    /// The rate of the package's session (each sample's `freq_hz`).
    pub freq: Hertz,
    /// Where the kubelet's pod log directories are ([`crate::kubernetes::POD_LOGS`]
    /// on a node), to name a pod's namespace and name.
    pub pod_logs: PathBuf,
    /// Whether the package energy is a power model's estimate (the session
    /// reads mechanism `estimate`), labelled so on every energy series.
    pub estimated: bool,
}

/// The split and the exported counters.
#[derive(Debug)]
pub struct AttributionCollector {
    split: Attribution,
    names: Names,
    pods: PodDirectory,
    by: By,
    bounded: Bounded,
    freq_hz: f64,
    /// Whether an idle power (configured or fitted) sets the idle part apart.
    idle_split: bool,
    estimated: bool,
}

impl AttributionCollector {
    /// Over `split` (the [`Attribution`] transform on the accounting program, made
    /// with `options.by` and `options.idle`), laid out for samples of `channels`
    /// (the session's that reads the package:
    /// `Exporter::channels_reading(Domain::Package)`).
    pub fn new(
        mut split: Attribution,
        channels: &[DomainId],
        options: CollectorOptions,
    ) -> AttributionCollector {
        split.begin(channels);
        let half_life = HALF_LIFE.as_secs_f64() / options.refresh.as_secs_f64().max(1e-3);
        AttributionCollector {
            idle_split: !matches!(options.idle, IdlePower::None),
            split,
            names: Names::new(),
            pods: PodDirectory::new(options.pod_logs),
            by: options.by,
            bounded: Bounded::new(options.top, half_life),
            freq_hz: options.freq.hz(),
            estimated: options.estimated,
        }
    }

    /// Splits one sample of the package's session.
    pub fn feed(&mut self, row: &SampleRow) {
        let sample = Sample {
            t_ns: row.t_ns,
            interval_ns: row.interval_ns,
            missed: u32::try_from(row.missed).unwrap_or(u32::MAX),
            merged: 0,
            freq_hz: self.freq_hz,
            marks: Default::default(),
            energy: &row.energy_j,
        };
        self.split.feed(&sample);
    }

    /// The counters since the exporter started, for the exposition.
    pub fn figures(&mut self) -> AttributionFigures {
        self.split.settle();
        let deltas = self.split.take_entities();
        let (unattributed, dropped) = {
            let t = self.split.totals();
            (t.unattributed, t.dropped_slices)
        };
        self.bounded.update(&deltas);
        let j = |uj: u64| uj as f64 / 1e6;
        let series = |id: String, name: String, pod, t: &EntityTotal| AttributedSeries {
            id,
            name,
            dynamic_j: j(t.dynamic_uj),
            idle_j: j(t.idle_uj),
            cpu_seconds: t.cpu_ns as f64 / 1e9,
            pod,
        };
        let mut out: Vec<AttributedSeries> = Vec::new();
        for (e, t) in self.bounded.members() {
            let (id, pod) = match e {
                Entity::Process(p) => (p.to_string(), None),
                Entity::Cgroup(c) => {
                    let path = self.names.cgroup(*c).map(|(p, _)| p.to_string());
                    let pod = path.and_then(|p| self.pods.identify(&p));
                    (c.to_string(), pod)
                }
            };
            out.push(series(id, self.split.name_of(&mut self.names, *e), pod, t));
        }
        out.push(series(
            "other".into(),
            "other".into(),
            None,
            self.bounded.other(),
        ));
        AttributionFigures {
            by: self.by.name(),
            series: out,
            unattributed_dynamic_j: j(unattributed.dynamic_uj),
            unattributed_idle_j: j(unattributed.idle_uj),
            dropped_slices: dropped,
            idle_split: self.idle_split,
            estimated: self.estimated,
        }
    }
}

/// The attribution's families (see the module's table).
pub fn families(a: &AttributionFigures) -> Vec<Family> {
    let labels = |s: &AttributedSeries| {
        let mut l = vec![
            ("by", a.by.to_string()),
            ("id", s.id.clone()),
            ("name", s.name.clone()),
        ];
        l.extend(s.pod.iter().flat_map(PodIdentity::labels));
        l
    };
    // A model's estimate, never to be summed with measurements unaware.
    let estimated = |l: &mut Vec<(&'static str, String)>| {
        if a.estimated {
            l.push(("estimated", "true".to_string()));
        }
    };
    let parts = |dynamic: f64, idle: f64| -> Vec<(&'static str, f64)> {
        if a.idle_split {
            vec![("dynamic", dynamic), ("idle", idle)]
        } else {
            vec![("unsplit", dynamic + idle)]
        }
    };
    let mut energy = Family::new(
        "quietwatt_attributed_energy_joules",
        Kind::Counter,
        Some(Unit::Joules),
        "Package energy attributed to a process or cgroup (by CPU time at each context switch) since the exporter started, in two parts: dynamic (above the idle power) and its share of idle, or one part, unsplit, where no idle power is set apart; the rest of the entities are id=\"other\".",
    );
    for s in &a.series {
        for (part, v) in parts(s.dynamic_j, s.idle_j) {
            let mut l = labels(s);
            l.push(("part", part.to_string()));
            estimated(&mut l);
            energy.push(l, Value::Joules(v));
        }
    }
    let mut cpu = Family::new(
        "quietwatt_attributed_cpu_seconds",
        Kind::Counter,
        Some(Unit::Seconds),
        "CPU time of a process or cgroup on the measured packages since the exporter started.",
    );
    for s in &a.series {
        cpu.push(labels(s), Value::Seconds(s.cpu_seconds));
    }
    let mut unattributed = Family::new(
        "quietwatt_unattributed_energy_joules",
        Kind::Counter,
        Some(Unit::Joules),
        "Package energy no process or cgroup got: dynamic energy while only the idle task ran, and the idle CPUs' share of the idle part.",
    );
    for (part, v) in parts(a.unattributed_dynamic_j, a.unattributed_idle_j) {
        let mut l = vec![("part", part.to_string())];
        estimated(&mut l);
        unattributed.push(l, Value::Joules(v));
    }
    let mut dropped = Family::new(
        "quietwatt_attribution_dropped_slices",
        Kind::Counter,
        None,
        "Context-switch slices the kernel could not hand over (a full ring): their energy is unattributed.",
    );
    dropped.push(
        std::iter::empty::<(&str, String)>(),
        Value::Count(a.dropped_slices),
    );
    vec![energy, cpu, unattributed, dropped]
}

impl Collector for AttributionCollector {
    fn name(&self) -> &str {
        "attribution"
    }

    fn samples_of(&self) -> Option<Domain> {
        Some(Domain::Package)
    }

    fn sample(&mut self, row: &SampleRow) {
        self.feed(row);
    }

    fn collect(&mut self, out: &mut Vec<Family>) -> Result<(), CollectError> {
        out.extend(families(&self.figures()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt_exporter::{render, Exposition, ExpositionFormat};

    fn exposition(a: &AttributionFigures) -> Exposition {
        Exposition {
            domains: Vec::new(),
            samples: 0,
            missed_deadlines: 0,
            version: "0.1.0".into(),
            resolution_j: 0.01,
            families: families(a),
            emulated: false,
            unavailable: None,
        }
    }

    #[test]
    fn without_an_idle_power_the_attributed_energy_is_unsplit_never_dynamic() {
        let a = AttributionFigures {
            by: "process",
            series: vec![AttributedSeries {
                id: "7".into(),
                name: "loop".into(),
                dynamic_j: 15.0,
                idle_j: 0.0,
                cpu_seconds: 1.0,
                pod: None,
            }],
            unattributed_dynamic_j: 2.0,
            unattributed_idle_j: 0.0,
            dropped_slices: 0,
            idle_split: false,
            estimated: false,
        };
        let t = render(&exposition(&a), ExpositionFormat::Text);
        assert!(
            !t.contains("part=\"dynamic\"") && !t.contains("part=\"idle\""),
            "{t}"
        );
        assert!(
            t.contains("id=\"7\",name=\"loop\",part=\"unsplit\"} 15.00\n"),
            "{t}"
        );
        assert!(
            t.contains("quietwatt_unattributed_energy_joules_total{part=\"unsplit\"} 2.00\n"),
            "{t}"
        );
        // Split from a model's estimate: every energy series says so (CPU
        // time is measured, and does not).
        let t = render(
            &exposition(&AttributionFigures {
                estimated: true,
                ..a
            }),
            ExpositionFormat::Text,
        );
        assert!(
            t.contains("id=\"7\",name=\"loop\",part=\"unsplit\",estimated=\"true\"} 15.00\n")
                && t.contains(
                    "quietwatt_unattributed_energy_joules_total{part=\"unsplit\",estimated=\"true\"} 2.00\n"
                )
                && t.contains("quietwatt_attributed_cpu_seconds_total{by=\"process\",id=\"7\",name=\"loop\"} 1.000000\n"),
            "{t}"
        );
    }

    #[test]
    fn attribution_is_two_parts_per_entity_and_other() {
        let a = AttributionFigures {
            by: "cgroup",
            series: vec![
                AttributedSeries {
                    id: "4242".into(),
                    name: "docker:4f3c\"x".into(),
                    dynamic_j: 1.239,
                    idle_j: 0.5,
                    cpu_seconds: 2.0,
                    pod: None,
                },
                AttributedSeries {
                    id: "other".into(),
                    name: "other".into(),
                    dynamic_j: 0.1,
                    idle_j: 0.0,
                    cpu_seconds: 0.25,
                    pod: None,
                },
            ],
            unattributed_dynamic_j: 0.02,
            unattributed_idle_j: 3.0,
            dropped_slices: 0,
            idle_split: true,
            estimated: false,
        };
        let e = exposition(&a);
        let t = render(&e, ExpositionFormat::Text);
        assert!(t.contains("# TYPE quietwatt_attributed_energy_joules_total counter\n"));
        assert!(t.contains(
            "quietwatt_attributed_energy_joules_total{by=\"cgroup\",id=\"4242\",name=\"docker:4f3c\\\"x\",part=\"dynamic\"} 1.23\n"
        ));
        assert!(t.contains(
            "quietwatt_attributed_energy_joules_total{by=\"cgroup\",id=\"other\",name=\"other\",part=\"idle\"} 0.00\n"
        ));
        assert!(t.contains(
            "quietwatt_attributed_cpu_seconds_total{by=\"cgroup\",id=\"4242\",name=\"docker:4f3c\\\"x\"} 2.000000\n"
        ));
        assert!(t.contains("quietwatt_unattributed_energy_joules_total{part=\"idle\"} 3.00\n"));
        // A pod's container carries its identity in full, before the part.
        let mut a = a;
        a.series[0].pod = Some(PodIdentity {
            pod_uid: "u-1".into(),
            container_id: Some("containerd://abc".into()),
            namespace: None,
            pod: Some("web-0".into()),
        });
        let t = render(&exposition(&a), ExpositionFormat::Text);
        assert!(t.contains(
            "{by=\"cgroup\",id=\"4242\",name=\"docker:4f3c\\\"x\",pod_uid=\"u-1\",container_id=\"containerd://abc\",pod=\"web-0\",part=\"dynamic\"} 1.23\n"
        ), "{t}");
        assert!(t.contains("quietwatt_attribution_dropped_slices_total 0\n"));
        let om = render(&e, ExpositionFormat::OpenMetrics);
        assert!(om.contains("# TYPE quietwatt_attributed_energy_joules counter\n# UNIT quietwatt_attributed_energy_joules joules\n"));
        assert!(om.ends_with("# EOF\n"));
    }
}
