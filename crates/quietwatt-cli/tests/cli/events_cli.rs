//! `record --events ... --trace`, `trace`, `bench wakeup` end to end, against the
//! emulator for the energy and this machine's kernel for the events. Needs root
//! (FUSE, system-wide perf counters); a missing feature fails, never skips.

use crate::common::*;
use quietwatt_emulator::EmulatorConfig;
use quietwatt_events::trace::chrome::{validate, PID_ENERGY, PID_EVENTS};
use serde_json::Value;
use std::collections::BTreeSet;

/// Whether this machine has a cpuidle driver (sysfs lists CPU 0's states); many
/// cloud VMs have none, and the tests then check what the product says instead.
fn has_cpuidle() -> bool {
    let has = std::path::Path::new("/sys/devices/system/cpu/cpu0/cpuidle/state0/usage").exists();
    if !has {
        eprintln!("NO CPUIDLE DRIVER on this machine: checking the tracepoint's counts instead");
    }
    has
}

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

#[test]
fn record_with_events_writes_an_events_file_a_summary_and_a_valid_chrome_trace() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.csv");
    let trace = dir.path().join("trace.json");
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-m",
            "powercap",
            "--duration",
            "1.5",
            "--events",
            "all",
            "--events-freq",
            "20",
            "--json",
            "-o",
            out.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");

    // The events file: beside the energy file, header, one row per counter per read.
    let events = dir.path().join("run.events.csv");
    assert_eq!(summary["events_file"], events.display().to_string());
    let text = std::fs::read_to_string(&events).unwrap();
    assert!(text.contains("\ntimestamp_ns,cpu,event,count\n"), "{text}");
    let rates = summary["events"]["rates"].as_array().expect("events.rates");
    let names: BTreeSet<&str> = rates.iter().filter_map(|r| r["event"].as_str()).collect();
    for want in [
        "page_faults_min",
        "page_faults_maj",
        "context_switches",
        "cpu_migrations",
    ] {
        assert!(names.contains(want), "{want} missing from {names:?}");
    }
    // quietwatt itself faults and switches while it records.
    let total = |n: &str| {
        rates
            .iter()
            .find(|r| r["event"] == n)
            .and_then(|r| r["total"].as_u64())
            .unwrap()
    };
    assert!(total("page_faults_min") > 0 && total("context_switches") > 0);
    // A C-state row per CPU and state, with cpuidle's count; on a machine without a
    // cpuidle driver, with the tracepoint's counts and a note saying what is missing.
    let cpuidle = has_cpuidle();
    let cstates = summary["events"]["cstates"].as_array().expect("cstates");
    if cpuidle {
        assert!(cstates
            .iter()
            .any(|r| r["cpu"] == 0 && r["sysfs_entries"].is_u64()));
    } else {
        let notes = summary["events"]["notes"].to_string();
        assert!(notes.contains("no cpuidle driver"), "{notes}");
        assert!(
            cstates.iter().any(|r| r["cpu"] == 0
                && r["sysfs_entries"].is_null()
                && (r["perf_entries"].as_u64() > Some(0) || r["bpf_entries"].as_u64() > Some(0))),
            "no C-state row for CPU 0 counted by the tracepoint: {cstates:?}"
        );
    }

    // The trace: valid, with the expected tracks, on the energy file's clock.
    let t = read_json(&trace);
    let problems = validate(&t);
    assert!(problems.is_empty(), "{problems:#?}");
    let evs = t["traceEvents"].as_array().unwrap();
    let counters: BTreeSet<&str> = evs
        .iter()
        .filter(|e| e["ph"] == "C")
        .filter_map(|e| e["name"].as_str())
        .collect();
    for want in [
        "power 0/package",
        "power 0/dram",
        "cpu0 page_faults_min /s",
        "cpu0 context_switches /s",
        if cpuidle {
            "cpuidle residency cpu0"
        } else {
            "idle residency cpu0 (power:cpu_idle, BPF)"
        },
    ] {
        assert!(counters.contains(want), "no {want} track in {counters:?}");
    }
    for pid in [PID_ENERGY, PID_EVENTS] {
        assert!(
            evs.iter()
                .any(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == pid),
            "no process_name for pid {pid}"
        );
    }
    // Every power value sits at a timestamp of the energy file, in microseconds.
    let csv = std::fs::read_to_string(&out).unwrap();
    let stamps: BTreeSet<u64> = csv
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("timestamp"))
        .filter_map(|l| l.split(',').next()?.parse().ok())
        .collect();
    let power: Vec<f64> = evs
        .iter()
        .filter(|e| e["name"] == "power 0/package")
        .map(|e| e["ts"].as_f64().unwrap())
        .collect();
    assert!(
        power.len() >= 100,
        "{} power values for 1.5 s at 100 Hz",
        power.len()
    );
    for ts in &power {
        let ns = (ts * 1e3).round() as u64;
        assert!(
            stamps.contains(&ns),
            "power counter at {ts} µs is not a timestamp of the energy file"
        );
    }
    // The emulator's package power (20 W by default) comes through.
    let w: Vec<f64> = evs
        .iter()
        .filter(|e| e["name"] == "power 0/package")
        .map(|e| e["args"]["W"].as_f64().unwrap())
        .collect();
    let mean = w.iter().sum::<f64>() / w.len() as f64;
    assert!((mean - 20.0).abs() < 1.0, "mean package power {mean} W");

    // `quietwatt trace` on the same recording gives the same trace.
    let again = dir.path().join("again.json");
    let o = quietwatt(
        m.root(),
        &[
            "trace",
            out.to_str().unwrap(),
            "-o",
            again.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_json(&again), t);
}

