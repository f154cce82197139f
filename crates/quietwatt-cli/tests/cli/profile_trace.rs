//! `quietwatt profile --record FILE.csv` then `quietwatt trace FILE.csv`: a
//! profile on the power timeline in Perfetto. A compiled spinning program is
//! profiled under the emulator; what a user relies on: the trace is valid Chrome
//! JSON, it has the package power track, the stack samples are slices on their
//! CPUs' tracks named by their leaf (the spinning function), inside the energy
//! rows' time span, and their µJ add up to the profile's attributed energy.

use crate::common;
use crate::profile::{profiled, u};
use quietwatt_events::trace::chrome::{validate, PID_ENERGY, PID_STACKS};
use serde_json::Value;
use std::path::Path;

const SPIN_RS: &str = r#"
use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn quietwatt_trace_spin(n: u64) -> u64 {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    for i in 0..n {
        x = x.rotate_left(7) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d);
        x = black_box(x);
    }
    x
}

fn main() {
    let deadline = Instant::now() + Duration::from_millis(400);
    let mut acc = 0;
    while Instant::now() < deadline {
        acc ^= quietwatt_trace_spin(200_000);
    }
    println!("{acc}");
}
"#;

/// Builds the spinning program with frame pointers, in `dir`.
fn build_spin(dir: &Path) -> std::path::PathBuf {
    let flags = ["-C", "opt-level=1", "-C", "force-frame-pointers=yes"];
    common::build_rust(dir, "spin", "quietwatt-trace-spin", SPIN_RS, &flags)
}

#[test]
fn a_recorded_profile_puts_its_samples_on_the_power_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_spin(dir.path());
    let record = dir.path().join("spin.csv");
    let stacks = dir.path().join("spin.stacks.csv");
    let trace = dir.path().join("spin.json");
    let m = common::mount_following();
    let s = profiled(
        m.root(),
        &[
            "-o",
            dir.path().join("spin.folded").to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
        ],
    );
    assert_eq!(s["emulated"], true);
    assert!(
        stacks.exists(),
        "no stacks file beside {}",
        record.display()
    );

    let o = common::quietwatt(
        m.root(),
        &[
            "trace",
            record.to_str().unwrap(),
            "-o",
            trace.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "trace failed:\n{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("spin.stacks.csv"),
        "trace does not say it read the stacks file: {}",
        common::stderr(&o)
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(validate(&json), Vec::<String>::new(), "the trace's format");
    let events = json["traceEvents"].as_array().unwrap();

    // The package power track and its time span.
    let power: Vec<f64> = events
        .iter()
        .filter(|e| e["pid"] == PID_ENERGY && e["ph"] == "C" && e["name"] == "power 0/package")
        .map(|e| e["ts"].as_f64().unwrap())
        .collect();
    assert!(power.len() > 50, "{} power counter events", power.len());
    let (from, to) = (power[0], *power.last().unwrap());

    let slices: Vec<&Value> = events
        .iter()
        .filter(|e| e["pid"] == PID_STACKS && e["ph"] == "X")
        .collect();
    assert!(!slices.is_empty(), "no stack sample slices");
    let uj = |e: &Value| e["args"]["energy_uj"].as_u64().unwrap();
    let total: u64 = slices.iter().map(|e| uj(e)).sum();
    assert_eq!(
        total,
        u(&s, "attributed_uj"),
        "the slices' µJ against the profile's attributed energy"
    );
    let spin: Vec<&&Value> = slices
        .iter()
        .filter(|e| e["name"].as_str().unwrap().contains("quietwatt_trace_spin"))
        .collect();
    let spin_uj: u64 = spin.iter().map(|e| uj(e)).sum();
    println!(
        "trace: {} slices, {} of them quietwatt_trace_spin with {spin_uj} of {total} µJ; power {from:.0}..{to:.0} µs",
        slices.len(),
        spin.len()
    );
    assert!(
        spin_uj as f64 >= 0.5 * total as f64,
        "the spinning function's slices have {spin_uj} of {total} µJ"
    );
    for e in slices.iter().filter(|e| uj(e) > 0) {
        // The slice ends at its sample, which lies in an energy interval (its start
        // may reach back one period before the first).
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(
            ts + dur >= from - 1e-3 && ts + dur <= to + 1e-3 && dur > 0.0,
            "a sample with energy outside the power track's {from}..{to} µs: {e}"
        );
        let stack = e["args"]["stack"].as_str().unwrap();
        assert!(
            stack.ends_with(e["name"].as_str().unwrap()),
            "a slice is named by its stack's leaf: {e}"
        );
    }
}

/// `--record` needs a `.csv` name, and neither it nor its stacks file may be
/// the flame graph: refused with the fix, before anything runs or is written.
#[test]
fn a_record_path_that_is_not_csv_or_is_the_output_is_refused_first() {
    let dir = tempfile::tempdir().unwrap();
    let m = common::mount(quietwatt_emulator::EmulatorConfig::default());
    let marker = dir.path().join("ran");
    let run = format!("touch {}", marker.display());
    let json = dir.path().join("t.json");
    let o = common::quietwatt(
        m.root(),
        &[
            "profile",
            "--record",
            json.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &run,
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("name it FILE.csv"),
        "{}",
        common::stderr(&o)
    );
    let same = dir.path().join("p.stacks.csv");
    let o = common::quietwatt(
        m.root(),
        &[
            "profile",
            "-o",
            same.to_str().unwrap(),
            "--format",
            "folded",
            "--record",
            dir.path().join("p.csv").to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &run,
        ],
    );
    assert!(!o.status.success(), "the stacks file would overwrite -o");
    assert!(!marker.exists(), "the command ran before the refusal");
    assert!(!json.exists() && !dir.path().join("p.csv").exists());
}
