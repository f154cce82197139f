//! The end-of-recording summary: residency per C-state per CPU from each mechanism
//! with their disagreement, which mechanism is blind on which CPU, event rates, the
//! energy per second, and an estimate of the energy per event.
//!
//! **Energy per event is an estimate.** RAPL measures a package, not an event. The
//! figure is the least-squares slope of the mean power of each events window against
//! the event's rate in it, W per (events/s) = J per event (paper 003 fits the energy
//! of page faults against their number the same way, across runs): the marginal
//! joules that come with one more event. Everything that
//! varies with the event (the work that causes the faults) is in the slope too, so
//! it says "joules that travel with one event", never "joules one event costs".

use super::recorder::{EventTotals, TraceTotals};
use super::Event;
use quietwatt::meter::EnergyReport;
use quietwatt_stats::fit::hc3_slope_se;
use quietwatt_stats::{excludes, student_t_quantile};
use serde::Serialize;
use std::fmt;

/// An entry count within this fraction of cpuidle's agrees with it.
pub const AGREEMENT: f64 = 0.10;

/// Below this many cpuidle entries a CPU's comparison says nothing either way.
pub const MIN_ENTRIES: u64 = 10;

/// One idle state of one CPU as each mechanism saw it.
#[derive(Debug, Clone, Serialize)]
pub struct CstateRow {
    /// The CPU.
    pub cpu: u32,
    /// The state's index (`stateN`, the tracepoint's `state`).
    pub state: u32,
    /// Its cpuidle name.
    pub name: String,
    /// Entries counted by perf on `power:cpu_idle`.
    pub perf_entries: Option<u64>,
    /// Entries counted by the BPF program.
    pub bpf_entries: Option<u64>,
    /// Entries by cpuidle's `usage`.
    pub sysfs_entries: Option<u64>,
    /// Fraction of the recording spent in the state, by cpuidle's `time`.
    pub sysfs_residency: Option<f64>,
    /// The same fraction measured by the BPF program (entry to exit timestamps).
    pub bpf_residency: Option<f64>,
    /// (perf − sysfs) / sysfs entries, percent.
    pub perf_vs_sysfs_pct: Option<f64>,
    /// (BPF − sysfs) / sysfs entries, percent.
    pub bpf_vs_sysfs_pct: Option<f64>,
    /// (BPF − sysfs) / sysfs residency, percent.
    pub bpf_residency_vs_sysfs_pct: Option<f64>,
}

/// Whether a mechanism sees `power:cpu_idle` on a CPU, judged against cpuidle.
#[derive(Debug, Clone, Serialize)]
pub struct Visibility {
    /// The CPU.
    pub cpu: u32,
    /// `perf` or `bpf`.
    pub mechanism: &'static str,
    /// Entries the mechanism counted (all states).
    pub seen: u64,
    /// Entries the reference counted (all states).
    pub reference: u64,
    /// The reference: `cpuidle usage`, or, on a CPU without a cpuidle driver, the
    /// other tracing mechanism (`bpf`), an independent count of the same tracepoint.
    pub against: &'static str,
    /// `sees`, `blind`, `differs`, or `idle` (too few entries to tell).
    pub verdict: &'static str,
}

/// One event's totals over every CPU.
#[derive(Debug, Clone, Serialize)]
pub struct RateRow {
    /// The event (its CSV name).
    pub event: String,
    /// Total over the recording, over every CPU.
    pub total: u64,
    /// Per second.
    pub per_s: f64,
    /// Per CPU totals, in CPU order.
    pub per_cpu: Vec<(u32, u64)>,
}

/// Mean power of one domain over the recording.
#[derive(Debug, Clone, Serialize)]
pub struct PowerRow {
    /// `socket/domain`.
    pub domain: String,
    /// Joules per second.
    pub joules_per_s: f64,
}

