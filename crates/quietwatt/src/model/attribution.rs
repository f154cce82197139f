//! `run --model FILE -- CMD`: the events of a command counted by perf software
//! counters that follow it from its `exec` on (children included), priced with a
//! model's per-event costs. The figures are model estimates, labelled so wherever
//! they are shown: the cost of an event measured in a scenario, applied to events
//! of another program.
//!
//! Which cost prices which counter: `minor-faults` by the ODPA cost (a first touch
//! of an anonymous page, the commonest minor fault; the COW cost is shown beside
//! it, since perf cannot tell the two apart), `context-switches` by the ping-pong
//! cost. Wake-ups from idle have no per-process counter: they are counted
//! **system-wide** (every CPU's cpuidle `usage`, one entry per idle period, so one
//! wake-up each) over the command's run, priced by the wake-up cost, and shown apart
//! from the command's own total, labelled as the whole machine's.

use super::counters::{SoftwareEvent, Task, TaskCounter};
use super::file::Model;
use super::Family;
use crate::error::Result;
use crate::events::{CpuidleStates, Event, EventCounters};
use crate::root::SysRoot;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The label every estimate carries.
pub const LABEL: &str = "model estimate";

/// Counters opened before the command is spawned, and the model to price with.
pub struct Attributor {
    model: Model,
    path: PathBuf,
    counters: Vec<TaskCounter>,
    /// Every CPU's cpuidle `usage` counters and their values at `open`; `Err` says
    /// why wake-ups cannot be counted here.
    idle: std::result::Result<(EventCounters, Vec<u64>), String>,
}

/// Every online CPU's cpuidle `usage` counters (this machine's), read once.
fn open_idle_usage() -> std::result::Result<(EventCounters, Vec<u64>), String> {
    let cpus = crate::events::online_cpus().map_err(|e| e.to_string())?;
    let mut notes = Vec::new();
    let states =
        CpuidleStates::read(&SysRoot::default(), &cpus, &mut notes).map_err(|e| e.to_string())?;
    let usage: Vec<_> = states
        .channels()
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|c| matches!(c.event, Event::CpuidleUsage(_)))
        .collect();
    if usage.is_empty() {
        return Err("this machine has no cpuidle states (no cpuidle driver)".into());
    }
    let mut c = EventCounters::from_channels(usage, states);
    let mut v = vec![0; c.channels().len()];
    c.read(&mut v).map_err(|e| e.to_string())?;
    Ok((c, v))
}

/// One priced event.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    /// The counter.
    pub event: String,
    /// Events the command had.
    pub count: u64,
    /// `family/scenario` of the cost used.
    pub cost_from: String,
    /// Seconds per event in the model.
    pub seconds_per_event: f64,
    /// count × seconds per event.
    pub seconds: f64,
    /// count × total joules per event (none when the model has no energy).
    pub joules: Option<f64>,
    /// The same with another scenario's cost, when perf cannot tell which applies
    /// (`cow` for minor faults).
    pub alternative: Option<Box<Estimate>>,
    /// Whose events were counted; only [`Scope::Command`] estimates add up to the
    /// totals.
    pub scope: Scope,
}

/// Whose events an estimate prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The command's own events: perf counters that follow it and its children.
    Command,
    /// Every CPU's events while the command ran (wake-ups from idle: no counter
    /// follows one process).
    System,
}

/// What `run --model` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Attribution {
    /// Always [`LABEL`].
    pub label: &'static str,
    /// The model file.
    pub model: String,
    /// Whether the model's energy came from the emulator.
    pub energy_emulated: bool,
    /// The priced events.
    pub estimates: Vec<Estimate>,
    /// Sum of the estimates' seconds.
    pub total_seconds: f64,
    /// Sum of the estimates' joules.
    pub total_joules: Option<f64>,
    /// What was not priced, and why.
    pub notes: Vec<String>,
}

impl Attributor {
    /// Reads the model and opens the counters on the calling thread's future
    /// exec'd children: call it on the thread that spawns the command, just before.
    pub fn open(path: &Path) -> Result<Attributor> {
        let model = Model::load(path)?;
        let counters = [
            SoftwareEvent::MinorFaults,
            SoftwareEvent::MajorFaults,
            SoftwareEvent::ContextSwitches,
        ]
        .iter()
        .map(|&e| TaskCounter::open(e, Task::ExecedChildren))
        .collect::<Result<_>>()?;
        Ok(Attributor {
            model,
            path: path.to_path_buf(),
            counters,
            idle: open_idle_usage(),
        })
    }

    /// Reads the counters (after the command was reaped) and prices the events.
    pub fn finish(self) -> Result<Attribution> {
        let mut counts = Vec::new();
        for c in &self.counters {
            counts.push((c.event(), c.read()?));
        }
        let wakeups = match self.idle {
            Ok((mut c, before)) => {
                let mut after = vec![0; before.len()];
                c.read(&mut after)
                    .map(|()| {
                        after
                            .iter()
                            .zip(&before)
                            .map(|(a, b)| a.saturating_sub(*b))
                            .sum()
                    })
                    .map_err(|e| e.to_string())
            }
            Err(why) => Err(why),
        };
        Ok(estimate(
            &self.model,
            &self.path.display().to_string(),
            &counts,
            wakeups,
        ))
    }
}

