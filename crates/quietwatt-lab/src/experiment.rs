//! Overhead experiments by the protocol of paper 002 (Section V-A): a plan of
//! workloads × monitors × frequencies × repetitions, run in interleaved rounds,
//! recorded run by run to a CSV file that survives an interruption, then analysed
//! with [`stats`](quietwatt_stats) into the table of the paper's Appendix A.
//!
//! **The plan.** A combination is a workload, a monitor and a sampling frequency;
//! the baseline (monitor `none`) has no frequency and is one combination per
//! workload (the paper's "frequency 0"). Repetitions are spread over time as in the
//! paper's Fig. 6: each round runs `per_round` repetitions of every combination in
//! turn, in an order shuffled anew each round (seeded, so that a resumed plan
//! replays the same schedule), so that a disturbance at one moment (another user, a
//! thermal event) falls on several combinations instead of spoiling one.
//!
//! **A run.** The monitor starts, then the workload runs as a child process; the
//! workload's figure is the solve time it reports itself (a built-in workload
//! prints it; any command that prints a JSON line with `solve_s` does too), else
//! its wall time. Recorded per run: workload time, wall time and CPU time of the
//! workload, monitor CPU time and context switches (the sampler's own accounting
//! for a quietwatt monitor; `wait4` rusage for a command), energy when a RAPL
//! source opens (two reads around the run, separate from the monitor), and the
//! idle fraction of `/proc/stat` and the C-state residency of `cpuidle` over the
//! run (always of the real kernel: they describe this machine's CPUs whatever
//! `--root` says).
//!
//! **The file.** One CSV row per run, appended and flushed as soon as the run ends;
//! on a restart the rows present are skipped (a half-written last line from a kill
//! is cut off first), so an interrupted plan resumes where it stopped. Failed runs
//! (a monitor that does not start, a workload that fails) are rows too, with
//! their error, and are not retried.
//!
//! The parts live in their own modules, re-exported here: [`plan`](super::plan)
//! (what runs and when), [`results`](super::results) (the CSV),
//! [`run`](super::run) (running a plan), [`analysis`](super::analysis) (the
//! statistics), [`report`](super::report) (Markdown) and
//! [`figures`](super::figures) (SVG).

