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
use quietwatt::root::SysRoot;
use quietwatt_events::{CpuidleStates, Event, EventCounters};
use quietwatt_stats::excludes;
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

impl std::fmt::Debug for Attributor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attributor")
            .field("path", &self.path)
            .field("counters", &self.counters.len())
            .finish_non_exhaustive()
    }
}

/// Every online CPU's cpuidle `usage` counters (this machine's), read once.
fn open_idle_usage() -> std::result::Result<(EventCounters, Vec<u64>), String> {
    let cpus = quietwatt_events::online_cpus().map_err(|e| e.to_string())?;
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
    /// Its 95 % confidence interval in the model, `[low, high]`.
    pub seconds_per_event_ci: [f64; 2],
    /// count × seconds per event.
    pub seconds: f64,
    /// count × the interval of the seconds per event (the count is exact).
    pub seconds_ci: [f64; 2],
    /// Total joules per event in the model (none when the model has no energy).
    pub joules_per_event: Option<f64>,
    /// Its 95 % confidence interval in the model.
    pub joules_per_event_ci: Option<[f64; 2]>,
    /// Whether the energy per event's interval leaves out 0 (none without energy):
    /// when it does not, the model cannot tell the event's energy from none and
    /// `joules` is not priced.
    pub significant: Option<bool>,
    /// count × total joules per event (none when the model has no energy, or when
    /// its interval contains 0).
    pub joules: Option<f64>,
    /// count × the interval of the joules per event, when `joules` is priced.
    pub joules_ci: Option<[f64; 2]>,
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
    /// Its 95 % interval: the estimates' half-widths added in quadrature (their
    /// costs come from independent fits).
    pub total_seconds_ci: [f64; 2],
    /// Sum of the estimates' joules.
    pub total_joules: Option<f64>,
    /// Its 95 % interval, likewise.
    pub total_joules_ci: Option<[f64; 2]>,
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
            "the energy of {what} is not priced: the model's energy per event is indistinguishable from zero (95 % CI [{lo:.3e}, {hi:.3e}] J)"
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
        model.cost(f, s).map(|c| {
            let what = format!("{} ({}/{})", event.name(), f.name(), s);
            let joules = priced_joules(c, count, &what).unwrap_or_else(|why| {
                unpriced.push(why);
                None
            });
            priced(
                c,
                event.name(),
                count,
                format!("{}/{}", f.name(), s),
                joules,
                Scope::Command,
            )
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
    let total_seconds: f64 = estimates.iter().map(|e| e.seconds).sum();
    let total_seconds_ci = sum_interval(
        total_seconds,
        estimates.iter().map(|e| (e.seconds, e.seconds_ci)),
    );
    let with_joules: Vec<(f64, [f64; 2])> = estimates
        .iter()
        .filter_map(|e| e.joules.zip(e.joules_ci))
        .collect();
    let total_joules: Option<f64> =
        (!with_joules.is_empty()).then(|| with_joules.iter().map(|j| j.0).sum());
    let total_joules_ci = total_joules.map(|t| sum_interval(t, with_joules.iter().copied()));
    match wakeups {
        Ok(n) => match model.cost(Family::Wakeup, "wakeup") {
            Some(c) => {
                let joules = priced_joules(c, n, "wake-ups from idle").unwrap_or_else(|why| {
                    notes.push(why);
                    None
                });
                estimates.push(priced(
                    c,
                    "wake-ups from idle",
                    n,
                    "wakeup/wakeup".into(),
                    joules,
                    Scope::System,
                ));
            }
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
        total_seconds_ci,
        total_joules,
        total_joules_ci,
        notes,
    }
}

/// An estimate of `count` events at the cost `c`, with `joules` as priced (or not).
fn priced(
    c: &super::file::EventCost,
    event: &str,
    count: u64,
    cost_from: String,
    joules: Option<f64>,
    scope: Scope,
) -> Estimate {
    let n = count as f64;
    let jci = c.total_joules_ci;
    Estimate {
        event: event.to_string(),
        count,
        cost_from,
        seconds_per_event: c.seconds_per_event,
        seconds_per_event_ci: c.seconds_ci,
        seconds: n * c.seconds_per_event,
        seconds_ci: [n * c.seconds_ci[0], n * c.seconds_ci[1]],
        joules_per_event: c.total_joules_per_event,
        joules_per_event_ci: jci,
        significant: jci.map(|ci| excludes(ci, 0.0)),
        joules,
        joules_ci: joules.and(jci).map(|ci| [n * ci[0], n * ci[1]]),
        alternative: None,
        scope,
    }
}

/// The interval of a sum of independent estimates around `total`: the half-widths
/// (each side apart) added in quadrature, as the standard errors of independent
/// fits add.
fn sum_interval(total: f64, parts: impl Iterator<Item = (f64, [f64; 2])>) -> [f64; 2] {
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for (v, ci) in parts {
        lo += (v - ci[0]).max(0.0).powi(2);
        hi += (ci[1] - v).max(0.0).powi(2);
    }
    [total - lo.sqrt(), total + hi.sqrt()]
}

/// `1.538 [1.480, 1.590]`: a value and its interval, scaled by `scale`, `digits` decimals.
fn with_ci(v: f64, ci: [f64; 2], scale: f64, digits: usize) -> String {
    format!(
        "{:.d$} [{:.d$}, {:.d$}]",
        v * scale,
        ci[0] * scale,
        ci[1] * scale,
        d = digits
    )
}

/// The lines `run` prints under the energy table.
pub fn text(a: &Attribution) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {} (from {}{}): time and energy spent in modelled OS events, with the model's 95 % intervals",
        a.label.to_uppercase(),
        a.model,
        if a.energy_emulated {
            ", model energy EMULATED"
        } else {
            ""
        }
    );
    let j = |v: Option<f64>, ci: Option<[f64; 2]>| match (v, ci) {
        (Some(j), Some(ci)) => format!("{} J", with_ci(j, ci, 1.0, 6)),
        (Some(j), None) => format!("{j:.6} J"),
        _ => "-".into(),
    };
    let line = |s: &mut String, e: &Estimate, tag: &str| {
        let verdict = if excludes(e.seconds_per_event_ci, 0.0) {
            ""
        } else {
            " (time per event not significant: its interval contains 0)"
        };
        let _ = writeln!(
            s,
            "    {:>10} {:<17} x {} us ({}) = {} s{verdict}, {}   [{LABEL}{tag}]",
            e.count,
            e.event,
            with_ci(e.seconds_per_event, e.seconds_per_event_ci, 1e6, 3),
            e.cost_from,
            with_ci(e.seconds, e.seconds_ci, 1.0, 6),
            j(e.joules, e.joules_ci),
        );
    };
    for e in a.estimates.iter().filter(|e| e.scope == Scope::Command) {
        line(&mut s, e, "");
        if let Some(alt) = &e.alternative {
            let _ = writeln!(
                s,
                "    {:>10} {:<17}   (if they were {}: {} s, {})",
                "",
                "",
                alt.cost_from,
                with_ci(alt.seconds, alt.seconds_ci, 1.0, 6),
                j(alt.joules, alt.joules_ci)
            );
        }
    }
    let _ = writeln!(
        s,
        "    total {} s, {}   [{}]",
        with_ci(a.total_seconds, a.total_seconds_ci, 1.0, 6),
        j(a.total_joules, a.total_joules_ci),
        LABEL
    );
    // After the total, and not in it: every CPU's events, not the command's.
    for e in a.estimates.iter().filter(|e| e.scope == Scope::System) {
        line(&mut s, e, ", ALL CPUs");
    }
    for n in &a.notes {
        let _ = writeln!(s, "    note: {n}");
    }
    if a.energy_emulated {
        let _ = writeln!(
            s,
            "    note: the model's energy is EMULATED: the emulator draws a constant power, so an event's true energy of its own is 0 J; a priced energy here is that constant power times the wall-clock time the event adds to a run (none for a wake-up, whose runs last a fixed time)"
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_priced_and_labelled() {
        let m = crate::file::tests::sample_model();
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
    fn every_estimate_carries_its_interval_and_the_total_adds_them_in_quadrature() {
        let mut m = crate::file::tests::sample_model();
        let mut c = m.families[0].clone();
        c.family = Family::Ctxswitch;
        c.costs[0].scenario = "pingpong".into();
        c.costs[0].seconds_per_event = 2e-6;
        c.costs[0].seconds_ci = [1.7e-6, 2.3e-6];
        m.families.push(c);
        let a = estimate(
            &m,
            "m.json",
            &[
                (SoftwareEvent::MinorFaults, 1000),
                (SoftwareEvent::ContextSwitches, 100),
            ],
            Err("no cpuidle in this test".into()),
        );
        let f = &a.estimates[0];
        // count × the cost's interval: 1000 × [1.4, 1.6] µs and 1000 × [20, 40] µJ.
        assert!(
            (f.seconds_ci[0] - 1.4e-3).abs() < 1e-12 && (f.seconds_ci[1] - 1.6e-3).abs() < 1e-12
        );
        let j = f.joules_ci.unwrap();
        assert!(
            (j[0] - 0.02).abs() < 1e-12 && (j[1] - 0.04).abs() < 1e-12,
            "{j:?}"
        );
        assert_eq!(f.significant, Some(true));
        // Total time 1.5 ms + 0.2 ms; half-widths 0.1 ms and 0.03 ms in quadrature.
        let half = (0.1e-3f64.powi(2) + 0.03e-3f64.powi(2)).sqrt();
        assert!((a.total_seconds - 1.7e-3).abs() < 1e-12);
        assert!(
            (a.total_seconds_ci[0] - (1.7e-3 - half)).abs() < 1e-12,
            "{:?}",
            a.total_seconds_ci
        );
        assert!(
            (a.total_seconds_ci[1] - (1.7e-3 + half)).abs() < 1e-12,
            "{:?}",
            a.total_seconds_ci
        );
        let t = text(&a);
        assert!(t.contains("1.500 [1.400, 1.600] us"), "{t}");
        assert!(t.contains("true energy of its own is 0 J"), "{t}");
        let json = serde_json::to_value(&a).unwrap();
        assert!(json["estimates"][0]["joules_per_event_ci"][1].is_f64());
        assert_eq!(json["estimates"][0]["significant"], true);
        assert!(json["total_seconds_ci"][0].is_f64());
    }

    #[test]
    fn system_wide_wakeups_are_priced_apart_from_the_commands_total() {
        let mut m = crate::file::tests::sample_model();
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
        let mut m = crate::file::tests::sample_model();
        m.families[0].costs[0].total_joules_ci = Some([-1e-5, 7e-5]);
        let a = estimate(&m, "m.json", &[(SoftwareEvent::MinorFaults, 1000)], Ok(0));
        assert_eq!(
            a.estimates[0].joules, None,
            "no energy from a CI spanning 0"
        );
        assert_eq!(a.estimates[0].significant, Some(false));
        assert_eq!(a.estimates[0].joules_per_event_ci, Some([-1e-5, 7e-5]));
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
