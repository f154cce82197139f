//! Paper 003's validation (Section 5) on an application the model was not fitted
//! on: a 3×3 box blur of a grey image (one byte per pixel) into an output buffer,
//! run three ways, as the paper ran its JPEG encoder:
//! - **NPF**: the output buffer was written before (no fault);
//! - **ODPA**: a fresh anonymous mapping each time (first touch);
//! - **COW**: a forked child blurs into the buffer its parent filled.
//!
//! Faults are counted by perf around each run. The model predicts the extra cost of
//! a variant as (its faults − NPF's faults) × the scenario's per-event cost; the
//! measurement is the difference of the medians of the runs. Error = |E − M| / M.
//! Variants are interleaved, shuffled each round.

use super::counters::{SoftwareEvent, Task, TaskCounter};
use super::energy::EnergyProbe;
use super::file::Model;
use super::scenario::{in_forked_children, Buffer};
use super::{page_size, Family, Measured};
use crate::error::{Error, Result};
use quietwatt_stats::median;
use quietwatt_stats::rng::XorShift;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

/// One variant's measurements and the model's prediction for it.
#[derive(Debug, Clone, Serialize)]
pub struct VariantResult {
    /// `npf`, `odpa` or `cow`.
    pub variant: String,
    /// Runs.
    pub runs: usize,
    /// Median faults per run.
    pub faults: f64,
    /// Median seconds per run.
    pub seconds: f64,
    /// Median joules (total) per run, if measured.
    pub joules: Option<f64>,
    /// Measured extra time against NPF (M), seconds.
    pub measured_extra_s: Option<f64>,
    /// Predicted extra time (E) = extra faults × the model's seconds per event.
    pub predicted_extra_s: Option<f64>,
    /// |E − M| / M for time.
    pub time_error: Option<f64>,
    /// Measured extra energy against NPF, joules.
    pub measured_extra_j: Option<f64>,
    /// Predicted extra energy, joules.
    pub predicted_extra_j: Option<f64>,
    /// |E − M| / M for energy.
    pub energy_error: Option<f64>,
    /// Measured time per extra fault (M / extra faults), seconds: compare with the model's.
    pub measured_s_per_fault: Option<f64>,
    /// The model's seconds per event.
    pub model_s_per_fault: Option<f64>,
    /// Every run's time, seconds, in run order (for the plot).
    pub run_seconds: Vec<f64>,
}

/// The validation's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct ValidationReport {
    /// What ran.
    pub application: String,
    /// Whether the energy is the emulator's.
    pub emulated: bool,
    /// The variants, NPF first.
    pub variants: Vec<VariantResult>,
}

/// A 3×3 box blur of `src` (side × side bytes) into `dst`: plain loops on raw
/// pointers, no allocation, so a forked child may run it.
fn blur(src: *const u8, dst: *mut u8, side: usize) {
    for y in 1..side - 1 {
        for x in 1..side - 1 {
            let mut sum = 0u32;
            for dy in 0..3 {
                for dx in 0..3 {
                    // SAFETY: (y + dy - 1, x + dx - 1) is inside the side × side image.
                    sum += unsafe { *src.add((y + dy - 1) * side + x + dx - 1) } as u32;
                }
            }
            // SAFETY: inside the side × side output buffer.
            unsafe { dst.add(y * side + x).write((sum / 9) as u8) };
        }
    }
}

fn in_process(
    src: &Buffer,
    dst: &Buffer,
    side: usize,
    probe: &mut EnergyProbe,
) -> Result<Measured> {
    let minor = TaskCounter::open(SoftwareEvent::MinorFaults, Task::ThisThread)?;
    probe.begin()?;
    let m0 = minor.read()?;
    let t0 = Instant::now();
    blur(src.as_ptr(), dst.as_ptr(), side);
    let wall = t0.elapsed().as_secs_f64();
    let m1 = minor.read()?;
    let joules = probe.end()?;
    Ok(Measured {
        events: m1 - m0,
        counts: BTreeMap::new(),
        seconds: wall,
        wall_seconds: wall,
        joules,
    })
}