/// The energy that travels with one event: an estimate (see the module docs).
#[derive(Debug, Clone, Serialize)]
pub struct EnergyPerEvent {
    /// The event.
    pub event: String,
    /// Least-squares slope, joules per event.
    pub joules_per_event: f64,
    /// Confidence interval of the slope, `[low, high]` joules per event, at
    /// `confidence`: the slope's standard error (the larger of the classical and the
    /// heteroskedasticity-robust HC3 one) times Student's t with `windows - 2`
    /// degrees of freedom.
    pub joules_per_event_ci: [f64; 2],
    /// Standard error of the slope, joules per event.
    pub joules_per_event_se: f64,
    /// The level of the interval (0.95).
    pub confidence: f64,
    /// Whether the interval leaves out 0; when it does not, the data cannot tell the
    /// event's energy from none.
    pub significant: bool,
    /// Intercept: watts at a rate of zero events.
    pub watts_at_zero: f64,
    /// Coefficient of determination of the fit.
    pub r2: f64,
    /// Windows fitted.
    pub windows: usize,
    /// Always `estimate`: this is not a measurement.
    pub kind: &'static str,
    /// The true value, where it is known: measured against the emulator with a
    /// constant power, the energy per event is 0 (its power never reacts to events).
    /// `None` on real hardware.
    pub true_joules_per_event: Option<f64>,
}

impl EnergyPerEvent {
    /// The least-squares fit of window power (W, `y`) against the event's rate in
    /// the window (events/s, `x`) over `points`; `None` with fewer than 3 points or
    /// a rate that never changes.
    pub fn fit(event: String, points: &[(f64, f64)]) -> Option<EnergyPerEvent> {
        let (x, y): (Vec<f64>, Vec<f64>) = points.iter().copied().unzip();
        let f = quietwatt_stats::fit::ols(&x, &y, &event).ok()?;
        // Windows are not alike: a busy one has more events and noisier reads, which
        // makes the classical error too small. The larger of it and the robust one.
        let se = f.slope_se.max(hc3_slope_se(&f, &x));
        let t = student_t_quantile(0.5 + f.confidence / 2.0, f.df as f64);
        let ci = [f.slope - t * se, f.slope + t * se];
        Some(EnergyPerEvent {
            event,
            joules_per_event: f.slope,
            joules_per_event_ci: ci,
            joules_per_event_se: se,
            confidence: f.confidence,
            significant: excludes(ci, 0.0),
            watts_at_zero: f.intercept,
            r2: f.r2,
            windows: f.n,
            kind: "estimate",
            true_joules_per_event: None,
        })
    }
}

/// Everything the summary prints.
#[derive(Debug, Clone, Serialize)]
pub struct EventSummary {
    /// Seconds counted.
    pub seconds: f64,
    /// One row per CPU and idle state.
    pub cstates: Vec<CstateRow>,
    /// Per CPU and tracing mechanism: does it see `power:cpu_idle` there?
    pub visibility: Vec<Visibility>,
    /// Events, summed over CPUs.
    pub rates: Vec<RateRow>,
    /// Joules per second of each energy domain (mean power), when energy was recorded.
    pub energy: Vec<PowerRow>,
    /// Joules per event (estimates), when the energy time series could be joined.
    pub energy_per_event: Vec<EnergyPerEvent>,
    /// Notes from opening the counters.
    pub notes: Vec<String>,
    /// With `--full-trace`: events written one by one, and dropped.
    pub traced: Option<TraceTotals>,
}

fn pct(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| (a as f64 - b as f64) / b as f64 * 100.0)
}

/// The verdict on a mechanism that counted `seen` entries where cpuidle counted `sysfs`.
pub fn verdict(seen: u64, sysfs: u64) -> &'static str {
    if sysfs < MIN_ENTRIES && seen < MIN_ENTRIES {
        "idle"
    } else if seen == 0 {
        "blind"
    } else if (seen as f64 - sysfs as f64).abs() <= AGREEMENT * sysfs.max(1) as f64 {
        "sees"
    } else {
        "differs"
    }
}