/// count × the cost's joules per event, unless its 95 % interval spans zero: then the
/// model cannot tell the event's energy from none, and it is not priced (`Err` holds
/// the sentence that says so).
fn priced_joules(
    c: &super::file::EventCost,
    count: u64,
    what: &str,
) -> std::result::Result<Option<f64>, String> {
    match (c.total_joules_per_event, c.total_joules_ci) {
        (Some(_), Some([lo, hi])) if lo <= 0.0 && hi >= 0.0 => Err(format!(
            "the energy of {what} is not priced: the model's energy per event is indistinguishable from zero (95 % CI [{:.3e}, {:.3e}] J)",
            lo, hi
        )),
        (j, _) => Ok(j.map(|j| j * count as f64)),
    }
}

/// Prices `counts` (the command's events) and `wakeups` (every CPU's idle exits while
/// it ran, or why they could not be counted) with `model`.
pub fn estimate(
    model: &Model,
    name: &str,
    counts: &[(SoftwareEvent, u64)],
    wakeups: std::result::Result<u64, String>,
) -> Attribution {
    let mut estimates = Vec::new();
    let mut notes = Vec::new();
    let mut unpriced = Vec::new();
    let mut price = |count: u64, event: SoftwareEvent, f: Family, s: &str| {
        model.cost(f, s).map(|c| Estimate {
            event: event.name().to_string(),
            count,
            cost_from: format!("{}/{}", f.name(), s),
            seconds_per_event: c.seconds_per_event,
            seconds: count as f64 * c.seconds_per_event,
            joules: priced_joules(c, count, &format!("{} ({}/{})", event.name(), f.name(), s))
                .unwrap_or_else(|why| {
                    unpriced.push(why);
                    None
                }),
            alternative: None,
            scope: Scope::Command,
        })
    };
    for &(event, count) in counts {
        let e = match event {
            SoftwareEvent::MinorFaults => {
                price(count, event, Family::Pagefault, "odpa").map(|mut e| {
                    e.alternative = price(count, event, Family::Pagefault, "cow").map(Box::new);
                    e
                })
            }
            SoftwareEvent::ContextSwitches => price(count, event, Family::Ctxswitch, "pingpong"),
            SoftwareEvent::MajorFaults => {
                if count > 0 {
                    notes.push(format!(
                        "{count} major fault(s) not priced: the model has no I/O fault scenario"
                    ));
                }
                continue;
            }
        };
        match e {
            Some(e) => estimates.push(e),
            None => notes.push(format!(
                "{count} {} not priced: the model has no cost for them (measure `quietwatt model {}`)",
                event.name(),
                if event == SoftwareEvent::ContextSwitches { "ctxswitch" } else { "pagefault" }
            )),
        }
    }
    notes.append(&mut unpriced);
    // The totals are the command's own: taken before the system-wide wake-ups join
    // the estimates below. An event whose energy is unpriced is said in the notes.
    let total_seconds = estimates.iter().map(|e| e.seconds).sum();
    let priced: Vec<f64> = estimates.iter().filter_map(|e| e.joules).collect();
    let total_joules = (!priced.is_empty()).then(|| priced.iter().sum());
    match wakeups {
        Ok(n) => match model.cost(Family::Wakeup, "wakeup") {
            Some(c) => estimates.push(Estimate {
                event: "wake-ups from idle".into(),
                count: n,
                cost_from: "wakeup/wakeup".into(),
                seconds_per_event: c.seconds_per_event,
                seconds: n as f64 * c.seconds_per_event,
                joules: priced_joules(c, n, "wake-ups from idle").unwrap_or_else(|why| {
                    notes.push(why);
                    None
                }),
                alternative: None,
                scope: Scope::System,
            }),
            None => notes.push(format!(
                "{n} wake-ups from idle (all CPUs) not priced: the model has no wake-up cost (measure `quietwatt model wakeup`)"
            )),
        },
        Err(why) => notes.push(format!("wake-ups from idle not counted: {why}")),
    }
    if estimates.iter().any(|e| e.scope == Scope::System) {
        notes.push(
            "wake-ups from idle are every CPU's while the command ran (cpuidle usage: no counter follows one process), not only the command's; they are not in its total".into(),
        );
    }
    Attribution {
        label: LABEL,
        model: name.to_string(),
        energy_emulated: model.energy.emulated,
        estimates,
        total_seconds,
        total_joules,
        notes,
    }
}

