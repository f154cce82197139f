//! `quietwatt compare --profile` (issue 25, item 8): a program against a version
//! of it whose one function does twice the work, under the load-following
//! emulator (energy follows CPU time): that function, and only it, is found
//! significantly changed, by about its doubled energy; the differential flame
//! graph names it; the JSON validates.

use crate::common;
use std::path::{Path, PathBuf};

/// `quietwatt_cmp_steady` and `quietwatt_cmp_changed`, each about a quarter
/// second of CPU; built with `--cfg doubled`, the changed one does twice its work.
const PROGRAM_RS: &str = r#"
// Each function spins in its own loop: its energy is its own (self) energy.
#[inline(never)]
fn quietwatt_cmp_steady() -> u64 {
    let mut x = 1u64;
    for i in 0..std::hint::black_box(48_000_000u64) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i ^ (x >> 7));
    }
    x
}
#[inline(never)]
fn quietwatt_cmp_changed() -> u64 {
    let n: u64 = if cfg!(doubled) { 96_000_000 } else { 48_000_000 };
    let mut x = 3u64;
    for i in 0..std::hint::black_box(n) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i ^ (x >> 7));
    }
    x
}
fn main() {
    println!("{}", quietwatt_cmp_steady() ^ quietwatt_cmp_changed());
}
"#;

/// The program, with frame pointers, optimised but each function out of line.
fn build(dir: &Path, doubled: bool) -> PathBuf {
    let (name, cfg): (_, &[&str]) = if doubled {
        ("cmp-b", &["--cfg", "doubled"])
    } else {
        ("cmp-a", &[])
    };
    let flags = [
        &["-C", "opt-level=1", "-C", "force-frame-pointers=yes"][..],
        cfg,
    ]
    .concat();
    common::build_rust(dir, "cmp", name, PROGRAM_RS, &flags)
}

#[test]
fn the_function_that_does_twice_the_work_is_the_only_one_found_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (build(dir.path(), false), build(dir.path(), true));
    let m = common::mount_following();
    let svg = dir.path().join("diff.svg");
    let o = common::quietwatt(
        m.root(),
        &[
            "compare",
            "--profile",
            "--profile-output",
            svg.to_str().unwrap(),
            "-r",
            "8",
            "--json",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
    );
    let err = common::stderr(&o);
    assert!(o.status.success(), "compare --profile failed:\n{err}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    crate::documents::validate("bench-energy", &doc);
    let functions = doc["functions"].as_array().expect("functions");
    let significant: Vec<&str> = functions
        .iter()
        .filter(|f| f["significant"] == true)
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    let table: Vec<String> = functions
        .iter()
        .take(6)
        .map(|f| {
            format!(
                "{} {:.0} -> {:.0} µJ, p_holm {}",
                f["function"],
                f["a_uj"].as_f64().unwrap(),
                f["b_uj"].as_f64().unwrap(),
                f["p_holm"]
            )
        })
        .collect();
    assert_eq!(significant, ["cmp::quietwatt_cmp_changed"], "{table:#?}");
    let changed = &functions[0];
    let (a_uj, b_uj) = (
        changed["a_uj"].as_f64().unwrap(),
        changed["b_uj"].as_f64().unwrap(),
    );
    // Twice the work: twice the CPU time, twice the energy above idle, within
    // the sampling's and the emulator's 10 ms quanta's noise.
    assert!(
        (1.5..=2.6).contains(&(b_uj / a_uj)),
        "{a_uj} µJ -> {b_uj} µJ"
    );
    assert!(
        changed["change_95_uj"][0].as_f64().unwrap() > 0.0,
        "{changed}"
    );
    let steady = functions
        .iter()
        .find(|f| f["function"] == "cmp::quietwatt_cmp_steady")
        .expect("the steady function was profiled");
    let ratio = steady["b_uj"].as_f64().unwrap() / steady["a_uj"].as_f64().unwrap();
    assert!((0.7..=1.4).contains(&ratio), "{steady}");
    let text = std::fs::read_to_string(&svg).expect("the flame graph");
    assert!(
        text.starts_with("<?xml") && text.contains("quietwatt_cmp_changed"),
        "{}",
        &text[..200.min(text.len())]
    );
    assert!(text.contains("EMULATED RAPL"));
}

#[test]
fn profile_needs_two_commands_and_no_prepare() {
    let m = common::mount(quietwatt_emulator::EmulatorConfig::default());
    for (args, says) in [
        (
            &["compare", "--profile", "true", "true", "true"][..],
            "exactly two",
        ),
        (
            &["compare", "--profile", "--prepare", "true", "true", "true"][..],
            "--prepare",
        ),
        (
            &[
                "compare",
                "--profile",
                "--profile-output",
                "x.png",
                "true",
                "true",
            ][..],
            ".svg",
        ),
    ] {
        let o = common::quietwatt(m.root(), args);
        assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
        assert!(common::stderr(&o).contains(says), "{}", common::stderr(&o));
    }
}
