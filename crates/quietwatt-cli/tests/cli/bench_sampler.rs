//! `bench sampler` from the command line against the emulator: the floor and the
//! engine run on the same (emulated powercap) source, the ratio is against the floor
//! of the same round, and the targets are judged. Correctness only: no figure of
//! speed is asserted (those go to BENCHMARKS.md).

use crate::common::*;
use quietwatt_emulator::EmulatorConfig;

#[test]
fn bench_sampler_compares_the_engine_with_the_floor_of_each_round() {
    let m = mount(EmulatorConfig::default());
    let out = quietwatt(
        m.root(),
        &[
            "bench",
            "sampler",
            "--freq",
            "100",
            "--duration",
            "1.2",
            "--rounds",
            "2",
            "--variants",
            "timerfd,reference",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("one JSON object");
    assert_eq!(v["stand_in"], false, "{v}");
    assert!(v["source"].as_str().unwrap().contains("EMULATED"), "{v}");
    assert_eq!(v["rounds"], 2);
    // The floor runs first whatever the order given, then the engine.
    let variants = v["variants"].as_array().unwrap();
    let names: Vec<&str> = variants
        .iter()
        .map(|x| x["variant"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["reference", "timerfd"]);
    for x in variants {
        // Two rounds of 1.2 s at 100 Hz: about 240 samples, one whole window each.
        let samples = x["samples"].as_u64().unwrap();
        assert!((150..=260).contains(&samples), "{x}");
        assert_eq!(x["windows"], 2, "{x}");
        assert_eq!(x["round_ratios"].as_array().unwrap().len(), 2, "{x}");
        assert!(
            x["process_cpu_per_sample_ns"].as_f64().unwrap() > 0.0,
            "{x}"
        );
    }
    assert_eq!(variants[0]["cpu_ratio"], 1.0);
    let what: Vec<&str> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["what"].as_str().unwrap())
        .collect();
    assert_eq!(
        what,
        [
            "achieved rate",
            "missed deadlines",
            "p99 wake-up lateness",
            "CPU per sample vs reference"
        ]
    );

    // An unknown variant is a usage error naming the valid ones.
    let bad = quietwatt(m.root(), &["bench", "sampler", "--variants", "fast"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("badsleep-st"), "{}", stderr(&bad));
}