/// The lines `run` prints under the energy table.
pub fn text(a: &Attribution) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {} (from {}{}): time and energy spent in modelled OS events",
        a.label.to_uppercase(),
        a.model,
        if a.energy_emulated {
            ", model energy EMULATED"
        } else {
            ""
        }
    );
    let j = |v: Option<f64>| v.map_or("-".into(), |j| format!("{j:.6} J"));
    let line = |s: &mut String, e: &Estimate, tag: &str| {
        let _ = writeln!(
            s,
            "    {:>10} {:<17} x {:.3} us ({}) = {:.6} s, {}   [{LABEL}{tag}]",
            e.count,
            e.event,
            e.seconds_per_event * 1e6,
            e.cost_from,
            e.seconds,
            j(e.joules),
        );
    };
    for e in a.estimates.iter().filter(|e| e.scope == Scope::Command) {
        line(&mut s, e, "");
        if let Some(alt) = &e.alternative {
            let _ = writeln!(
                s,
                "    {:>10} {:<17}   (if they were {}: {:.6} s, {})",
                "",
                "",
                alt.cost_from,
                alt.seconds,
                j(alt.joules)
            );
        }
    }
    let _ = writeln!(
        s,
        "    total {:.6} s, {}   [{}]",
        a.total_seconds,
        j(a.total_joules),
        LABEL
    );
    // After the total, and not in it: every CPU's events, not the command's.
    for e in a.estimates.iter().filter(|e| e.scope == Scope::System) {
        line(&mut s, e, ", ALL CPUs");
    }
    for n in &a.notes {
        let _ = writeln!(s, "    note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_priced_and_labelled() {
        let m = crate::model::file::tests::sample_model();
        let a = estimate(
            &m,
            "m.json",
            &[
                (SoftwareEvent::MinorFaults, 1000),
                (SoftwareEvent::ContextSwitches, 5),
            ],
            Err("no cpuidle in this test".into()),
        );
        assert_eq!(a.estimates.len(), 1);
        assert!((a.estimates[0].seconds - 1000.0 * 1.5e-6).abs() < 1e-12);
        assert!((a.total_joules.unwrap() - 1000.0 * 3e-5).abs() < 1e-12);
        assert!(
            a.notes
                .iter()
                .any(|n| n.contains("context-switches not priced")),
            "{:?}",
            a.notes
        );
        assert!(text(&a).contains("MODEL ESTIMATE"));
    }

    #[test]
    fn system_wide_wakeups_are_priced_apart_from_the_commands_total() {
        let mut m = crate::model::file::tests::sample_model();
        let mut w = m.families[0].clone();
        w.family = Family::Wakeup;
        w.costs[0].scenario = "wakeup".into();
        w.costs[0].seconds_per_event = 60e-6;
        w.costs[0].total_joules_per_event = Some(1e-4);
        m.families.push(w);
        let a = estimate(&m, "m.json", &[(SoftwareEvent::MinorFaults, 1000)], Ok(200));
        let wake = a
            .estimates
            .iter()
            .find(|e| e.scope == Scope::System)
            .expect("a wake-up estimate");
        assert_eq!(wake.count, 200);
        assert!((wake.seconds - 200.0 * 60e-6).abs() < 1e-12);
        assert!((wake.joules.unwrap() - 200.0 * 1e-4).abs() < 1e-12);
        // The command's total holds its own faults only.
        assert!((a.total_seconds - 1000.0 * 1.5e-6).abs() < 1e-12);
        let t = text(&a);
        assert!(
            t.contains("wake-ups from idle") && t.contains("ALL CPUs"),
            "{t}"
        );
        assert!(
            a.notes.iter().any(|n| n.contains("every CPU's")),
            "{:?}",
            a.notes
        );
        // Without cpuidle, the reason is said.
        let b = estimate(&m, "m.json", &[], Err("no cpuidle".into()));
        assert!(b.estimates.is_empty());
        assert!(b
            .notes
            .iter()
            .any(|n| n.contains("not counted: no cpuidle")));
    }

    #[test]
    fn an_energy_cost_indistinguishable_from_zero_is_not_priced() {
        let mut m = crate::model::file::tests::sample_model();
        m.families[0].costs[0].total_joules_ci = Some([-1e-5, 7e-5]);
        let a = estimate(&m, "m.json", &[(SoftwareEvent::MinorFaults, 1000)], Ok(0));
        assert_eq!(
            a.estimates[0].joules, None,
            "no energy from a CI spanning 0"
        );
        assert!(
            (a.estimates[0].seconds - 1000.0 * 1.5e-6).abs() < 1e-12,
            "time still priced"
        );
        assert_eq!(a.total_joules, None);
        assert!(
            a.notes
                .iter()
                .any(|n| n.contains("indistinguishable from zero")),
            "{:?}",
            a.notes
        );
    }

    #[test]
    fn an_execd_child_is_counted_from_its_exec() {
        let counters: Vec<TaskCounter> = [SoftwareEvent::MinorFaults]
            .iter()
            .map(|&e| TaskCounter::open(e, Task::ExecedChildren).unwrap())
            .collect();
        // This thread's own faults do not count: it never execs.
        let v: Vec<u8> = vec![1; 1 << 22];
        assert_eq!(counters[0].read().unwrap(), 0, "{}", v.len());
        let ok = std::process::Command::new("sh")
            .args(["-c", "true"])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        // A shell's start-up faults in its binary and libraries: dozens at least.
        assert!(
            counters[0].read().unwrap() > 10,
            "{}",
            counters[0].read().unwrap()
        );
    }
}
