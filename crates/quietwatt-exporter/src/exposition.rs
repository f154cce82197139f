//! The Prometheus text exposition format (0.0.4) and OpenMetrics 1.0, rendered
//! from an [`Exposition`]: plain figures, so the rendering is tested without a
//! session and served by whatever HTTP server the caller has.
//!
//! The exporter's own metric families, all prefixed `quietwatt_`:
//!
//! | family | type | labels |
//! |---|---|---|
//! | `energy_joules_total` | counter | `socket`, `domain`, `mechanism` (`die` on multi-die parts; `emulated="true"` when read from the emulator; `estimated="true"` for a power model's estimate, mechanism `estimate`) |
//! | `rapl_resets_total` | counter | `socket`, `domain` (`die`) |
//! | `rapl_ambiguous_decreases_total` | counter | `socket`, `domain` (`die`) |
//! | `up` | gauge | `socket`, `domain` (`die`) |
//! | `samples_total` | counter | none |
//! | `missed_deadlines_total` | counter | none |
//! | `cpu_seconds_total` | counter | none |
//! | `wakeups_total` | counter | none |
//! | `build_info` | gauge (OpenMetrics: info) | `version` (`emulated="true"` from the emulator) |
//!
//! Between `missed_deadlines_total` and `build_info` come the [`Family`]s that
//! [`crate::Collector`]s contributed, in the order they were registered: the
//! process's own usage (`cpu_seconds_total`, `wakeups_total`,
//! [`crate::ProcessCollector`]) first; then, in the `quietwatt` command, each
//! CPU's idle states and wake-ups (`quietwatt_events::exporter`) and the package
//! energy split among processes or cgroups (`quietwatt_attribution::exporter`).
//!
//! The label sets are bounded by the machine: one series per counter RAPL
//! exposes, at most sockets × dies × 5 domains, and one mechanism per process;
//! a collector keeps its own bounded (one series per CPU and idle state; the few
//! entities the caller chose plus `other`).
//! Power is not exported: `rate(quietwatt_energy_joules_total[1m])` is watts, and
//! a gauge of the power between two scrapes would depend on the scrape interval.

use quietwatt::meter::DomainEnergy;
use quietwatt::{Measurement, Mechanism};
use std::borrow::Cow;
use std::fmt::Write as _;

/// The two formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExpositionFormat {
    /// `text/plain; version=0.0.4`, what every Prometheus understands.
    Text,
    /// `application/openmetrics-text; version=1.0.0`, asked for by an `Accept`
    /// header that prefers it.
    OpenMetrics,
}

