//! A recording ends cleanly however it ends: Ctrl-C, SIGTERM, a starved sampler, a
//! full filesystem. The file stays complete, and its energy equals what the
//! emulator served over the recorded span.

use crate::common::*;
use quietwatt::Domain;
use quietwatt_emulator::{EmulatorConfig, Fault, FaultKind};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn spawn_record(root: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(root)
        .args(["record", "-m", "powercap", "--freq", "200", "-o"])
        .arg(out)
        .args(extra)
        .stdout(if extra.contains(&"--json") {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn quietwatt record")
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill failed");
}

/// Every data row parses; returns (package energy sum, rows with missed > 0).
fn parse_package(text: &str) -> (f64, usize) {
    let (sum, gaps, _) = parse_package_rows(text);
    (sum, gaps)
}

/// [`parse_package`], and the package rows' timestamps.
fn parse_package_rows(text: &str) -> (f64, usize, Vec<u64>) {
    assert!(text.ends_with('\n'), "the file ends mid-row");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().expect("header");
    assert!(
        header.starts_with("timestamp_ns,socket,domain,energy_j,power_w,missed"),
        "{header}"
    );
    let (mut sum, mut gaps, mut rows) = (0.0, 0, 0);
    let mut times = Vec::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 9, "malformed row {l:?}");
        let e: f64 = f[3].parse().expect("energy_j");
        let missed: u64 = f[5].parse().expect("missed");
        if f[1] == "0" && f[2] == "package" {
            sum += e;
            rows += 1;
            times.push(f[0].parse().expect("timestamp_ns"));
            if missed > 0 {
                gaps += 1;
            }
        }
    }
    assert!(rows > 20, "only {rows} package rows");
    (sum, gaps, times)
}

fn stops_cleanly_on(sig: i32) {
    let m = mount(EmulatorConfig::default().with_counter_bits(16).with_esu(16));
    let out = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let child = spawn_record(m.root(), &out, &[]);
    std::thread::sleep(Duration::from_millis(900));
    signal(&child, sig);
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (sum, gaps, times) = parse_package_rows(&std::fs::read_to_string(&out).unwrap());
    let served = m.served_powercap(0, Domain::Package);
    assert!(
        served > 10.0,
        "fewer than 10 wraps of the 1 J counter: {served} J"
    );
    // The 1 J counter turns every 50 ms at 20 W: a reader the host stalls for
    // longer (a loaded 2-CPU machine can) cannot see the turns in between, and no
    // reader can. Such a gap is a row with missed deadlines; each can hide whole
    // joules, never a fraction, and never without that mark and the warning.
    let long: u64 = times
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]) / 50_000_000)
        .sum();
    let hidden = ((served - sum) / 1.0).round();
    assert!(
        (sum + hidden - served).abs() <= tolerance(served, 20.0)
            && hidden >= 0.0
            && hidden as u64 <= long
            && (hidden == 0.0 || gaps > 0),
        "file sums to {sum} J, emulator served {served} J ({gaps} rows after missed deadlines, {long} turns' worth of long gaps)"
    );
    if hidden > 0.0 {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("whole counter ranges"), "{err}");
    }
}

#[test]
fn ctrl_c_leaves_a_complete_file_with_all_the_energy() {
    stops_cleanly_on(libc::SIGINT);
}

#[test]
fn sigterm_leaves_a_complete_file_with_all_the_energy() {
    stops_cleanly_on(libc::SIGTERM);
}

#[test]
fn a_starved_sampler_counts_missed_deadlines_and_keeps_the_energy_of_the_gap() {
    // 32-bit counters here: a 300 ms stop must not hide a wrap (a 1 J counter at
    // 20 W would wrap 6 times in the gap, which no reader can see).
    let m = mount(EmulatorConfig::default());
    let out = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let child = spawn_record(m.root(), &out, &["--duration", "1.2"]);
    std::thread::sleep(Duration::from_millis(400));
    signal(&child, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, libc::SIGCONT);
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (sum, gaps) = parse_package(&std::fs::read_to_string(&out).unwrap());
    assert!(
        gaps >= 1,
        "a 300 ms stop at 200 Hz left no row marked with missed deadlines"
    );
    let served = m.served_powercap(0, Domain::Package);
    assert!(
        (sum - served).abs() <= tolerance(served, 20.0),
        "file sums to {sum} J, emulator served {served} J: the gap's energy was lost"
    );
    // 32-bit counters turn in hours: no warning about hidden turns.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("whole counter ranges"), "{err}");
}

#[test]
fn a_stop_longer_than_a_counter_turn_is_said_to_hide_whole_ranges() {
    // A 1 J counter at 20 W turns every 50 ms: a 300 ms stop hides about six
    // turns, which no reader can see. Before, the rows and the totals were short
    // by 6 J and nothing said so.
    let m = mount(EmulatorConfig::default().with_counter_bits(16).with_esu(16));
    let out = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let child = spawn_record(m.root(), &out, &["--duration", "1.2", "--json"]);
    std::thread::sleep(Duration::from_millis(400));
    signal(&child, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, libc::SIGCONT);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("whole counter ranges"), "{err}");
    // In the JSON summary's warnings too.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the JSON summary");
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("whole counter ranges")),
        "{v}"
    );
}

#[test]
fn a_full_filesystem_ends_with_a_clear_error_and_a_valid_file() {
    let m = mount(EmulatorConfig::default());
    let fs = SmallFs::new("64k");
    let out = fs.path().join("energy.csv");
    let child = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(m.root())
        .args([
            "record",
            "-m",
            "powercap",
            "--freq",
            "2000",
            "--duration",
            "20",
            "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(74), "{err}");
    assert!(
        err.contains("No space left") && err.contains("energy.csv"),
        "{err}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let (sum, _) = parse_package(&text);
    assert!(sum > 0.0);
}

#[test]
fn transient_busy_reads_are_retried_and_the_energy_stays_whole() {
    let m = mount(EmulatorConfig::default());
    let out = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let child = spawn_record(m.root(), &out, &["--duration", "1.2", "--json"]);
    std::thread::sleep(Duration::from_millis(400));
    // Six EBUSY reads: a tick's four tries fail (skipped), the next tick's third reads.
    let busy = Fault::new(FaultKind::Busy, 0, Domain::Package).reads(6);
    m.emulator.inject(busy).expect("inject the busy fault");
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the JSON summary");
    let overhead = &v["overhead"];
    assert_eq!(overhead["read_retries"], 5, "{overhead}");
    assert_eq!(overhead["skipped_ticks"], 1, "{overhead}");
    let (sum, gaps) = parse_package(&std::fs::read_to_string(&out).unwrap());
    assert!(gaps >= 1, "the skipped tick is marked in the row after it");
    let served = m.served_powercap(0, Domain::Package);
    assert!(
        (sum - served).abs() <= tolerance(served, 20.0),
        "file sums to {sum} J, emulator served {served} J"
    );
}

#[test]
fn a_lasting_busy_counter_stops_the_recording_with_a_clear_error() {
    let m = mount(EmulatorConfig::default());
    let out = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let child = spawn_record(m.root(), &out, &["--duration", "20"]);
    std::thread::sleep(Duration::from_millis(400));
    let busy = Fault::new(FaultKind::Busy, 0, Domain::Package).reads(u32::MAX);
    m.emulator.inject(busy).expect("inject the busy fault");
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("energy_uj") && err.to_lowercase().contains("busy"),
        "{err}"
    );
    // What was read before the error is kept whole.
    let (sum, _) = parse_package(&std::fs::read_to_string(&out).unwrap());
    assert!(sum > 0.0);
}
