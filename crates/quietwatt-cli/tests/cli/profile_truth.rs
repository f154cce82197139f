//! `quietwatt profile` against a known truth (issue 25, item 5).
//!
//! 1. Under the load-following emulator (`follow=10:5`: 10 W plus 5 W per busy
//!    CPU of this machine, from its real /proc/stat) energy follows CPU time. A
//!    program built here with frame pointers runs two distinctively named
//!    functions on two threads, one with twice the other's CPU time, each timed
//!    by its own thread's CPU clock; the profile must name both and give each its
//!    share of their energy, and conserve the package energy exactly.
//! 2. A Node.js program run with `--perf-basic-prof`: its JIT-compiled hot
//!    function is named through the perf map `/tmp/perf-PID.map`.

use crate::common;
use crate::common::machine_busy_s;
use crate::profile::{folded, profiled, u};

use std::path::Path;

/// The truth program. Thread A runs `quietwatt_truth_heavy` all the time; thread
/// B alternates `quietwatt_truth_light` and `quietwatt_truth_rest`, one chunk
/// each, so heavy has about twice light's CPU time. Both threads stay busy until
/// the same deadline: every energy interval then holds both threads' samples,
/// and no interval's idle power goes to one of them alone (the split sets no idle
/// power apart by default, so a thread running alone at the end would take all
/// of its intervals' 10 W idle too). Each chunk is timed by its thread's own CPU
/// clock (`CLOCK_THREAD_CPUTIME_ID`), so the true ratio is known on a busy VM
/// too; the figures go to the file named by the first argument.
const TRUTH_RS: &str = r#"
use std::hint::black_box;
use std::time::{Duration, Instant};

#[repr(C)]
struct Timespec { sec: i64, nsec: i64 }
extern "C" { fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32; }
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;

fn thread_cpu_ns() -> u64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a valid clock id and a pointer to a live timespec.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

macro_rules! spin {
    ($name:ident) => {
        #[inline(never)]
        fn $name(n: u64) -> u64 {
            let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
            for i in 0..n {
                x = x.rotate_left(7) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d);
                x = black_box(x);
            }
            x
        }
    };
}
spin!(quietwatt_truth_heavy);
spin!(quietwatt_truth_light);
spin!(quietwatt_truth_rest);

/// Runs one chunk of `f`, adding the thread CPU ns it took to `ns`.
fn timed(ns: &mut u64, f: fn(u64) -> u64) {
    let t0 = thread_cpu_ns();
    black_box(f(200_000));
    *ns += thread_cpu_ns() - t0;
}

fn main() {
    let out = std::env::args().nth(1).expect("the output file");
    let secs: f64 = std::env::args().nth(2).map_or(1.0, |s| s.parse().unwrap());
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let a = std::thread::spawn(move || {
        let mut heavy = 0;
        while Instant::now() < deadline {
            timed(&mut heavy, quietwatt_truth_heavy);
        }
        heavy
    });
    let b = std::thread::spawn(move || {
        let (mut light, mut rest) = (0, 0);
        while Instant::now() < deadline {
            timed(&mut light, quietwatt_truth_light);
            timed(&mut rest, quietwatt_truth_rest);
        }
        (light, rest)
    });
    let heavy = a.join().unwrap();
    let (light, rest) = b.join().unwrap();
    std::fs::write(out, format!("{heavy} {light} {rest}\n")).unwrap();
}
"#;

/// Builds [`TRUTH_RS`] in `dir` with frame pointers and symbols.
fn build_truth(dir: &Path) -> std::path::PathBuf {
    let flags = ["-C", "opt-level=1", "-C", "force-frame-pointers=yes", "-g"];
    common::build_rust(dir, "truth", "quietwatt-truth", TRUTH_RS, &flags)
}

/// µJ of the stacks that hold a frame naming `function`.
fn energy_of(stacks: &[(String, u64)], function: &str) -> u64 {
    stacks
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f.contains(function)))
        .map(|(_, c)| c)
        .sum()
}

/// How far (in percentage points) a function's share of the two functions'
/// energy may be from its share of their CPU time. Sampling noise: at ~1 kHz
/// per CPU a 1 s run gives ~1500 samples of the two, a binomial spread of
/// ~1.2 points. The model's limit: power is per interval, not per CPU, and the
/// emulator counts busy CPUs in 10 ms quanta of the real /proc/stat, so the
/// other work of a busy VM lands on whichever of the two was sampled beside it.
/// Observed on the busy 2-CPU VM this was written on (other builds running,
/// the Node test beside it): the energy share 0 to 4.4 points from the CPU share
/// over 14 runs (CPU shares 60 to 80 %); 10 points leaves room for a busier
/// machine while still telling 2:1 (67 %) from 1:1 (50 %). Joules are not
/// checked against 5 W × CPU time: the other work of a busy VM raises every
/// interval's power, which the shares cancel and absolute joules would not.
const SHARE_TOLERANCE_PP: f64 = 10.0;

