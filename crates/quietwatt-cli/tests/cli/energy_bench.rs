//! `run -r N` and `bench energy` against the emulator (package 20 W + dram 4 W =
//! 24 W total, constant), and the one JSON schema of every command's `--json`.
//! Physics, not timing: energies are checked against 24 W × the measured time
//! within the stated bounds; no assertion depends on how loaded the machine is.

use crate::common::*;
use quietwatt_emulator::EmulatorConfig;
use serde_json::Value;

/// The emulator's default total power (package + dram).
const TOTAL_W: f64 = 24.0;
/// How far apart a timestamp and the read it stamps can be on a loaded host (a
/// FUSE read served late), seconds. Small enough that adding core into the total
/// (12 W over a 0.2 s run) still fails.
const SKEW_S: f64 = 0.03;

fn json(o: &std::process::Output) -> Value {
    serde_json::from_str(stdout(o).trim())
        .unwrap_or_else(|e| panic!("--json output does not parse ({e}): {}", stdout(o)))
}

fn summary(v: &Value) -> (f64, f64, [f64; 2], f64, f64, f64) {
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    (
        f("mean"),
        f("std"),
        [v["ci"][0].as_f64().unwrap(), v["ci"][1].as_f64().unwrap()],
        f("min"),
        f("max"),
        f("measurement_bound"),
    )
}

#[test]
fn run_repeat_gives_mean_spread_and_interval_that_match_the_physics() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(
        m.root(),
        &[
            "run", "-m", "powercap", "-r", "5", "--json", "--", "sleep", "0.2",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["schema"], "quietwatt.repeat/1", "{v}");
    assert_eq!(v["runs"], 5);
    assert_eq!(v["emulated"], true);
    assert!(v["freq_hz"].is_number(), "{v}");
    assert_eq!(v["per_run"].as_array().unwrap().len(), 5);
    let (e, std, ci, min, max, bound) = summary(&v["energy_j"]);
    let (t, tstd, tci, ..) = summary(&v["duration_s"]);
    assert!(std >= 0.0 && tstd >= 0.0);
    assert!(ci[0] <= e && e <= ci[1], "{ci:?} {e}");
    assert!(tci[0] <= t && t <= tci[1], "{tci:?} {t}");
    assert!(min <= e && e <= max);
    assert!(t >= 0.2, "each run sleeps 0.2 s: {t}");
    // Physics: the emulator draws 24 W, so the mean energy is 24 W times the mean
    // measured time, within the mean of the runs' bounds (plus rounding). The time
    // comes from timestamps taken just before the reads; on a loaded host a FUSE read
    // can be served tens of ms after its timestamp, so the energy and the timed span
    // may differ by that much: SKEW_S of 24 W is allowed on top.
    let expected = TOTAL_W * t;
    assert!(
        (e - expected).abs() <= bound + 1e-3 * expected + TOTAL_W * SKEW_S,
        "mean {e} J against {expected} J (24 W × {t} s), bound {bound} J"
    );
    // Every run on its own as well.
    for r in v["per_run"].as_array().unwrap() {
        let (e, u, d) = (
            r["total_energy_j"].as_f64().unwrap(),
            r["total_uncertainty_j"].as_f64().unwrap(),
            r["duration_s"].as_f64().unwrap(),
        );
        assert!(
            (e - TOTAL_W * d).abs() <= u + 1e-3 * e + TOTAL_W * SKEW_S,
            "{r}"
        );
        assert_eq!(r["exit_code"], 0);
    }
    // Per domain: package and dram.
    let doms = v["domains"].as_array().unwrap();
    assert!(doms.iter().any(|d| d["domain"] == "package"), "{v}");
    assert!(doms.iter().any(|d| d["domain"] == "dram"), "{v}");
}

