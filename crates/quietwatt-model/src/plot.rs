//! A model's regressions drawn: time per execution against events per execution,
//! one group of points and its fitted line per scenario (paper 003's figures).

use crate::file::FamilyModel;
use crate::XAxis;
use quietwatt_stats::plot::{scatter_fit_svg, FitGroup};

/// The time regression of `family` as an SVG document, or `None` before any
/// scenario has a fit. Times are in microseconds per execution.
pub fn time_svg(family: &FamilyModel) -> Option<String> {
    if family.fits.is_empty() {
        return None;
    }
    let groups: Vec<FitGroup> = family
        .fits
        .iter()
        .map(|fit| {
            let points = family
                .runs
                .iter()
                .filter(|r| r.scenario == fit.scenario)
                .map(|r| {
                    let per = r.batch.max(1) as f64;
                    let x = match fit.x {
                        XAxis::Measured => r.events as f64 / per,
                        XAxis::Intended => r.count as f64,
                    };
                    (x, r.seconds / per * 1e6)
                })
                .collect();
            FitGroup {
                label: format!("{} (R² {:.3})", fit.scenario, fit.time.r2),
                points,
                line: Some((fit.time.slope * 1e6, fit.time.intercept * 1e6)),
            }
        })
        .collect();
    Some(scatter_fit_svg(
        &format!("{}: time against events", family.family.name()),
        "events per execution",
        "time per execution (µs)",
        &groups,
    ))
}
