//! The overhead lab from the command line: `bench latency` against the emulator.

use crate::common::{assert_png_beside, mount, quietwatt, stderr, stdout};
use quietwatt_emulator::EmulatorConfig;
use serde_json::Value;

#[test]
fn latency_reads_the_emulator_through_each_mechanism_and_labels_it() {
    let emu = mount(EmulatorConfig::default().with_cpufreq_khz(&[3_000_000, 1_500_000]));
    let out = quietwatt(
        emu.root(),
        &[
            "bench",
            "latency",
            "--json",
            "--iterations",
            "100",
            "--bootstrap",
            "20",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    let rows = v["rows"].as_array().expect("rows");
    let of = |p: &str| -> Vec<&Value> { rows.iter().filter(|r| r["primitive"] == p).collect() };
    for mech in ["powercap pread", "msr pread"] {
        let rs = of(mech);
        assert!(!rs.is_empty(), "no {mech} row");
        for r in rs {
            assert_eq!(r["label"], "emulated (FUSE)", "{r}");
            assert!(
                r["latency"]["median_ns"].as_f64().unwrap_or(0.0) > 0.0,
                "{r}"
            );
        }
    }
    // perf_event_open reaches the real kernel, which has no emulated PMU: said, not faked.
    let rapl_perf: Vec<&Value> = of("perf read")
        .into_iter()
        .filter(|r| !r["target"].as_str().unwrap_or("").starts_with("cpu-clock"))
        .collect();
    assert!(
        rapl_perf.iter().all(|r| r["latency"].is_null()),
        "{rapl_perf:?}"
    );
    assert!(rapl_perf
        .iter()
        .any(|r| r["unavailable"].as_str().unwrap_or("").contains("emulated")));
    // The estimate's read: from the busy CPUs, and weighed by the emulator's
    // cpufreq.
    let est = of("estimate read");
    assert_eq!(est.len(), 2, "{est:?}");
    for r in est {
        assert!(
            r["latency"]["median_ns"].as_f64().unwrap_or(0.0) > 0.0,
            "{r}"
        );
    }
}

#[test]
fn latency_table_names_its_timer_and_rejects_zero_iterations() {
    let dir = tempfile::tempdir().unwrap();
    let out = quietwatt(
        dir.path(),
        &[
            "bench",
            "latency",
            "--iterations",
            "50",
            "--bootstrap",
            "10",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("95 % CI of median"), "{text}");
    assert!(text.contains("rdtsc") && text.contains("getppid"), "{text}");
    let out = quietwatt(dir.path(), &["bench", "latency", "--iterations", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--iterations"), "{}", stderr(&out));
}

/// Rows of a results.csv as (seq, round, workload, monitor, freq, rep, status, error).
fn csv_rows(path: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).expect("results.csv");
    let (rows, _) = quietwatt_lab::experiment::parse_csv(&text);
    assert_eq!(
        rows[0].join(","),
        quietwatt_lab::experiment::CSV_COLUMNS.join(","),
        "header"
    );
    rows[1..].to_vec()
}

/// The index of a results.csv column.
fn col(name: &str) -> usize {
    quietwatt_lab::experiment::CSV_COLUMNS
        .iter()
        .position(|c| *c == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

fn overhead_args(out: &std::path::Path) -> Vec<String> {
    [
        "bench",
        "overhead",
        "--out",
        out.to_str().expect("utf-8 path"),
        "--workload",
        "ep:20000,idle:30",
        "--threads",
        "1",
        "--monitor",
        "quietwatt:perf-stand-in",
        "--monitor",
        "sleeper=sleep 5",
        "--freq",
        "10,100",
        "--reps",
        "3",
        "--per-round",
        "1",
        "--settle-ms",
        "20",
    ]
    .iter()
    .map(ToString::to_string)
    .collect()
}

#[test]
fn a_tiny_plan_runs_interleaved_resumes_after_a_kill_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lab");
    let csv = out.join("results.csv");
    // 2 workloads x (baseline + 2 monitors x 2 frequencies) = 10 combinations, x 3.
    let total = 2 * (1 + 2 * 2) * 3;

    // First session, killed after a few runs.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .args(overhead_args(&out))
        .env_remove("QUIETWATT_ROOT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start quietwatt");
    let t0 = std::time::Instant::now();
    loop {
        let n = std::fs::read_to_string(&csv)
            .map(|t| t.lines().count().saturating_sub(1))
            .unwrap_or(0);
        if n >= 5 {
            break;
        }
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the plan ended before it could be interrupted"
        );
        assert!(t0.elapsed().as_secs() < 120, "no rows after 2 minutes");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
    let before = csv_rows(&csv);
    assert!(
        before.len() >= 5 && before.len() < total,
        "{}",
        before.len()
    );
    // And a row cut in the middle, as a kill during a write leaves it.
    let mut text = std::fs::read_to_string(&csv).unwrap();
    text.push_str("99,3,ep:20000:t1,none,0");
    std::fs::write(&csv, text).unwrap();

    // Second session: resumes.
    let args = overhead_args(&out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = quietwatt(dir.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("resuming"), "{}", stderr(&o));
    let rows = csv_rows(&csv);
    assert_eq!(rows.len(), total, "every run once");
    // The rows of the first session are untouched, and come first.
    assert_eq!(rows[..before.len()], before[..]);
    for r in &rows {
        assert_eq!(r[col("status")], "ok", "{r:?}");
    }
    // Interleaved: in schedule order, round r holds repetition r of each of the 10
    // combinations exactly once; the file is in schedule order.
    let seqs: Vec<usize> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let combo = |r: &Vec<String>| format!("{}|{}|{}", r[2], r[3], r[4]);
    let mut orders = Vec::new();
    for round in 0..3 {
        let in_round: Vec<&Vec<String>> =
            rows.iter().filter(|r| r[1] == round.to_string()).collect();
        assert_eq!(in_round.len(), 10, "round {round}");
        assert!(
            in_round.iter().all(|r| r[5] == round.to_string()),
            "round {round}"
        );
        let mut combos: Vec<String> = in_round.iter().map(|r| combo(r)).collect();
        orders.push(combos.clone());
        combos.sort();
        combos.dedup();
        assert_eq!(combos.len(), 10, "round {round}: {combos:?}");
    }
    assert!(
        orders[0] != orders[1] || orders[1] != orders[2],
        "never shuffled"
    );
    // The monitors left their marks: the sampler took samples, the command used CPU.
    for r in rows.iter().filter(|r| r[3] == "quietwatt:perf-stand-in") {
        assert!(
            r[col("monitor_samples")].parse::<u64>().unwrap_or(0) >= 1,
            "{r:?}"
        );
    }
    for r in rows.iter().filter(|r| r[3] == "sleeper") {
        assert!(!r[col("monitor_cpu_s")].is_empty(), "{r:?}");
    }
    // The report: one line per monitored combination, no NaN.
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    for w in ["ep:20000:t1", "idle:30:t1"] {
        for m in ["quietwatt:perf-stand-in", "sleeper"] {
            for f in ["10", "100"] {
                assert!(
                    md.contains(&format!("| {w} | {m} | {f} | 3 / 3")),
                    "{w} {m} {f}:\n{md}"
                );
            }
        }
    }
    assert!(
        md.contains("too few samples"),
        "3 runs cannot be tested:\n{md}"
    );
    // One box plot per workload: the baseline and the 4 monitored combinations.
    for w in ["ep_20000_t1", "idle_30_t1"] {
        let svg = std::fs::read_to_string(out.join(format!("boxplot-{w}.svg"))).expect("svg");
        assert!(
            svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
            "{w}"
        );
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<g class=\"series\"").count(), 5, "{svg}");
        for label in [
            "none (baseline)",
            "sleeper 100 Hz",
            "quietwatt:perf-stand-in 10 Hz",
        ] {
            assert!(
                svg.contains(&format!("data-label=\"{label}\" data-n=\"3\"")),
                "{label}: {svg}"
            );
        }
        assert!(md.contains(&format!("(boxplot-{w}.svg)")), "{md}");
    }
    // Every SVG plot has its PNG beside it.
    let mut svgs = 0;
    for entry in std::fs::read_dir(&out).expect("the output directory") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "svg") {
            assert_png_beside(&path);
            svgs += 1;
        }
    }
    assert!(svgs >= 3, "2 box plots and the busy plot at least: {svgs}");
    // The idle workload against frequency: busy fraction always (from /proc/stat),
    // C-state residency where the kernel has cpuidle.
    let busy = std::fs::read_to_string(out.join("busy-idle_30_t1.svg")).expect("busy plot");
    for m in ["quietwatt:perf-stand-in", "sleeper"] {
        assert!(
            busy.contains(&format!("data-label=\"{m}\" data-n=\"2\"")),
            "{busy}"
        );
    }
    assert!(busy.contains("class=\"reference\""), "{busy}");
    assert!(md.contains("busy CPU fraction"), "{md}");
    if std::path::Path::new("/sys/devices/system/cpu/cpu0/cpuidle/state0/time").exists() {
        assert!(out.join("cstates-idle_30_t1.svg").exists());
    }
    assert!(!md.contains("NaN"), "{md}");
    // Nothing left to do: a third session only reports.
    let o = quietwatt(dir.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(csv_rows(&csv).len(), total);
}

#[test]
fn a_monitor_that_fails_to_start_is_a_failed_run_and_the_plan_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lab");
    let o = quietwatt(
        dir.path(),
        &[
            "bench",
            "overhead",
            "--out",
            out.to_str().unwrap(),
            "--workload",
            "idle:5",
            "--monitor",
            "broken=echo no such tool >&2; exit 3",
            "--freq",
            "10",
            "--reps",
            "2",
            "--settle-ms",
            "100",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&out.join("results.csv"));
    assert_eq!(rows.len(), 4);
    let broken: Vec<&Vec<String>> = rows.iter().filter(|r| r[3] == "broken").collect();
    assert_eq!(broken.len(), 2);
    for r in broken {
        assert_eq!(r[col("status")], "failed");
        assert!(
            r[col("error")].contains("no such tool") && r[col("error")].contains("exit code 3"),
            "{r:?}"
        );
    }
    assert!(rows
        .iter()
        .filter(|r| r[3] == "none")
        .all(|r| r[col("status")] == "ok"));
    let md = stdout(&o);
    assert!(
        md.contains("Failed runs") && md.contains("no such tool"),
        "{md}"
    );
}

#[test]
fn a_workload_prints_its_own_solve_time() {
    let dir = tempfile::tempdir().unwrap();
    let o = quietwatt(
        dir.path(),
        &[
            "bench",
            "workload",
            "cg",
            "--size",
            "2000",
            "--threads",
            "2",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).expect("JSON");
    assert!(v["solve_s"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["spec"]["kind"], "cg");
    assert!(v["check"].as_f64().unwrap() < 1e-8, "CG converged: {v}");
    let o = quietwatt(dir.path(), &["bench", "workload", "ep", "--size", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