#[test]
fn a_full_trace_puts_idle_slices_and_fault_instants_on_the_viewer_timeline() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.csv");
    let trace = dir.path().join("trace.json");
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-m",
            "powercap",
            "--duration",
            "1",
            "--events",
            "cstate,faults",
            "--full-trace",
            "--json",
            "-o",
            out.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    let written = summary["events"]["traced"]["written"]
        .as_u64()
        .unwrap_or_else(|| panic!("no events.traced.written in {summary}"));
    assert_eq!(summary["events"]["traced"]["dropped"], 0, "{summary}");
    let text = std::fs::read_to_string(dir.path().join("run.events.csv")).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(",trace:")).collect();
    assert_eq!(
        rows.len() as u64,
        written,
        "trace rows vs the summary's count"
    );

    let t = read_json(&trace);
    let problems = validate(&t);
    assert!(problems.is_empty(), "{problems:#?}");
    let evs = t["traceEvents"].as_array().unwrap();
    // One slice per idle period (entry to exit) and one instant per fault, on the
    // per-CPU tracks, from exactly the rows recorded.
    let slices = evs
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "cstate")
        .count();
    let exits = rows
        .iter()
        .filter(|l| l.contains(",trace:cpu_idle_exit,"))
        .count();
    // None when another process keeps both vCPUs busy: then there is no idle
    // period to draw, which the test says (the slice building is unit-tested).
    if exits == 0 {
        eprintln!("WEAK CHECK: no CPU idled in 1 s (another process keeps every CPU busy): no C-state slice to compare");
    }
    assert!(
        slices <= exits && slices + 2 >= exits,
        "{slices} slices for {exits} exits"
    );
    let faults = rows
        .iter()
        .filter(|l| l.contains(",trace:page_faults_"))
        .count();
    let instants = evs
        .iter()
        .filter(|e| {
            e["ph"] == "i"
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("page_faults_"))
        })
        .count();
    assert!(faults > 0, "quietwatt itself faults while it records");
    assert_eq!(instants, faults);
    for e in evs.iter().filter(|e| e["ph"] == "X") {
        assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}");
        assert!(e["name"].as_str().unwrap().starts_with('C'), "{e}");
    }
}

