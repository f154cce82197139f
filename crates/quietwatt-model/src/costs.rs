//! From runs to fits to per-event costs, as paper 003 reads them: per scenario, time
//! and energy per execution against events per execution; the cost of one event is
//! the scenario's slope less the baseline's slope (the same work without the event).

use super::file::{EventCost, FamilyModel, Run, ScenarioFit};
use super::XAxis;
use crate::error::Result;
use quietwatt_stats::fit::{ols, slope_difference, Fit};

/// Fits every scenario of `family` that has enough runs and prices its event,
/// replacing `fits`, `costs` and the fit notes. `channels` is the number of energy
/// channels, `total` the indices whose sum is the total. A fit that cannot be made
/// is a note, not an error: the other scenarios still get theirs.
pub fn analyze(family: &mut FamilyModel, channels: usize, total: &[usize]) {
    family.fits.clear();
    family.costs.clear();
    family.notes.retain(|n| !n.starts_with("fit: "));
    for s in &family.scenarios {
        let runs: Vec<&Run> = family
            .runs
            .iter()
            .filter(|r| r.scenario == s.spec.name)
            .collect();
        match fit_scenario(&s.spec.name, s.spec.x, &runs, channels, total) {
            Ok(f) => family.fits.push(f),
            Err(e) => family.notes.push(format!("fit: {e}")),
        }
    }
    let baseline = family
        .scenarios
        .iter()
        .find(|s| s.spec.baseline)
        .and_then(|b| family.fits.iter().find(|f| f.scenario == b.spec.name));
    if family.scenarios.iter().any(|s| s.spec.baseline) && baseline.is_none() {
        family
            .notes
            .push("fit: no baseline fit, so no cost can be priced yet".into());
        return;
    }
    for s in family.scenarios.iter().filter(|s| !s.spec.baseline) {
        let Some(f) = family.fits.iter().find(|f| f.scenario == s.spec.name) else {
            continue;
        };
        let diff = |a: &Fit, b: Option<&Fit>| match b {
            Some(b) => slope_difference(a, b),
            None => (a.slope, a.slope_ci),
        };
        let (sec, sec_ci) = diff(&f.time, baseline.map(|b| &b.time));
        let (mut j, mut j_ci) = (Vec::new(), Vec::new());
        for (i, e) in f.energy.iter().enumerate() {
            let (v, ci) = diff(e, baseline.and_then(|b| b.energy.get(i)));
            j.push(v);
            j_ci.push(ci);
        }
        let total = f
            .total_energy
            .as_ref()
            .map(|t| diff(t, baseline.and_then(|b| b.total_energy.as_ref())));
        family.costs.push(EventCost {
            scenario: s.spec.name.clone(),
            baseline: baseline.map(|b| b.scenario.clone()),
            counted: s.spec.counted.clone(),
            seconds_per_event: sec,
            seconds_ci: sec_ci,
            joules_per_event: j,
            joules_ci: j_ci,
            total_joules_per_event: total.map(|t| t.0),
            total_joules_ci: total.map(|t| t.1),
        });
    }
}