#[test]
fn two_functions_in_a_known_cpu_ratio_get_their_energy_share_and_conserve_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_truth(dir.path());
    let figures = dir.path().join("cpu.txt");
    let out = dir.path().join("truth.folded");
    let m = common::mount_following();
    let busy_before = machine_busy_s();
    let s = profiled(
        m.root(),
        &[
            "-o",
            out.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            figures.to_str().unwrap(),
            "1.0",
        ],
    );
    assert_eq!(s["emulated"], true);
    assert_eq!(s["exit_code"], 0);

    // The truth: each function's CPU time by its own thread's clock.
    let text = std::fs::read_to_string(&figures).expect("the truth program's CPU times");
    let ns: Vec<f64> = text
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let (heavy_ns, light_ns) = (ns[0], ns[1]);
    assert!(
        heavy_ns > 0.0 && light_ns > 0.0,
        "no CPU time measured: {text}"
    );

    let stacks = folded(&out);
    let heavy = energy_of(&stacks, "quietwatt_truth_heavy");
    let light = energy_of(&stacks, "quietwatt_truth_light");
    let listing = || {
        stacks
            .iter()
            .map(|(s, c)| format!("{s} {c}\n"))
            .collect::<String>()
    };
    assert!(heavy > 0, "quietwatt_truth_heavy not named:\n{}", listing());
    assert!(light > 0, "quietwatt_truth_light not named:\n{}", listing());

    let energy_share = 100.0 * heavy as f64 / (heavy + light) as f64;
    let cpu_share = 100.0 * heavy_ns / (heavy_ns + light_ns);
    // Printed for the record of what this machine shows (`--nocapture`).
    println!(
        "truth: heavy {:.3} s, light {:.3} s CPU ({cpu_share:.1} % heavy); \
         energy heavy {heavy} µJ, light {light} µJ ({energy_share:.1} % heavy)",
        heavy_ns / 1e9,
        light_ns / 1e9
    );
    // Other load beside the program (a busy CI machine): the split gives each
    // interval's whole energy to the command's samples in it, so an interval
    // where heavy runs while another process keeps the other CPU busy is all
    // heavy's (docs: the model's limits). There the honest truth is one-sided.
    let foreign = (machine_busy_s() - busy_before) - ns[..3].iter().sum::<f64>() / 1e9;
    let capacity = common::cpus() as f64 * s["wall_s"].as_f64().unwrap();
    let foreign_share = (foreign / capacity).max(0.0);
    println!(
        "truth: other load beside the program: {:.0} % of the CPUs",
        100.0 * foreign_share
    );
    if foreign_share <= 0.1 {
        assert!(
            (energy_share - cpu_share).abs() <= SHARE_TOLERANCE_PP,
            "heavy's share of the two functions' energy {energy_share:.1} % against its share of \
             their CPU time {cpu_share:.1} % (± {SHARE_TOLERANCE_PP} points)"
        );
    } else {
        assert!(
            energy_share >= cpu_share - SHARE_TOLERANCE_PP && energy_share > 50.0,
            "with {:.0} % other load, heavy's share of the energy {energy_share:.1} % is below \
             its share of the CPU time {cpu_share:.1} % (- {SHARE_TOLERANCE_PP} points)",
            100.0 * foreign_share
        );
    }

    // Conservation, exact in µJ: the stacks and the [unattributed] line make up
    // the measured package energy.
    let unattributed: u64 = stacks
        .iter()
        .filter(|(s, _)| s == "[unattributed]")
        .map(|(_, c)| c)
        .sum();
    let attributed: u64 = stacks.iter().map(|(_, c)| c).sum::<u64>() - unattributed;
    assert_eq!(attributed, u(&s, "attributed_uj"), "the stacks' µJ");
    // The program's three spinning functions are nearly all it does: the rest
    // (start, thread spawns, the clocks read between chunks) is small.
    let spinning = heavy + light + energy_of(&stacks, "quietwatt_truth_rest");
    println!(
        "truth: the three spinning functions have {:.1} % of the attributed energy",
        100.0 * spinning as f64 / attributed as f64
    );
    assert!(
        spinning as f64 >= 0.8 * attributed as f64,
        "the spinning functions have {spinning} of {attributed} attributed µJ:\n{}",
        listing()
    );
    assert_eq!(unattributed, u(&s, "unattributed_uj"));
    assert_eq!(
        attributed + unattributed,
        u(&s, "package_uj"),
        "stacks + unattributed against the measured package energy, in µJ"
    );
    intervals_hold_the_cpu_time_truth(&s, &ns);
}

