//! Every bad input gets a clear error naming the fix and its own exit code, never a
//! panic or a silent zero; data already recorded stays complete and parseable.

use crate::common::*;
use quietwatt::Domain;
use quietwatt_emulator::{EmulatorConfig, Fault, FaultKind, Mechanism as Served};
use std::time::Duration;

fn code(o: &std::process::Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

fn no_panic(o: &std::process::Output) {
    assert!(
        !stderr(o).contains("panicked"),
        "quietwatt panicked: {}",
        stderr(o)
    );
}

#[test]
fn unknown_mechanism_lists_the_mechanisms() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(m.root(), &["run", "--mechanism", "rapl9000", "--", "true"]);
    assert_eq!(code(&o), 2);
    let e = stderr(&o);
    assert!(
        e.contains("rapl9000") && e.contains("powercap") && e.contains("msr"),
        "{e}"
    );
}

#[test]
fn unknown_domain_name_lists_the_domain_names() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(
        m.root(),
        &["run", "--domains", "package,gpu0", "--", "true"],
    );
    assert_eq!(code(&o), 2);
    let e = stderr(&o);
    assert!(
        e.contains("gpu0") && e.contains("package, core, uncore, dram, psys"),
        "{e}"
    );
}

#[test]
fn a_domain_this_machine_lacks_lists_those_it_has() {
    let m = mount(EmulatorConfig::amd());
    let o = quietwatt(
        m.root(),
        &[
            "run",
            "--mechanism",
            "powercap",
            "--domains",
            "dram",
            "--",
            "true",
        ],
    );
    assert_eq!(code(&o), 2);
    let e = stderr(&o);
    assert!(
        e.contains("'dram' is not available") && e.contains("core, package"),
        "{e}"
    );
}

#[test]
fn frequencies_out_of_range_are_refused() {
    let m = mount(EmulatorConfig::default());
    // 1e-20 Hz once panicked (a period of 1e20 s does not fit a Duration).
    for f in ["0", "-5", "200000", "fast", "1e-20", "1e-400", "0.0001"] {
        let o = quietwatt(m.root(), &["run", "--freq", f, "--", "true"]);
        assert_eq!(code(&o), 2, "--freq {f}: {}", stderr(&o));
        no_panic(&o);
        assert!(stderr(&o).contains("100000"), "--freq {f}: {}", stderr(&o));
        let o = quietwatt(
            m.root(),
            &["record", "-o", "/dev/null", "--freq", f, "--duration", "1"],
        );
        assert_eq!(code(&o), 2, "record --freq {f}");
        no_panic(&o);
        let o = quietwatt(m.root(), &["serve", "--listen", "127.0.0.1:0", "--freq", f]);
        assert_eq!(code(&o), 2, "serve --freq {f}: {}", stderr(&o));
        no_panic(&o);
        let bound = format!("--freq-min={f}");
        let o = quietwatt(m.root(), &["run", "--freq", "auto", &bound, "--", "true"]);
        assert_eq!(code(&o), 2, "--freq-min {f}: {}", stderr(&o));
        no_panic(&o);
        assert!(stderr(&o).contains("--freq-min"), "{}", stderr(&o));
    }
}

#[test]
fn durations_take_units_and_bad_ones_name_the_grammar() {
    let m = mount(EmulatorConfig::default());
    // One grammar with the emulator's: a unit, or a bare number of seconds.
    for d in ["200ms", "0.2", "0.2s"] {
        let o = quietwatt(m.root(), &["record", "-o", "/dev/null", "--duration", d]);
        assert_eq!(code(&o), 0, "--duration {d}: {}", stderr(&o));
    }
    for d in ["-1", "0", "0ms", "5 parsecs", "NaN", ""] {
        let flag = format!("--duration={d}");
        let o = quietwatt(m.root(), &["record", "-o", "/dev/null", &flag]);
        assert_eq!(code(&o), 2, "--duration {d:?}: {}", stderr(&o));
        no_panic(&o);
        let e = stderr(&o);
        assert!(
            e.contains("500ms") && e.contains("bare number is seconds"),
            "{e}"
        );
    }
}