impl EventSummary {
    /// The summary of `t`, with the mean power of `energy` when given.
    pub fn new(t: &EventTotals, energy: Option<&EnergyReport>) -> EventSummary {
        let secs = t.seconds();
        let mut cstates = Vec::new();
        let mut visibility = Vec::new();
        for cpu in t.cpus() {
            let mut states: Vec<u32> = t
                .channels
                .iter()
                .filter(|(c, _)| *c == cpu)
                .filter_map(|(_, e)| e.state())
                .collect();
            states.sort_unstable();
            states.dedup();
            for s in states {
                let perf = t.get(cpu, Event::IdleEnter(s));
                let bpf = t.get(cpu, Event::BpfIdleEnter(s));
                let sysfs = t.get(cpu, Event::CpuidleUsage(s));
                let frac = |v: Option<u64>, per_s: f64| {
                    v.filter(|_| secs > 0.0).map(|x| x as f64 / per_s / secs)
                };
                let sysfs_res = frac(t.get(cpu, Event::CpuidleTimeUs(s)), 1e6);
                let bpf_res = frac(t.get(cpu, Event::BpfIdleNs(s)), 1e9);
                cstates.push(CstateRow {
                    cpu,
                    state: s,
                    name: t.cpuidle.name(cpu, s),
                    perf_entries: perf,
                    bpf_entries: bpf,
                    sysfs_entries: sysfs,
                    sysfs_residency: sysfs_res,
                    bpf_residency: bpf_res,
                    perf_vs_sysfs_pct: perf.zip(sysfs).and_then(|(a, b)| pct(a, b)),
                    bpf_vs_sysfs_pct: bpf.zip(sysfs).and_then(|(a, b)| pct(a, b)),
                    bpf_residency_vs_sysfs_pct: bpf_res
                        .zip(sysfs_res)
                        .and_then(|(a, b)| (b > 0.0).then(|| (a - b) / b * 100.0)),
                });
            }
            let rows: Vec<&CstateRow> = cstates.iter().filter(|r| r.cpu == cpu).collect();
            let total = |f: fn(&CstateRow) -> Option<u64>| -> Option<u64> {
                let v: Vec<u64> = rows.iter().filter_map(|r| f(r)).collect();
                (!v.is_empty()).then(|| v.iter().sum())
            };
            let (perf, bpf) = (total(|r| r.perf_entries), total(|r| r.bpf_entries));
            if let Some(sysfs) = total(|r| r.sysfs_entries) {
                for (mechanism, seen) in [("perf", perf), ("bpf", bpf)] {
                    if let Some(seen) = seen {
                        visibility.push(Visibility {
                            cpu,
                            mechanism,
                            seen,
                            reference: sysfs,
                            against: "cpuidle usage",
                            verdict: verdict(seen, sysfs),
                        });
                    }
                }
            } else if let (Some(perf), Some(bpf)) = (perf, bpf) {
                // No cpuidle driver: the two tracing mechanisms check each other.
                visibility.push(Visibility {
                    cpu,
                    mechanism: "perf",
                    seen: perf,
                    reference: bpf,
                    against: "bpf",
                    verdict: verdict(perf, bpf),
                });
            }
        }
        let mut rates = Vec::new();
        for event in [
            Event::PageFaultsMin,
            Event::PageFaultsMaj,
            Event::ContextSwitches,
            Event::CpuMigrations,
            Event::WakeIdleWithoutIpi,
            Event::IdleExit,
        ] {
            let per_cpu: Vec<(u32, u64)> = t
                .channels
                .iter()
                .zip(&t.totals)
                .filter(|((_, e), _)| *e == event)
                .map(|((c, _), &v)| (*c, v))
                .collect();
            if per_cpu.is_empty() {
                continue;
            }
            let total: u64 = per_cpu.iter().map(|x| x.1).sum();
            rates.push(RateRow {
                event: event.to_string(),
                total,
                per_s: if secs > 0.0 { total as f64 / secs } else { 0.0 },
                per_cpu,
            });
        }
        let energy = energy
            .map(|r| {
                r.domains
                    .iter()
                    .map(|d| PowerRow {
                        domain: format!("{}/{}", d.socket, d.domain),
                        joules_per_s: d.mean_power_w.0,
                    })
                    .collect()
            })
            .unwrap_or_default();
        EventSummary {
            seconds: secs,
            cstates,
            visibility,
            rates,
            energy,
            energy_per_event: Vec::new(),
            notes: t.notes.clone(),
            traced: t.traced,
        }
    }
}