/// Runs the three variants `reps` times each (interleaved) on a `side` × `side`
/// image and compares with `model`'s page-fault costs.
pub fn run(
    model: &Model,
    side: usize,
    reps: u32,
    probe: &mut EnergyProbe,
) -> Result<ValidationReport> {
    let fam = model.family(Family::Pagefault).ok_or_else(|| {
        Error::Fit(quietwatt_stats::fit::FitError {
            what: "the validation".into(),
            why: "the model has no pagefault family: make it with `quietwatt model pagefault`"
                .into(),
        })
    })?;
    if fam.costs.is_empty() {
        return Err(Error::Fit(quietwatt_stats::fit::FitError {
            what: "the validation".into(),
            why: "the model's pagefault family has no costs (too few runs?)".into(),
        }));
    }
    let side = side.max(16);
    let page = page_size();
    let pages = (side * side).div_ceil(page);
    let src = Buffer::map(pages, page)?;
    for i in 0..side * side {
        // SAFETY: inside the buffer; a deterministic pattern.
        unsafe {
            src.as_ptr()
                .add(i)
                .write((i.wrapping_mul(2654435761) >> 13) as u8);
        };
    }
    let npf_dst = Buffer::map(pages, page)?;
    // The COW variant forks: without this, every later NPF run would fault.
    npf_dst.dont_fork();
    npf_dst.touch();
    let total = |m: &Measured| -> Option<f64> {
        (!m.joules.is_empty()).then(|| {
            model
                .energy
                .total_members
                .iter()
                .map(|&i| m.joules[i])
                .sum()
        })
    };
    let names = ["npf", "odpa", "cow"];
    let mut got: Vec<Vec<Measured>> = vec![Vec::new(); 3];
    let mut rng = XorShift::new(0x7a11d);
    for _ in 0..reps.max(1) {
        let mut order = [0usize, 1, 2];
        for i in (1..3).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for v in order {
            let m = match v {
                0 => in_process(&src, &npf_dst, side, probe)?,
                1 => {
                    let dst = Buffer::map(pages, page)?;
                    in_process(&src, &dst, side, probe)?
                }
                _ => {
                    let dst = Buffer::map(pages, page)?;
                    dst.touch();
                    in_forked_children(1, probe, &|| blur(src.as_ptr(), dst.as_ptr(), side))?
                }
            };
            got[v].push(m);
        }
    }
    let med = |v: &[f64]| median(v).unwrap_or(0.0);
    let summary: Vec<(f64, f64, Option<f64>)> = got
        .iter()
        .map(|runs| {
            let f = med(&runs.iter().map(|m| m.events as f64).collect::<Vec<_>>());
            let t = med(&runs.iter().map(|m| m.seconds).collect::<Vec<_>>());
            let j: Option<Vec<f64>> = runs.iter().map(total).collect();
            (f, t, j.map(|j| med(&j)))
        })
        .collect();
    let (f0, t0, j0) = summary[0];
    let err = |e: f64, m: f64| (m != 0.0).then(|| (e - m).abs() / m.abs());
    let variants = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let (f, t, j) = summary[i];
            let cost = (i > 0)
                .then(|| model.cost(Family::Pagefault, name))
                .flatten();
            let extra_faults = f - f0;
            let m_t = (i > 0).then_some(t - t0);
            let e_t = cost.map(|c| extra_faults * c.seconds_per_event);
            let m_j = if i > 0 {
                j.zip(j0).map(|(a, b)| a - b)
            } else {
                None
            };
            let e_j = cost
                .and_then(|c| c.total_joules_per_event)
                .map(|c| extra_faults * c);
            VariantResult {
                variant: name.to_string(),
                runs: got[i].len(),
                faults: f,
                seconds: t,
                joules: j,
                measured_extra_s: m_t,
                predicted_extra_s: e_t,
                time_error: e_t.zip(m_t).and_then(|(e, m)| err(e, m)),
                measured_extra_j: m_j,
                predicted_extra_j: e_j,
                energy_error: e_j.zip(m_j).and_then(|(e, m)| err(e, m)),
                measured_s_per_fault: m_t.filter(|_| extra_faults > 0.0).map(|m| m / extra_faults),
                model_s_per_fault: cost.map(|c| c.seconds_per_event),
                run_seconds: got[i].iter().map(|m| m.seconds).collect(),
            }
        })
        .collect();
    Ok(ValidationReport {
        application: format!(
            "3x3 box blur of a {side}x{side} image (one byte per pixel) into a {} KiB output buffer",
            pages * page / 1024
        ),
        emulated: model.energy.emulated,
        variants,
    })
}

