//! The Prometheus text exposition format (0.0.4) and OpenMetrics 1.0, rendered
//! from an [`Exposition`]: plain figures, so the rendering is tested without a
//! session and served by whatever HTTP server the caller has.
//!
//! The metric families, all prefixed `quietwatt_`:
//!
//! | family | type | labels |
//! |---|---|---|
//! | `energy_joules_total` | counter | `socket`, `domain`, `mechanism` (`die` on multi-die parts; `emulated="true"` when read from the emulator) |
//! | `counter_resets_total` | counter | `socket`, `domain` (`die`) |
//! | `up` | gauge | `socket`, `domain` (`die`) |
//! | `samples_total` | counter | none |
//! | `missed_deadlines_total` | counter | none |
//! | `cpu_seconds_total` | counter | none |
//! | `wakeups_total` | counter | none |
//! | `build_info` | gauge (OpenMetrics: info) | `version` (`emulated="true"` from the emulator) |
//! | `cpu_idle_entries_total` (`--events`) | counter | `cpu`, `state` |
//! | `cpu_idle_seconds_total` (`--events`) | counter | `cpu`, `state` |
//! | `cpu_wakeups_total` (`--events`) | counter | `cpu` |
//! | `attributed_energy_joules_total` (attribution) | counter | `by`, `id`, `name`, `part` |
//! | `attributed_cpu_seconds_total` (attribution) | counter | `by`, `id`, `name` |
//! | `unattributed_energy_joules_total` (attribution) | counter | `part` |
//! | `attribution_dropped_slices_total` (attribution) | counter | none |
//!
//! The label sets are bounded by the machine: one series per counter RAPL
//! exposes, at most sockets × dies × 5 domains, and one mechanism per process;
//! with the events, one series per CPU and idle state (cpuidle's states, a
//! handful) and one per CPU; with the attribution, the few entities the caller
//! chose plus `other` ([`AttributionFigures`]), each in two parts (`dynamic`,
//! `idle`).
//! Power is not exported: `rate(quietwatt_energy_joules_total[1m])` is watts, and
//! a gauge of the power between two scrapes would depend on the scrape interval.

use crate::session::Report;
use std::fmt::Write as _;

/// The two formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
                    om = om.max(q)
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
    /// Resets, steps back and jumps of the counter that the energy absorbed.
    pub resets: u64,
    /// Whether the counter is still read; a failed one keeps its last energy.
    pub up: bool,
}

impl DomainSeries {
    /// The series of every counter of `report` (a session's snapshot), marked up,
    /// labelled with what the report calls its source (a stand-in's own label,
    /// never a real mechanism's).
    pub fn of_report(report: &Report) -> Vec<DomainSeries> {
        let mechanism = report.energy.mechanism;
        report
            .energy
            .domains
            .iter()
            .map(|d| DomainSeries {
                socket: d.socket,
                die: d.die,
                domain: d.domain,
                mechanism,
                energy_j: d.energy_j.0,
                resets: d.anomalies,
                up: true,
            })
            .collect()
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
    /// CPU time of the exporting process (user and system), seconds.
    pub cpu_seconds: Option<f64>,
    /// Times the exporting process slept and was woken (voluntary context switches).
    pub wakeups: Option<u64>,
    /// The exporter's version, for `build_info`.
    pub version: String,
    /// Energies are rounded down to a multiple of this many joules (> 0): see
    /// [`quantize`].
    pub resolution_j: f64,
    /// Idle states per CPU since the exporter started (empty without events).
    pub idle: Vec<IdleSeries>,
    /// Wake-ups from idle per CPU since the exporter started (empty without events).
    pub cpu_wakeups: Vec<WakeupSeries>,
    /// The package energy split among processes or cgroups, when attributed.
    pub attribution: Option<AttributionFigures>,
    /// Whether the figures come from quietwatt's emulator, not hardware: every
    /// energy series and `build_info` then carry `emulated="true"`, so that a
    /// dashboard fed by an exporter left on `--emulate auto` cannot pass them off
    /// as a machine's.
    pub emulated: bool,
}

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
}

/// One CPU's use of one idle state since the exporter started.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleSeries {
    /// The CPU.
    pub cpu: u32,
    /// The state's cpuidle name (`C1`, `C6`, `POLL`).
    pub state: String,
    /// Entries into the state (cpuidle's `usage`).
    pub entries: u64,
    /// Seconds in the state (cpuidle's `time`).
    pub seconds: f64,
}

/// One CPU's wake-ups from idle (exits of `power:cpu_idle`) since the exporter
/// started.
#[derive(Debug, Clone, PartialEq)]
pub struct WakeupSeries {
    /// The CPU.
    pub cpu: u32,
    /// Exits from idle.
    pub wakeups: u64,
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
struct Family<'a> {
    out: &'a mut String,
    format: ExpositionFormat,
}