#[test]
fn freq_bounds_without_freq_auto_are_refused_with_the_fix() {
    let m = mount(EmulatorConfig::default());
    for bound in ["--freq-min", "--freq-max"] {
        let o = quietwatt(
            m.root(),
            &["run", "--freq", "100", bound, "50", "--", "true"],
        );
        assert_eq!(code(&o), 2, "{bound}: {}", stderr(&o));
        assert!(stderr(&o).contains("give --freq auto"), "{}", stderr(&o));
    }
    // With auto they bound the rate.
    let o = quietwatt(
        m.root(),
        &["run", "--freq", "auto", "--freq-min", "20", "--", "true"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn an_unwritable_output_fails_before_measuring() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-o",
            "/nonexistent-dir/energy.csv",
            "--duration",
            "5",
        ],
    );
    assert_eq!(code(&o), 74);
    assert!(
        stderr(&o).contains("/nonexistent-dir/energy.csv"),
        "{}",
        stderr(&o)
    );
    assert!(
        m.emulator
            .served(Served::Powercap, 0, Domain::Package)
            .is_none(),
        "the counters were read although the output could not be written"
    );
}

#[test]
fn a_full_disk_is_an_output_error() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(m.root(), &["record", "-o", "/dev/full", "--duration", "2"]);
    no_panic(&o);
    assert_eq!(code(&o), 74, "{}", stderr(&o));
    assert!(stderr(&o).contains("/dev/full"), "{}", stderr(&o));
}

#[test]
fn no_rapl_at_all_points_to_doctor_with_its_own_exit_code() {
    let empty = tempfile::tempdir().unwrap();
    // `run` runs the command all the same (see cli_habits.rs) unless energy is required.
    let o = quietwatt(empty.path(), &["run", "--require-energy", "--", "true"]);
    assert_eq!(code(&o), 69);
    assert!(stderr(&o).contains("quietwatt doctor"), "{}", stderr(&o));
    let o = quietwatt(empty.path(), &["doctor"]);
    assert_eq!(code(&o), 69);
    assert!(stdout(&o).contains("cannot measure"), "{}", stdout(&o));
}

