//! `record --attribute` and `run --attribute` from the command line, against the
//! emulator's load-following package (10 W idle + 5 W per busy CPU of this
//! machine). Need root (FUSE, BPF, cgroup v2) and a kernel with BTF; they fail
//! loudly without them. Truths come from measured CPU time, never wall time.

use crate::common;

use quietwatt::Domain;
use std::collections::BTreeMap;

fn uj(s: &str) -> i128 {
    let (w, f) = s.split_once('.').unwrap();
    i128::from(w.parse::<i64>().unwrap()) * 1_000_000 + i128::from(f.parse::<i64>().unwrap())
}

#[test]
fn record_attribute_conserves_every_row_and_adds_up_to_the_recorded_energy() {
    let m = common::mount_following();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("split.csv");
    let o = common::quietwatt(
        m.root(),
        &[
            "record",
            "--attribute",
            "cgroup",
            "--idle-watts",
            "10",
            "-o",
            out.to_str().unwrap(),
            "--duration",
            "1",
            "-f",
            "200",
            "--json",
        ],
    );
    assert!(
        o.status.success(),
        "record --attribute failed (it needs root and a kernel with BTF):\n{}",
        common::stderr(&o)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("# attribution: cgroup"));
    assert!(text.contains("# idle_power: configured: 10 W per package"));
    // Whether cycles could weight the share is detected and said.
    assert!(text.contains("# attribution_weight: CPU time ("));
    let mut rows: BTreeMap<u64, (i128, Option<i128>)> = BTreeMap::new();
    let mut header = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if header.is_none() {
            header = Some(line.to_string());
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let e = rows.entry(f[0].parse().unwrap()).or_insert((0, None));
        match f[3] {
            "total" => e.1 = Some(uj(f[6])),
            "cgroup" | "unattributed" => e.0 += uj(f[6]),
            "dram" => {}
            k => panic!("unknown kind {k}"),
        }
        // joules = dynamic_j + idle_j on every row.
        assert_eq!(uj(f[6]), uj(f[7]) + uj(f[8]), "{line}");
    }
    assert_eq!(
        header.as_deref(),
        Some("t_ns,interval_ns,package,kind,id,name,joules,dynamic_j,idle_j,cpu_ns")
    );
    assert!(rows.len() > 100, "{} samples", rows.len());
    let mut total = 0;
    for (t, (parts, whole)) in &rows {
        assert_eq!(
            Some(*parts),
            *whole,
            "sample {t}: parts against the measured total"
        );
        total += whole.unwrap();
    }
    // The total rows add up to the recording's package energy (its own report), to
    // the rounding of each sample's running total (1 µJ); and to what the emulator
    // served from the recording's first read to its last, which the report is
    // checked against elsewhere (the served figure also counts the probe reads made
    // before the BPF program loaded, so only an upper bound here).
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    let report = v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == "package")
        .and_then(|d| d["energy_j"].as_f64())
        .unwrap();
    let report = (report * 1e6).round() as i128;
    let a = &v["attribution"];
    assert_eq!(a["unbalanced_intervals"], 0, "{a}");
    assert_eq!(
        (a["package_j"].as_f64().unwrap() * 1e6).round() as i128,
        total,
        "{a}"
    );
    assert!(
        (total - report).abs() <= 1,
        "rows {total} µJ against the report's {report} µJ"
    );
    let served = (m.served_powercap(0, Domain::Package) * 1e6).round() as i128;
    assert!(
        total <= served,
        "rows {total} µJ above the {served} µJ served"
    );
}

#[test]
fn run_attribute_charges_a_busy_command_its_cpu_time() {
    let m = common::mount_following();
    // The command prints its own CPU time (ns) at its end.
    let o = common::quietwatt(
        m.root(),
        &[
            "run",
            "--attribute",
            "--idle-watts",
            "10",
            "--json",
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; cat /proc/$$/schedstat",
        ],
    );
    assert!(
        o.status.success(),
        "run --attribute failed (it needs root, cgroup v2 and a kernel with BTF):\n{}",
        common::stderr(&o)
    );
    let out = common::stdout(&o);
    let mut lines = out.lines();
    let cpu_ns: f64 = lines
        .next()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .expect("the command's schedstat");
    let v: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let share = &v["share"];
    assert_eq!(share["scope"], "cgroup", "{v}");
    let dynamic = share["dynamic_j"].as_f64().unwrap();
    // The shell's own CPU time is the truth.
    let truth = common::FOLLOW_W_PER_CPU * cpu_ns / 1e9;
    let tol = common::follow_tolerance(truth);
    eprintln!("share: dynamic {dynamic:.4} J, truth {truth:.4} J ({cpu_ns} ns), tolerance {tol:.3} J; {share}");
    assert!(
        (dynamic - truth).abs() <= tol,
        "{dynamic} J against {truth} J"
    );
    assert!(share["joules"].as_f64().unwrap() <= share["package_j"].as_f64().unwrap());
    // The cgroup quietwatt made for the command is gone.
    let v2 = quietwatt_attribution::names::cgroup2_mount().unwrap();
    let left: Vec<_> = std::fs::read_dir(v2)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("quietwatt-run-")
        })
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

#[test]
fn run_attribute_without_a_cgroup_follows_the_commands_process_tree() {
    // A machine where quietwatt cannot make a cgroup: the cgroup v2 hierarchy
    // mounted read-only, in a mount namespace of the test's own (unshare -m).
    let m = common::mount_following();
    let v2 = quietwatt_attribution::names::cgroup2_mount()
        .expect("a cgroup v2 hierarchy (this test makes it read-only in its own mount namespace)");
    // Two children busy on their own, each printing its CPU time (ns) as it ends,
    // then the parent's.
    let child = r#"i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; cat /proc/$$/schedstat"#;
    let script = format!("for k in 1 2; do sh -c '{child}' & done; wait; cat /proc/$$/schedstat");
    let o = std::process::Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            r#"mount -o remount,bind,ro "$1" && shift && exec "$@""#,
            "sh",
        ])
        .arg(&v2)
        .arg(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(m.root())
        .args([
            "run",
            "--attribute",
            "--idle-watts",
            "10",
            "--json",
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .env_remove("QUIETWATT_ROOT")
        .output()
        .expect("run unshare (util-linux)");
    let err = common::stderr(&o);
    assert!(
        o.status.success(),
        "run --attribute in a namespace with a read-only cgroup v2 failed (it needs root, \
         unshare and a kernel with BTF):\n{err}"
    );
    assert!(err.contains("cannot create a cgroup"), "{err}");
    let out = common::stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    let (json, stats) = lines.split_last().expect("output");
    let cpu_ns: Vec<f64> = stats
        .iter()
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(cpu_ns.len(), 3, "two children and the parent: {out}");
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let share = &v["share"];
    assert_eq!(share["scope"], "process tree", "{v}");
    let dynamic = share["dynamic_j"].as_f64().unwrap();
    // The children's CPU time is nearly all of it: a share of the parent alone
    // (what this used to report) is a hundredth of the truth.
    let truth = common::FOLLOW_W_PER_CPU * cpu_ns.iter().sum::<f64>() / 1e9;
    let tol = common::follow_tolerance(truth);
    eprintln!("tree share: dynamic {dynamic:.4} J, truth {truth:.4} J ({cpu_ns:?} ns), tolerance {tol:.3} J; {share}");
    assert!(
        (dynamic - truth).abs() <= tol,
        "{dynamic} J against {truth} J"
    );
    assert!(share["joules"].as_f64().unwrap() <= share["package_j"].as_f64().unwrap());
}
