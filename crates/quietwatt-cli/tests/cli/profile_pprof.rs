//! `quietwatt profile -o x.pb.gz` against the emulator, read by Go's own pprof:
//! what a user relies on is that `go tool pprof` opens the file, shows energy in
//! its unit and the profile's functions, and diffs two profiles (`-diff_base`).
//! Go is on the machines these tests run on; without it the test fails and says
//! so (a skipped check would pass silently).

use crate::common;

use quietwatt_emulator::EmulatorConfig;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `go` on PATH, or at /usr/local/go/bin/go.
fn go() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("go"))
        .find(|g| g.is_file());
    let fallback = PathBuf::from("/usr/local/go/bin/go");
    match on_path {
        Some(g) => g,
        None if fallback.is_file() => fallback,
        None => panic!(
            "`go` is neither on PATH nor at /usr/local/go/bin/go: this test reads the \
             profile with `go tool pprof`; install Go (https://go.dev/dl) and run it again"
        ),
    }
}

/// `go tool pprof ARGS`, its stdout; fails the test with stderr if it fails.
fn pprof(dir: &Path, args: &[&str]) -> String {
    let o = Command::new(go())
        .args(["tool", "pprof"])
        .args(args)
        .current_dir(dir)
        // Nothing to fetch or symbolize: the names are in the file.
        .env("PPROF_BINARY_PATH", dir)
        .env("HOME", dir)
        .output()
        .expect("cannot run go");
    assert!(
        o.status.success(),
        "go tool pprof {args:?} failed: {}\n{}",
        o.status,
        common::stderr(&o)
    );
    common::stdout(&o)
}

#[test]
fn go_tool_pprof_reads_the_energy_profile_and_diffs_it() {
    let m = common::mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.pb.gz");
    let s = crate::profile::profiled(
        m.root(),
        &[
            "-o",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &crate::profile::spin(0),
        ],
    );
    assert_eq!(s["format"], "pprof");
    let top: Vec<&str> = s["top_self"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["function"].as_str())
        .collect();
    assert!(!top.is_empty(), "no function got energy: {s}");

    let text = pprof(dir.path(), &["-top", "-sample_index=energy", "x.pb.gz"]);
    assert!(
        text.contains("Type: energy") && text.contains("microjoules"),
        "the energy unit is not in go tool pprof -top:\n{text}"
    );
    assert!(
        top.iter().any(|f| text.contains(f)),
        "none of the profile's functions {top:?} in go tool pprof -top:\n{text}"
    );
    assert!(
        text.contains("[unattributed]") || s["unattributed_uj"] == 0,
        "{text}"
    );
    // The frames' modules are Mappings: the shell's own file among them, and
    // locations pointing to them (`M=`).
    let raw = pprof(dir.path(), &["-raw", "x.pb.gz"]);
    let mappings: Vec<&str> = raw
        .split("Mappings")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("0x"))
        .collect();
    let shell = std::fs::canonicalize("/bin/sh").unwrap();
    assert!(
        mappings.iter().any(|l| l.contains(shell.to_str().unwrap())),
        "{} is not among the Mappings of go tool pprof -raw:\n{raw}",
        shell.display()
    );
    assert!(
        raw.lines().any(|l| l.contains(" M=")),
        "no location points to a mapping:\n{raw}"
    );
    // The samples are there too, as the second sample type.
    pprof(dir.path(), &["-top", "-sample_index=samples", "x.pb.gz"]);
    // A profile against itself: every difference is 0, and pprof says so.
    let diff = pprof(
        dir.path(),
        &[
            "-top",
            "-sample_index=energy",
            "-diff_base",
            "x.pb.gz",
            "x.pb.gz",
        ],
    );
    assert!(
        diff.contains("accounting for 0,"),
        "a profile against itself should differ by nothing:\n{diff}"
    );
}
