//! A labelled estimate where nothing can measure (issue 27), against the
//! load-following emulator, whose package draws `10 W + PER_CPU × busy CPUs`
//! of this machine (its real `/proc/stat`): `calibrate` on it recovers those
//! coefficients; `run --power-model` with the RAPL tree hidden (a root with
//! no powercap, msr or power PMU) estimates a workload's energy within the
//! model's stated error of the emulator's truth, read by the workload itself
//! at its start and end; a workload the model does not describe (another
//! per-CPU power) falls outside it, as the output warns it may.

use crate::common;
use quietwatt::estimate::inputs::Input;
use quietwatt::estimate::model::{blind_to, DomainModel, Fit, Origin, BUSY_CPUS, SCHEMA};
use quietwatt::estimate::{CpuIdentity, PowerModel};
use std::path::{Path, PathBuf};

/// The emulator's idle package power, W (`common::mount_following`).
const IDLE_W: f64 = 10.0;

/// `calibrate` against `emulator` into `dir/model.json`: the model, or `None`
/// where the machine was kept busy by other work (checked independently: the
/// machine's own busy CPU time over the sweep).
pub(crate) fn calibrated(emulator: &Path, dir: &Path) -> Option<PathBuf> {
    let model = dir.join("model.json");
    let before = common::machine_busy_s();
    let t = std::time::Instant::now();
    let o = common::quietwatt(
        emulator,
        &[
            "calibrate",
            "-o",
            model.to_str().unwrap(),
            "--per-level",
            "1s",
            "--repeats",
            "2",
        ],
    );
    let busy = (common::machine_busy_s() - before) / t.elapsed().as_secs_f64();
    if o.status.success() {
        return Some(model);
    }
    // The honest answer on a machine others keep busy: refused, with why.
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("other work kept this machine busy")
            && err.contains("calibrate on an idle machine"),
        "{err}"
    );
    // Independently: spinners add load only where CPUs were free; the sweep's
    // average busy CPUs say whether they were.
    assert!(
        busy > common::cpus() as f64 - 0.75,
        "calibration refused on a machine only {busy:.2} CPUs busy on average: {err}"
    );
    eprintln!("calibration refused on a busy machine ({busy:.2} CPUs busy on average): the estimate is checked with the emulator's own coefficients");
    None
}

/// A model of this machine's CPU with the emulator's own coefficients, and
/// the error a calibration here states (its busy quanta).
fn known_model(dir: &Path, per_cpu_w: f64) -> PathBuf {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let model = PowerModel {
        schema: SCHEMA.into(),
        cpu: CpuIdentity::parse(&cpuinfo, common::cpus() as u32),
        fit: Fit {
            inputs: vec![BUSY_CPUS.into()],
            domains: vec![DomainModel {
                domain: "package".into(),
                idle_w: IDLE_W,
                per_busy_cpu_w: per_cpu_w,
                terms: Vec::new(),
                error_w: 0.1,
                loo_rmse_w: 0.05,
                points: 6,
            }],
            blind_to: blind_to(&[Input::BusyCpus]),
        },
        origin: Origin::Calibrated {
            mechanism: "powercap".into(),
            emulated: true,
            seconds_per_level: 1.0,
            created_unix_s: 0,
        },
        simpler: Vec::new(),
        left_out: Vec::new(),
    };
    let path = dir.join("known.json");
    model.save(&path).unwrap();
    path
}

/// A scratch directory and, in it, a root with no RAPL at all (no powercap,
/// msr or power PMU).
pub(crate) fn no_rapl() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    (dir, empty)
}

/// The package line of a model file's fit on the busy CPUs alone: (idle W,
/// W per busy CPU, error W).
fn package_line(model: &Path) -> (f64, f64, f64) {
    let m = PowerModel::load(model).unwrap();
    let busy_only = std::iter::once(&m.fit)
        .chain(&m.simpler)
        .find(|f| f.inputs == [BUSY_CPUS])
        .expect("a fit on the busy CPUs alone");
    let d = busy_only.domain("package").expect("package modelled");
    (d.idle_w, d.per_busy_cpu_w, d.error_w)
}

/// What a workload measured of itself: the emulator's package energy at its
/// start and end, and the span between, s.
pub(crate) struct Truth {
    pub energy_j: f64,
    pub span_s: f64,
}

