//! The estimate's inputs beyond the busy CPUs (issue 27, item 1), against the
//! load-following emulator with emulated frequencies (`--cpufreq 3,2.2,1.5`,
//! `follow=10:2:1`: each busy CPU draws 2 W plus 1 W per GHz of its
//! `scaling_cur_freq`): `calibrate` sweeps the frequencies the governor
//! allows (and puts the limits back), recovers all three coefficients, and
//! keeps a fit on the busy CPUs alone with the larger error it has; with the
//! frequency readable and RAPL hidden, `run` estimates a workload held at
//! 1.5 GHz within the frequency fit's stated error of the emulator's truth;
//! where the frequency cannot be read, the busy CPUs' fit is used, said, and
//! its wider error holds too. The PMU's instructions and cycles: what a
//! machine without one is told, checked against the kernel's list of PMUs.

use crate::common;
use crate::estimate::{calibrated, estimate_in, estimated_package, no_rapl};
use quietwatt::estimate::inputs::Input;
use quietwatt::estimate::model::{blind_to, DomainModel, Fit, Origin, Term, BUSY_CPUS, SCHEMA};
use quietwatt::estimate::{CpuIdentity, PowerModel};
use std::path::{Path, PathBuf};

const IDLE_W: f64 = 10.0;
const PER_CPU_W: f64 = 2.0;
const PER_GHZ_W: f64 = 1.0;

fn cpufreq(root: &Path, cpu: usize, file: &str) -> PathBuf {
    root.join(format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/{file}"))
}

/// The fit on exactly `inputs`, if the model has one.
fn fit_on<'a>(m: &'a PowerModel, inputs: &[Input]) -> Option<&'a Fit> {
    std::iter::once(&m.fit)
        .chain(&m.simpler)
        .find(|f| f.inputs().eq(inputs.iter().copied()))
}

/// A model of this CPU with the emulator's own coefficients, where a busy
/// machine refused calibration: the frequency fit, and the busy CPUs' fit
/// (the mean of the three frequencies' draw) with the spread as its error.
fn known_model(dir: &Path) -> PathBuf {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let domain = |per_cpu: f64, terms: Vec<Term>, error_w: f64| DomainModel {
        domain: "package".into(),
        idle_w: IDLE_W,
        per_busy_cpu_w: per_cpu,
        terms,
        error_w,
        loo_rmse_w: error_w / 2.0,
        points: 26,
    };
    let fit = |inputs: &[Input], d: DomainModel| Fit {
        inputs: inputs.iter().map(|i| i.name().to_string()).collect(),
        domains: vec![d],
        blind_to: blind_to(inputs),
    };
    let mean_ghz = common::FREQS_KHZ.iter().sum::<u64>() as f64 * 1e-6 / 3.0;
    let spread = (3.0 - 1.5) * PER_GHZ_W * common::cpus() as f64;
    let model = PowerModel {
        schema: SCHEMA.into(),
        cpu: CpuIdentity::parse(&cpuinfo, common::cpus() as u32),
        fit: fit(
            &[Input::BusyCpus, Input::BusyCpuGhz],
            domain(
                PER_CPU_W,
                vec![Term {
                    input: Input::BusyCpuGhz.name().into(),
                    w_per_unit: PER_GHZ_W,
                }],
                0.1,
            ),
        ),
        origin: Origin::Calibrated {
            mechanism: "powercap".into(),
            emulated: true,
            seconds_per_level: 1.0,
            created_unix_s: 0,
        },
        simpler: vec![fit(
            &[Input::BusyCpus],
            domain(PER_CPU_W + PER_GHZ_W * mean_ghz, Vec::new(), spread),
        )],
        left_out: Vec::new(),
    };
    let path = dir.join("known-freq.json");
    model.save(&path).unwrap();
    path
}

/// Within `u` of the truth, but for the run's start and exit outside the
/// workload's own span (at most the emulator's full power: every CPU busy at
/// the highest frequency).
fn within(doc: &serde_json::Value, e: f64, u: f64, truth: &crate::estimate::Truth) -> bool {
    let d = doc["duration_s"].as_f64().unwrap();
    let full = IDLE_W + (PER_CPU_W + 3.0 * PER_GHZ_W) * common::cpus() as f64;
    (e - truth.energy_j).abs() <= u + (d - truth.span_s).max(0.0) * full
}

