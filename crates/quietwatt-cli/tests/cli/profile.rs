//! `quietwatt profile` against the emulator: a CPU-bound shell loop profiled with
//! perf_event stacks (root here; cpu-clock in a VM without a PMU), its package
//! energy split among the stacks. What a user relies on: the folded file parses,
//! its counts add up to the measured package energy exactly in µJ, the flame graph
//! is well-formed and its title names the joules and the mechanism, the exit
//! code is the command's; bad input is refused before anything is written.

use crate::common;

use quietwatt_emulator::EmulatorConfig;
use std::path::Path;

/// A CPU-bound shell loop (a few hundred ms of CPU on a busy VM), ending with
/// `code`.
pub(crate) fn spin(code: u8) -> String {
    format!("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exit {code}")
}

/// The `--json` summary on stdout.
pub(crate) fn summary(o: &std::process::Output) -> serde_json::Value {
    let out = common::stdout(o);
    let line = out.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "no JSON summary ({e}) in {out:?}; stderr:\n{}",
            common::stderr(o)
        )
    })
}

/// `quietwatt --root ROOT profile --json ARGS`, which must succeed; its summary.
pub(crate) fn profiled(root: &Path, args: &[&str]) -> serde_json::Value {
    let o = common::quietwatt(root, &[&["profile", "--json"], args].concat());
    assert!(
        o.status.success(),
        "profile failed (it needs root or perf_event_paranoid <= 1):\n{}",
        common::stderr(&o)
    );
    summary(&o)
}

pub(crate) fn u(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {v}"))
}

/// A folded file's `(stack, µJ)` lines, each checked to be `stack COUNT`.
pub(crate) fn folded(path: &Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|line| {
            let (stack, count) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not `stack COUNT`: {line:?}"));
            let count = count
                .parse()
                .unwrap_or_else(|_| panic!("count not an integer: {line:?}"));
            (stack.to_string(), count)
        })
        .collect()
}

#[test]
fn folded_stacks_add_up_to_the_measured_package_energy_exactly() {
    let m = common::mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.folded");
    let s = profiled(
        m.root(),
        &["-o", out.to_str().unwrap(), "--", "sh", "-c", &spin(0)],
    );
    assert_eq!(s["emulated"], true);
    assert_eq!(s["exit_code"], 0);
    assert_eq!(s["format"], "folded");
    assert_eq!(s["dram_split"], false);
    assert!(u(&s, "samples") > 0, "no stack sampled: {s}");
    let measured = u(&s, "package_uj");
    assert!(measured > 0, "{s}");
    let lines = folded(&out);
    let (mut stacks, mut unattributed) = (0u64, None);
    for (stack, count) in &lines {
        assert!(!stack.is_empty() && *count > 0, "{stack:?} {count}");
        if stack == "[unattributed]" {
            unattributed = Some(*count);
        } else {
            stacks += count;
        }
    }
    assert_eq!(stacks, u(&s, "attributed_uj"), "the stacks' µJ");
    assert_eq!(
        unattributed.unwrap_or(0),
        u(&s, "unattributed_uj"),
        "the [unattributed] line"
    );
    assert_eq!(
        stacks + unattributed.unwrap_or(0),
        measured,
        "stacks + unattributed against the measured package energy, in µJ"
    );
    assert!(stacks > 0, "the loop's stacks got no energy:\n{lines:?}");
    // The top functions are leaf frames of those stacks, with shares.
    let top = s["top_self"].as_array().unwrap();
    assert!(!top.is_empty() && top.len() <= 10, "{s}");
}

