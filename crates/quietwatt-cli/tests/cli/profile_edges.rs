//! `quietwatt profile`'s edges (issue 25, items 2 and 9): code built without
//! frame pointers is named as such, with how to rebuild it; an idle power set
//! apart is the configured watts over the profile and the split stays exact.

use crate::common;
use crate::profile::{profiled, u};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A hot path three calls deep (`outer` → `middle` → `leaf`), each kept out of
/// line.
const DEEP_RS: &str = r#"
#[inline(never)]
fn leaf(n: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i ^ (x >> 7));
    }
    x
}
#[inline(never)]
fn middle(n: u64) -> u64 {
    let mut s = 0;
    for _ in 0..20 {
        s ^= std::hint::black_box(leaf(std::hint::black_box(n)));
    }
    s
}
#[inline(never)]
fn outer(n: u64) -> u64 {
    let mut s = 0;
    for _ in 0..10 {
        s ^= middle(n);
    }
    s
}
fn main() {
    // A fixed amount of work (about half a second of CPU), not of wall time:
    // cpu-clock samples CPU time, so a busy machine gives as many samples.
    let mut s = 0;
    for _ in 0..std::hint::black_box(5) {
        s ^= outer(std::hint::black_box(1_000_000));
    }
    println!("{s}");
}
"#;

/// The program above, optimised, with or without frame pointers.
fn build(dir: &Path, frame_pointers: bool) -> PathBuf {
    let (name, fp) = match frame_pointers {
        true => ("deep-fp", "force-frame-pointers=yes"),
        false => ("deep-nofp", "force-frame-pointers=no"),
    };
    common::build_rust(dir, "deep", name, DEEP_RS, &["-C", "opt-level=2", "-C", fp])
}

/// Whether the document warns that `module` has no frame pointers.
fn warns_of(doc: &serde_json::Value, module: &str) -> bool {
    doc["warnings"].as_array().unwrap().iter().any(|w| {
        let m = w.as_str().unwrap_or_default();
        m.contains("without frame pointers") && m.contains(module)
    })
}

/// The same program built both ways: the one without frame pointers is said to
/// be (its chains stop at `leaf ← main`, inside the executable), with how to
/// rebuild; the one with them is not (its chains reach `outer` and libc).
#[test]
fn code_without_frame_pointers_is_named_with_how_to_rebuild_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = common::mount(quietwatt_emulator::EmulatorConfig::default());
    let out = dir.path().join("p.folded");
    let out = out.to_str().unwrap();
    for fp in [false, true] {
        let exe = build(dir.path(), fp);
        let doc = profiled(m.root(), &["-o", out, "--", exe.to_str().unwrap()]);
        let module = exe.file_name().unwrap().to_str().unwrap();
        assert!(u(&doc, "samples") >= 200, "too few samples to judge: {doc}");
        assert_eq!(
            warns_of(&doc, module),
            !fp,
            "frame pointers {fp}: {}",
            doc["warnings"]
        );
        if !fp {
            let w = doc["warnings"].to_string();
            assert!(
                w.contains("force-frame-pointers=yes") && w.contains("-fno-omit-frame-pointer"),
                "{w}"
            );
        }
    }
}