/// Each spinning function's 95 % interval (`top_self[].self_uj_95`) holds its
/// truth for what the interval states, the sampling: the interval's relative
/// ends applied to the function's samples hold the samples its CPU time should
/// have had (the three functions' samples split by their measured CPU times).
/// The split's own systematics (a function running alone on the package takes
/// that interval's whole energy: about 5 points of share here) are the test
/// above's tolerance, not the interval's.
fn intervals_hold_the_cpu_time_truth(s: &serde_json::Value, ns: &[f64]) {
    let names = [
        "quietwatt_truth_heavy",
        "quietwatt_truth_light",
        "quietwatt_truth_rest",
    ];
    let top = s["top_self"].as_array().expect("top_self");
    let entry = |name: &str| {
        top.iter()
            .find(|f| f["function"].as_str().is_some_and(|n| n.contains(name)))
            .unwrap_or_else(|| panic!("{name} not among the top functions: {top:?}"))
    };
    let f64_of = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{v}"));
    let samples: Vec<f64> = names
        .iter()
        .map(|n| f64_of(&entry(n)["self_uj_95"]["samples"]))
        .collect();
    let spinning: f64 = samples.iter().sum();
    let cpu: f64 = ns[..3].iter().sum();
    for (i, name) in names.iter().enumerate() {
        let f = entry(name);
        let r = &f["self_uj_95"];
        let self_uj = f64_of(&f["self_uj"]);
        let (low, high) = (f64_of(&r["low_uj"]), f64_of(&r["high_uj"]));
        assert!(
            low <= self_uj && self_uj <= high && low < high,
            "{name}: the interval {low}..{high} µJ does not hold its own estimate {self_uj}"
        );
        let k = samples[i];
        let (k_low, k_high) = (k * low / self_uj, k * high / self_uj);
        let truth = spinning * ns[i] / cpu;
        println!(
            "truth: {name} self {self_uj} µJ, 95 % {low}..{high} µJ; {k} of {} samples, \
             {k_low:.0}..{k_high:.0}; its CPU time's share of the samples {truth:.0}",
            r["of_samples"]
        );
        assert!(
            k_low <= truth && truth <= k_high,
            "{name}: the 95 % interval on its samples {k_low:.0}..{k_high:.0} (from \
             {low}..{high} µJ) misses the samples its CPU time should have had, {truth:.0}"
        );
    }
}

const NODE_JS: &str = r#"
const fs = require("fs");
fs.writeFileSync(process.argv[2], String(process.pid));
function quietwattHotLoop(n) {
  let x = 0x9e3779b9 | 0;
  for (let i = 0; i < n; i++) {
    x = (((x << 7) | (x >>> 25)) ^ (i * 0x2545f491)) | 0;
  }
  return x;
}
let acc = 0;
const until = Date.now() + 600;
while (Date.now() < until) acc ^= quietwattHotLoop(1000000);
console.log(acc);
"#;

#[test]
fn a_node_js_function_is_named_through_its_perf_map() {
    let node = "/usr/bin/node";
    assert!(
        Path::new(node).exists(),
        "{node} is missing: this test needs Node.js (v20) to profile JIT frames \
         through --perf-basic-prof; install nodejs"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hot.js");
    let pid_file = dir.path().join("pid");
    std::fs::write(&script, NODE_JS).unwrap();
    let out = dir.path().join("node.folded");
    let m = common::mount_following();
    let o = common::quietwatt(
        m.root(),
        &[
            "profile",
            "-o",
            out.to_str().unwrap(),
            "--json",
            "--",
            node,
            "--perf-basic-prof",
            // Its V8 log goes with the test's files, not into the working directory.
            &format!("--logfile={}", dir.path().join("v8.log").display()),
            "--no-logfile-per-isolate",
            script.to_str().unwrap(),
            pid_file.to_str().unwrap(),
        ],
    );
    // Node leaves its perf map in /tmp: remove it whatever the outcome.
    if let Ok(pid) = std::fs::read_to_string(&pid_file) {
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", pid.trim()));
    }
    assert!(o.status.success(), "{}", common::stderr(&o));
    let stacks = folded(&out);
    // JIT frames may give short stacks: the leaf naming the function in some
    // sample is enough.
    let leaves: Vec<(&str, u64)> = stacks
        .iter()
        .filter_map(|(s, c)| Some((s.rsplit(';').next()?, *c)))
        .filter(|(leaf, _)| leaf.contains("quietwattHotLoop"))
        .collect();
    // Printed for the record of how the frame reads (`--nocapture`).
    println!("node: leaves naming quietwattHotLoop: {leaves:?}");
    let named: u64 = leaves.iter().map(|(_, c)| c).sum();
    assert!(
        named > 0,
        "no leaf frame names quietwattHotLoop:\n{}",
        stacks
            .iter()
            .map(|(s, c)| format!("{s} {c}\n"))
            .collect::<String>()
    );
}