fn opt<T: fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |x| x.to_string())
}

fn opt_pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:+.1}%"))
}

fn opt_frac(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{:.1}%", x * 100.0))
}

impl fmt::Display for EventSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "events over {:.2} s", self.seconds)?;
        if !self.cstates.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "C-states per CPU: entries by mechanism (perf tracepoint count, BPF, cpuidle usage) and residency (cpuidle time, BPF)"
            )?;
            writeln!(
                f,
                "{:>4} {:<16} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10}",
                "cpu",
                "state",
                "perf",
                "bpf",
                "sysfs",
                "perf-sys",
                "bpf-sys",
                "res sysfs",
                "res bpf",
                "res diff"
            )?;
            for r in &self.cstates {
                writeln!(
                    f,
                    "{:>4} {:<16} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10}",
                    r.cpu,
                    format!("{} {}", r.state, r.name),
                    opt(r.perf_entries),
                    opt(r.bpf_entries),
                    opt(r.sysfs_entries),
                    opt_pct(r.perf_vs_sysfs_pct),
                    opt_pct(r.bpf_vs_sysfs_pct),
                    opt_frac(r.sysfs_residency),
                    opt_frac(r.bpf_residency),
                    opt_pct(r.bpf_residency_vs_sysfs_pct),
                )?;
            }
        }
        if !self.visibility.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "power:cpu_idle visibility (entries seen vs cpuidle usage, or vs BPF without cpuidle):"
            )?;
            for v in &self.visibility {
                let words = match v.verdict {
                    "sees" => "sees it".to_string(),
                    "blind" => format!("BLIND: sees none of the {} entries", v.against),
                    "differs" => format!("differs from {} by more than 10 %", v.against),
                    _ => "too few idle entries to tell".to_string(),
                };
                writeln!(
                    f,
                    "  cpu{} {:<5} {:>10} vs {:>10} ({})  {words}",
                    v.cpu, v.mechanism, v.seen, v.reference, v.against
                )?;
            }
        }
        if !self.rates.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "{:<24} {:>12} {:>12}  per CPU",
                "event", "total", "per s"
            )?;
            for r in &self.rates {
                let per_cpu: Vec<String> = r
                    .per_cpu
                    .iter()
                    .map(|(c, v)| format!("cpu{c}={v}"))
                    .collect();
                writeln!(
                    f,
                    "{:<24} {:>12} {:>12.1}  {}",
                    r.event,
                    r.total,
                    r.per_s,
                    per_cpu.join(" ")
                )?;
            }
        }
        if !self.energy.is_empty() {
            writeln!(f)?;
            let e: Vec<String> = self
                .energy
                .iter()
                .map(|p| format!("{} {:.3} J/s", p.domain, p.joules_per_s))
                .collect();
            writeln!(f, "energy per second: {}", e.join(", "))?;
        }
        if let Some(first) = self.energy_per_event.first() {
            writeln!(
                f,
                "energy per event (ESTIMATE: least-squares slope of window power against window event rate, includes whatever varies with the event; {:.0} % CI from the slope's standard error (classical or robust HC3, the larger) and Student's t):",
                first.confidence * 100.0
            )?;
            for e in &self.energy_per_event {
                writeln!(f, "  {e}")?;
            }
        }
        if let Some(t) = &self.traced {
            let dropped = match t.dropped {
                Some(0) => "none dropped".to_string(),
                Some(d) => format!(
                    "{d} DROPPED by the kernel (ring full between drains: drain more often or give the trace ring more memory)"
                ),
                None => "dropped count unreadable".to_string(),
            };
            writeln!(
                f,
                "full trace: {} events written one by one, {dropped}",
                t.written
            )?;
            if t.undecoded > 0 {
                writeln!(
                    f,
                    "full trace: {} ring records were no known event and were left out (a quietwatt bug: please report it)",
                    t.undecoded
                )?;
            }
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

impl fmt::Display for EnergyPerEvent {
    /// `page_faults_min  5.2e-4 J/event, 95 % CI [-3.1e-4, 1.4e-3]: not significant (R² 0.30, 29 windows)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<24} {:>10.3e} J/event, {:.0} % CI [{:.2e}, {:.2e}]: {} (R² {:.2}, {} windows)",
            self.event,
            self.joules_per_event,
            self.confidence * 100.0,
            self.joules_per_event_ci[0],
            self.joules_per_event_ci[1],
            if self.significant {
                "significant"
            } else {
                "not significant"
            },
            self.r2,
            self.windows
        )?;
        if let Some(t) = self.true_joules_per_event {
            write!(f, " (emulated: true value {t} J/event)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuidle::{CpuidleState, CpuidleStates};

    fn totals(channels: Vec<((u32, Event), u64)>) -> EventTotals {
        let state = |i: u32, n: &str| CpuidleState {
            index: i,
            name: n.into(),
            latency_us: 0,
            residency_us: 0,
            disabled: false,
        };
        EventTotals {
            first_ns: 0,
            last_ns: 2_000_000_000,
            reads: 20,
            missed: 0,
            channels: channels.iter().map(|x| x.0).collect(),
            totals: channels.iter().map(|x| x.1).collect(),
            cpuidle: CpuidleStates {
                cpus: vec![
                    (0, vec![state(0, "POLL"), state(1, "haltpoll idle")]),
                    (1, vec![state(0, "POLL"), state(1, "haltpoll idle")]),
                ],
                root: Default::default(),
            },
            notes: vec![],
            traced: None,
            error: None,
        }
    }

    #[test]
    fn a_blind_cpu_and_an_agreeing_cpu_are_told_apart() {
        let t = totals(vec![
            ((0, Event::IdleEnter(1)), 980),
            ((0, Event::CpuidleUsage(1)), 1000),
            ((0, Event::CpuidleTimeUs(1)), 1_500_000),
            ((1, Event::IdleEnter(1)), 0),
            ((1, Event::CpuidleUsage(1)), 700),
            ((1, Event::CpuidleTimeUs(1)), 1_800_000),
            ((0, Event::PageFaultsMin), 40),
            ((1, Event::PageFaultsMin), 60),
        ]);
        let s = EventSummary::new(&t, None);
        assert_eq!(s.cstates.len(), 2);
        assert_eq!(s.cstates[0].name, "haltpoll idle");
        assert!((s.cstates[0].perf_vs_sysfs_pct.unwrap() + 2.0).abs() < 1e-9);
        assert!((s.cstates[0].sysfs_residency.unwrap() - 0.75).abs() < 1e-9);
        let v: Vec<(u32, &str)> = s.visibility.iter().map(|v| (v.cpu, v.verdict)).collect();
        assert_eq!(v, vec![(0, "sees"), (1, "blind")]);
        assert_eq!(s.rates[0].total, 100);
        assert!((s.rates[0].per_s - 50.0).abs() < 1e-9);
        let text = s.to_string();
        assert!(text.contains("BLIND"), "{text}");
    }

    #[test]
    fn without_cpuidle_perf_is_checked_against_bpf_and_states_are_named_by_the_kernel_loop() {
        let mut t = totals(vec![
            ((0, Event::IdleEnter(1)), 990),
            ((0, Event::BpfIdleEnter(1)), 1000),
            ((1, Event::IdleEnter(1)), 0),
            ((1, Event::BpfIdleEnter(1)), 800),
        ]);
        t.cpuidle.cpus.clear();
        let s = EventSummary::new(&t, None);
        assert_eq!(s.cstates[0].name, "default idle (no cpuidle driver)");
        assert_eq!(s.cstates[0].sysfs_entries, None);
        let v: Vec<(u32, &str, &str)> = s
            .visibility
            .iter()
            .map(|v| (v.cpu, v.against, v.verdict))
            .collect();
        assert_eq!(v, vec![(0, "bpf", "sees"), (1, "bpf", "blind")]);
        let text = s.to_string();
        assert!(
            text.contains("BLIND: sees none of the bpf entries"),
            "{text}"
        );
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict(0, 3), "idle");
        assert_eq!(verdict(0, 100), "blind");
        assert_eq!(verdict(95, 100), "sees");
        assert_eq!(verdict(120, 100), "differs");
    }

    #[test]
    fn a_line_is_fitted_exactly() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 2.0 + 0.5 * i as f64)).collect();
        let e = EnergyPerEvent::fit("x".into(), &pts).unwrap();
        assert!((e.joules_per_event - 0.5).abs() < 1e-12 && (e.watts_at_zero - 2.0).abs() < 1e-12);
        assert!((e.r2 - 1.0).abs() < 1e-12 && e.significant);
        assert!(EnergyPerEvent::fit("x".into(), &[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]).is_none());
    }

    #[test]
    fn the_interval_covers_a_zero_slope_when_busy_windows_are_noisier() {
        // 200 seeded recordings of 29 windows: a flat 20 W whose noise grows with the
        // event rate (a busy machine reads late), as on a loaded emulator. The true
        // energy per event is 0; the 95 % interval must contain it in at least 85 %.
        // (The classical error alone covers it about 56 times in 100 here, HC3 about
        // 90: a few high-leverage bursts are its hard case.)
        let mut rng = quietwatt_stats::rng::XorShift::new(0xFA_17);
        let mut normal = || {
            let (u, v) = (1.0 - rng.unit(), rng.unit());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let mut covered = 0;
        for _ in 0..200 {
            let pts: Vec<(f64, f64)> = (0..29)
                .map(|k| {
                    // Mostly quiet windows, a few bursts: bursts carry the leverage.
                    let rate = if k % 7 == 3 {
                        5000.0
                    } else {
                        200.0 + 20.0 * k as f64
                    };
                    (rate, 20.0 + (0.02 + rate * 4e-5) * normal())
                })
                .collect();
            let e = EnergyPerEvent::fit("f".into(), &pts).unwrap();
            if !e.significant {
                covered += 1;
            }
        }
        assert!(
            covered >= 170,
            "{covered} of 200 intervals contain the true 0 J/event"
        );
    }

    #[test]
    fn an_interval_that_contains_zero_prints_not_significant_and_the_truth() {
        // Flat power with noise unrelated to the rate: the textbook points of
        // stats::fit with the line taken out (slope 0.03 ± 0.22 at 95 %).
        let pts = [
            (1.0, 20.0),
            (2.0, 20.5),
            (3.0, 19.5),
            (4.0, 20.0),
            (5.0, 20.1),
        ];
        let mut e = EnergyPerEvent::fit("page_faults_min".into(), &pts).unwrap();
        assert!(
            e.joules_per_event_ci[0] < 0.0 && e.joules_per_event_ci[1] > 0.0,
            "{e:?}"
        );
        assert!(!e.significant);
        e.true_joules_per_event = Some(0.0);
        let line = e.to_string();
        assert!(line.contains("95 % CI ["), "{line}");
        assert!(line.contains(": not significant"), "{line}");
        assert!(line.contains("(emulated: true value 0 J/event)"), "{line}");
        let json = serde_json::to_value(&e).unwrap();
        assert!(json["joules_per_event_ci"][0].is_f64() && json["joules_per_event_ci"][1].is_f64());
        assert_eq!(json["significant"], false);
        assert_eq!(json["kind"], "estimate");
    }
}