#[test]
fn trace_refuses_a_file_that_is_not_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "a,b,c\n1,2,3\n").unwrap();
    let o = quietwatt(
        dir.path(),
        &["trace", bad.to_str().unwrap(), "-o", "/dev/null"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("expected the energy header"),
        "{}",
        stderr(&o)
    );
    // A NaN energy is a bad row, named with its line (it once went into the trace
    // as null); bytes that are neither text nor Parquet are a bad file (exit 2, not
    // an I/O error); neither says "this is a bug".
    let nan = dir.path().join("nan.csv");
    std::fs::write(
        &nan,
        "timestamp_ns,socket,domain,energy_j,power_w,missed,merged,freq_hz,counter\n\
         1000,0,package,0.1,10.0,0,0,100,\n2000,0,package,nan,10.0,0,0,100,\n",
    )
    .unwrap();
    let junk = dir.path().join("junk.parquet");
    std::fs::write(&junk, [0xffu8, 0xfe, 0x00, 0x80, 0x12, 0x34]).unwrap();
    for (file, says) in [(&nan, "nan.csv:3"), (&junk, "neither Parquet")] {
        let o = quietwatt(
            dir.path(),
            &["trace", file.to_str().unwrap(), "-o", "/dev/null"],
        );
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
        assert!(!stderr(&o).contains("bug"), "{}", stderr(&o));
    }
}

