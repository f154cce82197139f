//! A recording ends cleanly however it ends: Ctrl-C, SIGTERM, a starved sampler, a
//! full filesystem. The file stays complete, and its energy equals what the
//! emulator served over the recorded span.

mod common;

use common::*;
use quietwatt::Domain;
use quietwatt_emulator::EmulatorConfig;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn spawn_record(root: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(root)
        .args(["record", "-m", "powercap", "--freq", "200", "-o"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
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
    assert!(text.ends_with('\n'), "the file ends mid-row");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().expect("header");
    assert!(
        header.starts_with("timestamp_ns,socket,domain,energy_j,power_w,missed"),
        "{header}"
    );
    let (mut sum, mut gaps, mut rows) = (0.0, 0, 0);
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 9, "malformed row {l:?}");
        let e: f64 = f[3].parse().expect("energy_j");
        let missed: u64 = f[5].parse().expect("missed");
        if f[1] == "0" && f[2] == "package" {
            sum += e;
            rows += 1;
            if missed > 0 {
                gaps += 1;
            }
        }
    }
    assert!(rows > 20, "only {rows} package rows");
    (sum, gaps)
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
    let (sum, _) = parse_package(&std::fs::read_to_string(&out).unwrap());
    let served = m.served_powercap(0, Domain::Package);
    assert!(
        served > 10.0,
        "fewer than 10 wraps of the 1 J counter: {served} J"
    );
    assert!(
        (sum - served).abs() <= tolerance(served, 20.0),
        "file sums to {sum} J, emulator served {served} J"
    );
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
