//! The statistics of a results file: each monitored combination against its
//! workload's baseline, one metric at a time (workload time, busy fraction,
//! power), with Holm's adjustment over the table (paper 002, Appendix A and B).

use crate::results::{Measurement, RunRecord};
use quietwatt_stats::{self as stats, Comparison};

/// One line of the statistics table: a combination against its workload's baseline.
#[derive(Debug, Clone)]
pub struct ReportRow {
    /// Workload label.
    pub workload: String,
    /// Monitor label.
    pub monitor: String,
    /// Frequency, hertz.
    pub freq_hz: f64,
    /// Failed runs of this combination (left out).
    pub failed: usize,
    /// The comparison of workload times with the baseline's.
    pub comparison: Comparison,
    /// Holm-adjusted p-value over the whole table.
    pub adjusted_p: Option<f64>,
    /// Median monitor CPU time per run, seconds.
    pub monitor_cpu_s: Option<f64>,
    /// Median monitor wake-ups per run.
    pub monitor_wakeups: Option<f64>,
}

/// A figure of a run that the analysis compares with the baseline's.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// What it is, for table titles: `workload time`.
    pub name: &'static str,
    /// Its unit, for column heads: `s`.
    pub unit: &'static str,
    /// Reads it from a run (`None`: not measured there).
    pub get: fn(&Measurement) -> Option<f64>,
}

/// The workload's own time: the paper's running time (Appendix A).
pub const WORKLOAD_TIME: Metric = Metric {
    name: "workload time",
    unit: "s",
    get: |m| m.workload_s,
};

/// The busy fraction of the CPUs over the run, `1 - idle` of `/proc/stat`: what a
/// monitor takes from an idle machine (the C0 share of paper 002, Fig. 12).
pub const BUSY_FRACTION: Metric = Metric {
    name: "busy CPU fraction (1 - /proc/stat idle)",
    unit: "fraction",
    get: |m| m.proc_idle_frac.map(|i| 1.0 - i),
};

/// Mean power over the run from the energy read around it (paper 002, Appendix B).
pub const POWER: Metric = Metric {
    name: "mean power",
    unit: "W",
    get: |m| match (m.energy_j, m.energy_s) {
        (Some(e), Some(t)) if t > 0.0 => Some(e / t),
        _ => None,
    },
};

/// Whether a workload label names the built-in idle workload.
pub fn is_idle(label: &str) -> bool {
    label.starts_with("idle:")
}

/// [`analyze_metric`] of [`WORKLOAD_TIME`] over every workload.
pub fn analyze(records: &[RunRecord]) -> Vec<ReportRow> {
    analyze_metric(records, &WORKLOAD_TIME, |_| true)
}

/// The statistics of a results file: for each monitored combination of the
/// workloads `keep` accepts, `metric` against the same workload's baseline
/// (one-sided, "the monitor raises it": slower, busier, more power),
/// with Holm's adjustment over every test of the table (the paper adjusts over its
/// whole table: an adjusted p of 0.22 from a raw p below 0.01 needs more than 5
/// tests in the family). Baseline runs of a workload are compared with nothing.
pub fn analyze_metric(
    records: &[RunRecord],
    metric: &Metric,
    keep: impl Fn(&str) -> bool,
) -> Vec<ReportRow> {
    // Combinations in order of first appearance in the file, by workload.
    let mut keys: Vec<(String, String, String)> = Vec::new();
    for r in records {
        let k = (
            r.key.workload.clone(),
            r.key.monitor.clone(),
            r.key.freq_hz.clone(),
        );
        if !keys.contains(&k) && keep(&k.0) {
            keys.push(k);
        }
    }
    let workloads: Vec<String> = {
        let mut w: Vec<String> = Vec::new();
        for (a, _, _) in &keys {
            if !w.contains(a) {
                w.push(a.clone());
            }
        }
        w
    };
    let times = |w: &str, mon: &str, f: &str| -> (Vec<f64>, usize) {
        let rs: Vec<&RunRecord> = records
            .iter()
            .filter(|r| r.key.workload == w && r.key.monitor == mon && r.key.freq_hz == f)
            .collect();
        let ok: Vec<f64> = rs
            .iter()
            .filter(|r| r.m.ok)
            .filter_map(|r| (metric.get)(&r.m))
            .collect();
        let failed = rs.iter().filter(|r| !r.m.ok).count();
        (ok, failed)
    };
    let med = |v: Vec<f64>| stats::median(&v);
    let mut rows = Vec::new();
    for w in &workloads {
        let (base, _) = times(w, "none", "0");
        let mut mine: Vec<&(String, String, String)> = keys
            .iter()
            .filter(|(a, m, _)| a == w && m != "none")
            .collect();
        // Monitor by first appearance, frequency ascending.
        mine.sort_by(|a, b| {
            let pos = |m: &str| keys.iter().position(|k| k.1 == m).unwrap_or(0);
            pos(&a.1).cmp(&pos(&b.1)).then(
                a.2.parse::<f64>()
                    .unwrap_or(0.0)
                    .total_cmp(&b.2.parse::<f64>().unwrap_or(0.0)),
            )
        });
        for (_, mon, f) in mine {
            let (x, failed) = times(w, mon, f);
            let of = |get: fn(&Measurement) -> Option<f64>| {
                med(records
                    .iter()
                    .filter(|r| {
                        r.m.ok
                            && r.key.workload == *w
                            && r.key.monitor == *mon
                            && r.key.freq_hz == *f
                    })
                    .filter_map(|r| get(&r.m))
                    .collect())
            };
            rows.push(ReportRow {
                workload: w.clone(),
                monitor: mon.clone(),
                freq_hz: f.parse().unwrap_or(0.0),
                failed,
                comparison: stats::compare(&x, &base),
                adjusted_p: None,
                monitor_cpu_s: of(|m| m.monitor_cpu_s),
                monitor_wakeups: of(|m| m.monitor_wakeups.map(|v| v as f64)),
            });
        }
    }
    let tested: Vec<(usize, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.comparison.test.as_ref().ok().map(|t| (i, t.p_value)))
        .collect();
    let ps: Vec<f64> = tested.iter().map(|&(_, p)| p).collect();
    if let Ok(adj) = stats::holm(&ps) {
        for (&(i, _), a) in tested.iter().zip(adj) {
            rows[i].adjusted_p = Some(a);
        }
    }
    rows
}
