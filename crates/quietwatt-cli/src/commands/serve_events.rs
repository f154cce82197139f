//! `serve --events`: each CPU's idle states and wake-ups beside the energy, from
//! the events module's counters (cpuidle's `usage` and `time`, the
//! `power:cpu_idle` exits), as counters since the exporter started. A CPU without
//! a cpuidle driver has its idle entries and time from the BPF program on
//! `power:cpu_idle` instead, under the kernel's own state numbers.

use crate::exit::Failure;
use quietwatt::export::prometheus::{IdleSeries, WakeupSeries};
use quietwatt::SysRoot;
use quietwatt_events::{Event, EventCounters, Groups};
use std::collections::BTreeMap;

/// The counters and their first reading.
pub struct IdleEvents {
    counters: EventCounters,
    base: Vec<u64>,
    now: Vec<u64>,
    /// The reading before `now` (exported counters never go back).
    prev: Vec<u64>,
    /// CPUs whose idle states cpuidle counts; the others are counted by BPF.
    with_cpuidle: std::collections::BTreeSet<u32>,
}

impl IdleEvents {
    /// Opens the C-state counters of every CPU (the kernel's; an emulator root
    /// without cpuidle falls back to the system's, as `record --events` does).
    pub fn open(root: &SysRoot) -> Result<IdleEvents, Failure> {
        let groups: Groups = "cstate"
            .parse()
            .map_err(|e| Failure::usage(format!("--events: {e}")))?;
        let mut counters = EventCounters::open(groups, root, None).map_err(|e| {
            Failure::new(
                crate::exit::NO_RAPL,
                format!("--events: the C-state counters cannot be opened: {e}; leave out --events to export the energy alone"),
            )
        })?;
        for n in &counters.notes {
            eprintln!("quietwatt: note: --events: {n}");
        }
        let mut base = vec![0; counters.channels().len()];
        counters.read(&mut base).map_err(|e| {
            Failure::new(
                crate::exit::MEASUREMENT,
                format!("--events: reading the C-state counters failed: {e}"),
            )
        })?;
        let now = base.clone();
        let with_cpuidle = counters
            .channels()
            .iter()
            .filter(|c| matches!(c.event, Event::CpuidleUsage(_)))
            .map(|c| c.cpu)
            .collect();
        Ok(IdleEvents {
            counters,
            prev: base.clone(),
            base,
            now,
            with_cpuidle,
        })
    }

    /// Reads the counters: the idle states and wake-ups since the first reading,
    /// or why they could not be read.
    pub fn read(&mut self) -> Result<(Vec<IdleSeries>, Vec<WakeupSeries>), String> {
        self.prev.copy_from_slice(&self.now);
        self.counters
            .read(&mut self.now)
            .map_err(|e| e.to_string())?;
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