impl Family<'_> {
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
    let mut f = Family {
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
            "{},mechanism=\"{}\"{}",
            domain_labels(d),
            escape(d.mechanism),
            if e.emulated { ",emulated=\"true\"" } else { "" }
        );
        let v = format!("{:.*}", places, quantize(d.energy_j, e.resolution_j));
        f.sample("quietwatt_energy_joules_total", &labels, &v);
    }

    f.header(
        "quietwatt_counter_resets",
        "counter",
        None,
        "Resets, steps back and implausible jumps of a RAPL counter that the energy absorbed (and restarts after a failure).",
    );
    for d in &e.domains {
        f.sample(
            "quietwatt_counter_resets_total",
            &domain_labels(d),
            &d.resets.to_string(),
        );
    }

    f.header(
        "quietwatt_up",
        "gauge",
        None,
        "1 while a RAPL counter is read, 0 after it failed (its energy stays at the last good reading).",
    );
    for d in &e.domains {
        f.sample(
            "quietwatt_up",
            &domain_labels(d),
            if d.up { "1" } else { "0" },
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

    if let Some(cpu) = e.cpu_seconds {
        f.header(
            "quietwatt_cpu_seconds",
            "counter",
            Some("seconds"),
            "CPU time of the exporter process, user and system: what measuring costs.",
        );
        f.sample("quietwatt_cpu_seconds_total", "", &format!("{cpu:.6}"));
    }
    if let Some(w) = e.wakeups {
        f.header(
            "quietwatt_wakeups",
            "counter",
            None,
            "Times the exporter process slept and was woken (voluntary context switches).",
        );
        f.sample("quietwatt_wakeups_total", "", &w.to_string());
    }

    if !e.idle.is_empty() {
        f.header(
            "quietwatt_cpu_idle_entries",
            "counter",
            None,
            "Entries of a CPU into an idle state (cpuidle's usage) since the exporter started.",
        );
        for i in &e.idle {
            let labels = format!("cpu=\"{}\",state=\"{}\"", i.cpu, escape(&i.state));
            f.sample(
                "quietwatt_cpu_idle_entries_total",
                &labels,
                &i.entries.to_string(),
            );
        }
        f.header(
            "quietwatt_cpu_idle_seconds",
            "counter",
            Some("seconds"),
            "Time a CPU spent in an idle state (cpuidle's time) since the exporter started.",
        );
        for i in &e.idle {
            let labels = format!("cpu=\"{}\",state=\"{}\"", i.cpu, escape(&i.state));
            f.sample(
                "quietwatt_cpu_idle_seconds_total",
                &labels,
                &format!("{:.6}", i.seconds),
            );
        }
    }
    if !e.cpu_wakeups.is_empty() {
        f.header(
            "quietwatt_cpu_wakeups",
            "counter",
            None,
            "Wake-ups of a CPU from idle (exits of the power:cpu_idle tracepoint) since the exporter started.",
        );
        for w in &e.cpu_wakeups {
            f.sample(
                "quietwatt_cpu_wakeups_total",
                &format!("cpu=\"{}\"", w.cpu),
                &w.wakeups.to_string(),
            );
        }
    }

    if let Some(a) = &e.attribution {
        render_attribution(&mut f, a, e.resolution_j, places);
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

/// The attribution's families (see the module's table).
fn render_attribution(f: &mut Family<'_>, a: &AttributionFigures, resolution: f64, places: usize) {
    let j = |v: f64| format!("{:.*}", places, quantize(v, resolution));
    let labels = |s: &AttributedSeries| {
        format!(
            "by=\"{}\",id=\"{}\",name=\"{}\"",
            escape(a.by),
            escape(&s.id),
            escape(&s.name)
        )
    };
    f.header(
        "quietwatt_attributed_energy_joules",
        "counter",
        Some("joules"),
        "Package energy attributed to a process or cgroup (by CPU time at each context switch) since the exporter started, in two parts: dynamic (above the idle power) and its share of idle, or one part, unsplit, where no idle power is set apart; the rest of the entities are id=\"other\".",
    );
    let parts = |dynamic: f64, idle: f64| -> Vec<(&'static str, f64)> {
        if a.idle_split {
            vec![("dynamic", dynamic), ("idle", idle)]
        } else {
            vec![("unsplit", dynamic + idle)]
        }
    };
    for s in &a.series {
        for (part, v) in parts(s.dynamic_j, s.idle_j) {
            f.sample(
                "quietwatt_attributed_energy_joules_total",
                &format!("{},part=\"{part}\"", labels(s)),
                &j(v),
            );
        }
    }
    f.header(
        "quietwatt_attributed_cpu_seconds",
        "counter",
        Some("seconds"),
        "CPU time of a process or cgroup on the measured packages since the exporter started.",
    );
    for s in &a.series {
        f.sample(
            "quietwatt_attributed_cpu_seconds_total",
            &labels(s),
            &format!("{:.6}", s.cpu_seconds),
        );
    }
    f.header(
        "quietwatt_unattributed_energy_joules",
        "counter",
        Some("joules"),
        "Package energy no process or cgroup got: dynamic energy while only the idle task ran, and the idle CPUs' share of the idle part.",
    );
    for (part, v) in parts(a.unattributed_dynamic_j, a.unattributed_idle_j) {
        f.sample(
            "quietwatt_unattributed_energy_joules_total",
            &format!("part=\"{part}\""),
            &j(v),
        );
    }
    f.header(
        "quietwatt_attribution_dropped_slices",
        "counter",
        None,
        "Context-switch slices the kernel could not hand over (a full ring): their energy is unattributed.",
    );
    f.sample(
        "quietwatt_attribution_dropped_slices_total",
        "",
        &a.dropped_slices.to_string(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

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
                    up: true,
                },
                DomainSeries {
                    socket: 0,
                    die: None,
                    domain: "dram",
                    mechanism: "powercap",
                    energy_j: 3.0,
                    resets: 0,
                    up: false,
                },
            ],
            samples: 42,
            missed_deadlines: 0,
            cpu_seconds: Some(0.25),
            wakeups: Some(7),
            version: "0.1.0".into(),
            resolution_j: 0.01,
            idle: Vec::new(),
            cpu_wakeups: Vec::new(),
            attribution: None,
            emulated: false,
        }
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

    #[test]
    fn without_an_idle_power_the_attributed_energy_is_unsplit_never_dynamic() {
        let mut e = sample();
        e.attribution = Some(AttributionFigures {
            by: "process",
            series: vec![AttributedSeries {
                id: "7".into(),
                name: "loop".into(),
                dynamic_j: 15.0,
                idle_j: 0.0,
                cpu_seconds: 1.0,
            }],
            unattributed_dynamic_j: 2.0,
            unattributed_idle_j: 0.0,
            dropped_slices: 0,
            idle_split: false,
        });
        let t = render(&e, ExpositionFormat::Text);
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
    }

    #[test]
    fn attribution_is_two_parts_per_entity_and_other_only_when_given() {
        assert!(!render(&sample(), ExpositionFormat::Text).contains("attributed"));
        let mut e = sample();
        e.attribution = Some(AttributionFigures {
            by: "cgroup",
            series: vec![
                AttributedSeries {
                    id: "4242".into(),
                    name: "docker:4f3c\"x".into(),
                    dynamic_j: 1.239,
                    idle_j: 0.5,
                    cpu_seconds: 2.0,
                },
                AttributedSeries {
                    id: "other".into(),
                    name: "other".into(),
                    dynamic_j: 0.1,
                    idle_j: 0.0,
                    cpu_seconds: 0.25,
                },
            ],
            unattributed_dynamic_j: 0.02,
            unattributed_idle_j: 3.0,
            dropped_slices: 0,
            idle_split: true,
        });
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
        assert!(t.contains("quietwatt_attribution_dropped_slices_total 0\n"));
        let om = render(&e, ExpositionFormat::OpenMetrics);
        assert!(om.contains("# TYPE quietwatt_attributed_energy_joules counter\n# UNIT quietwatt_attributed_energy_joules joules\n"));
        assert!(om.ends_with("# EOF\n"));
    }

    #[test]
    fn the_events_are_families_per_cpu_and_state_only_when_given() {
        let plain = render(&sample(), ExpositionFormat::Text);
        assert!(!plain.contains("cpu_idle") && !plain.contains("cpu_wakeups"));
        let mut e = sample();
        e.idle = vec![IdleSeries {
            cpu: 1,
            state: "C1".into(),
            entries: 12,
            seconds: 0.5,
        }];
        e.cpu_wakeups = vec![WakeupSeries { cpu: 1, wakeups: 9 }];
        let t = render(&e, ExpositionFormat::Text);
        assert!(t.contains("# TYPE quietwatt_cpu_idle_entries_total counter\n"));
        assert!(t.contains("quietwatt_cpu_idle_entries_total{cpu=\"1\",state=\"C1\"} 12\n"));
        assert!(t.contains("quietwatt_cpu_idle_seconds_total{cpu=\"1\",state=\"C1\"} 0.500000\n"));
        assert!(t.contains("quietwatt_cpu_wakeups_total{cpu=\"1\"} 9\n"));
        let om = render(&e, ExpositionFormat::OpenMetrics);
        assert!(om.contains("# TYPE quietwatt_cpu_idle_seconds counter\n# UNIT quietwatt_cpu_idle_seconds seconds\n"));
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
