//! A recording across the edges a user meets: a process stopped and continued
//! (`kill -STOP`/`-CONT`), and a disk that fills up. The row that spans a gap says
//! so, and the summary counts exactly the samples the file holds.

use crate::common::*;
use quietwatt_emulator::EmulatorConfig;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The rate of the recordings here.
const HZ: f64 = 100.0;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives for the call.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) },
        0
    );
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill failed");
}

/// One data row of the CSV.
#[derive(Debug, Clone)]
struct Row {
    t_ns: u64,
    domain: String,
    energy_j: f64,
    missed: u64,
    merged: u64,
}

/// The recording's channels (`# channel:` lines) and data rows; panics unless the
/// file ends with a whole line and every row has the header's column count.
fn parse(text: &str) -> (usize, Vec<Row>) {
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "the file ends mid-row: {:?}",
        &text[text.len().saturating_sub(80)..]
    );
    let channels = text.lines().filter(|l| l.starts_with("# channel:")).count();
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().expect("a header line");
    let columns = header.split(',').count();
    assert!(
        header.starts_with("timestamp_ns,socket,domain,energy_j,power_w,missed"),
        "{header}"
    );
    let rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), columns, "malformed row {l:?} under {header:?}");
            Row {
                t_ns: f[0].parse().expect("timestamp_ns"),
                domain: format!("{}/{}", f[1], f[2]),
                energy_j: f[3].parse().expect("energy_j"),
                missed: f[5].parse().expect("missed"),
                merged: f[6].parse().expect("merged"),
            }
        })
        .collect();
    (channels, rows)
}

/// The samples: rows grouped by timestamp, in time order, each checked to hold
/// one row per channel (a sample cut in half is not a sample).
fn samples(channels: usize, rows: &[Row]) -> Vec<(u64, Vec<Row>)> {
    let mut by_t: BTreeMap<u64, Vec<Row>> = BTreeMap::new();
    for r in rows {
        by_t.entry(r.t_ns).or_default().push(r.clone());
    }
    for (t, rs) in &by_t {
        assert_eq!(rs.len(), channels, "sample at {t} has {} rows", rs.len());
        assert!(
            rs.windows(2).all(|w| w[0].missed == w[1].missed),
            "the rows of one sample disagree on missed: {rs:?}"
        );
    }
    by_t.into_iter().collect()
}

