//! `record -o FILE.parquet`: the file reads back whole however the recording ends
//! (Ctrl-C, SIGTERM, SIGKILL, a full disk), with the energy the emulator served.

use crate::common::*;
use quietwatt::sink::parquet::{read, Recorded, Row};
use quietwatt::Domain;
use quietwatt_emulator::EmulatorConfig;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn spawn_record(root: &Path, out: &Path, extra: &[&str]) -> Child {
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

/// The samples of a recording: rows grouped by timestamp in time order, each
/// checked to hold one row per channel of the metadata, in the same order every
/// time; and the rows checked to be in time order in the file.
fn samples(r: &Recorded) -> Vec<(u64, Vec<Row>)> {
    let channels = r.metadata["channels"]
        .as_array()
        .expect("the channels in the metadata")
        .len();
    assert!(channels >= 1);
    assert!(
        r.rows.windows(2).all(|w| w[0].t_ns <= w[1].t_ns),
        "timestamps go back"
    );
    let mut by_t: BTreeMap<u64, Vec<Row>> = BTreeMap::new();
    for row in &r.rows {
        by_t.entry(row.t_ns).or_default().push(row.clone());
    }
    let first: Vec<String> = by_t.values().next().map_or_else(Vec::new, |rs| {
        rs.iter()
            .map(|r| format!("{}/{}", r.socket, r.domain))
            .collect()
    });
    for (t, rs) in &by_t {
        assert_eq!(
            rs.len(),
            channels,
            "the sample at {t} has {} rows",
            rs.len()
        );
        let names: Vec<String> = rs
            .iter()
            .map(|r| format!("{}/{}", r.socket, r.domain))
            .collect();
        assert_eq!(names, first, "the sample at {t}");
    }
    by_t.into_iter().collect()
}

/// The package rows' energy, and their mean power: the energy over the time from
/// the read before the first row (each row's interval is its energy over its
/// power) to the last row.
fn package_power(r: &Recorded) -> (f64, f64) {
    let rows: Vec<&Row> = r
        .rows
        .iter()
        .filter(|r| r.socket == 0 && r.domain == "package")
        .collect();
    assert!(rows.len() > 20, "only {} package rows", rows.len());
    let sum: f64 = rows.iter().map(|r| r.energy_j).sum();
    let first = rows[0];
    let start_ns = first.t_ns as f64 - first.energy_j / first.power_w * 1e9;
    let span_s = (rows[rows.len() - 1].t_ns as f64 - start_ns) / 1e9;
    (sum, sum / span_s)
}

fn stops_cleanly_on(sig: i32) {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("energy.parquet");
    let child = spawn_record(m.root(), &out, &[]);
    std::thread::sleep(Duration::from_millis(900));
    signal(&child, sig);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = read(&out).expect("a readable Parquet file");
    let samples = samples(&r);
    // Every sample the summary counts is in the file: the rows in memory at the
    // signal went into a last row group.
    let line = stderr(&o)
        .lines()
        .find(|l| l.contains("samples written"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no sample count in: {}", stderr(&o)));
    assert!(
        line.trim_start()
            .starts_with(&format!("{} samples", samples.len())),
        "{line} against {} in the file",
        samples.len()
    );
    let (sum, _) = package_power(&r);
    let served = m.served_powercap(0, Domain::Package);
    assert!(
        (sum - served).abs() <= tolerance(served, 20.0),
        "file sums to {sum} J, emulator served {served} J"
    );
}

#[test]
fn ctrl_c_leaves_a_complete_parquet_file_with_all_the_energy() {
    stops_cleanly_on(libc::SIGINT);
}

#[test]
fn sigterm_leaves_a_complete_parquet_file_with_all_the_energy() {
    stops_cleanly_on(libc::SIGTERM);
}

/// Waits until every thread of `pid` is stopped (state `T`), at most a minute.
fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
        let all = tasks.flatten().all(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // The state follows the command's closing parenthesis.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T'))
        });
        if all {
            return;
        }
        assert!(Instant::now() < deadline, "quietwatt did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigkill_leaves_every_row_group_written_before_it_readable() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("energy.parquet");
    let mut child = spawn_record(m.root(), &out, &[]);
    // Until the file holds three row groups (each one written with its footer; a
    // read that overlaps a write may fail, and is tried again).
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        if let Ok(r) = read(&out) {
            if r.row_groups >= 3 {
                break r;
            }
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("quietwatt ended before three row groups: {st}");
        }
        assert!(Instant::now() < deadline, "no third row group in a minute");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Stopped first, so that the kill cannot land inside the write of a row group
    // (the one window the format leaves: microseconds per row group, documented);
    // a stop takes effect only once the write has returned.
    signal(&child, libc::SIGSTOP);
    wait_stopped(child.id());
    signal(&child, libc::SIGKILL);
    let st = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGKILL)
    );
    let r = read(&out).expect("the killed recording reads as Parquet");
    assert!(r.row_groups >= seen.row_groups, "row groups were lost");
    assert_eq!(r.rows[..seen.rows.len()], seen.rows[..], "rows changed");
    let samples = samples(&r);
    assert!(samples.len() >= 20, "{} samples", samples.len());
    assert_eq!(r.metadata["schema_version"], 1);
    assert_eq!(r.metadata["mechanism"], "powercap");
    // The energy of the rows left adds up: their mean power is the emulator's over
    // the whole run (its power is constant), within 1 % (the timestamps are taken
    // beside each read, the emulator's clock inside it).
    let (_, watts) = package_power(&r);
    let served = m.served_record(quietwatt_emulator::Mechanism::Powercap, 0, Domain::Package);
    let truth = served.energy().0 / (served.last_t - served.first_t).as_secs_f64();
    assert!(
        (watts - truth).abs() <= truth * 0.01,
        "{watts} W in the file, {truth} W served"
    );
}

