//! The report's text: the Appendix A table in Markdown, the protocol above it,
//! the baselines and failed runs below it, and the tables of the idle runs.

use crate::analysis::{
    analyze_metric, is_idle, Metric, ReportRow, BUSY_FRACTION, POWER, WORKLOAD_TIME,
};
use crate::results::RunRecord;
use quietwatt_stats::{self as stats, StatsError};

fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// The Appendix A table of `rows` (one metric), in Markdown.
pub fn table_markdown(rows: &[ReportRow], metric: &Metric) -> String {
    let mut s = String::new();
    s.push_str(&format!("| workload | monitor | freq (Hz) | runs (kept / baseline) | median ({u}) | p-value | adj. p | shift ({u}) [95 % CI] | relative % [95 % CI] | monitor CPU (ms) | wake-ups |\n", u = metric.unit));
    s.push_str("|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|\n");
    for r in rows {
        let c = &r.comparison;
        let (p, adj) = match (&c.test, r.adjusted_p) {
            (Ok(t), Some(a)) => (fmt_p(t.p_value), fmt_p(a)),
            (Ok(t), None) => (fmt_p(t.p_value), "-".into()),
            (Err(e), _) => (e.to_string(), "-".into()),
        };
        let shift = match &c.shift {
            Ok(sh) => format!("{:+.4} [{:+.4}, {:+.4}]", sh.estimate, sh.lower, sh.upper),
            Err(StatsError::TooFewSamples { .. }) => "-".into(),
            Err(e) => e.to_string(),
        };
        let pct = match (c.overhead_pct, c.overhead_ci_pct) {
            (Some(p), Some((lo, hi))) => format!("{p:+.2} [{lo:+.2}, {hi:+.2}]"),
            (Some(p), None) => format!("{p:+.2}"),
            _ => "-".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} / {}{} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.workload,
            r.monitor,
            r.freq_hz,
            c.n_x,
            c.n_y,
            if r.failed > 0 {
                format!(" ({} failed)", r.failed)
            } else {
                String::new()
            },
            c.median_x.map(|m| format!("{m:.4}")).unwrap_or("-".into()),
            p,
            adj,
            shift,
            pct,
            r.monitor_cpu_s
                .map(|v| format!("{:.2}", v * 1e3))
                .unwrap_or("-".into()),
            r.monitor_wakeups
                .map(|v| format!("{v:.0}"))
                .unwrap_or("-".into()),
        ));
    }
    s
}

/// The table of paper 002's Appendix A, in Markdown, with the protocol above it.
pub fn markdown(rows: &[ReportRow], records: &[RunRecord]) -> String {
    let mut s = String::new();
    let ok = records.iter().filter(|r| r.m.ok).count();
    s.push_str(&format!(
        "Runs: {} ({} ok, {} failed). Outliers: outside [q1 - 3 IQR, q3 + 3 IQR] per combination, dropped. \
Test: one-sided Wilcoxon rank-sum (Mann-Whitney U; alternative: the monitored workload is slower), \
exact without ties when a group has 8 runs or fewer, else normal approximation with tie and continuity correction; \
{}. \
Shift: Hodges-Lehmann estimate of (monitored - baseline) workload time with its 95 % distribution-free interval; \
overhead: the shift over the baseline median.\n\n",
        records.len(),
        ok,
        records.len() - ok,
        match rows.iter().filter(|r| r.comparison.test.is_ok()).count() {
            0 => "no test could be made, so no p-value is adjusted".to_string(),
            1 => "one test, so its p-value needs no adjustment (Holm-Bonferroni over one test leaves it unchanged)".to_string(),
            n => format!("p-values adjusted by Holm-Bonferroni over the {n} tests of the table"),
        }
    ));
    s.push_str(&table_markdown(rows, &WORKLOAD_TIME));
    let baselines: Vec<String> = {
        let mut b: Vec<String> = Vec::new();
        for r in records.iter().filter(|r| r.key.monitor == "none") {
            if !b.contains(&r.key.workload) {
                b.push(r.key.workload.clone());
            }
        }
        b
    };
    s.push('\n');
    for w in baselines {
        let v: Vec<f64> = records
            .iter()
            .filter(|r| r.m.ok && r.key.workload == w && r.key.monitor == "none")
            .filter_map(|r| r.m.workload_s)
            .collect();
        s.push_str(&format!(
            "Baseline {w}: {} runs, median {} s.\n",
            v.len(),
            stats::median(&v)
                .map(|m| format!("{m:.4}"))
                .unwrap_or("-".into())
        ));
    }
    let failed: Vec<&RunRecord> = records.iter().filter(|r| !r.m.ok).collect();
    if !failed.is_empty() {
        s.push_str("\nFailed runs:\n\n");
        for r in failed.iter().take(20) {
            s.push_str(&format!(
                "- {} / {} @ {} Hz, rep {}: {}\n",
                r.key.workload,
                r.key.monitor,
                r.key.freq_hz,
                r.key.rep,
                r.m.error.as_deref().unwrap_or("(no message)")
            ));
        }
        if failed.len() > 20 {
            s.push_str(&format!("- ... and {} more\n", failed.len() - 20));
        }
    }
    s
}

/// The idle part of a report (paper 002, Appendix B and Fig. 11 to 13): for the
/// built-in idle workloads, the busy CPU fraction and, where energy was read, the
/// mean power, each against the baseline by the same test (alternative: the
/// monitor raises it), Holm-adjusted within its table. `None` without idle runs.
pub fn idle_markdown(records: &[RunRecord]) -> Option<String> {
    if !records.iter().any(|r| is_idle(&r.key.workload)) {
        return None;
    }
    let mut s = String::new();
    for metric in [BUSY_FRACTION, POWER] {
        let has = records
            .iter()
            .any(|r| is_idle(&r.key.workload) && (metric.get)(&r.m).is_some());
        if !has {
            s.push_str(&format!(
                "No {} in the idle runs (no energy source opened, or no /proc/stat).\n\n",
                metric.name
            ));
            continue;
        }
        let rows = analyze_metric(records, &metric, is_idle);
        s.push_str(&format!(
            "Idle runs, {} ({}):\n\n",
            metric.name, metric.unit
        ));
        s.push_str(&table_markdown(&rows, &metric));
        s.push('\n');
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::plan::RunKey;
    use crate::results::Measurement;

    #[test]
    fn a_report_without_tests_says_none_was_made() {
        let md = markdown(&[], &[]);
        assert!(md.contains("no test could be made"), "{md}");
        assert!(!md.contains("over the 0 tests"), "{md}");
    }

    #[test]
    fn too_few_runs_say_so_in_the_table() {
        let mk = |mon: &str, f: &str, rep: usize, t: f64| RunRecord {
            seq: rep,
            round: rep,
            key: RunKey {
                workload: "w".into(),
                monitor: mon.into(),
                freq_hz: f.into(),
                rep,
            },
            m: Measurement {
                ok: true,
                workload_s: Some(t),
                ..Measurement::default()
            },
        };
        let recs: Vec<RunRecord> = (0..3)
            .flat_map(|i| [mk("none", "0", i, 1.0 + i as f64), mk("m", "10", i, 2.0)])
            .collect();
        let rows = analyze(&recs);
        assert_eq!(rows.len(), 1);
        let md = markdown(&rows, &recs);
        assert!(md.contains("too few samples"), "{md}");
        assert!(!md.contains("NaN"), "{md}");
    }
}