/// Waits (at most a minute, however loaded the machine) until `path` holds data rows.
fn wait_for_rows(path: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().filter(|l| !l.starts_with('#')).count() > 5 {
            return;
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("quietwatt ended before recording anything: {st}");
        }
        assert!(Instant::now() < deadline, "no rows after a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends SIGSTOP to `pid` from a real-time thread that keeps CPU 0 busy a few
/// tens of milliseconds around it: a thread of normal priority pinned there (the
/// sampler, `--cpu 0`) is woken by its timer but cannot run meanwhile, so the stop
/// lands where a user's `kill -STOP` lands by chance, between a wake-up and the
/// read it is for. Without the permission for SCHED_FIFO it just sends SIGSTOP.
fn stop_while_cpu0_is_held(pid: u32) {
    std::thread::spawn(move || {
        // SAFETY: plain system calls on this thread, with arguments that live for the call.
        let held = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            let param = libc::sched_param { sched_priority: 1 };
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0
                && libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
        };
        let spin = |d: Duration| {
            let t0 = Instant::now();
            while held && t0.elapsed() < d {
                std::hint::spin_loop();
            }
        };
        // A few periods into the hold the sampler's wake-up has come and waits.
        spin(Duration::from_millis(25));
        // SAFETY: kill(2) on the test's own child.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
        // Bounded: a real-time thread must not hold a CPU for long.
        spin(Duration::from_millis(15));
    })
    .join()
    .unwrap();
}

#[test]
fn the_row_whose_energy_spans_a_sigstop_reports_its_missed_deadlines() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gap.csv");
    let mut child = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(m.root())
        .args(["record", "-m", "powercap", "--freq", &HZ.to_string()])
        .args(["--cpu", "0", "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn quietwatt record");
    wait_for_rows(&out, &mut child);
    stop_while_cpu0_is_held(child.id());
    std::thread::sleep(Duration::from_millis(1500));
    // No read can start between the stop taking effect and this moment.
    let cont_ns = monotonic_ns();
    signal(&child, libc::SIGCONT);
    // A few samples after the gap, then a clean stop.
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, libc::SIGINT);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let (channels, rows) = parse(&std::fs::read_to_string(&out).unwrap());
    assert!(channels >= 1);
    let samples = samples(channels, &rows);
    let period_ns = 1e9 / HZ;
    // The first read after SIGCONT: its predecessor came before the stop.
    let i = samples
        .iter()
        .position(|(t, _)| *t >= cont_ns)
        .expect("no sample after SIGCONT");
    assert!(i > 0, "no sample before the stop");
    let interval = |k: usize| samples[k].0 - samples[k - 1].0;
    let missed = |k: usize| samples[k].1[0].missed;
    let span = interval(i);
    // The rows around the gap, for the messages: (timestamp, interval, missed, energy).
    let around: Vec<_> = (i.saturating_sub(2).max(1)..(i + 3).min(samples.len()))
        .map(|k| {
            (
                samples[k].0,
                interval(k),
                missed(k),
                samples[k].1[0].energy_j,
            )
        })
        .collect();
    assert!(
        span > 1_000_000_000,
        "the first sample after a 1.5 s stop spans only {span} ns: {around:?}"
    );
    // That row reports (most of) the deadlines in its span: none was served.
    assert!(
        missed(i) as f64 >= span as f64 / period_ns / 2.0,
        "the row spanning the {:.3} s gap reports {} missed deadlines: {around:?}",
        span as f64 / 1e9,
        missed(i)
    );
    // No row reports more deadlines than its own span held (plus one served late
    // and one at its start, for it and each read merged into it): the gap's count
    // is not pushed onto a later row.
    for (prev, (t, rows)) in samples.iter().zip(&samples[1..]) {
        let span = t - prev.0;
        let bound = (span as f64 / period_ns) as u64 + 2 * (rows[0].merged + 1);
        assert!(
            rows[0].missed <= bound,
            "the row at {t} spans {span} ns (at most {bound} deadlines) but reports {} missed; \
             around the gap: {around:?}",
            rows[0].missed
        );
    }
    // The gap's energy is on the same row as its span: its mean power is that of
    // the rest of the recording (the emulator's power is constant).
    let power = |k: usize| samples[k].1[0].energy_j / (interval(k) as f64 / 1e9);
    let total_j: f64 = (1..samples.len()).map(|k| samples[k].1[0].energy_j).sum();
    let mean = total_j / ((samples.last().unwrap().0 - samples[0].0) as f64 / 1e9);
    assert!(
        power(i) > mean / 2.0 && power(i) < mean * 2.0,
        "{} over the gap: {} W against {mean} W on average: {around:?}",
        samples[i].1[0].domain,
        power(i)
    );
}

