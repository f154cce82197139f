//! The report's figures, as SVG: box plots of run time per monitor and
//! frequency (paper 002, Fig. 7 and 8), and lines of the idle runs against the
//! sampling frequency (Fig. 11 to 13).

use crate::analysis::{analyze, is_idle, BUSY_FRACTION, POWER};
use crate::plan::freq_text;
use crate::results::{Measurement, RunRecord};
use quietwatt_stats as stats;
use quietwatt_stats::plot::{boxplot_svg, lines_svg, Line, Series};

/// The medians per frequency of one metric, per monitor, for one workload, with
/// the baseline's median.
fn by_frequency(
    records: &[RunRecord],
    workload: &str,
    get: impl Fn(&Measurement) -> Option<f64>,
) -> (Vec<Line>, Option<f64>) {
    let mut monitors: Vec<String> = Vec::new();
    for r in records.iter().filter(|r| r.key.workload == workload) {
        if r.key.monitor != "none" && !monitors.contains(&r.key.monitor) {
            monitors.push(r.key.monitor.clone());
        }
    }
    let values = |mon: &str, f: &str| -> Vec<f64> {
        records
            .iter()
            .filter(|r| {
                r.m.ok && r.key.workload == workload && r.key.monitor == mon && r.key.freq_hz == f
            })
            .filter_map(|r| get(&r.m))
            .collect()
    };
    let lines = monitors
        .iter()
        .map(|mon| {
            let mut freqs: Vec<&str> = Vec::new();
            for r in records
                .iter()
                .filter(|r| r.key.workload == workload && &r.key.monitor == mon)
            {
                if !freqs.contains(&r.key.freq_hz.as_str()) {
                    freqs.push(&r.key.freq_hz);
                }
            }
            Line {
                label: mon.clone(),
                points: freqs
                    .iter()
                    .filter_map(|f| Some((f.parse().ok()?, stats::median(&values(mon, f))?)))
                    .collect(),
            }
        })
        .collect();
    (lines, stats::median(&values("none", "0")))
}

/// The C-state residencies of a run, by state name.
fn cstate_values(m: &Measurement) -> Vec<(String, f64)> {
    m.cstates
        .as_deref()
        .unwrap_or("")
        .split(';')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Plots of the idle workloads against the sampling frequency (paper 002, Fig. 11
/// to 13): busy CPU fraction, C-state residency (one line per monitor and state),
/// and mean power where energy was read. Returns (file stem, SVG).
pub fn idle_plots(records: &[RunRecord]) -> Vec<(String, String)> {
    let mut workloads: Vec<String> = Vec::new();
    for r in records.iter().filter(|r| is_idle(&r.key.workload)) {
        if !workloads.contains(&r.key.workload) {
            workloads.push(r.key.workload.clone());
        }
    }
    let mut out = Vec::new();
    for w in workloads {
        let slug = file_slug(&w);
        for (stem, metric) in [("busy", BUSY_FRACTION), ("power", POWER)] {
            let (lines, base) = by_frequency(records, &w, metric.get);
            if lines.iter().all(|l| l.points.is_empty()) {
                continue;
            }
            let refs: Vec<(String, f64)> = base
                .map(|b| ("none (baseline)".to_string(), b))
                .into_iter()
                .collect();
            out.push((
                format!("{stem}-{slug}"),
                lines_svg(
                    &format!("{w}: {} against sampling frequency", metric.name),
                    "sampling frequency (Hz)",
                    &format!("median {} ({})", metric.name, metric.unit),
                    &lines,
                    &refs,
                ),
            ));
        }
        let mut states: Vec<String> = Vec::new();
        for r in records.iter().filter(|r| r.key.workload == w) {
            for (k, _) in cstate_values(&r.m) {
                if !states.contains(&k) {
                    states.push(k);
                }
            }
        }
        let mut lines = Vec::new();
        let mut refs = Vec::new();
        for st in &states {
            let get = |m: &Measurement| {
                cstate_values(m)
                    .into_iter()
                    .find(|(k, _)| k == st)
                    .map(|(_, v)| v)
            };
            let (ls, base) = by_frequency(records, &w, get);
            for mut l in ls {
                l.label = format!("{} {st}", l.label);
                lines.push(l);
            }
            if let Some(b) = base {
                refs.push((format!("none {st}"), b));
            }
        }
        if lines.iter().any(|l| !l.points.is_empty()) {
            out.push((
                format!("cstates-{slug}"),
                lines_svg(
                    &format!("{w}: C-state residency against sampling frequency"),
                    "sampling frequency (Hz)",
                    "median residency (fraction of CPU time)",
                    &lines,
                    &refs,
                ),
            ));
        }
    }
    out
}

/// A file name from a label: letters, digits, `-`, `_` and `.` kept, the rest `_`.
pub fn file_slug(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One box plot per workload of its run times: the baseline first, then each
/// monitor at each frequency in the order of [`analyze`] (paper 002, Fig. 7 and
/// 8). Returns (workload label, SVG document).
pub fn boxplots(records: &[RunRecord]) -> Vec<(String, String)> {
    let rows = analyze(records);
    let mut workloads: Vec<String> = Vec::new();
    for r in records {
        if !workloads.contains(&r.key.workload) {
            workloads.push(r.key.workload.clone());
        }
    }
    let times = |w: &str, mon: &str, f: &str| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r.m.ok && r.key.workload == w && r.key.monitor == mon && r.key.freq_hz == f)
            .filter_map(|r| r.m.workload_s)
            .collect()
    };
    workloads
        .into_iter()
        .map(|w| {
            let mut series = vec![Series {
                label: "none (baseline)".into(),
                values: times(&w, "none", "0"),
            }];
            for r in rows.iter().filter(|r| r.workload == w) {
                series.push(Series {
                    label: format!("{} {} Hz", r.monitor, r.freq_hz),
                    values: times(&w, &r.monitor, &freq_text(Some(r.freq_hz))),
                });
            }
            let svg = boxplot_svg(
                &format!("{w}: run time per monitor and frequency"),
                "workload time (s)",
                &series,
            );
            (w, svg)
        })
        .collect()
}