/// `run --power-model MODEL --json` on an empty root (no RAPL) of a shell
/// that spins about a second and a half, reading the emulator's package
/// counter at its start and end: the run's JSON and the truth.
fn estimate(emulator: &Path, model: &Path, extra: &[&str]) -> (serde_json::Value, Truth) {
    let (_dir, empty) = no_rapl();
    estimate_in(&empty, emulator, model, extra)
}

/// [`estimate`] with `root` as the run's root (one without RAPL).
pub(crate) fn estimate_in(
    root: &Path,
    emulator: &Path,
    model: &Path,
    extra: &[&str],
) -> (serde_json::Value, Truth) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("truth");
    let counter = emulator.join("sys/class/powercap/intel-rapl:0/energy_uj");
    let script =
        "a=$(cat \"$1\"); ta=$(date +%s%N); i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done; \
                  b=$(cat \"$1\"); tb=$(date +%s%N); echo \"$a $b $ta $tb\" > \"$2\"";
    let mut args = vec!["run", "--json", "--power-model", model.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--",
        "sh",
        "-c",
        script,
        "sh",
        counter.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    let o = common::quietwatt(root, &args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let said = std::fs::read_to_string(&out).unwrap();
    let v: Vec<f64> = said
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let range: f64 = std::fs::read_to_string(counter.with_file_name("max_energy_range_uj"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let uj = if v[1] >= v[0] {
        v[1] - v[0]
    } else {
        v[1] + range - v[0]
    };
    (
        doc,
        Truth {
            energy_j: uj * 1e-6,
            span_s: (v[3] - v[2]) * 1e-9,
        },
    )
}

/// The package's estimated energy and uncertainty, after checking that the
/// run says it is an estimate everywhere.
pub(crate) fn estimated_package(doc: &serde_json::Value, model: &Path) -> (f64, f64) {
    assert_eq!(doc["mechanism"], "estimate", "{doc}");
    assert_eq!(doc["estimated"], true, "{doc}");
    assert_eq!(doc["estimate"]["model"], model.to_str().unwrap(), "{doc}");
    assert!(
        doc["notes"].to_string().contains("ESTIMATED, not measured"),
        "{doc}"
    );
    let p = doc["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == "package")
        .expect("package");
    (
        p["energy_j"].as_f64().unwrap(),
        p["uncertainty_j"].as_f64().unwrap(),
    )
}

#[test]
fn calibrate_recovers_the_emulators_coefficients_and_run_estimates_its_truth_without_rapl() {
    let m = common::mount_following();
    let dir = tempfile::tempdir().unwrap();
    let model = match calibrated(m.root(), dir.path()) {
        Some(model) => {
            let (idle, per_cpu, error) = package_line(&model);
            // The stated tolerance: 0.5 W on the idle power, 5 % on the
            // per-CPU power (the busy time is read in 10 ms quanta).
            assert!((idle - IDLE_W).abs() <= 0.5, "idle {idle} W");
            assert!(
                (per_cpu - common::FOLLOW_W_PER_CPU).abs() <= 0.05 * common::FOLLOW_W_PER_CPU,
                "{per_cpu} W per busy CPU"
            );
            assert!(error > 0.0 && error < 1.0, "± {error} W");
            model
        }
        None => known_model(dir.path(), common::FOLLOW_W_PER_CPU),
    };
    let (doc, truth) = estimate(m.root(), &model, &[]);
    let (e, u) = estimated_package(&doc, &model);
    // The run spans the workload and its start and exit: the truth misses
    // that much of the power (at most the emulator's, 10 W + 5 W per CPU).
    let d = doc["duration_s"].as_f64().unwrap();
    let outside = (d - truth.span_s).max(0.0) * (IDLE_W + 5.0 * common::cpus() as f64);
    assert!(
        (e - truth.energy_j).abs() <= u + outside,
        "estimated {e} ± {u} J, the emulator drew {} J over {} s of the run's {d} s",
        truth.energy_j,
        truth.span_s
    );
}

#[test]
fn a_workload_the_model_does_not_describe_falls_outside_its_stated_error() {
    // The machine now draws 8 W per busy CPU; the model says 5.
    let m = common::mount_following_at(8.0);
    let dir = tempfile::tempdir().unwrap();
    let model = known_model(dir.path(), common::FOLLOW_W_PER_CPU);
    let (doc, truth) = estimate(m.root(), &model, &[]);
    let (e, u) = estimated_package(&doc, &model);
    // 3 W per busy CPU unseen over the spinning shell's CPU second and more.
    assert!(
        truth.energy_j - e > u,
        "estimated {e} ± {u} J, the emulator drew {} J: the model's error should not cover another machine",
        truth.energy_j
    );
    // What the model cannot see is said with the figures.
    let blind = doc["estimate"]["blind_to"].to_string();
    assert!(blind.contains("instruction mix"), "{blind}");
}

#[test]
fn a_model_of_another_cpu_a_corrupt_one_and_no_proc_stat_are_refused_with_the_fix() {
    let (dir, empty) = no_rapl();
    let model = known_model(dir.path(), 5.0);
    let mut other = PowerModel::load(&model).unwrap();
    other.cpu.model += 1;
    let other_path = dir.path().join("other.json");
    other.save(&other_path).unwrap();
    let run = |model: &Path, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--require-energy",
            "--power-model",
            model.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        common::quietwatt(&empty, &args)
    };
    let o = run(&other_path, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains("the power model was made on")
            && err.contains("quietwatt calibrate")
            && err.contains("--force-model"),
        "{err}"
    );
    // Forced: measured by the model all the same, and said to be.
    let o = run(&other_path, &["--force-model"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("ESTIMATED by a power model"),
        "{}",
        common::stderr(&o)
    );

    let corrupt = dir.path().join("corrupt.json");
    std::fs::write(
        &corrupt,
        "{\"schema\": \"quietwatt.power-model/1\", \"cpu\": 3}",
    )
    .unwrap();
    let o = run(&corrupt, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("is corrupt")
            && common::stderr(&o).contains("quietwatt calibrate -o FILE"),
        "{}",
        common::stderr(&o)
    );

    // /proc/stat with no CPU in it (an empty file bound over it, in a mount
    // namespace of the run's own).
    let o = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount --bind /dev/null /proc/stat && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(&empty)
        .args(["run", "--require-energy", "--power-model"])
        .arg(&model)
        .args(["--", "true"])
        .env_remove("QUIETWATT_ROOT")
        .output()
        .expect("unshare (util-linux)");
    assert_eq!(o.status.code(), Some(69), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains("cannot read the busy CPUs from /proc/stat")
            && err.contains("no per-CPU line"),
        "{err}"
    );
    // Where the counters can be read, they are: no estimate.
    let m = common::mount(quietwatt_emulator::EmulatorConfig::default());
    let o = common::quietwatt(
        m.root(),
        &[
            "run",
            "--json",
            "--power-model",
            model.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["mechanism"], "powercap", "{doc}");
    assert!(doc.get("estimated").is_none(), "{doc}");
}

#[test]
fn record_compare_and_repeated_runs_estimate_too_and_say_so() {
    let (dir, empty) = no_rapl();
    let model = known_model(dir.path(), 5.0);
    let model_s = model.to_str().unwrap();
    // record: every reading the model's, the summary and the file say so.
    let csv = dir.path().join("r.csv");
    let o = common::quietwatt(
        &empty,
        &[
            "record",
            "-o",
            csv.to_str().unwrap(),
            "--duration",
            "0.5",
            "--json",
            "--power-model",
            model_s,
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["mechanism"], "estimate", "{doc}");
    assert_eq!(doc["estimated"], true, "{doc}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.contains("# mechanism: estimate\n"), "{text}");
    // Idle 10 W at least over the half second, within the stated error.
    let p = doc["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == "package")
        .unwrap();
    let (e, d) = (
        p["energy_j"].as_f64().unwrap(),
        doc["duration_s"].as_f64().unwrap(),
    );
    assert!(
        e >= IDLE_W * d - p["uncertainty_j"].as_f64().unwrap(),
        "{doc}"
    );

    // compare (and run -r, the same series): estimated runs, said in the text
    // and the JSON.
    let json = dir.path().join("c.json");
    let o = common::quietwatt(
        &empty,
        &[
            "compare",
            "-r",
            "2",
            "--power-model",
            model_s,
            "--export-json",
            json.to_str().unwrap(),
            "--export-markdown",
            dir.path().join("c.md").to_str().unwrap(),
            "true",
            "sleep 0.2",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("ESTIMATED by a power model, not measured"),
        "{}",
        common::stderr(&o)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["mechanism"], "estimate", "{doc}");
    assert_eq!(doc["estimated"], true, "{doc}");
    // The PR comment says it too.
    let md = std::fs::read_to_string(dir.path().join("c.md")).unwrap();
    assert!(md.starts_with("> **ESTIMATED** by a power model"), "{md}");
    // --profile splits measured energy: refused with the reason.
    let o = common::quietwatt(
        &empty,
        &[
            "compare",
            "-r",
            "2",
            "--power-model",
            model_s,
            "--profile",
            "true",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("a power model's estimate knows no stacks"),
        "{}",
        common::stderr(&o)
    );
    // Without a model, nothing measures: the fix is named.
    let o = common::quietwatt(&empty, &["run", "--require-energy", "--", "true"]);
    assert_eq!(o.status.code(), Some(69));
}

#[test]
fn guesses_are_labelled_guesses_with_a_wide_error() {
    let (_dir, empty) = no_rapl();
    // A TDP-based guess: a fifth idle to all of it busy, ± half of it.
    let o = common::quietwatt(
        &empty,
        &["run", "--json", "--tdp-watts", "40", "--", "sleep", "0.3"],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["estimated"], true, "{doc}");
    assert!(
        doc["notes"]
            .to_string()
            .contains("a TDP-based guess (40 W given")
            && doc["notes"]
                .to_string()
                .contains("not calibrated on this machine"),
        "{doc}"
    );
    assert_eq!(doc["estimate"]["error_w"][0], 20.0, "{doc}");
    for bad in ["0", "-3", "nan"] {
        let o = common::quietwatt(
            &empty,
            &["run", "--require-energy", "--tdp-watts", bad, "--", "true"],
        );
        assert_ne!(o.status.code(), Some(0), "--tdp-watts {bad}");
        assert!(
            common::stderr(&o).contains("TDP") || common::stderr(&o).contains("invalid value"),
            "{}",
            common::stderr(&o)
        );
    }
    // The built-in table: this CPU's microarchitecture, where it lists it.
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let here = CpuIdentity::parse(&cpuinfo, common::cpus() as u32);
    let listed = quietwatt::estimate::guess::builtin(&here).is_some();
    let o = common::quietwatt(
        &empty,
        &[
            "run",
            "--json",
            "--require-energy",
            "--power-model",
            "builtin",
            "--",
            "true",
        ],
    );
    if listed {
        assert!(o.status.success(), "{}", common::stderr(&o));
        assert!(
            common::stderr(&o).contains("a guess from the built-in table"),
            "{}",
            common::stderr(&o)
        );
    } else {
        eprintln!("{here} is not in the built-in table: checking the refusal");
        assert_eq!(o.status.code(), Some(69), "{}", common::stderr(&o));
        assert!(
            common::stderr(&o).contains("the built-in table has no figures for")
                && common::stderr(&o).contains("--tdp-watts"),
            "{}",
            common::stderr(&o)
        );
    }
}

#[test]
fn serve_exports_the_estimate_labelled_as_one() {
    use std::io::{BufRead, BufReader, Read, Write};
    let (dir, empty) = no_rapl();
    let model = known_model(dir.path(), 5.0);
    // No RAPL, and this machine's CPUs for the attribution's topology.
    std::fs::create_dir_all(empty.join("sys/devices/system")).unwrap();
    std::os::unix::fs::symlink(
        "/sys/devices/system/cpu",
        empty.join("sys/devices/system/cpu"),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(&empty)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--attribute",
            "process",
            "--power-model",
        ])
        .arg(&model)
        .env_remove("QUIETWATT_ROOT")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let Some(Ok(l)) = lines.next() else {
            let _ = child.kill();
            panic!("serve did not start: {log}");
        };
        log.push_str(&l);
        log.push('\n');
        if let Some(rest) = l.split("serving http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    let mut http = std::net::TcpStream::connect(&addr).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    http.read_to_string(&mut body).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(log.contains("serving the power model's ESTIMATE"), "{log}");
    let series: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("quietwatt_energy_joules_total{"))
        .collect();
    assert!(!series.is_empty(), "{body}");
    for s in series {
        assert!(
            s.contains("mechanism=\"estimate\"") && s.contains("estimated=\"true\""),
            "{s}"
        );
    }
    // The estimate split among processes says it is one, on every series.
    let attributed: Vec<&str> = body
        .lines()
        .filter(|l| {
            l.starts_with("quietwatt_attributed_energy_joules_total{")
                || l.starts_with("quietwatt_unattributed_energy_joules_total{")
        })
        .collect();
    assert!(attributed.len() >= 2, "{body}");
    for s in attributed {
        assert!(s.contains("estimated=\"true\""), "{s}");
    }
}