#[test]
fn a_csv_trace_keeps_every_channel_line_of_the_header() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.csv");
    let o = quietwatt(
        m.root(),
        &["record", "-o", rec.to_str().unwrap(), "--duration", "0.2"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let t = dir.path().join("t.json");
    let o = quietwatt(
        m.root(),
        &["trace", rec.to_str().unwrap(), "-o", t.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v = read_json(&t);
    let channels = v["otherData"]["channel"]
        .as_array()
        .expect("an array of channels");
    let header = std::fs::read_to_string(&rec).unwrap();
    assert_eq!(
        channels.len(),
        header
            .lines()
            .filter(|l| l.starts_with("# channel:"))
            .count()
    );
    assert!(channels.len() >= 2, "{channels:?}");
}

#[test]
fn an_unknown_event_group_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = quietwatt(
        dir.path(),
        &[
            "--emulate",
            "on",
            "record",
            "-o",
            "/dev/null",
            "--events",
            "disk",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown event group 'disk'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bench_wakeup_reports_latency_per_idle_state_reached() {
    let dir = tempfile::tempdir().unwrap();
    let o = quietwatt(
        dir.path(),
        &[
            "bench",
            "wakeup",
            "--count",
            "50",
            "--interval-ms",
            "10",
            "--busy-us",
            "100",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_str(stdout(&o).trim()).expect("JSON");
    // Every signal is a measured wake-up or reported lost (a vCPU the host stalled
    // for longer than the wait); a few at most.
    let seen = r["all"]["n"].as_u64().unwrap();
    let lost = r["lost"].as_u64().unwrap();
    assert_eq!(seen + lost, 50, "{r}");
    assert!(lost <= 5, "{lost} of 50 wake-ups lost: {r}");
    let by_state = r["by_state"].as_array().unwrap();
    let n: u64 = by_state.iter().map(|s| s["n"].as_u64().unwrap()).sum();
    assert_eq!(n, seen, "every wake-up is classed once: {by_state:?}");
    // The idle states: cpuidle's, or, without a driver, none listed and a note.
    let states = r["states"].as_array().unwrap();
    if has_cpuidle() {
        assert!(!states.is_empty(), "{r}");
    } else {
        assert!(states.is_empty(), "{r}");
        assert!(r["notes"].to_string().contains("no cpuidle driver"), "{r}");
    }
    // Latency is positive and below the interval; the callee ran its busy-wait.
    let p50 = r["all"]["p50_us"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 < 10_000.0, "p50 {p50} µs");
    let active = r["active"]["p50_us"].as_f64().unwrap();
    assert!(
        (100.0..1000.0).contains(&active),
        "callee active {active} µs"
    );
    assert!(
        r["power_profile"]
            .as_str()
            .unwrap()
            .contains("no energy source here"),
        "{r}"
    );
    assert!(r["profile"].is_null(), "no profile without a source: {r}");
}

#[test]
fn bench_wakeup_profiles_the_power_around_the_wake_up_from_an_energy_source() {
    // Against the emulator, whose power is a constant 24 W (package + dram) and does
    // not react to wake-ups: the profile must come back flat at 24 W, in every bin.
    // It checks the alignment, the weighting and the units; the emulator's reads
    // over FUSE are slow (hundreds of µs, and slower after a signal, when its
    // server waits for the callee's CPU), which distorts single bins: they are only
    // checked for their units; the conservation over the window is the real check.
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(
        m.root(),
        &[
            "bench",
            "wakeup",
            "--count",
            "300",
            "--interval-ms",
            "5",
            "--busy-us",
            "100",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_str(stdout(&o).trim()).expect("JSON");
    let p = &r["profile"];
    assert!(p["source"].as_str().unwrap().contains("EMULATED"), "{p}");
    assert!(
        r["power_profile"].as_str().unwrap().contains("EMULATED"),
        "{r}"
    );
    let mean = p["mean_w"].as_f64().unwrap();
    assert!(
        (mean - 24.0).abs() < 0.24,
        "mean {mean} W over the run, the emulator serves 24 W"
    );
    assert!(p["changes"].as_u64().unwrap() > 500, "{p}");
    let bins = p["bins"].as_array().unwrap();
    assert_eq!(bins.len(), 32, "2 ms before to 6 ms after, 250 µs bins");
    for b in bins {
        let w = b["mean_w"]
            .as_f64()
            .unwrap_or_else(|| panic!("an empty bin: {b}"));
        // Units and alignment: a wrong scale or sign is off by orders of magnitude.
        // Not a closeness test: under load single bins move by tens of percent (the
        // intervals below say how much), and the window's average is the exact check.
        assert!(w > 0.25 * 24.0 && w < 4.0 * 24.0, "{b} in {p}");
    }
    // Over the whole window the bins carry the mean power: what one bin gains its
    // neighbours lose (an interval's energy is spread, never lost or duplicated).
    let avg = bins
        .iter()
        .map(|b| b["mean_w"].as_f64().unwrap())
        .sum::<f64>()
        / bins.len() as f64;
    assert!((avg - 24.0).abs() < 0.05 * 24.0, "window average {avg} W");

    // Every bin has its interval (300 wake-ups each), the verdict follows from it,
    // and the output states the true power the emulator draws.
    assert_eq!(p["true_w"].as_f64(), Some(24.0), "{p}");
    for b in bins {
        assert!(b["wakeups"].as_u64().unwrap() >= 290, "{b}");
        let (lo, hi) = (
            b["ci_w"][0].as_f64().expect("an interval"),
            b["ci_w"][1].as_f64().expect("an interval"),
        );
        let w = b["mean_w"].as_f64().unwrap();
        assert!(lo < w && w < hi, "{b}");
        assert_eq!(
            b["significant"].as_bool(),
            Some(mean < lo || mean > hi),
            "the verdict is the interval's: {b}"
        );
    }
}

#[test]
fn bench_wakeup_prints_each_bins_interval_and_the_emulators_true_power() {
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(
        m.root(),
        &[
            "bench",
            "wakeup",
            "--count",
            "40",
            "--interval-ms",
            "5",
            "--busy-us",
            "100",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("(emulated: true value 24.000 W)"), "{text}");
    assert!(text.contains("simultaneous intervals"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            let mut f = l.split_whitespace();
            f.next().and_then(|a| a.parse::<f64>().ok()).is_some()
                && f.next().and_then(|a| a.parse::<f64>().ok()).is_some()
        })
        .collect();
    assert_eq!(rows.len(), 32, "{text}");
    for r in rows {
        assert!(
            r.ends_with("not significant")
                || r.ends_with("differs")
                || r.ends_with("too few wake-ups for an interval"),
            "a bin without its verdict: {r}"
        );
        // With 40 wake-ups each bin has an interval: `[low, high]`.
        assert!(r.contains('[') && r.contains(']'), "{r}");
    }
}

#[test]
fn the_energy_per_fault_on_the_emulator_has_an_interval_that_holds_its_true_0() {
    // The emulator draws a constant power: the true energy per fault is 0 J. The
    // estimate must come with an interval, say whether it leaves 0 out, and state
    // the truth. A 95 % interval misses the truth 1 time in 20 by design, so the
    // test asserts the 99.9 % interval from the same standard error (a false
    // failure 1 run in 1000) and the printed verdict's consistency with the bounds.
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.csv");
    let args = |json: bool| {
        let mut a = vec![
            "record",
            "-m",
            "powercap",
            "--duration",
            "3",
            "--events",
            "faults",
            "-o",
            out.to_str().unwrap(),
        ];
        if json {
            a.push("--json");
        }
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |json: bool| {
        let a = args(json);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = quietwatt(m.root(), &a);
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    let o = run(true);
    let v: Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    let e = v["events"]["energy_per_event"]
        .as_array()
        .expect("energy_per_event")
        .iter()
        .find(|e| e["event"] == "page_faults_min")
        .unwrap_or_else(|| panic!("no page_faults_min estimate: {v}"))
        .clone();
    assert_eq!(e["kind"], "estimate");
    assert_eq!(e["true_joules_per_event"].as_f64(), Some(0.0), "{e}");
    let (b, se) = (
        e["joules_per_event"].as_f64().unwrap(),
        e["joules_per_event_se"].as_f64().unwrap(),
    );
    let (lo, hi) = (
        e["joules_per_event_ci"][0].as_f64().unwrap(),
        e["joules_per_event_ci"][1].as_f64().unwrap(),
    );
    assert!(lo < b && b < hi && se > 0.0, "{e}");
    assert_eq!(
        e["significant"].as_bool(),
        Some(lo > 0.0 || hi < 0.0),
        "{e}"
    );
    let df = e["windows"].as_u64().unwrap() as f64 - 2.0;
    let t999 = quietwatt_stats::student_t_quantile(0.9995, df);
    assert!(
        b.abs() <= t999 * se,
        "the 99.9 % interval {b} ± {} leaves out the true 0 J/fault: {e}",
        t999 * se
    );

    let o = run(false);
    let text = stderr(&o);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("page_faults_min") && l.contains("J/event"))
        .unwrap_or_else(|| panic!("no energy per fault line: {text}"));
    assert!(line.contains("95 % CI ["), "{line}");
    assert!(line.contains("(emulated: true value 0 J/event)"), "{line}");
    assert!(text.contains("ESTIMATE"), "{text}");
    let bounds: Vec<f64> = line
        .split('[')
        .nth(1)
        .and_then(|r| r.split(']').next())
        .unwrap()
        .split(',')
        .map(|x| x.trim().parse().unwrap())
        .collect();
    let contains_0 = bounds[0] <= 0.0 && bounds[1] >= 0.0;
    assert_eq!(
        line.contains(": not significant"),
        contains_0,
        "the verdict must follow the interval: {line}"
    );
}

#[test]
fn trace_reads_a_recording_whose_last_line_was_cut_and_says_it_left_it_out() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.csv");
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-m",
            "powercap",
            "-f",
            "50",
            "--duration",
            "0.3",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let whole = std::fs::read_to_string(&out).unwrap();
    let rows = whole
        .lines()
        .filter(|l| l.starts_with(char::is_numeric))
        .count();
    // SIGKILL mid-write: the last row loses its end (what is left still parses).
    std::fs::write(&out, &whole[..whole.len() - 5]).unwrap();
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
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the last line was cut") && stderr(&o).contains("left out"),
        "{}",
        stderr(&o)
    );
    let t = read_json(&trace);
    assert!(validate(&t).is_empty());
    let counters = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C" && e["pid"] == PID_ENERGY)
        .count();
    assert_eq!(counters, rows - 1, "one counter event per complete row");
}