#[test]
fn doctor_passes_on_an_emulated_machine() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(m.root(), &["doctor"]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    assert!(stdout(&o).contains("[ ok ] powercap"), "{}", stdout(&o));
    // One mechanism at a time, as `run --mechanism` takes them.
    for mech in ["msr", "powercap"] {
        let o = quietwatt(m.root(), &["doctor", "--mechanism", mech]);
        assert_eq!(code(&o), 0, "{}", stdout(&o));
        let diagnosed = stdout(&o).lines().filter(|l| l.starts_with('[')).count();
        assert_eq!(diagnosed, 1, "{}", stdout(&o));
        assert!(
            stdout(&o).contains(&format!("[ ok ] {mech}")),
            "{}",
            stdout(&o)
        );
        let o = quietwatt(m.root(), &["list", "--mechanism", mech, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("list --json");
        let ms = v["mechanisms"].as_array().unwrap();
        assert_eq!(ms.len(), 1, "{v}");
        assert_eq!(ms[0]["mechanism"], mech);
        assert_eq!(ms[0]["counters_move"], true, "{v}");
    }
}

#[test]
fn counters_that_never_move_are_no_rapl_for_doctor_and_emulate_auto() {
    // A hypervisor can expose RAPL files that always read the same value (this
    // project's VM has a power PMU whose energy-psys reads 0): every figure would be
    // 0 J. With every counter frozen, doctor must fail powercap and say why.
    let mut c = EmulatorConfig::default();
    for (s, d) in c.counters() {
        c = c.with_fault(Fault::new(FaultKind::Freeze, s, d));
    }
    let m = mount(c);
    let o = quietwatt(m.root(), &["doctor"]);
    no_panic(&o);
    let out = stdout(&o);
    assert!(out.contains("[fail] powercap"), "{out}");
    assert!(out.contains("none of these counters changed"), "{out}");
    assert_eq!(code(&o), 69, "{out}");
    let o = quietwatt(m.root(), &["list", "--mechanism", "powercap"]);
    assert!(
        stdout(&o).contains("none of its counters changed"),
        "{}",
        stdout(&o)
    );
    // `--emulate auto` (the quick start) falls back to the built-in emulator, loudly.
    let o = quietwatt(
        m.root(),
        &["--emulate", "auto", "run", "--json", "--", "true"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("*** EMULATED RAPL ***"),
        "{}",
        stderr(&o)
    );
    // One frozen domain among live ones is a domain drawing nothing, not a dead
    // mechanism: doctor still passes.
    let m =
        mount(EmulatorConfig::default().with_fault(Fault::new(FaultKind::Freeze, 0, Domain::Dram)));
    let o = quietwatt(m.root(), &["doctor"]);
    assert!(stdout(&o).contains("[ ok ] powercap"), "{}", stdout(&o));
}

#[test]
fn a_counter_reading_garbage_is_an_error_naming_the_file() {
    let m = mount(EmulatorConfig::default().with_fault(Fault::new(
        FaultKind::Garbage,
        0,
        Domain::Package,
    )));
    let o = quietwatt(
        m.root(),
        &["run", "--mechanism", "powercap", "--json", "--", "true"],
    );
    no_panic(&o);
    assert_eq!(code(&o), 1);
    let e = stderr(&o);
    assert!(
        e.contains("intel-rapl:0/energy_uj") && e.contains("unexpected content"),
        "{e}"
    );
}

#[test]
fn a_counter_beyond_its_range_is_an_error_not_a_wrap() {
    let m = mount(EmulatorConfig::default().with_fault(
        Fault::new(FaultKind::Overrange, 0, Domain::Dram).at(Duration::from_millis(300)),
    ));
    let o = quietwatt(
        m.root(),
        &[
            "run",
            "--mechanism",
            "powercap",
            "--json",
            "--freq",
            "50",
            "--",
            "sleep",
            "0.6",
        ],
    );
    no_panic(&o);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("not a valid reading"), "{}", stderr(&o));
    // The partial report is still printed, flagged with the error.
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(v["error"].as_str().unwrap().contains("energy_uj"));
}

#[test]
fn an_unreadable_counter_explains_the_permission_fix() {
    let m = mount(EmulatorConfig::default().with_fault(Fault::new(
        FaultKind::Eacces,
        0,
        Domain::Package,
    )));
    let o = quietwatt(m.root(), &["run", "--mechanism", "powercap", "--", "true"]);
    assert_eq!(code(&o), 69);
    let e = stderr(&o);
    assert!(e.contains("CVE-2020-8694") && e.contains("setfacl"), "{e}");
    let o = quietwatt(m.root(), &["doctor"]);
    assert!(stdout(&o).contains("setfacl"), "{}", stdout(&o));
}

#[test]
fn a_zone_vanishing_mid_recording_keeps_what_was_recorded() {
    let m =
        mount(EmulatorConfig::default().with_fault(
            Fault::new(FaultKind::Vanish, 0, Domain::Dram).at(Duration::from_millis(600)),
        ));
    let csv = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-o",
            csv.to_str().unwrap(),
            "--freq",
            "100",
            "--duration",
            "3",
            "--mechanism",
            "powercap",
        ],
    );
    no_panic(&o);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("vanished"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.ends_with('\n'), "the last row is cut");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .collect();
    assert!(rows.len() > 4 * 10, "only {} rows kept", rows.len());
    for r in rows {
        assert!(
            r.split(',').count() >= 5 && r.split(',').nth(3).unwrap().parse::<f64>().is_ok(),
            "bad row {r:?}"
        );
    }
}