/// Records at 2 kHz into a 64 KiB filesystem until it is full; returns quietwatt's
/// output and the file's text.
fn record_until_full(m: &Mounted, format: &str, json: bool) -> (std::process::Output, String) {
    let fs = SmallFs::new("64k");
    let out = fs.path().join(format!("energy.{format}"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quietwatt"));
    cmd.arg("--root").arg(m.root()).args([
        "record",
        "-m",
        "powercap",
        "--freq",
        "2000",
        "--duration",
        "120",
        "--format",
        format,
        "-o",
    ]);
    cmd.arg(&out);
    if json {
        cmd.arg("--json");
    }
    let o = cmd.output().expect("run quietwatt record");
    let text = std::fs::read_to_string(&out).expect("the output file");
    // The disk did fill: the file holds most of it.
    assert!(
        text.len() > 32 * 1024,
        "{} bytes: {}",
        text.len(),
        stderr(&o)
    );
    (o, text)
}

/// Checks the error of a recording ended by a full disk, names the file and the fix.
fn assert_full_disk_error(message: &str, file: &str) {
    for part in ["disk is full", file, "Free space", "-o"] {
        assert!(message.contains(part), "no {part:?} in: {message}");
    }
}

/// The number in "N samples written" of the text summary.
fn summary_samples(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains("samples written"))
        .unwrap_or_else(|| panic!("no sample count in: {stderr}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn after_a_full_disk_the_summary_counts_the_whole_samples_the_csv_holds() {
    let m = mount(EmulatorConfig::default());
    let (o, text) = record_until_full(&m, "csv", false);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(74), "{err}");
    assert_full_disk_error(&err, "energy.csv");
    let (channels, rows) = parse(&text);
    let samples = samples(channels, &rows);
    assert!(!samples.is_empty());
    assert_eq!(
        summary_samples(&err),
        samples.len() as u64,
        "the summary's count against the file's: {err}"
    );
    // The overhead line counts the same samples as written.
    assert!(
        err.contains(&format!("({} written)", samples.len())),
        "{err}"
    );
    // And the summary says its energy covers more than the file.
    assert!(
        err.contains("the output holds") && err.contains("cover the whole measurement"),
        "{err}"
    );
}

#[test]
fn after_a_full_disk_the_json_summary_counts_the_whole_samples_the_file_holds() {
    let m = mount(EmulatorConfig::default());
    for format in ["csv", "jsonl"] {
        let (o, text) = record_until_full(&m, format, true);
        assert_eq!(o.status.code(), Some(74), "{}", stderr(&o));
        let name = format!("energy.{format}");
        assert_full_disk_error(&stderr(&o), &name);
        let summary: serde_json::Value =
            serde_json::from_str(stdout(&o).trim()).expect("one JSON summary on stdout");
        assert_full_disk_error(summary["error"].as_str().expect("an error"), &name);
        let (channels, rows) = if format == "csv" {
            parse(&text)
        } else {
            parse_jsonl(&text)
        };
        let held = samples(channels, &rows).len() as u64;
        assert!(held > 0);
        assert_eq!(
            summary["samples"].as_u64(),
            Some(held),
            "{format}: {summary}"
        );
        assert_eq!(
            summary["overhead"]["written"].as_u64(),
            Some(held),
            "{format}: {summary}"
        );
        // The energy the file holds, per domain, is what the summary says it
        // holds; before, only the whole measurement's (1.50 s against the file's
        // 1.23 s) was given.
        let holds = &summary["output_holds"];
        assert_eq!(holds["samples"].as_u64(), Some(held), "{summary}");
        let rows: Vec<Row> = samples(channels, &rows)
            .into_iter()
            .flat_map(|(_, r)| r)
            .collect();
        for d in holds["domains"].as_array().expect("output_holds.domains") {
            let name = d["domain"].as_str().unwrap();
            let id = format!("{}/{name}", d["socket"]);
            let in_file: f64 = rows
                .iter()
                .filter(|r| r.domain == id)
                .map(|r| r.energy_j)
                .sum();
            let said = d["energy_j"].as_f64().unwrap();
            // Rows are printed to the µJ.
            assert!(
                (in_file - said).abs() <= 1e-6 * held as f64 + 1e-9,
                "{format} {name}: file {in_file} J, summary says {said} J"
            );
            let whole = summary["domains"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["domain"] == name)
                .unwrap()["energy_j"]
                .as_f64()
                .unwrap();
            assert!(said <= whole + 1e-9, "{name}: {said} J held of {whole} J");
        }
        let (held_s, whole_s) = (
            holds["duration_s"].as_f64().unwrap(),
            summary["duration_s"].as_f64().unwrap(),
        );
        assert!(
            held_s > 0.0 && held_s <= whole_s,
            "{held_s} s of {whole_s} s"
        );
        assert!(
            summary["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w.as_str().unwrap().contains("the output holds")),
            "{summary}"
        );
    }
}

/// The channels and rows of a JSON Lines recording; panics unless every line is
/// a whole JSON object (the first the metadata).
fn parse_jsonl(text: &str) -> (usize, Vec<Row>) {
    assert!(text.ends_with('\n'), "the file ends mid-line");
    let mut lines = text.lines();
    let meta: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let channels = meta["metadata"]["channels"]
        .as_array()
        .expect("the channels in the metadata")
        .len();
    let rows = lines
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}"));
            let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("no {k}: {l}"));
            Row {
                t_ns: n("timestamp_ns"),
                domain: format!(
                    "{}/{}",
                    n("socket"),
                    v["domain"].as_str().unwrap_or_default()
                ),
                energy_j: v["energy_j"].as_f64().expect("energy_j"),
                missed: n("missed"),
                merged: n("merged"),
            }
        })
        .collect();
    (channels, rows)
}
