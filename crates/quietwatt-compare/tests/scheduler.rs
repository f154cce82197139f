//! The scheduler, the statistics and the gate, tested without processes: a
//! `MockExecutor` gives each command scripted energies and times.

use quietwatt_compare::executor::Scripted;
use quietwatt_compare::result::GateRule;
use quietwatt_compare::{
    export, schedule, Comparison, Event, MockExecutor, Plan, RunKind, ScheduleError,
};
use quietwatt_stats::repeat::{GateOutcome, Verdict};

fn plan(runs: u32, warmup: u32) -> Plan {
    Plan {
        runs,
        warmup,
        seed: 7,
        ignore_failure: false,
    }
}

/// `n` runs around `mean` joules (± 1 %), each `mean / 10` seconds.
fn around(mean: f64, n: usize) -> Vec<Scripted> {
    (0..n)
        .map(|i| {
            let e = mean * (1.0 + 0.01 * ((i % 3) as f64 - 1.0));
            Scripted::ok(e, e / 10.0)
        })
        .collect()
}

fn commands(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("cmd{i}")).collect()
}

fn never() -> impl FnMut() -> bool {
    || false
}

fn compare(scripts: Vec<Vec<Scripted>>, runs: u32, gate: Option<GateRule>) -> Comparison {
    let k = scripts.len();
    let mut x = MockExecutor::new(scripts);
    let p = plan(runs, 0);
    let o = schedule(&mut x, k, &p, &mut never(), &mut |_| {}).unwrap();
    Comparison::new(&commands(k), &p, &o, 0, gate)
}

#[test]
fn every_round_runs_every_command_once_in_orders_that_vary() {
    let mut x = MockExecutor::new(vec![around(1.0, 3), around(2.0, 3), around(3.0, 3)]);
    let o = schedule(&mut x, 3, &plan(20, 0), &mut never(), &mut |_| {}).unwrap();
    assert_eq!(o.rounds, 20);
    assert!(o.runs.iter().all(|r| r.len() == 20));
    let rounds: Vec<Vec<usize>> = x
        .calls
        .chunks(3)
        .map(|c| c.iter().map(|c| c.1).collect())
        .collect();
    for r in &rounds {
        let mut s = r.clone();
        s.sort_unstable();
        assert_eq!(s, [0, 1, 2], "a round runs each command once: {rounds:?}");
    }
    // Shuffled: no command always goes first, and more than one order occurs.
    for i in 0..3 {
        assert!(
            rounds.iter().any(|r| r[0] != i),
            "#{i} always first: {rounds:?}"
        );
    }
    let mut orders = rounds.clone();
    orders.sort();
    orders.dedup();
    assert!(orders.len() > 2, "{orders:?}");
    // Seeded: the same seed, the same order; another seed, another.
    let mut y = MockExecutor::new(vec![around(1.0, 3), around(2.0, 3), around(3.0, 3)]);
    schedule(&mut y, 3, &plan(20, 0), &mut never(), &mut |_| {}).unwrap();
    assert_eq!(x.calls, y.calls);
    let mut z = MockExecutor::new(vec![around(1.0, 3), around(2.0, 3), around(3.0, 3)]);
    let other = Plan {
        seed: 8,
        ..plan(20, 0)
    };
    schedule(&mut z, 3, &other, &mut never(), &mut |_| {}).unwrap();
    assert_ne!(x.calls, z.calls);
}

#[test]
fn warm_ups_run_first_and_are_not_measured() {
    let mut x = MockExecutor::new(vec![around(1.0, 2), around(2.0, 2)]);
    let mut seen = 0;
    let o = schedule(&mut x, 2, &plan(3, 2), &mut never(), &mut |e| {
        if let Event::Measured { .. } = e {
            seen += 1;
        }
    })
    .unwrap();
    assert_eq!(&x.calls[..4], &[(true, 0), (true, 1), (true, 0), (true, 1)]);
    assert!(x.calls[4..].iter().all(|c| !c.0));
    assert_eq!(seen, 6, "one callback per measured run");
    assert!(
        o.runs.iter().all(|r| r.len() == 3),
        "warm-ups are not among the runs"
    );
    let c = Comparison::new(&commands(2), &plan(3, 2), &o, 0, None);
    assert_eq!((c.runs, c.warmup), (3, 2));
}

#[test]
fn the_summary_ratio_and_its_line_match_the_scripted_energies() {
    let c = compare(vec![around(1.0, 6), around(3.0, 6)], 12, None);
    let x = &c.comparisons[0];
    let r = x.energy_ratio.as_ref().unwrap();
    assert!((r.estimate - 3.0).abs() < 1e-9, "{r:?}");
    assert!(r.ci[0] < 3.0 && 3.0 < r.ci[1] && r.ci[0] > 2.8, "{r:?}");
    assert_eq!(x.verdict, Verdict::More);
    let line = export::summary_line(&c, x).unwrap();
    assert!(line.starts_with("'cmd1' used 3.00 ± 0.0"), "{line}");
    assert!(line.contains("× the energy of 'cmd0' ["), "{line}");
    // The reverse: less.
    let c = compare(vec![around(3.0, 6), around(1.0, 6)], 12, None);
    assert_eq!(c.comparisons[0].verdict, Verdict::Less);
    // The JSON carries the figures.
    let v = serde_json::to_value(&c).unwrap();
    assert_eq!(v["commands"][1]["per_run"].as_array().unwrap().len(), 12);
    assert_eq!(v["comparisons"][0]["verdict"], "less");
}