/// `--idle-watts 10` under the load-following emulator (10 W idle plus 5 W per
/// busy CPU), the whole machine for a second (so that every interval has
/// samples, the idle task's or a busy machine's other load): the idle part is
/// 10 W over the profile's measured span, labelled configured, and the
/// folded stacks still add up to the measured package energy exactly.
#[test]
fn a_configured_idle_power_is_set_apart_and_the_split_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let m = common::mount_following();
    let out = dir.path().join("idle.folded");
    let doc = profiled(
        m.root(),
        &[
            "--idle-watts",
            "10",
            "-o",
            out.to_str().unwrap(),
            "-a",
            "--duration",
            "1",
        ],
    );
    assert!(
        doc["idle_power"]
            .as_str()
            .unwrap()
            .starts_with("configured: 10 W"),
        "{doc}"
    );
    let idle_j = u(&doc, "idle_uj") as f64 / 1e6;
    // The measured span: the package's energy over its mean power (the
    // intervals' count would miss the ticks a busy host merges).
    let package = doc["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == "package")
        .expect("a package domain");
    let span_s = package["energy_j"].as_f64().unwrap() / package["mean_power_w"].as_f64().unwrap();
    let truth = 10.0 * span_s;
    // Never more than the configured watts over the span; less only where an
    // interval's energy was below them (an interval's idle part is at most its
    // energy: a counter that did not move in an interval, as an emulator read
    // late on a busy host does, lends it none), so at least half here.
    assert!(
        idle_j <= 1.05 * truth + 0.05 && idle_j >= 0.5 * truth,
        "idle part {idle_j} J against 10 W over {span_s} s"
    );
    let lines = crate::profile::folded(&out);
    assert_eq!(
        lines.iter().map(|l| l.1).sum::<u64>(),
        u(&doc, "package_uj")
    );
    // A bad value is refused before anything runs.
    let o = common::quietwatt(m.root(), &["profile", "--idle-watts", "hot", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("idle power in watts"),
        "{}",
        common::stderr(&o)
    );
}

/// `-o` on a filesystem too small for the flame graph: exit 74 naming the path,
/// the full disk and the fix; the summary is still printed (the figures were
/// measured); nothing cut is left at the path, and a file already there is
/// unchanged.
#[test]
fn a_full_disk_leaves_the_output_whole_or_untouched_and_the_summary_printed() {
    let dir = tempfile::tempdir().unwrap();
    let m = common::mount(quietwatt_emulator::EmulatorConfig::default());
    let exe = build(dir.path(), true);
    let small = common::SmallFs::new("16k");
    let out = small.path().join("p.svg");
    std::fs::write(&out, "an earlier profile\n").unwrap();
    let o = common::quietwatt(
        m.root(),
        &[
            "profile",
            "-o",
            out.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
        ],
    );
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(74), "{err}");
    for part in [
        "disk is full",
        "p.svg",
        "Free space",
        "top functions by self energy",
    ] {
        assert!(err.contains(part), "no {part:?} in:\n{err}");
    }
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "an earlier profile\n"
    );
    let left: Vec<_> = std::fs::read_dir(small.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["p.svg"], "a temporary file was left behind");
    assert!(!err.contains("wrote "), "{err}");
}

/// `quietwatt profile` as an unprivileged user (`nobody`), against an emulator
/// whose counters everyone may read, so that only perf_event's permission is
/// in question. What it may do depends on this machine's
/// `kernel.perf_event_paranoid`, read here as the independent answer: the whole
/// machine (`-a`) needs it at most 0, a command's kernel stacks at most 1, its
/// user stacks (`--user-only`) at most 2. Each refusal exits 69 naming the
/// sysctl and CAP_PERFMON; each allowed profile succeeds.
#[test]
fn an_unprivileged_user_is_refused_what_perf_event_paranoid_forbids_with_the_fix() {
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .expect("perf_event_paranoid")
        .trim()
        .parse()
        .unwrap();
    let m = common::mount(quietwatt_emulator::EmulatorConfig {
        enforce_permissions: false,
        ..Default::default()
    });
    // The binary and a writable directory where nobody can reach them.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("quietwatt");
    std::fs::copy(env!("CARGO_BIN_EXE_quietwatt"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for (p, mode) in [(dir.path(), 0o777), (bin.as_path(), 0o755)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let out = dir.path().join("p.folded");
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .arg("--root")
            .arg(m.root())
            .args(["profile", "-o", out.to_str().unwrap()])
            .args(args)
            .output()
            .expect("setpriv (util-linux) runs the test as nobody")
    };
    let cases: [(&[&str], i32, &str); 3] = [
        (&["-a", "--duration", "0.2"], 0, "the whole machine"),
        (&["--", "true"], 1, "a command with kernel stacks"),
        (&["--user-only", "--", "true"], 2, "a command's user stacks"),
    ];
    for (args, most, what) in cases {
        let o = as_nobody(args);
        let err = common::stderr(&o);
        eprintln!(
            "perf_event_paranoid {paranoid}, {what}: exit {:?}",
            o.status.code()
        );
        if paranoid <= most {
            assert!(o.status.success(), "{what} at paranoid {paranoid}: {err}");
        } else {
            assert_eq!(
                o.status.code(),
                Some(69),
                "{what} at paranoid {paranoid}: {err}"
            );
            assert!(
                err.contains("perf_event_paranoid") && err.contains("CAP_PERFMON"),
                "{what}: no fix in {err}"
            );
        }
    }
}