impl ExpositionFormat {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` (version 1.0.0 or none) with a quality at
    /// least that of `text/plain` or `*/*`; the text format otherwise, and without
    /// a header (Prometheus's own fallback).
    pub fn negotiate(accept: Option<&str>) -> ExpositionFormat {
        let Some(accept) = accept else {
            return ExpositionFormat::Text;
        };
        let (mut om, mut text) = (0.0f64, 0.0f64);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let (mut q, mut version) = (1.0f64, None);
            for p in parts {
                if let Some((k, v)) = p.split_once('=') {
                    match k.trim().to_ascii_lowercase().as_str() {
                        "q" => q = v.trim().parse().unwrap_or(0.0),
                        "version" => version = Some(v.trim().to_string()),
                        _ => {}
                    }
                }
            }
            match media.as_str() {
                // 0.0.1 is the draft that Prometheus also offers; only 1.0.0 is rendered.
                "application/openmetrics-text"
                    if version.as_deref().is_none_or(|v| v == "1.0.0") =>
                {
                    om = om.max(q);
                }
                "text/plain" | "*/*" | "text/*" => text = text.max(q),
                _ => {}
            }
        }
        if om > 0.0 && om >= text {
            ExpositionFormat::OpenMetrics
        } else {
            ExpositionFormat::Text
        }
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            ExpositionFormat::Text => "text/plain; version=0.0.4; charset=utf-8",
            ExpositionFormat::OpenMetrics => {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            }
        }
    }
}

/// One energy counter as exported.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainSeries {
    /// The package.
    pub socket: u32,
    /// The die, on multi-die parts.
    pub die: Option<u32>,
    /// `package`, `core`, `uncore`, `dram` or `psys`.
    pub domain: &'static str,
    /// The mechanism read (`powercap`, `perf`, `msr`).
    pub mechanism: &'static str,
    /// Corrected energy since the exporter started, joules (never decreasing).
    pub energy_j: f64,
    /// Resets, steps back and jumps of the counter that the energy absorbed (and
    /// restarts after a failure): intervals whose energy was lost.
    pub resets: u64,
    /// Decreases that one wrap and a restart explained equally well (a reading
    /// late against a small counter's range), counted as the wrap: no energy lost,
    /// but each may have added up to the counter's range. Not resets.
    pub ambiguous: u64,
    /// Whether the counter is still read; a failed one keeps its last energy.
    pub up: bool,
}

impl DomainSeries {
    /// The series of every counter of `report` (a session's snapshot), marked up,
    /// labelled with what the report calls its source (a stand-in's own label,
    /// never a real mechanism's).
    pub fn of_report(report: &Measurement) -> Vec<DomainSeries> {
        let mechanism = report.energy.mechanism;
        report
            .energy
            .domains
            .iter()
            .map(|d| DomainSeries::of_domain(d, mechanism))
            .collect()
    }

    /// One counter's series: its anomalies less the ambiguous decreases (counted
    /// as wraps, no energy lost) are its resets; those go apart.
    pub fn of_domain(d: &DomainEnergy, mechanism: &'static str) -> DomainSeries {
        DomainSeries {
            socket: d.socket,
            die: d.die,
            domain: d.domain,
            mechanism,
            energy_j: d.energy_j.0,
            resets: d.anomalies - d.ambiguous,
            ambiguous: d.ambiguous,
            up: true,
        }
    }
}

/// Everything one scrape shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Exposition {
    /// The energy counters.
    pub domains: Vec<DomainSeries>,
    /// Readings taken by the samplers.
    pub samples: u64,
    /// Sampling deadlines that passed without a reading.
    pub missed_deadlines: u64,
    /// The exporter's version, for `build_info`.
    pub version: String,
    /// Energies are rounded down to a multiple of this many joules (> 0): see
    /// [`quantize`]. [`Value::Joules`] of every family too.
    pub resolution_j: f64,
    /// What the collectors contributed at the refresh, in their order.
    pub families: Vec<Family>,
    /// Whether the figures come from quietwatt's emulator, not hardware: every
    /// energy series and `build_info` then carry `emulated="true"`, so that a
    /// dashboard fed by an exporter left on `--emulate auto` cannot pass them off
    /// as a machine's.
    pub emulated: bool,
    /// Why no energy is exported, when no counter can be read here (no RAPL, no
    /// permission): the energy families are then empty and `quietwatt_up` has one
    /// series, `quietwatt_up{reason="..."} 0`, so that a fleet's dashboards and
    /// alerts see the node and why, as node_exporter leaves out a collector it
    /// cannot run.
    pub unavailable: Option<String>,
}

/// What a metric family is (its `# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// Never decreases while the exporter runs; its samples are `NAME_total`.
    Counter,
    /// Goes up and down; its samples are `NAME`.
    Gauge,
    /// Labels that describe the exporter, the value always 1; its samples are
    /// `NAME_info` (a gauge in the text format).
    Info,
}

/// The unit of a family (OpenMetrics' `# UNIT`, and the suffix of its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unit {
    /// Joules: the family's name ends in `_joules`.
    Joules,
    /// Seconds: the family's name ends in `_seconds`.
    Seconds,
    /// Bytes: the family's name ends in `_bytes`.
    Bytes,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Joules => "joules",
            Unit::Seconds => "seconds",
            Unit::Bytes => "bytes",
        }
    }
}

/// A sample's value, typed by its unit, which says how it is written.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// Joules, rounded down to the exposition's resolution ([`quantize`]) and
    /// written with the decimals that show it.
    Joules(f64),
    /// Seconds, written with 6 decimals (microseconds).
    Seconds(f64),
    /// A count.
    Count(u64),
}

/// One sample of a family: its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `(name, value)` pairs in the order written; values are escaped when written.
    pub labels: Vec<(Cow<'static, str>, String)>,
    /// The value.
    pub value: Value,
}

/// One metric family a [`crate::Collector`] contributes: its name, type, unit,
/// help and samples. A family is written with its `# HELP` and `# TYPE` even
/// without samples; a collector that has nothing to say contributes no family.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family's name without `_total` or `_info` (`quietwatt_cpu_wakeups`):
    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`, or the family is left out of the exposition.
    pub name: Cow<'static, str>,
    /// Counter, gauge or info.
    pub kind: Kind,
    /// Its unit, if it has one.
    pub unit: Option<Unit>,
    /// One line saying what it counts.
    pub help: Cow<'static, str>,
    /// Its samples, in the order written.
    pub samples: Vec<Sample>,
}

impl Family {
    /// An empty family.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        kind: Kind,
        unit: Option<Unit>,
        help: impl Into<Cow<'static, str>>,
    ) -> Family {
        Family {
            name: name.into(),
            kind,
            unit,
            help: help.into(),
            samples: Vec::new(),
        }
    }

    /// Adds a sample with `labels` (`(name, value)`, written in this order).
    pub fn push<K: Into<Cow<'static, str>>>(
        &mut self,
        labels: impl IntoIterator<Item = (K, String)>,
        value: Value,
    ) {
        self.samples.push(Sample {
            labels: labels.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            value,
        });
    }

    /// Whether the family's and every label's name are valid names, so that the
    /// exposition stays parseable whatever a collector gives.
    fn is_valid(&self) -> bool {
        let name_ok = |n: &str, colon: bool| {
            let mut c = n.chars();
            c.next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || (colon && f == ':'))
                && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || (colon && ch == ':'))
        };
        name_ok(&self.name, true)
            && self
                .samples
                .iter()
                .all(|s| s.labels.iter().all(|(k, _)| name_ok(k, false)))
    }
}

/// `joules` rounded down to a multiple of `resolution` (the exported precision).
/// Down, not to the nearest, so a counter that never decreases stays so.
pub fn quantize(joules: f64, resolution: f64) -> f64 {
    if resolution.is_nan() || resolution <= 0.0 || !joules.is_finite() {
        return joules;
    }
    (joules / resolution + 1e-9).floor().max(0.0) * resolution
}

/// Decimal places that show a multiple of `resolution` exactly (0.001 → 3).
fn decimals(resolution: f64) -> usize {
    let mut d = 0;
    let mut r = resolution;
    while d < 9 && (r - r.round()).abs() > 1e-9 * r.max(1.0) {
        r *= 10.0;
        d += 1;
    }
    d
}

/// A label value escaped as both formats require: backslash, quote, newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `socket="0",domain="package"` (with `die` when there is one).
fn domain_labels(d: &DomainSeries) -> String {
    let mut s = format!("socket=\"{}\"", d.socket);
    if let Some(die) = d.die {
        let _ = write!(s, ",die=\"{die}\"");
    }
    let _ = write!(s, ",domain=\"{}\"", escape(d.domain));
    s
}

/// A metric family being written: its metadata once, then its samples.
struct Writer<'a> {
    out: &'a mut String,
    format: ExpositionFormat,
}

impl Writer<'_> {
    /// `# HELP`, `# TYPE` (and `# UNIT` in OpenMetrics) of family `base`, whose
    /// samples are `base_total` for a counter (the text format names the family
    /// after its sample, OpenMetrics after the sample without `_total`).
    fn header(&mut self, base: &str, kind: &str, unit: Option<&str>, help: &str) {
        let name = match (self.format, kind) {
            (ExpositionFormat::Text, "counter") => format!("{base}_total"),
            (ExpositionFormat::Text, "info") => format!("{base}_info"),
            _ => base.to_string(),
        };
        let kind = match (self.format, kind) {
            (ExpositionFormat::Text, "info") => "gauge",
            (_, k) => k,
        };
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        if let (ExpositionFormat::OpenMetrics, Some(u)) = (self.format, unit) {
            let _ = writeln!(self.out, "# UNIT {name} {u}");
        }
    }

    /// A collector's family: its metadata, then each sample with its labels
    /// escaped and its value written as its unit says.
    fn family(&mut self, family: &Family, resolution: f64, places: usize) {
        let kind = match family.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Info => "info",
        };
        // A collector's help is one line: a newline in it would end the comment.
        let help = family.help.replace('\\', "\\\\").replace('\n', "\\n");
        self.header(&family.name, kind, family.unit.map(Unit::name), &help);
        let name = match family.kind {
            Kind::Counter => format!("{}_total", family.name),
            Kind::Info => format!("{}_info", family.name),
            Kind::Gauge => family.name.to_string(),
        };
        let mut labels = String::new();
        for s in &family.samples {
            labels.clear();
            for (i, (k, v)) in s.labels.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(labels, "{sep}{k}=\"{}\"", escape(v));
            }
            let value = match s.value {
                Value::Joules(j) => format!("{:.*}", places, quantize(j, resolution)),
                Value::Seconds(t) => format!("{t:.6}"),
                Value::Count(n) => n.to_string(),
            };
            self.sample(&name, &labels, &value);
        }
    }

    fn sample(&mut self, name: &str, labels: &str, value: &str) {
        if labels.is_empty() {
            let _ = writeln!(self.out, "{name} {value}");
        } else {
            let _ = writeln!(self.out, "{name}{{{labels}}} {value}");
        }
    }
}

/// The exposition in `format`: `# HELP` and `# TYPE` before each family, one
/// `name{labels} value` line per sample, and `# EOF` last in OpenMetrics.
pub fn render(e: &Exposition, format: ExpositionFormat) -> String {
    let mut out = String::with_capacity(2048);
    let mut f = Writer {
        out: &mut out,
        format,
    };
    let places = decimals(e.resolution_j);

    f.header(
        "quietwatt_energy_joules",
        "counter",
        Some("joules"),
        "Energy of a RAPL domain since the exporter started, wraps corrected, resets absorbed; rate() gives watts.",
    );
    for d in &e.domains {
        let labels = format!(
            "{},mechanism=\"{}\"{}{}",
            domain_labels(d),
            escape(d.mechanism),
            if e.emulated { ",emulated=\"true\"" } else { "" },
            // A model's estimate, never to be summed with measurements unaware.
            if d.mechanism == Mechanism::Estimate.name() {
                ",estimated=\"true\""
            } else {
                ""
            }
        );
        let v = format!("{:.*}", places, quantize(d.energy_j, e.resolution_j));
        f.sample("quietwatt_energy_joules_total", &labels, &v);
    }

    f.header(
        "quietwatt_rapl_resets",
        "counter",
        None,
        "Resets, steps back and implausible jumps of a RAPL counter that the energy absorbed (and restarts after a failure).",
    );
    for d in &e.domains {
        f.sample(
            "quietwatt_rapl_resets_total",
            &domain_labels(d),
            &d.resets.to_string(),
        );
    }

    f.header(
        "quietwatt_rapl_ambiguous_decreases",
        "counter",
        None,
        "Decreases of a RAPL counter that one wrap and a restart explain equally well (read late against its range): counted as a wrap, so the energy may be high by up to the range each.",
    );
    for d in &e.domains {
        f.sample(
            "quietwatt_rapl_ambiguous_decreases_total",
            &domain_labels(d),
            &d.ambiguous.to_string(),
        );
    }

    f.header(
        "quietwatt_up",
        "gauge",
        None,
        "1 while a RAPL counter is read, 0 after it failed (its energy stays at the last good reading); one series with a reason, 0, when no counter can be read here.",
    );
    for d in &e.domains {
        f.sample(
            "quietwatt_up",
            &domain_labels(d),
            if d.up { "1" } else { "0" },
        );
    }
    if let Some(reason) = &e.unavailable {
        f.sample(
            "quietwatt_up",
            &format!("reason=\"{}\"", escape(reason)),
            "0",
        );
    }

    f.header(
        "quietwatt_samples",
        "counter",
        None,
        "Readings of the counters taken by the exporter's samplers.",
    );
    f.sample("quietwatt_samples_total", "", &e.samples.to_string());

    f.header(
        "quietwatt_missed_deadlines",
        "counter",
        None,
        "Sampling deadlines that passed without a reading (the next reading covers them).",
    );
    f.sample(
        "quietwatt_missed_deadlines_total",
        "",
        &e.missed_deadlines.to_string(),
    );

    for family in e.families.iter().filter(|f| f.is_valid()) {
        f.family(family, e.resolution_j, places);
    }

    f.header(
        "quietwatt_build",
        "info",
        None,
        "The exporter's version; always 1.",
    );
    f.sample(
        "quietwatt_build_info",
        &format!(
            "version=\"{}\"{}",
            escape(&e.version),
            if e.emulated { ",emulated=\"true\"" } else { "" }
        ),
        "1",
    );

    if format == ExpositionFormat::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt::{Joules, Watts};

    fn sample() -> Exposition {
        Exposition {
            domains: vec![
                DomainSeries {
                    socket: 0,
                    die: None,
                    domain: "package",
                    mechanism: "powercap",
                    energy_j: 12.345678,
                    resets: 1,
                    ambiguous: 2,
                    up: true,
                },
                DomainSeries {
                    socket: 0,
                    die: None,
                    domain: "dram",
                    mechanism: "powercap",
                    energy_j: 3.0,
                    resets: 0,
                    ambiguous: 0,
                    up: false,
                },
            ],
            samples: 42,
            missed_deadlines: 0,
            version: "0.1.0".into(),
            resolution_j: 0.01,
            families: Vec::new(),
            emulated: false,
            unavailable: None,
        }
    }

    #[test]
    fn an_ambiguous_decrease_is_exported_apart_and_never_as_a_reset() {
        let d = DomainEnergy {
            socket: 0,
            die: None,
            domain: "package",
            energy_j: Joules(5.0),
            uncertainty_j: Joules(0.1),
            mean_power_w: Watts(10.0),
            power_uncertainty_w: Watts(0.2),
            quantum_j: Joules(1e-6),
            update_interval_s: 0.001,
            wraps: 4,
            anomalies: 3,
            ambiguous: 2,
        };
        let s = DomainSeries::of_domain(&d, "powercap");
        assert_eq!((s.resets, s.ambiguous), (1, 2));
        let e = Exposition {
            domains: vec![s],
            ..sample()
        };
        let t = render(&e, ExpositionFormat::Text);
        assert!(
            t.contains("quietwatt_rapl_resets_total{socket=\"0\",domain=\"package\"} 1\n")
                && t.contains(
                    "quietwatt_rapl_ambiguous_decreases_total{socket=\"0\",domain=\"package\"} 2\n"
                ),
            "{t}"
        );
    }

    #[test]
    fn emulated_figures_say_so_on_every_energy_series_and_build_info() {
        let mut e = sample();
        e.emulated = true;
        for format in [ExpositionFormat::Text, ExpositionFormat::OpenMetrics] {
            let t = render(&e, format);
            for line in t.lines().filter(|l| {
                l.starts_with("quietwatt_energy_joules_total{")
                    || l.starts_with("quietwatt_build_info{")
            }) {
                assert!(line.contains("emulated=\"true\""), "{line}");
            }
        }
        assert!(!render(&sample(), ExpositionFormat::Text).contains("emulated"));
    }

    /// A collector's families: two kinds, both units, labels to escape.
    fn collected() -> Vec<Family> {
        let mut idle = Family::new(
            "quietwatt_cpu_idle_seconds",
            Kind::Counter,
            Some(Unit::Seconds),
            "Time in an idle state.",
        );
        idle.push(
            [("cpu", "1".to_string()), ("state", "C\"1".to_string())],
            Value::Seconds(0.5),
        );
        let mut split = Family::new(
            "quietwatt_split_energy_joules",
            Kind::Gauge,
            Some(Unit::Joules),
            "Two\nlines",
        );
        split.push([("part", "dynamic".to_string())], Value::Joules(1.239));
        split.push(Vec::<(&str, String)>::new(), Value::Count(3));
        vec![idle, split]
    }

    #[test]
    fn collected_families_come_between_the_exporters_own_and_build_info() {
        let mut e = sample();
        e.families = collected();
        let t = render(&e, ExpositionFormat::Text);
        let at = |needle: &str| t.find(needle).unwrap_or_else(|| panic!("{needle}:\n{t}"));
        assert!(
            at("quietwatt_missed_deadlines_total ")
                < at("# HELP quietwatt_cpu_idle_seconds_total ")
        );
        assert!(
            at("quietwatt_cpu_idle_seconds_total{") < at("# HELP quietwatt_split_energy_joules ")
        );
        assert!(at("quietwatt_split_energy_joules ") < at("# HELP quietwatt_build_info "));
        assert!(t.contains("# TYPE quietwatt_cpu_idle_seconds_total counter\n"));
        assert!(
            t.contains("quietwatt_cpu_idle_seconds_total{cpu=\"1\",state=\"C\\\"1\"} 0.500000\n"),
            "{t}"
        );
        // Joules at the exposition's resolution, rounded down, like the energy.
        assert!(
            t.contains("quietwatt_split_energy_joules{part=\"dynamic\"} 1.23\n"),
            "{t}"
        );
        assert!(t.contains("quietwatt_split_energy_joules 3\n"), "{t}");
        // A help of two lines stays one comment line.
        assert!(
            t.contains("# HELP quietwatt_split_energy_joules Two\\nlines\n"),
            "{t}"
        );
        let om = render(&e, ExpositionFormat::OpenMetrics);
        assert!(om.contains("# TYPE quietwatt_cpu_idle_seconds counter\n# UNIT quietwatt_cpu_idle_seconds seconds\n"));
        assert!(om.contains("# TYPE quietwatt_split_energy_joules gauge\n# UNIT quietwatt_split_energy_joules joules\n"));
        assert!(om.ends_with("# EOF\n"));
    }

    #[test]
    fn a_family_with_an_invalid_name_is_left_out_not_written_broken() {
        let mut e = sample();
        let mut bad = Family::new("not a name", Kind::Counter, None, "x");
        bad.push([("cpu", "0".to_string())], Value::Count(1));
        let mut bad_label = Family::new("quietwatt_x", Kind::Counter, None, "x");
        bad_label.push([("a-b", "0".to_string())], Value::Count(1));
        e.families = vec![bad, bad_label];
        assert_eq!(
            render(&e, ExpositionFormat::Text),
            render(&sample(), ExpositionFormat::Text)
        );
    }

    #[test]
    fn the_text_format_has_metadata_before_samples_and_no_eof() {
        let t = render(&sample(), ExpositionFormat::Text);
        assert!(t.contains("# TYPE quietwatt_energy_joules_total counter\n"));
        assert!(t.contains(
            "quietwatt_energy_joules_total{socket=\"0\",domain=\"package\",mechanism=\"powercap\"} 12.34\n"
        ));
        assert!(t.contains("quietwatt_up{socket=\"0\",domain=\"dram\"} 0\n"));
        assert!(t.contains("# TYPE quietwatt_build_info gauge\n"));
        assert!(t.contains("quietwatt_build_info{version=\"0.1.0\"} 1\n"));
        assert!(!t.contains("# EOF"));
        assert!(!t.contains("# UNIT"));
        // Every line is metadata or `name{labels} value`.
        for line in t.lines() {
            assert!(
                line.starts_with("# HELP ")
                    || line.starts_with("# TYPE ")
                    || line.split(' ').count() == 2,
                "{line}"
            );
        }
    }

    #[test]
    fn openmetrics_names_counter_families_without_total_and_ends_with_eof() {
        let t = render(&sample(), ExpositionFormat::OpenMetrics);
        assert!(t.contains("# TYPE quietwatt_energy_joules counter\n"));
        assert!(t.contains("# UNIT quietwatt_energy_joules joules\n"));
        assert!(t.contains("quietwatt_energy_joules_total{"));
        assert!(t.contains("# TYPE quietwatt_build info\n"));
        assert!(t.contains("quietwatt_build_info{version=\"0.1.0\"} 1\n"));
        assert!(t.ends_with("# EOF\n"));
        assert_eq!(t.matches("# EOF").count(), 1);
    }

    #[test]
    fn energies_are_rounded_down_to_the_resolution() {
        assert_eq!(quantize(12.345678, 0.01), 12.34);
        assert_eq!(quantize(0.0099, 0.01), 0.0);
        assert_eq!(quantize(5.0, 1.0), 5.0);
        assert_eq!(decimals(0.01), 2);
        assert_eq!(decimals(0.001), 3);
        assert_eq!(decimals(1.0), 0);
        assert_eq!(decimals(0.5), 1);
        // Never above the value: a counter rounded this way cannot decrease.
        let mut last = 0.0;
        for i in 0..1000 {
            let q = quantize(i as f64 * 0.0037, 0.01);
            assert!(q >= last && q <= i as f64 * 0.0037 + 1e-12);
            last = q;
        }
    }

    #[test]
    fn the_accept_header_chooses_the_format() {
        use ExpositionFormat::*;
        assert_eq!(ExpositionFormat::negotiate(None), Text);
        assert_eq!(ExpositionFormat::negotiate(Some("text/plain")), Text);
        assert_eq!(ExpositionFormat::negotiate(Some("*/*")), Text);
        // What Prometheus 2.x sends.
        assert_eq!(
            ExpositionFormat::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            )),
            OpenMetrics
        );
        assert_eq!(
            ExpositionFormat::negotiate(Some("application/openmetrics-text")),
            OpenMetrics
        );
        assert_eq!(
            ExpositionFormat::negotiate(Some(
                "text/plain;q=0.9,application/openmetrics-text;q=0.5"
            )),
            Text
        );
        assert_eq!(
            ExpositionFormat::negotiate(Some("application/openmetrics-text; version=0.0.1")),
            Text
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