#[test]
fn calibrate_sweeps_the_frequencies_and_the_estimate_follows_them() {
    let m = common::mount_following_freq(PER_CPU_W, PER_GHZ_W);
    let dir = tempfile::tempdir().unwrap();
    let model = match calibrated(m.root(), dir.path()) {
        Some(path) => {
            let model = PowerModel::load(&path).unwrap();
            // The stated tolerance: 0.5 W idle, 0.2 W per busy CPU, 0.1 W per
            // busy CPU × GHz (10 ms busy quanta over 1 s levels).
            let f = fit_on(&model, &[Input::BusyCpus, Input::BusyCpuGhz])
                .unwrap_or_else(|| panic!("a frequency fit: {model:?}"));
            let p = f.domain("package").unwrap();
            assert!((p.idle_w - IDLE_W).abs() <= 0.5, "{p:?}");
            assert!((p.per_busy_cpu_w - PER_CPU_W).abs() <= 0.2, "{p:?}");
            assert!(
                (p.coef(Input::BusyCpuGhz) - PER_GHZ_W).abs() <= 0.1,
                "{p:?}"
            );
            // The busy CPUs alone cannot see the frequency: a fit kept for
            // machines without cpufreq, its error as wide as that blindness.
            let b = fit_on(&model, &[Input::BusyCpus]).expect("a busy CPUs' fit");
            let b = b.domain("package").unwrap();
            assert!(
                b.error_w > 2.0 * p.error_w && b.error_w > 0.5,
                "{b:?} {p:?}"
            );
            path
        }
        None => known_model(dir.path()),
    };
    // Whatever calibrate did, each CPU's limit is back at the highest.
    for c in 0..common::cpus() {
        let max = std::fs::read_to_string(cpufreq(m.root(), c, "scaling_max_freq")).unwrap();
        assert_eq!(max.trim(), "3000000", "cpu{c}");
    }

    // The workload held at 1.5 GHz; a root with no RAPL whose cpufreq is the
    // emulator's.
    for c in 0..common::cpus() {
        std::fs::write(cpufreq(m.root(), c, "scaling_max_freq"), "1500000\n").unwrap();
    }
    let (_d, root) = no_rapl();
    std::fs::create_dir_all(root.join("sys/devices/system")).unwrap();
    std::os::unix::fs::symlink(
        m.root().join("sys/devices/system/cpu"),
        root.join("sys/devices/system/cpu"),
    )
    .unwrap();
    let (doc, truth) = estimate_in(&root, m.root(), &model, &[]);
    let (e, u) = estimated_package(&doc, &model);
    assert!(
        doc["estimate"]["inputs"]
            .to_string()
            .contains("busy_cpu_ghz"),
        "{doc}"
    );
    assert!(
        within(&doc, e, u, &truth),
        "with the frequency: estimated {e} ± {u} J, the emulator drew {} J over {} s",
        truth.energy_j,
        truth.span_s
    );
    // Without cpufreq: the busy CPUs' fit, said, and its wider error holds.
    let (_d2, empty) = no_rapl();
    let (doc2, truth2) = estimate_in(&empty, m.root(), &model, &[]);
    let (e2, u2) = estimated_package(&doc2, &model);
    assert_eq!(
        doc2["estimate"]["inputs"],
        serde_json::json!([BUSY_CPUS]),
        "{doc2}"
    );
    let notes = doc2["notes"].to_string();
    assert!(
        notes.contains("fit on busy_cpu_ghz is not used") && notes.contains("no cpufreq"),
        "{notes}"
    );
    assert!(
        within(&doc2, e2, u2, &truth2),
        "without the frequency: estimated {e2} ± {u2} J, the emulator drew {} J",
        truth2.energy_j
    );
    let per_s = |doc: &serde_json::Value, u: f64| u / doc["duration_s"].as_f64().unwrap();
    assert!(per_s(&doc2, u2) > per_s(&doc, u), "{u2} vs {u}");
}

/// Whether the kernel lists a core PMU (`cpu`, or a hybrid part's
/// `cpu_core`): the second count of whether instructions can be counted.
fn kernel_lists_a_core_pmu() -> bool {
    ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists())
}

#[test]
fn calibrate_says_whether_the_pmu_can_count_instructions() {
    let m = common::mount_following_freq(PER_CPU_W, PER_GHZ_W);
    let (dir, _) = no_rapl();
    let out = dir.path().join("m.json");
    // A short sweep: what matters here is what it says before the first
    // level, and the model where one is made.
    let o = common::quietwatt(
        m.root(),
        &[
            "calibrate",
            "-o",
            out.to_str().unwrap(),
            "--per-level",
            "200ms",
            "--repeats",
            "2",
            "--max-busy",
            "1",
            "--frequencies",
            "0",
        ],
    );
    let err = common::stderr(&o);
    let no_pmu = "instructions_gps, cycles_gps: instructions and cycles of CPU 0: no hardware PMU";
    if kernel_lists_a_core_pmu() {
        // Counted, or (a VM's listed PMU without its hardware events) said why
        // not, in the model too.
        let said = err.contains("instructions_gps, cycles_gps: instructions and cycles of CPU");
        eprintln!("this machine lists a core PMU; instructions refused: {said}");
        if o.status.success() {
            let m = PowerModel::load(&out).unwrap();
            assert_eq!(
                m.all_inputs().contains(&Input::Instructions),
                !said,
                "{m:?} {err}"
            );
            assert_eq!(
                m.left_out.iter().any(|l| l.starts_with("instructions_gps")),
                said,
                "{m:?}"
            );
        }
    } else {
        eprintln!("no core PMU listed in /sys/bus/event_source/devices: the fit is told so");
        assert!(err.contains(no_pmu), "{err}");
        if o.status.success() {
            let m = PowerModel::load(&out).unwrap();
            assert!(!m.all_inputs().contains(&Input::Instructions), "{m:?}");
            assert!(
                m.left_out.iter().any(|l| l.contains("no hardware PMU")),
                "{m:?}"
            );
        }
    }
    // --frequencies 0: the governor's frequency only, said; the frequency is
    // read, and never varied apart from the load.
    assert!(err.contains("levels at the governor's frequency"), "{err}");
    if o.status.success() {
        let m = PowerModel::load(&out).unwrap();
        assert!(
            m.left_out
                .iter()
                .any(|l| l.starts_with("busy_cpu_ghz: never varied apart from busy_cpus")),
            "{m:?}"
        );
    }
}