#[test]
fn run_repeat_prints_a_table_and_exports_json() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("r.json");
    let o = quietwatt(
        m.root(),
        &[
            "run",
            "-m",
            "powercap",
            "--repeat",
            "2",
            "--warmup",
            "1",
            "--export-json",
            export.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("over 2 run(s) after 1 warm-up run(s)"),
        "{err}"
    );
    assert!(
        err.contains("mean ± std") && err.contains("95 % CI"),
        "{err}"
    );
    assert!(err.contains("measurement bounds"), "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(v["schema"], "quietwatt.repeat/1");
    assert_eq!(v["warmup"], 1);
}

#[test]
fn run_repeat_stops_at_a_failing_run_unless_told_to_go_on() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(m.root(), &["run", "-r", "3", "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("--ignore-failure"), "{}", stderr(&o));
    assert!(stderr(&o).contains("run 1 of 3"), "{}", stderr(&o));
    let o = quietwatt(
        m.root(),
        &["run", "-r", "2", "-i", "--json", "--", "sh", "-c", "exit 3"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(json(&o)["per_run"][1]["exit_code"], 3);
    // Options that make no sense are refused before anything runs.
    let o = quietwatt(m.root(), &["run", "--warmup", "2", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = quietwatt(m.root(), &["run", "-r", "0", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn compare_and_run_repeat_take_the_same_flags_and_print_the_same_lines() {
    // The statistics, the order and the gate's decisions are tested without
    // processes in quietwatt-compare (tests/scheduler.rs); here only the front
    // doors: the same flags, the same per-run line, the same summary, the schema.
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("b.json");
    let o = quietwatt(
        m.root(),
        &[
            "compare",
            "-m",
            "powercap",
            "--runs",
            "2",
            "-w",
            "1",
            "--export-json",
            export.to_str().unwrap(),
            // Both long enough for the emulator's counters to step (a total of 0
            // has no ratio).
            "sleep 0.01",
            "sleep 0.02",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("quietwatt: run 1/2 of #1 'sleep 0.01': "),
        "{err}"
    );
    assert!(
        err.contains("quietwatt: run 2/2 of #2 'sleep 0.02': "),
        "{err}"
    );
    assert!(
        err.contains("2 interleaved run(s) each after 1 warm-up run(s)"),
        "{err}"
    );
    assert!(
        err.contains("'sleep 0.02' used ") && err.contains("× the energy of 'sleep 0.01' ["),
        "{err}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(v["schema"], "quietwatt.bench-energy/1", "{v}");
    assert_eq!(
        (v["runs"].as_u64(), v["warmup"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(v["emulated"], true);
    assert!(v["freq_hz"].is_number());
    for c in v["commands"].as_array().unwrap() {
        assert_eq!(c["per_run"].as_array().unwrap().len(), 2, "{c}");
    }
    assert!(v["comparisons"][0]["energy_ratio"]["ci"].is_array(), "{v}");
    // run takes -w and --runs too, and prints the same line per run.
    let o = quietwatt(
        m.root(),
        &[
            "run", "-m", "powercap", "--runs", "2", "-w", "1", "--", "true",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("quietwatt: run 2/2: "), "{err}");
    assert!(
        err.contains("over 2 run(s) after 1 warm-up run(s)"),
        "{err}"
    );
}

#[test]
fn a_gate_that_cannot_decide_says_so_and_fails_unless_told_and_a_failing_command_is_not_the_gate() {
    // Twice the sleep costs a little under twice the energy (the same start-up
    // cost in both): against a 100 % gate with two runs each (Student's t with one
    // degree of freedom), the ratio's interval usually reaches above 2 and cannot
    // lie wholly above it. Whatever the runs gave, the exit code must be what the
    // reported interval says: 3 above the limit, 4 straddling it (with the
    // message; the tester's 1.30 [0.30, 5.62] against 50 % once passed silently),
    // 0 below. The pure decision is unit-tested in quietwatt_stats::repeat.
    let m = mount(EmulatorConfig::default());
    let args = |extra: &[&'static str]| {
        let mut a = vec!["compare", "-r", "2", "--fail-if-more-than", "100", "--json"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["sleep 0.05", "sleep 0.1"]);
        a
    };
    let mut undecided = 0;
    for extra in [&[][..], &["--pass-inconclusive"][..]] {
        let o = quietwatt(m.root(), &args(extra));
        let v = json(&o);
        let ci = &v["comparisons"][0]["energy_ratio"]["ci"];
        let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
        let more = v["comparisons"][0]["verdict"] == "more";
        let code = o.status.code();
        if more && lo > 2.0 {
            assert_eq!(code, Some(3), "{v}");
            assert_eq!(v["gate"]["failed"], true, "{v}");
        } else if hi > 2.0 {
            undecided += 1;
            assert_eq!(v["gate"]["inconclusive"], true, "{v}");
            assert!(
                stderr(&o).contains("the gate cannot decide"),
                "{}",
                stderr(&o)
            );
            let want = if extra.is_empty() { 4 } else { 0 };
            assert_eq!(code, Some(want), "{extra:?}: {}", stderr(&o));
        } else {
            assert_eq!(code, Some(0), "{v}");
            assert_eq!(v["gate"]["inconclusive"], false, "{v}");
        }
    }
    eprintln!("{undecided} of 2 comparisons were inconclusive");
    // A compared command's own exit 3 is not the gate's regression.
    let o = quietwatt(
        m.root(),
        &[
            "compare",
            "-r",
            "2",
            "--fail-if-more-than",
            "10",
            "exit 3",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("exited with code 3"), "{}", stderr(&o));
}

#[test]
fn bench_energy_refuses_bad_input_before_running() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(m.root(), &["bench", "energy", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("two or more"), "{}", stderr(&o));
    let o = quietwatt(
        m.root(),
        &[
            "bench",
            "energy",
            "--fail-if-more-than",
            "-5",
            "true",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = quietwatt(m.root(), &["bench", "energy", "-r", "2", "true", "exit 5"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("--ignore-failure"), "{}", stderr(&o));
    let o = quietwatt(m.root(), &["bench", "energy", "-m", "ebpf", "true", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("polling mechanisms"), "{}", stderr(&o));
}

/// Checks the schema field and the types shared by every kind.
fn check_schema(v: &Value, kind: &str, what: &str) {
    assert_eq!(
        v["schema"].as_str(),
        Some(format!("quietwatt.{kind}/1").as_str()),
        "{what}: {v}"
    );
    if let Some(f) = v.get("freq_hz") {
        assert!(f.is_number(), "{what}: freq_hz must be a number: {v}");
    }
    if let Some(e) = v.get("emulated") {
        assert!(e.is_boolean(), "{what}: emulated must be a boolean: {v}");
    }
}

#[test]
fn every_json_output_carries_the_schema_and_typed_fields() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    let jsonl = dir.path().join("r.jsonl");
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("run", vec!["run", "--json", "--", "true"]),
        ("run", vec!["run", "--json", "-f", "auto", "--", "true"]),
        ("repeat", vec!["run", "-r", "2", "--json", "--", "true"]),
        (
            "record",
            vec![
                "record",
                "--json",
                "-o",
                csv.to_str().unwrap(),
                "--duration",
                "0.2",
            ],
        ),
        ("check", vec!["check", "--json", "--interval", "0.2"]),
        ("doctor", vec!["doctor", "--json"]),
        ("list", vec!["list", "--json"]),
        (
            "bench-energy",
            vec!["bench", "energy", "-r", "2", "--json", "true", "true"],
        ),
    ];
    for (kind, args) in &cases {
        let o = quietwatt(m.root(), args);
        let what = args.join(" ");
        assert!(
            o.status.code() == Some(0) || kind == &"check",
            "{what}: {}",
            stderr(&o)
        );
        let v: Value = serde_json::from_str(stdout(&o).trim())
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", stdout(&o)));
        check_schema(&v, kind, &what);
        if *kind != "list" && *kind != "doctor" {
            assert!(v["emulated"].is_boolean(), "{what}: no emulated: {v}");
        }
        if *kind == "record" {
            assert_eq!(v["freq_hz"], 100.0, "record's default rate: {v}");
        }
        if args.contains(&"auto") {
            assert!(v["freq_auto"]["min_hz"].is_number(), "{v}");
        }
    }
    // The JSON Lines recording's metadata line.
    let o = quietwatt(
        m.root(),
        &["record", "-o", jsonl.to_str().unwrap(), "--duration", "0.2"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let meta = &first["metadata"];
    check_schema(meta, "recording", "record -o x.jsonl");
    assert_eq!(meta["emulated"], true, "{meta}");
    assert!(meta["freq_hz"].is_number(), "{meta}");
}

#[test]
fn compare_prepares_each_run_shuffles_each_round_and_exports_the_same_figures() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("order");
    let prep = dir.path().join("prepared");
    let csv = dir.path().join("runs.csv");
    let md = dir.path().join("table.md");
    let a = format!("echo a >> {}; sleep 0.02", log.display());
    let b = format!("echo b >> {}; sleep 0.06", log.display());
    let o = quietwatt(
        m.root(),
        &[
            "compare",
            "-m",
            "powercap",
            "-r",
            "8",
            "--warmup",
            "1",
            "--reference",
            "2",
            "--prepare",
            &format!("echo p >> {}", prep.display()),
            "--export-csv",
            csv.to_str().unwrap(),
            "--export-markdown",
            md.to_str().unwrap(),
            "--json",
            &a,
            &b,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["reference"], 1, "{v}");
    // Each measured round runs both, in a shuffled order: not always a first.
    let order = std::fs::read_to_string(&log).unwrap().replace('\n', "");
    assert_eq!(order.len(), 2 * (1 + 8), "{order}");
    let rounds: Vec<&str> = (1..9).map(|r| &order[2 * r..2 * r + 2]).collect();
    assert!(
        rounds.iter().all(|r| *r == "ab" || *r == "ba"),
        "{rounds:?}"
    );
    assert!(
        rounds.contains(&"ba") && rounds.contains(&"ab"),
        "{rounds:?}"
    );
    // --prepare before every run, warm-ups included.
    let prepared = std::fs::read_to_string(&prep).unwrap().lines().count();
    assert_eq!(prepared, 2 * (1 + 8));
    // The first command against the reference (the second).
    let c = &v["comparisons"][0];
    assert_eq!(
        (c["command"].as_u64(), c["reference"].as_u64()),
        (Some(0), Some(1)),
        "{c}"
    );
    assert!(c["verdict"].is_string(), "{c}");
    // The CSV holds every run, with the JSON's figures.
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 16);
    assert!(text
        .lines()
        .next()
        .unwrap()
        .starts_with("command,run,exit_code,duration_s,total_energy_j"));
    let first = v["commands"][0]["per_run"][0]["total_energy_j"]
        .as_f64()
        .unwrap();
    let in_csv: f64 = rows
        .iter()
        .find(|r| r[1] == "1" && r[0].contains("echo a"))
        .map(|r| r[4].parse().unwrap())
        .unwrap();
    assert!((in_csv - first).abs() < 1e-8, "{in_csv} vs {first}");
    // The Markdown table, under what the figures are (a PR comment is read
    // without stderr): one row per command, the reference marked.
    let table = std::fs::read_to_string(&md).unwrap();
    let table = table
        .strip_prefix("> **EMULATED** RAPL: the emulator's figures, not this machine's.\n\n")
        .unwrap_or_else(|| panic!("no EMULATED banner over the table: {table}"));
    assert_eq!(
        table.lines().filter(|l| l.starts_with("| `")).count(),
        2,
        "{table}"
    );
    assert!(
        table.lines().nth(3).unwrap().contains("1.00 (reference)"),
        "{table}"
    );
    // With the verdict, and hyperfine's summary line under the table.
    assert!(
        table.starts_with("| Command |") && table.contains("| Verdict |"),
        "{table}"
    );
    assert!(
        table.contains("used ") && table.contains("× the energy of"),
        "{table}"
    );
}

#[test]
fn compare_refuses_a_reference_that_is_not_one_of_the_commands_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let o = quietwatt(
        dir.path(),
        &["compare", "--reference", "3", "true", "false"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--reference"), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("EMULATED"),
        "refused before anything was mounted"
    );
}

#[test]
fn run_repeat_prepares_each_run_and_exports_csv_and_markdown() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let prep = dir.path().join("prepared");
    let csv = dir.path().join("runs.csv");
    let md = dir.path().join("table.md");
    let o = quietwatt(
        m.root(),
        &[
            "run",
            "-r",
            "3",
            "--warmup",
            "1",
            "--prepare",
            &format!("echo p >> {}", prep.display()),
            "--export-csv",
            csv.to_str().unwrap(),
            "--export-markdown",
            md.to_str().unwrap(),
            "--json",
            "--",
            "sleep",
            "0.02",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(std::fs::read_to_string(&prep).unwrap().lines().count(), 4);
    let text = std::fs::read_to_string(&csv).unwrap();
    let totals: Vec<f64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(4).unwrap().parse().unwrap())
        .collect();
    let json_totals: Vec<f64> = v["per_run"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["total_energy_j"].as_f64().unwrap())
        .collect();
    assert_eq!(totals.len(), 3);
    for (a, b) in totals.iter().zip(&json_totals) {
        assert!((a - b).abs() < 1e-8, "{totals:?} vs {json_totals:?}");
    }
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(table.contains("| `sleep 0.02` |"), "{table}");
}

#[test]
fn compare_draws_each_commands_runs_as_a_box_with_a_png_beside_it() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("energy.svg");
    let o = quietwatt(
        m.root(),
        &[
            "compare",
            "-r",
            "3",
            "--plot",
            svg.to_str().unwrap(),
            "sleep 0.01",
            "sleep 0.03",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") || text.contains("<svg"), "{text}");
    assert!(text.contains("#1 sleep 0.01") && text.contains("#2 sleep 0.03"));
    assert!(text.contains("EMULATED"));
    let png = std::fs::read(svg.with_extension("png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // Anything but an .svg is refused before anything runs.
    let o = quietwatt(m.root(), &["compare", "--plot", "x.png", "true", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