#[test]
fn the_flame_graph_is_well_formed_and_names_the_joules_and_the_mechanism() {
    let m = common::mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.svg");
    let o = common::quietwatt(
        m.root(),
        &[
            "profile",
            "-o",
            out.to_str().unwrap(),
            "--json",
            "--",
            "sh",
            "-c",
            &spin(3),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", common::stderr(&o));
    let s = summary(&o);
    assert_eq!(s["exit_code"], 3);
    let svg = std::fs::read_to_string(&out).unwrap();
    // Well-formed: every element closed in order, to the end.
    let mut reader = quick_xml::Reader::from_str(&svg);
    let mut elements = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(_) | quick_xml::events::Event::Empty(_)) => {
                elements += 1;
            }
            Ok(_) => {}
            Err(e) => panic!("not well-formed XML at {}: {e}", reader.buffer_position()),
        }
    }
    assert!(elements > 10, "{elements} elements");
    let title = format!(
        "energy: {:.3} J package ({}), {} @ 997 Hz",
        u(&s, "package_uj") as f64 / 1e6,
        s["mechanism"].as_str().unwrap(),
        s["event"].as_str().unwrap()
    );
    assert!(svg.contains(&title), "no {title:?} in the SVG");
    assert!(svg.contains("µJ"), "the counts are not in µJ");
    assert!(
        svg.contains("EMULATED RAPL"),
        "the subtitle says the emulator"
    );
}

#[test]
fn a_system_wide_profile_conserves_the_package_energy_too() {
    let m = common::mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("all.folded");
    let s = profiled(
        m.root(),
        &["-a", "--duration", "300ms", "-o", out.to_str().unwrap()],
    );
    assert_eq!(s["exit_code"], serde_json::Value::Null);
    let total: u64 = folded(&out).iter().map(|(_, c)| c).sum();
    assert_eq!(total, u(&s, "package_uj"));
    assert!(u(&s, "samples") > 0, "{s}");
}

/// Runs `profile ARGS` in `dir` (bad input needs no emulator: it is refused
/// before one is mounted) and checks the refusal.
fn refused(dir: &Path, args: &[&str], code: i32, says: &str) {
    let mut all = vec!["profile"];
    all.extend_from_slice(args);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .args(&all)
        .current_dir(dir)
        .env_remove("QUIETWATT_ROOT")
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {says:?} not in {err}");
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert!(left.is_empty(), "{args:?} wrote {left:?}");
}

#[test]
fn bad_input_is_refused_with_its_fix_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    refused(d, &["--format", "html", "--", "true"], 2, "html");
    refused(
        d,
        &["-o", "missing/dir/p.svg", "--", "true"],
        74,
        "is not a directory",
    );
    refused(d, &["-o", "p.txt", "--", "true"], 2, "--format svg|folded");
    refused(d, &["-a", "-o", "all.svg"], 2, "-a needs --duration");
    refused(d, &["-o", "p.svg"], 2, "nothing to profile");
    refused(
        d,
        &["-a", "--duration", "1", "--", "true"],
        2,
        "one or the other",
    );
    refused(
        d,
        &["--duration", "1", "--", "true"],
        2,
        "--duration is for -a",
    );
    refused(d, &["-a", "--duration", "soon"], 2, "invalid --duration");
}

#[test]
fn a_command_that_is_not_found_exits_127_and_writes_nothing() {
    let m = common::mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.svg");
    let o = common::quietwatt(
        m.root(),
        &[
            "profile",
            "-o",
            out.to_str().unwrap(),
            "--",
            "quietwatt-no-such-command",
        ],
    );
    assert_eq!(o.status.code(), Some(127), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("command not found"));
    assert!(!out.exists());
}

/// A Rust program's hot function, named from its ELF symbols and DWARF lines
/// after it exited (blazesym over the mappings the sampler kept): the lab's `ep`
/// kernel spends its time in `quietwatt_lab::workload::ep_block`.
#[test]
fn the_hot_function_of_a_program_is_named_with_its_file_and_line() {
    let m = common::mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ep.folded");
    let o = common::quietwatt(
        m.root(),
        &[
            "profile",
            "--lines",
            "-o",
            out.to_str().unwrap(),
            "--",
            env!("CARGO_BIN_EXE_quietwatt"),
            "bench",
            "workload",
            "ep",
            "--size",
            "4000000",
            "--threads",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let folded = std::fs::read_to_string(&out).unwrap();
    let hot: u64 = folded
        .lines()
        .filter(|l| l.contains("quietwatt_lab::workload::ep_block (workload.rs:"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(hot > 0, "ep_block not named with its line:\n{folded}");
    // The summary's top functions name it too.
    assert!(
        common::stderr(&o).contains("quietwatt_lab::workload::ep_block"),
        "{}",
        common::stderr(&o)
    );
}