#[test]
fn the_gate_passes_fails_or_cannot_tell() {
    let gate = |pct| {
        Some(GateRule {
            pct,
            pass_inconclusive: false,
        })
    };
    // Three times the energy, gate at 50 %: a regression.
    let c = compare(vec![around(1.0, 6), around(3.0, 6)], 12, gate(50.0));
    let g = c.gate.as_ref().unwrap();
    assert_eq!(
        (g.outcome(), g.failed_commands.as_slice()),
        (GateOutcome::Regression, &[1][..])
    );
    // The same energy: a pass.
    let c = compare(vec![around(1.0, 6), around(1.0, 6)], 12, gate(5.0));
    assert_eq!(c.gate.as_ref().unwrap().outcome(), GateOutcome::Pass);
    // 1.05 × with a wide spread against a 5 % limit: the runs cannot tell.
    let noisy = |m: f64| -> Vec<Scripted> {
        [0.7, 1.3, 0.9, 1.1]
            .iter()
            .map(|f| Scripted::ok(m * f, 0.1))
            .collect()
    };
    let c = compare(vec![noisy(1.0), noisy(1.05)], 8, gate(5.0));
    let g = c.gate.as_ref().unwrap();
    assert_eq!(
        g.outcome(),
        GateOutcome::Inconclusive,
        "{:?}",
        c.comparisons
    );
    assert_eq!(g.inconclusive_commands, [1]);
    let md = export::markdown(&c);
    assert!(
        md.contains("| Verdict |") && md.contains("no significant difference; gate: inconclusive"),
        "{md}"
    );
    assert!(md.contains("**inconclusive**"), "{md}");
}

#[test]
fn a_stop_keeps_the_whole_rounds_and_nothing_before_the_first() {
    // Stop asked during the 4th round's 2nd run: three whole rounds kept.
    let mut x = MockExecutor::new(vec![around(1.0, 3), around(2.0, 3)]);
    let mut n = 0;
    let mut stop = || {
        n += 1;
        n == 8
    };
    let o = schedule(&mut x, 2, &plan(10, 0), &mut stop, &mut |_| {}).unwrap();
    assert_eq!((o.rounds, o.interrupted), (3, Some(10)));
    assert!(o.runs.iter().all(|r| r.len() == 3));
    let c = Comparison::new(&commands(2), &plan(10, 0), &o, 0, None);
    assert_eq!(c.interrupted.unwrap().runs_asked, 10);
    assert_eq!(c.runs, 3);
    // Stopped in the first round, or in a warm-up: nothing to summarise.
    let mut x = MockExecutor::new(vec![around(1.0, 3), around(2.0, 3)]);
    let e = schedule(&mut x, 2, &plan(10, 0), &mut || true, &mut |_| {}).unwrap_err();
    assert!(matches!(e, ScheduleError::Interrupted));
    let e = schedule(&mut x, 2, &plan(10, 1), &mut || true, &mut |_| {}).unwrap_err();
    assert!(matches!(e, ScheduleError::Interrupted));
}

#[test]
fn a_failing_run_stops_the_series_unless_told_to_go_on() {
    let failing = vec![Scripted {
        exit_code: 3,
        ..Scripted::ok(1.0, 0.1)
    }];
    let mut x = MockExecutor::new(vec![around(1.0, 2), failing.clone()]);
    let e = schedule(&mut x, 2, &plan(4, 1), &mut never(), &mut |_| {}).unwrap_err();
    assert!(
        matches!(
            e,
            ScheduleError::Failed {
                command: 1,
                kind: RunKind::WarmUp,
                index: 1,
                of: 1,
                exit_code: 3
            }
        ),
        "{e:?}"
    );
    let mut x = MockExecutor::new(vec![around(1.0, 2), failing]);
    let go_on = Plan {
        ignore_failure: true,
        ..plan(4, 1)
    };
    let o = schedule(&mut x, 2, &go_on, &mut never(), &mut |_| {}).unwrap();
    assert_eq!(o.first_failure(), 3);
    assert!(o.runs[1].iter().all(|r| r.exit_code == 3));
}

#[test]
fn one_command_is_run_r_and_its_line_says_no_command_name() {
    let mut x = MockExecutor::new(vec![around(2.0, 3)]);
    let mut lines = Vec::new();
    let cmds = commands(1);
    let o = schedule(&mut x, 1, &plan(3, 0), &mut never(), &mut |e| {
        if let Event::Measured {
            command,
            round,
            run,
        } = e
        {
            lines.push(export::run_line(&cmds, command, round, 3, run));
        }
    })
    .unwrap();
    assert_eq!(lines[0], "run 1/3: 1.9800 ± 0.0010 J in 0.1980 s");
    let c = Comparison::new(&cmds, &plan(3, 0), &o, 0, None);
    assert!(c.comparisons.is_empty());
    assert!(export::csv(&c).starts_with(
        "command,run,exit_code,duration_s,total_energy_j,total_uncertainty_j,0/package_energy_j"
    ));
    let two = commands(2);
    let l = export::run_line(&two, 1, 2, 5, &o.runs[0][0]);
    assert!(l.starts_with("run 2/5 of #2 'cmd1': "), "{l}");
}