/// The fits of one scenario from its runs, per execution.
pub fn fit_scenario(
    name: &str,
    x_axis: XAxis,
    runs: &[&Run],
    channels: usize,
    total: &[usize],
) -> Result<ScenarioFit> {
    let per = |r: &Run, v: f64| v / r.batch.max(1) as f64;
    let x: Vec<f64> = runs
        .iter()
        .map(|r| match x_axis {
            XAxis::Measured => per(r, r.events as f64),
            XAxis::Intended => r.count as f64,
        })
        .collect();
    let col = |f: &dyn Fn(&Run) -> f64| runs.iter().map(|r| per(r, f(r))).collect::<Vec<f64>>();
    let time = ols(&x, &col(&|r| r.seconds), &format!("{name} time"))?;
    let wall = ols(&x, &col(&|r| r.wall_seconds), &format!("{name} wall time"))?;
    let with_energy = channels > 0 && runs.iter().all(|r| r.joules.len() == channels);
    let mut energy = Vec::new();
    let mut total_energy = None;
    if with_energy {
        for i in 0..channels {
            energy.push(ols(&x, &col(&|r| r.joules[i]), &format!("{name} energy"))?);
        }
        if !total.is_empty() {
            let t = col(&|r| total.iter().map(|&i| r.joules[i]).sum());
            total_energy = Some(ols(&x, &t, &format!("{name} total energy"))?);
        }
    }
    let asked: f64 = runs.iter().map(|r| r.count as f64 * r.batch as f64).sum();
    let got: f64 = runs.iter().map(|r| r.events as f64).sum();
    Ok(ScenarioFit {
        scenario: name.to_string(),
        x: x_axis,
        time,
        wall,
        energy,
        total_energy,
        events_per_count: if asked > 0.0 { got / asked } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::PlannedScenario;
    use crate::{Family, ScenarioSpec};
    use std::collections::BTreeMap;

    fn spec(name: &str, baseline: bool) -> PlannedScenario {
        PlannedScenario {
            spec: ScenarioSpec {
                name: name.into(),
                description: String::new(),
                baseline,
                x: if baseline {
                    XAxis::Intended
                } else {
                    XAxis::Measured
                },
                counted: "minor-faults".into(),
                unit: "page".into(),
            },
            counts: vec![],
            batch: 2,
        }
    }

    fn run(scenario: &str, count: u64, events: u64, seconds: f64, joules: [f64; 2]) -> Run {
        Run {
            seq: 0,
            round: 0,
            scenario: scenario.into(),
            count,
            batch: 2,
            events,
            counts: BTreeMap::new(),
            seconds,
            wall_seconds: seconds,
            joules: joules.to_vec(),
        }
    }

    #[test]
    fn the_cost_is_the_slope_less_the_baseline_slope_exactly() {
        // Synthetic runs (batch 2, so totals are twice the per-execution line):
        // baseline 100 ns per page, scenario 100 ns + 1.4 µs per fault (one per page,
        // plus 3 stray faults); energy 20 W package + 4 W dram of that time.
        let mut runs = Vec::new();
        for n in [1000u64, 2000, 4000, 8000] {
            let npf = 1e-3 + 100e-9 * n as f64;
            runs.push(run(
                "npf",
                n,
                0,
                2.0 * npf,
                [2.0 * 20.0 * npf, 2.0 * 4.0 * npf],
            ));
            let ev = n + 3;
            let t = 1e-3 + (100e-9 + 1.4e-6) * ev as f64;
            runs.push(run(
                "odpa",
                n,
                2 * ev,
                2.0 * t,
                [2.0 * 20.0 * t, 2.0 * 4.0 * t],
            ));
        }
        let mut f = FamilyModel {
            family: Family::Pagefault,
            scenarios: vec![spec("npf", true), spec("odpa", false)],
            rounds: 1,
            seed: 1,
            runs,
            complete: true,
            fits: vec![],
            costs: vec![],
            notes: vec![],
        };
        analyze(&mut f, 2, &[0, 1]);
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        let c = &f.costs[0];
        assert_eq!(c.baseline.as_deref(), Some("npf"));
        assert!(
            (c.seconds_per_event - 1.4e-6).abs() < 1e-15,
            "{}",
            c.seconds_per_event
        );
        assert!((c.joules_per_event[0] - 20.0 * 1.4e-6).abs() < 1e-13);
        assert!((c.joules_per_event[1] - 4.0 * 1.4e-6).abs() < 1e-13);
        assert!((c.total_joules_per_event.unwrap() - 24.0 * 1.4e-6).abs() < 1e-13);
        let odpa = f.fits.iter().find(|f| f.scenario == "odpa").unwrap();
        assert!((odpa.events_per_count - 15012.0 / 15000.0).abs() < 1e-12);
    }

    #[test]
    fn too_few_runs_leave_a_note_and_no_cost() {
        let mut f = FamilyModel {
            family: Family::Pagefault,
            scenarios: vec![spec("npf", true), spec("odpa", false)],
            rounds: 1,
            seed: 1,
            runs: vec![run("odpa", 1, 1, 1.0, [1.0, 1.0])],
            complete: false,
            fits: vec![],
            costs: vec![],
            notes: vec![],
        };
        analyze(&mut f, 2, &[0, 1]);
        assert!(f.costs.is_empty());
        assert!(
            f.notes.iter().any(|n| n.contains("baseline")),
            "{:?}",
            f.notes
        );
    }
}