#[test]
fn a_frozen_counter_is_reported_not_passed_off_as_zero_power() {
    let m =
        mount(EmulatorConfig::default().with_fault(Fault::new(FaultKind::Freeze, 0, Domain::Core)));
    let o = quietwatt(
        m.root(),
        &["run", "--mechanism", "powercap", "--", "sleep", "0.8"],
    );
    assert_eq!(code(&o), 0);
    let e = stderr(&o);
    assert!(e.contains("0/core") && e.contains("did not advance"), "{e}");
}

#[test]
fn the_command_exit_code_is_propagated() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(m.root(), &["run", "--", "sh", "-c", "exit 7"]);
    assert_eq!(code(&o), 7);
    let o = quietwatt(m.root(), &["run", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code(&o), 128 + 15);
    // A shell's code for a command that does not exist (cli_habits.rs has more).
    let o = quietwatt(m.root(), &["run", "--", "/nonexistent/program"]);
    assert_eq!(code(&o), 127);
    assert!(stderr(&o).contains("/nonexistent/program"));
}

#[test]
fn pinning_to_a_cpu_that_does_not_exist_is_a_usage_error() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(m.root(), &["run", "--cpu", "999", "--", "true"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--cpu 999"), "{}", stderr(&o));
}

#[test]
fn a_cpu_model_the_quirk_table_does_not_know_is_measured_with_one_warning() {
    let m = mount(EmulatorConfig::intel(0x01));
    let o = quietwatt(
        m.root(),
        &[
            "run",
            "--mechanism",
            "msr",
            "--freq",
            "100",
            "--",
            "sleep",
            "0.2",
        ],
    );
    no_panic(&o);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(
        e.matches("powercap RAPL model table").count(),
        1,
        "warned once: {e}"
    );
    assert!(e.contains("package"), "and measured: {e}");
}

#[test]
fn no_output_overwrites_an_input_or_another_output() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("run.csv");
    let r = rec.to_str().unwrap();
    let o = quietwatt(m.root(), &["record", "-o", r, "--duration", "0.3"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let before = std::fs::read(&rec).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&rec, &link).unwrap();
    let hard = dir.path().join("hard.json");
    std::fs::hard_link(&rec, &hard).unwrap();
    let dotted = dir.path().join(".").join("run.csv");
    for out in [&rec, &link, &hard, &dotted] {
        let o = quietwatt(m.root(), &["trace", r, "-o", out.to_str().unwrap()]);
        assert_eq!(code(&o), 2, "trace -o {}: {}", out.display(), stderr(&o));
        no_panic(&o);
        assert!(
            stderr(&o).contains("same file as the input INPUT"),
            "{}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read(&rec).unwrap(),
            before,
            "the recording changed"
        );
    }
    // record: the trace or the events file on the recording itself.
    let other = dir.path().join("other.csv");
    let x = other.to_str().unwrap();
    let events = dir.path().join("other.events.csv");
    for args in [
        vec!["record", "-o", x, "--duration", "0.2", "--trace", x],
        vec![
            "record",
            "-o",
            x,
            "--duration",
            "0.2",
            "--events",
            "faults",
            "--trace",
            events.to_str().unwrap(),
        ],
    ] {
        let o = quietwatt(m.root(), &args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("same file"), "{}", stderr(&o));
        assert!(!other.exists(), "{args:?} wrote before refusing");
    }
    // A trace beside the recording is fine.
    let t = dir.path().join("run.json");
    let o = quietwatt(m.root(), &["trace", r, "-o", t.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn a_damaged_parquet_file_is_an_error_without_a_panic_message() {
    // Found by scripts/fuzz.sh: the parquet decoder asserts on a varint of more
    // than ten bytes. Before, `trace` printed "thread 'main' panicked at ..." above
    // its own error.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.parquet");
    std::fs::write(
        &p,
        include_bytes!("../../../quietwatt/tests/vectors/fuzz-parquet-vlq-overflow.parquet"),
    )
    .unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .args(["trace", p.to_str().unwrap(), "-o", "/dev/null"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_ne!(code(&o), 0, "{err}");
    assert!(err.contains("damaged Parquet"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
