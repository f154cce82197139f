//! The exporter's collector of each CPU's idle states and wake-ups beside the
//! energy ([`IdleCollector`], what `serve --events` registers), from this crate's
//! counters (cpuidle's `usage` and `time`, the `power:cpu_idle` exits), as
//! counters since the exporter started. A CPU without a cpuidle driver has its
//! idle entries and time from the BPF program on `power:cpu_idle` instead, under
//! the kernel's own state numbers.
//!
//! | family | type | labels |
//! |---|---|---|
//! | `quietwatt_cpu_idle_entries_total` | counter | `cpu`, `state` |
//! | `quietwatt_cpu_idle_seconds_total` | counter | `cpu`, `state` |
//! | `quietwatt_cpu_wakeups_total` | counter | `cpu` |

use crate::{Event, EventCounters, EventsError, Groups};
use quietwatt::SysRoot;
use quietwatt_exporter::{CollectError, Collector, Family, Kind, Unit, Value};
use std::collections::BTreeMap;

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

/// Why the C-state counters could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The counters cannot be opened here.
    #[error("the C-state counters cannot be opened: {0}")]
    Open(#[source] EventsError),
    /// They opened, but the first reading failed.
    #[error("reading the C-state counters failed: {0}")]
    Read(#[source] EventsError),
}

/// The C-state counters and their first reading.
#[derive(Debug)]
pub struct IdleCollector {
    counters: EventCounters,
    base: Vec<u64>,
    now: Vec<u64>,
    /// The reading before `now` (exported counters never go back).
    prev: Vec<u64>,
    /// CPUs whose idle states cpuidle counts; the others are counted by BPF.
    with_cpuidle: std::collections::BTreeSet<u32>,
}

impl IdleCollector {
    /// Opens the C-state counters of every CPU (the kernel's; an emulator root
    /// without cpuidle falls back to the system's, as `record --events` does) and
    /// takes their first reading.
    pub fn open(root: &SysRoot) -> Result<IdleCollector, OpenError> {
        let groups = Groups {
            cstate: true,
            ..Groups::default()
        };
        let mut counters = EventCounters::open(groups, root, None).map_err(OpenError::Open)?;
        let mut base = vec![0; counters.channels().len()];
        counters.read(&mut base).map_err(OpenError::Read)?;
        let now = base.clone();
        let with_cpuidle = counters
            .channels()
            .iter()
            .filter(|c| matches!(c.event, Event::CpuidleUsage(_)))
            .map(|c| c.cpu)
            .collect();
        Ok(IdleCollector {
            counters,
            prev: base.clone(),
            base,
            now,
            with_cpuidle,
        })
    }

    /// What was left out or found while opening, for the user.
    pub fn notes(&self) -> &[String] {
        &self.counters.notes
    }

    /// Reads the counters: the idle states and wake-ups since the first reading,
    /// or why they could not be read.
    pub fn read(&mut self) -> Result<(Vec<IdleSeries>, Vec<WakeupSeries>), EventsError> {
        self.prev.copy_from_slice(&self.now);
        self.counters.read(&mut self.now)?;
        // Exported counters never go back: the BPF idle time includes the period in
        // progress, which the program may close a few microseconds earlier than read.
        for (n, p) in self.now.iter_mut().zip(&self.prev) {
            *n = (*n).max(*p);
        }
        let with_cpuidle = &self.with_cpuidle;
        let mut idle: BTreeMap<(u32, u32), IdleSeries> = BTreeMap::new();
        let mut wakeups: BTreeMap<u32, u64> = BTreeMap::new();
        for ((c, &now), &base) in self
            .counters
            .channels()
            .iter()
            .zip(&self.now)
            .zip(&self.base)
        {
            let d = now.saturating_sub(base);
            let (state, apply): (u32, fn(&mut IdleSeries, u64)) = match c.event {
                Event::CpuidleUsage(s) => (s, |i, d| i.entries = d),
                Event::CpuidleTimeUs(s) => (s, |i, d| i.seconds = d as f64 / 1e6),
                Event::BpfIdleEnter(s) if !with_cpuidle.contains(&c.cpu) => {
                    (s, |i, d| i.entries = d)
                }
                Event::BpfIdleNs(s) if !with_cpuidle.contains(&c.cpu) => {
                    (s, |i, d| i.seconds = d as f64 / 1e9)
                }
                Event::IdleExit => {
                    *wakeups.entry(c.cpu).or_default() += d;
                    continue;
                }
                _ => continue,
            };
            let series = idle.entry((c.cpu, state)).or_insert_with(|| IdleSeries {
                cpu: c.cpu,
                state: self.counters.cpuidle.name(c.cpu, state),
                entries: 0,
                seconds: 0.0,
            });
            apply(series, d);
        }
        Ok((
            idle.into_values().collect(),
            wakeups
                .into_iter()
                .map(|(cpu, wakeups)| WakeupSeries { cpu, wakeups })
                .collect(),
        ))
    }
}

/// The families of `idle` and `wakeups`: none of a kind that has no series.
pub fn families(idle: &[IdleSeries], wakeups: &[WakeupSeries]) -> Vec<Family> {
    let mut out = Vec::new();
    let labels = |i: &IdleSeries| [("cpu", i.cpu.to_string()), ("state", i.state.clone())];
    if !idle.is_empty() {
        let mut entries = Family::new(
            "quietwatt_cpu_idle_entries",
            Kind::Counter,
            None,
            "Entries of a CPU into an idle state (cpuidle's usage) since the exporter started.",
        );
        let mut seconds = Family::new(
            "quietwatt_cpu_idle_seconds",
            Kind::Counter,
            Some(Unit::Seconds),
            "Time a CPU spent in an idle state (cpuidle's time) since the exporter started.",
        );
        for i in idle {
            entries.push(labels(i), Value::Count(i.entries));
            seconds.push(labels(i), Value::Seconds(i.seconds));
        }
        out.extend([entries, seconds]);
    }
    if !wakeups.is_empty() {
        let mut f = Family::new(
            "quietwatt_cpu_wakeups",
            Kind::Counter,
            None,
            "Wake-ups of a CPU from idle (exits of the power:cpu_idle tracepoint) since the exporter started.",
        );
        for w in wakeups {
            f.push([("cpu", w.cpu.to_string())], Value::Count(w.wakeups));
        }
        out.push(f);
    }
    out
}

impl Collector for IdleCollector {
    fn name(&self) -> &str {
        "events"
    }

    fn collect(&mut self, out: &mut Vec<Family>) -> Result<(), CollectError> {
        let (idle, wakeups) = self
            .read()
            .map_err(|e| CollectError(format!("reading the C-state counters failed ({e})")))?;
        out.extend(families(&idle, &wakeups));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt_exporter::{render, Exposition, ExpositionFormat};

    fn exposition(families: Vec<Family>) -> Exposition {
        Exposition {
            domains: Vec::new(),
            samples: 0,
            missed_deadlines: 0,
            version: "0.1.0".into(),
            resolution_j: 0.01,
            families,
            emulated: false,
            unavailable: None,
        }
    }

    #[test]
    fn the_events_are_families_per_cpu_and_state_only_when_given() {
        let plain = render(&exposition(families(&[], &[])), ExpositionFormat::Text);
        assert!(!plain.contains("cpu_idle") && !plain.contains("cpu_wakeups"));
        let idle = [IdleSeries {
            cpu: 1,
            state: "C1".into(),
            entries: 12,
            seconds: 0.5,
        }];
        let wakeups = [WakeupSeries { cpu: 1, wakeups: 9 }];
        let e = exposition(families(&idle, &wakeups));
        let t = render(&e, ExpositionFormat::Text);
        assert!(t.contains("# TYPE quietwatt_cpu_idle_entries_total counter\n"));
        assert!(t.contains("quietwatt_cpu_idle_entries_total{cpu=\"1\",state=\"C1\"} 12\n"));
        assert!(t.contains("quietwatt_cpu_idle_seconds_total{cpu=\"1\",state=\"C1\"} 0.500000\n"));
        assert!(t.contains("quietwatt_cpu_wakeups_total{cpu=\"1\"} 9\n"));
        // Entries, then seconds, then wake-ups: the order serve always had.
        let at = |n: &str| t.find(n).unwrap();
        assert!(
            at("# HELP quietwatt_cpu_idle_entries_total")
                < at("# HELP quietwatt_cpu_idle_seconds_total")
        );
        assert!(at("quietwatt_cpu_idle_seconds_total{") < at("# HELP quietwatt_cpu_wakeups_total"));
        let om = render(&e, ExpositionFormat::OpenMetrics);
        assert!(om.contains("# TYPE quietwatt_cpu_idle_seconds counter\n# UNIT quietwatt_cpu_idle_seconds seconds\n"));
    }
}