#[test]
fn a_full_disk_keeps_the_row_groups_that_fit_and_the_summary_counts_them() {
    let m = mount(EmulatorConfig::default());
    // Room for a few row groups at 2 kHz (about 50 KB each at the start).
    let fs = SmallFs::new("512k");
    let out = fs.path().join("energy.parquet");
    let o = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(m.root())
        .args([
            "record",
            "-m",
            "powercap",
            "--freq",
            "2000",
            "--duration",
            "120",
        ])
        .args(["--json", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(74), "{err}");
    for part in ["disk is full", "energy.parquet", "Free space", "-o"] {
        assert!(err.contains(part), "no {part:?} in: {err}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(stdout(&o).trim()).expect("one JSON summary on stdout");
    assert_eq!(summary["format"], "parquet");
    let r = read(&out).expect("the file left by a full disk reads as Parquet");
    let held = samples(&r).len() as u64;
    assert!(held > 0, "nothing kept: {err}");
    assert_eq!(summary["samples"].as_u64(), Some(held), "{summary}");
    assert_eq!(
        summary["overhead"]["written"].as_u64(),
        Some(held),
        "{summary}"
    );
    // The disk did fill: what failed did not fit.
    assert!(std::fs::metadata(&out).unwrap().len() > 128 * 1024);
}

#[test]
fn the_extension_or_format_chooses_parquet_and_an_existing_file_is_replaced() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("energy.parquet");
    // Longer than the recording: none of it may be left at the end.
    std::fs::write(&out, vec![b'x'; 4 << 20]).unwrap();
    let o = quietwatt(
        m.root(),
        &["record", "--duration", "0.3", "-o", out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("(parquet)"), "{}", stderr(&o));
    let r = read(&out).expect("Parquet");
    assert!(samples(&r).len() > 5);
    assert!(std::fs::metadata(&out).unwrap().len() < 1 << 20);
    // --format wins over the name.
    let named = dir.path().join("energy.bin.csv");
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "--format",
            "parquet",
            "--duration",
            "0.2",
            "-o",
            named.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(samples(&read(&named).expect("Parquet")).len() > 5);
    // The trace reads it as it reads a CSV.
    let trace = dir.path().join("trace.json");
    let o = quietwatt(
        m.root(),
        &[
            "trace",
            out.to_str().unwrap(),
            "-o",
            trace.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let counters = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
        .count();
    assert!(counters > 5, "{counters} counter events");
}

#[test]
fn a_device_or_a_pipe_is_refused_with_what_to_do() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "--format",
            "parquet",
            "--duration",
            "0.1",
            "-o",
            "/dev/null",
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(74), "{err}");
    assert!(
        err.contains("/dev/null") && err.contains("regular file"),
        "{err}"
    );
    assert!(err.contains("CSV or JSON Lines"), "{err}");
    // A FIFO with no reader: refused at once, not a hang in open().
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out.parquet");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path in our own temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = quietwatt(
        m.root(),
        &["record", "--duration", "0.1", "-o", fifo.to_str().unwrap()],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(74), "{err}");
    assert!(
        err.contains("is a pipe") && err.contains("regular file"),
        "{err}"
    );
}