pub use crate::analysis::{
    analyze, analyze_metric, is_idle, Metric, ReportRow, BUSY_FRACTION, POWER, WORKLOAD_TIME,
};
pub use crate::figures::{boxplots, file_slug, idle_plots};
pub use crate::plan::{
    parse_builtin, Combo, CommandFactory, ExperimentError, Monitor, Plan, QuietwattSource, RunKey,
    Slot, Workload, WorkloadCommand, DEFAULT_SEED,
};
pub use crate::report::{idle_markdown, markdown, table_markdown};
pub use crate::results::{parse_csv, Measurement, Results, RunRecord, CSV_COLUMNS};
pub use crate::run::{execute, open_monitor_source, Executed, Executor, ProcessExecutor, Progress};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_plan as plan;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    /// An executor that records what it was asked and fails one combination.
    struct Fake {
        calls: Vec<RunKey>,
    }

    impl Executor for Fake {
        fn run(&mut self, plan: &Plan, slot: &Slot) -> Measurement {
            let key = plan.key(slot);
            self.calls.push(key.clone());
            let base = if key.workload.starts_with("ep") {
                1.0
            } else {
                0.1
            };
            let slower = if key.monitor == "none" { 0.0 } else { 0.01 };
            Measurement {
                ok: true,
                workload_s: Some(base + slower + slot.rep as f64 * 1e-4),
                ..Measurement::default()
            }
        }
    }

    #[test]
    fn a_plan_resumes_after_an_interruption_and_runs_each_slot_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        let p = plan(5, 1);
        let total = p.schedule().len();
        // First session: 7 runs, then "killed" (the file is cut in the middle of
        // the 8th line).
        {
            let mut res = Results::open(&path).unwrap();
            let mut fake = Fake { calls: vec![] };
            execute(
                &p,
                &mut res,
                &mut fake,
                &AtomicBool::new(false),
                &mut |_| {},
            )
            .unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let cut: usize = text.match_indices('\n').nth(7).unwrap().0 + 1;
        std::fs::write(&path, format!("{}8,0,ep:10", &text[..cut])).unwrap();
        let mut res = Results::open(&path).unwrap();
        assert_eq!(res.records.len(), 7);
        let mut fake = Fake { calls: vec![] };
        let mut last = None;
        let ex = execute(
            &p,
            &mut res,
            &mut fake,
            &AtomicBool::new(false),
            &mut |pr| last = Some(pr.clone()),
        )
        .unwrap();
        assert_eq!((ex.done, ex.skipped, ex.interrupted), (total - 7, 7, false));
        assert_eq!(fake.calls.len(), total - 7);
        let last = last.unwrap();
        assert_eq!(
            (last.done, last.todo, last.skipped),
            (total - 7, total - 7, 7)
        );
        assert_eq!(last.eta, Duration::ZERO);
        // Every slot exactly once in the file, which parses whole again.
        let res = Results::open(&path).unwrap();
        let mut keys: Vec<RunKey> = res.records.iter().map(|r| r.key.clone()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), total);
        assert_eq!(res.records.len(), total);
        // A third session has nothing to do.
        let mut res = Results::open(&path).unwrap();
        let mut fake = Fake { calls: vec![] };
        let ex = execute(
            &p,
            &mut res,
            &mut fake,
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(ex.done, 0);
        // The analysis: one row per monitored combination, a clear slowdown found.
        let rows = analyze(&res.records);
        assert_eq!(rows.len(), 4);
        for r in &rows {
            let t = r.comparison.test.as_ref().unwrap();
            assert!(t.p_value < 0.01, "{r:?}");
            assert!(r.adjusted_p.unwrap() >= t.p_value);
            assert!(r.comparison.overhead_pct.unwrap() > 0.0);
        }
        let md = markdown(&rows, &res.records);
        assert!(
            md.contains("| ep:10:t1 | quietwatt:perf-stand-in | 10 |"),
            "{md}"
        );
        let plots = boxplots(&res.records);
        assert_eq!(plots.len(), 2);
        for (_, svg) in &plots {
            assert_eq!(svg.matches("<g class=\"series\"").count(), 3, "{svg}");
            assert!(svg.contains("data-label=\"quietwatt:perf-stand-in 100 Hz\" data-n=\"5\""));
        }
    }

    #[test]
    fn idle_runs_get_their_own_tables_and_plots() {
        let mk = |mon: &str, f: &str, rep: usize, idle: f64, energy: Option<f64>| RunRecord {
            seq: rep,
            round: rep,
            key: RunKey {
                workload: "idle:10:t1".into(),
                monitor: mon.into(),
                freq_hz: f.into(),
                rep,
            },
            m: Measurement {
                ok: true,
                workload_s: Some(0.01),
                wall_s: Some(0.02),
                energy_j: energy,
                energy_s: energy.map(|_| 0.02),
                proc_idle_frac: Some(idle),
                cstates: Some(format!("C1={:.3};C6={:.3}", 1.0 - idle, idle)),
                ..Measurement::default()
            },
        };
        let mut recs = Vec::new();
        for i in 0..5 {
            let e = i as f64 * 1e-4;
            recs.push(mk("none", "0", i, 0.98 - e, None));
            recs.push(mk("m", "10", i, 0.97 - e, None));
            recs.push(mk("m", "1000", i, 0.90 - e, None));
        }
        let md = idle_markdown(&recs).expect("idle runs");
        assert!(md.contains("busy CPU fraction"), "{md}");
        assert!(md.contains("No mean power"), "{md}");
        assert!(md.contains("| idle:10:t1 | m | 1000 | 5 / 5 |"), "{md}");
        let plots = idle_plots(&recs);
        let names: Vec<&str> = plots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["busy-idle_10_t1", "cstates-idle_10_t1"]);
        assert!(
            plots[1].1.contains("data-label=\"m C6\" data-n=\"2\""),
            "{}",
            plots[1].1
        );
        assert!(idle_markdown(&recs[..0]).is_none());
    }
}
