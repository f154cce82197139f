//! `--mechanism ebpf|perf-ring` through the command line, for real on this machine's
//! kernel, with software counters standing in for the RAPL events
//! (`--stand-in-events`, hidden: for tests and benchmarks). Needs root (or CAP_BPF and
//! CAP_PERFMON); fails, never skips, without it.

use std::process::{Command, Output};
use std::sync::{Mutex, PoisonError};

/// One at a time: each samples CPU 0 at 1 kHz.
static SERIAL: Mutex<()> = Mutex::new(());

use crate::busy::busy_cpu0;

fn quietwatt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .args(args)
        .env_remove("QUIETWATT_ROOT")
        .output()
        .expect("run quietwatt")
}

fn json(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    // One object on the last line (record, run), or the whole output (doctor).
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .or_else(|_| serde_json::from_str(&stdout))
        .unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {stdout}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

#[test]
fn record_through_both_in_kernel_mechanisms_writes_one_row_per_sample_and_domain() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let _tick = busy_cpu0();
    let dir = tempfile::tempdir().unwrap();
    for m in ["ebpf", "perf-ring"] {
        let csv = dir.path().join(format!("{m}.csv"));
        let out = quietwatt(&[
            "record",
            "-m",
            m,
            "--stand-in-events",
            "-f",
            "1000",
            "--duration",
            "2",
            "--json",
            "-o",
            csv.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{m}: {stderr}");
        let v = json(&out);
        // Software events stand in for RAPL here: the report says so, and the kernel
        // side says which mechanism sampled them.
        assert_eq!(v["mechanism"], quietwatt::source::STAND_IN_LABEL, "{v}");
        let samples = v["samples"].as_u64().unwrap();
        assert!(
            (1900..=2010).contains(&samples),
            "{m}: {samples} samples in 2 s at 1 kHz"
        );
        let k = &v["kernel"];
        assert_eq!(k["mechanism"], m);
        assert!(k["drains"].as_u64().unwrap() <= 4, "{m}: {k}");
        assert_eq!(k["kernel"]["dropped"], 0, "{m}: {k}");
        assert!(v["overhead"]["cpu_per_sample_ns"].as_f64().unwrap() > 0.0);
        let text = std::fs::read_to_string(&csv).unwrap();
        assert!(
            text.contains(&format!(
                "# mechanism: {}",
                quietwatt::source::STAND_IN_LABEL
            )) && text.contains("# drain_hz: 1"),
            "{text:.400}"
        );
        let rows = text.lines().filter(|l| !l.starts_with('#')).count() - 1;
        assert_eq!(
            rows as u64,
            2 * samples,
            "{m}: two stand-in domains a sample"
        );
    }
}

#[test]
fn run_measures_the_command_through_ebpf_and_perf_ring() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let _tick = busy_cpu0();
    for m in ["ebpf", "perf-ring"] {
        let out = quietwatt(&[
            "run",
            "-m",
            m,
            "--stand-in-events",
            "--json",
            "--",
            "sh",
            "-c",
            "sleep 0.5; exit 3",
        ]);
        assert_eq!(
            out.status.code(),
            Some(3),
            "{m}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = json(&out);
        let d = v["duration_s"].as_f64().unwrap();
        assert!((0.5..0.8).contains(&d), "{m}: {d} s");
        // 1 kHz by default for the in-kernel mechanisms.
        assert_eq!(v["freq_hz"], 1000.0, "{v}");
        assert!(v["overhead"]["samples"].as_u64().unwrap() > 400, "{v}");
    }
}

#[test]
fn in_kernel_mechanisms_refuse_an_adaptive_rate_and_a_bad_drain_rate() {
    let out = quietwatt(&[
        "record",
        "-m",
        "ebpf",
        "--stand-in-events",
        "-f",
        "auto",
        "-o",
        "/dev/null",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fixed rate"));
    let out = quietwatt(&[
        "run",
        "-m",
        "perf-ring",
        "--stand-in-events",
        "--drain-hz",
        "0",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--drain-hz"));
    let out = quietwatt(&["run", "-m", "powercap", "--stand-in-events", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--stand-in-events"));
}

#[test]
fn doctor_explains_the_in_kernel_mechanisms() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let out = quietwatt(&["doctor", "--json"]);
    let v = json(&out);
    let all = v
        .as_array()
        .cloned()
        .or_else(|| v["mechanisms"].as_array().cloned())
        .unwrap_or_default();
    for m in ["ebpf", "perf-ring"] {
        let d = all
            .iter()
            .find(|d| d["mechanism"] == m)
            .unwrap_or_else(|| panic!("no {m} in {v}"));
        let finding = d["finding"].as_str().unwrap_or_default();
        if d["works"] == false {
            // No RAPL here: the doctor says whether the in-kernel machinery works anyway.
            assert!(
                finding.contains("in-kernel machinery itself works"),
                "{m}: {d}"
            );
            assert!(d["fix"].is_string(), "{m}: {d}");
        }
    }
}
