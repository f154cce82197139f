//! `run --model FILE -- CMD`: the events of a command counted by perf software
//! counters that follow it from its `exec` on (children included), priced with a
//! model's per-event costs. The figures are model estimates, labelled so wherever
//! they are shown: the cost of an event measured in a scenario, applied to events
//! of another program.
//!
//! Which cost prices which counter: `minor-faults` by the ODPA cost (a first touch
//! of an anonymous page, the commonest minor fault; the COW cost is shown beside
//! it, since perf cannot tell the two apart), `context-switches` by the ping-pong
//! cost. Wake-ups from idle have no per-process counter, so they are not priced.

use super::counters::{SoftwareEvent, Task, TaskCounter};
use super::file::Model;
use super::Family;
use crate::error::Result;
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
        })
    }

    /// Reads the counters (after the command was reaped) and prices the events.
    pub fn finish(self) -> Result<Attribution> {
        let mut counts = Vec::new();
        for c in &self.counters {
            counts.push((c.event(), c.read()?));
        }
        Ok(estimate(
            &self.model,
            &self.path.display().to_string(),
            &counts,
        ))
    }
}

/// Prices `counts` with `model`.
pub fn estimate(model: &Model, name: &str, counts: &[(SoftwareEvent, u64)]) -> Attribution {
    let mut estimates = Vec::new();
    let mut notes = Vec::new();
    let price = |count: u64, event: SoftwareEvent, f: Family, s: &str| {
        model.cost(f, s).map(|c| Estimate {
            event: event.name().to_string(),
            count,
            cost_from: format!("{}/{}", f.name(), s),
            seconds_per_event: c.seconds_per_event,
            seconds: count as f64 * c.seconds_per_event,
            joules: c.total_joules_per_event.map(|j| j * count as f64),
            alternative: None,
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
    notes.push("wake-ups from idle are not priced: no perf counter counts them per process".into());
    let total_seconds = estimates.iter().map(|e| e.seconds).sum();
    let total_joules = estimates.iter().map(|e| e.joules).sum::<Option<f64>>();
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
    for e in &a.estimates {
        let _ = writeln!(
            s,
            "    {:>10} {:<17} x {:.3} us ({}) = {:.6} s, {}   [{}]",
            e.count,
            e.event,
            e.seconds_per_event * 1e6,
            e.cost_from,
            e.seconds,
            j(e.joules),
            LABEL
        );
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