/// The report as a Markdown table.
pub fn table(r: &ValidationReport) -> String {
    let o = |v: Option<f64>, scale: f64, digits: usize| {
        v.map_or("-".to_string(), |x| format!("{:.*}", digits, x * scale))
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Validation on {}{}:\n",
        r.application,
        if r.emulated { " (energy EMULATED)" } else { "" }
    );
    let _ = writeln!(
        s,
        "| variant | runs | faults | time (ms) | measured extra M (ms) | predicted E (ms) | time error | measured us/fault | model us/fault | energy (J) | measured extra (mJ) | predicted (mJ) | energy error |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for v in &r.variants {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.3} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            v.variant,
            v.runs,
            v.faults,
            v.seconds * 1e3,
            o(v.measured_extra_s, 1e3, 3),
            o(v.predicted_extra_s, 1e3, 3),
            v.time_error
                .map_or("-".into(), |e| format!("{:.1} %", e * 100.0)),
            o(v.measured_s_per_fault, 1e6, 3),
            o(v.model_s_per_fault, 1e6, 3),
            o(v.joules, 1.0, 4),
            o(v.measured_extra_j, 1e3, 3),
            o(v.predicted_extra_j, 1e3, 3),
            v.energy_error
                .map_or("-".into(), |e| format!("{:.1} %", e * 100.0)),
        );
    }
    s
}

/// The validation drawn: the application's run times per variant (box plots), each
/// label carrying the extra time over NPF the model predicts (E) and the one
/// measured (M), medians.
pub fn plot_svg(r: &ValidationReport) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |s| format!("{:+.2} ms", s * 1e3));
    let series: Vec<quietwatt_stats::plot::Series> = r
        .variants
        .iter()
        .map(|v| quietwatt_stats::plot::Series {
            // Wrapped by the plot before each '(': one short line each.
            label: if v.variant == "npf" {
                "npf (baseline)".to_string()
            } else {
                format!(
                    "{} (E {}) (M {})",
                    v.variant,
                    ms(v.predicted_extra_s),
                    ms(v.measured_extra_s)
                )
            },
            values: v.run_seconds.iter().map(|s| s * 1e3).collect(),
        })
        .collect();
    quietwatt_stats::plot::boxplot_svg(
        "validation (E model, M measured)",
        "time per run (ms)",
        &series,
    )
}

#[cfg(test)]
mod plot_tests {
    use super::*;

    #[test]
    fn the_plot_has_a_box_per_variant_with_both_extras_in_its_label() {
        let v = |name: &str, e: Option<f64>, m: Option<f64>, runs: &[f64]| VariantResult {
            variant: name.into(),
            runs: runs.len(),
            faults: 0.0,
            seconds: 0.0,
            joules: None,
            measured_extra_s: m,
            predicted_extra_s: e,
            time_error: None,
            measured_extra_j: None,
            predicted_extra_j: None,
            energy_error: None,
            measured_s_per_fault: None,
            model_s_per_fault: None,
            run_seconds: runs.to_vec(),
        };
        let r = ValidationReport {
            application: "a".into(),
            emulated: false,
            variants: vec![
                v("npf", None, None, &[0.010, 0.011, 0.012]),
                v("odpa", Some(0.0074), Some(0.0084), &[0.018, 0.019, 0.020]),
                v("cow", Some(0.0134), Some(0.0157), &[0.025, 0.026, 0.024]),
            ],
        };
        let svg = plot_svg(&r);
        assert_eq!(svg.matches("<g class=\"series\"").count(), 3, "{svg}");
        for want in [
            "npf",
            "(E +7.40 ms)",
            "(M +8.40 ms)",
            "(E +13.40 ms)",
            "(M +15.70 ms)",
        ] {
            assert!(svg.contains(want), "{want} missing");
        }
    }
}
