//! `record --freq auto` against the emulator: the rate falls while the machine
//! idles, rises to the maximum as soon as every CPU is busy, is written on every
//! row, and the energy of the whole recording is still the emulator's.
//!
//! The emulator serves a `/proc/stat` whose load follows a schedule (idle, then
//! every CPU busy), so the test sees the same load on an idle laptop and on a CI
//! machine that other jobs keep busy: the host's own load never enters it.

use crate::common::*;
use quietwatt::meter::monotonic_ns;
use quietwatt::Domain;
use quietwatt_emulator::EmulatorConfig;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Seconds of idle before the load starts. The rate starts at the maximum and may
/// fall only after each 2-s hold, to what the mean load of the hold asks; this
/// leaves time for two holds and about a second at the low rate.
const IDLE_S: f64 = 5.5;
/// Seconds of load, to the end of the recording.
const BUSY_S: f64 = 1.8;

/// (timestamp_ns, freq_hz, energy_j) of every package row.
fn package_rows(text: &str) -> Vec<(u64, f64, f64)> {
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().expect("a header");
    assert!(header.ends_with(",freq_hz,counter"), "{header}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 9, "malformed row {l:?}");
            (f, l)
        })
        .filter(|(f, _)| f[1] == "0" && f[2] == "package")
        .map(|(f, l)| {
            let p = |i: usize| f[i].parse::<f64>().unwrap_or_else(|_| panic!("{l:?}"));
            (f[0].parse().unwrap(), p(7), p(3))
        })
        .collect()
}

#[test]
fn auto_rate_is_low_at_idle_reaches_the_maximum_under_load_and_keeps_the_energy() {
    let load_at = Duration::from_secs_f64(IDLE_S);
    let m = mount(EmulatorConfig::default().with_load(&[(Duration::ZERO, 0.0), (load_at, 1.0)]));
    // The load step on this process's CLOCK_MONOTONIC (the rows' clock).
    let load_start_ns =
        monotonic_ns() - m.emulator.elapsed().as_nanos() as u64 + load_at.as_nanos() as u64;
    let out = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let total = format!("{}", IDLE_S + BUSY_S);
    let child = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(m.root())
        .args([
            "record", "-m", "powercap", "-d", "package", "--freq", "auto",
        ])
        .args(["--duration", &total, "--json", "-o"])
        .arg(&out)
        .env_remove("QUIETWATT_ROOT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn quietwatt record");
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "record failed: {}", stderr(&o));
    assert!(
        !stderr(&o).contains("is read from this machine's /proc/stat"),
        "the emulated load was not used: {}",
        stderr(&o)
    );

    let rows = package_rows(&std::fs::read_to_string(&out).unwrap());
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    let rates: Vec<f64> = rows.iter().map(|r| r.1).collect();
    assert_eq!(rates[0], 1000.0, "auto starts at the maximum");

    // Idle: after the hold the rate fell, to at most 10 wake-ups a second.
    let idle: Vec<&(u64, f64, f64)> = rows.iter().filter(|r| r.0 < load_start_ns).collect();
    let lowest = idle.iter().map(|r| r.1).fold(f64::MAX, f64::min);
    assert!(
        lowest <= 10.0,
        "the rate never fell below {lowest} Hz while idle"
    );
    // The rows of the idle tail are that far apart: the rate is what was sampled.
    let slow: Vec<&&(u64, f64, f64)> = idle.iter().filter(|r| r.1 <= 10.0).collect();
    assert!(slow.len() >= 2, "{slow:?}");
    let gap = slow[slow.len() - 1].0 - slow[slow.len() - 2].0;
    assert!(gap >= 90_000_000, "rows {gap} ns apart at <= 10 Hz");

    // Load: the maximum soon after the load step (a tick at 5 Hz is 200 ms; the
    // bound is generous because a loaded host can hold the sampler back), and kept
    // while the load lasts.
    let busy: Vec<&(u64, f64, f64)> = rows.iter().filter(|r| r.0 >= load_start_ns).collect();
    let first_max = busy
        .iter()
        .find(|r| r.1 >= 1000.0)
        .unwrap_or_else(|| panic!("the rate never reached 1000 Hz under load: {busy:?}"));
    let rise_ms = (first_max.0 - load_start_ns) as f64 / 1e6;
    assert!(rise_ms < 1500.0, "rose {rise_ms} ms after the load step");
    assert!(busy
        .iter()
        .skip_while(|r| r.1 < 1000.0)
        .all(|r| r.1 >= 1000.0));
    assert!(v["overhead"]["rate_changes"].as_u64().unwrap() >= 2, "{v}");

    // Energy: every row's, summed, is what the emulator served.
    let sum: f64 = rows.iter().map(|r| r.2).sum();
    let served = m.served_powercap(0, Domain::Package);
    assert!(
        (sum - served).abs() <= tolerance(served, 20.0),
        "the CSV sums to {sum} J, the emulator served {served} J"
    );
}
