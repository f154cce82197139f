//! `quietwatt model` and `run --model` against the RAPL emulator: the scenarios
//! cause the events they claim (counted by perf), the energy fits recover the
//! emulator's ground truth (a constant power, so energy per event = power × time
//! per event), a model file feeds `run --model`, whose figures are labelled as
//! model estimates.

use crate::common::{assert_png_beside, mount, quietwatt, stderr, stdout};
use quietwatt_emulator::EmulatorConfig;
use serde_json::Value;
use std::path::Path;

fn model(root: &Path, args: &[&str], out: &Path) -> Value {
    let mut a = vec!["model"];
    a.extend_from_slice(args);
    let out_s = out.to_str().unwrap();
    a.extend_from_slice(&["--output", out_s]);
    let o = quietwatt(root, &a);
    assert!(o.status.success(), "{}\n{}", stderr(&o), stdout(&o));
    assert!(
        stderr(&o).contains("energy: EMULATED"),
        "the output must say the energy is emulated: {}",
        stderr(&o)
    );
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

fn fit<'a>(family: &'a Value, scenario: &str) -> &'a Value {
    family["fits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["scenario"] == scenario)
        .unwrap_or_else(|| panic!("no fit for {scenario}: {}", family["notes"]))
}

#[test]
fn pagefault_scenarios_cause_the_faults_they_claim_and_energy_fits_the_emulators_power() {
    let config = EmulatorConfig::default();
    let watts = config.power.default;
    let m = mount(config);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pf.json");
    let v = model(
        m.root(),
        &[
            "pagefault",
            "--counts",
            "1024,2048,4096,8192",
            "--rounds",
            "2",
            "--min-run-ms",
            "40",
            "--max-mib",
            "512",
        ],
        &out,
    );
    assert_eq!(v["format"], 1);
    assert_eq!(
        v["machine"]["page_size_bytes"].as_u64().unwrap() as i64,
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64
    );
    assert_eq!(v["energy"]["emulated"], true);
    let fam = &v["families"][0];
    assert_eq!(fam["family"], "pagefault");
    assert_eq!(fam["complete"], true);
    assert_eq!(fam["runs"].as_array().unwrap().len(), 3 * 4 * 2);
    // perf agrees with the scenario within 5 %: one minor fault per page.
    for s in ["odpa", "cow"] {
        let per = fit(fam, s)["events_per_count"].as_f64().unwrap();
        assert!((0.95..=1.05).contains(&per), "{s}: {per} faults per page");
    }
    let npf = fit(fam, "npf")["events_per_count"].as_f64().unwrap();
    assert!(npf < 0.05, "npf: {npf} faults per page");
    // The time fits are drawn beside the model: a series per scenario, a point per
    // run, a fitted line each.
    let svg = std::fs::read_to_string(dir.path().join("pf.pagefault.svg")).expect("the plot");
    for s in ["npf", "odpa", "cow"] {
        assert!(
            svg.contains(&format!(r#"data-label="{s} (R²"#)),
            "{s} missing"
        );
    }
    assert_eq!(svg.matches(r#"class="fit""#).count(), 3);
    assert_eq!(
        svg.matches("<circle").count(),
        3 * 4 * 2 + 3,
        "runs + legend"
    );
    assert_png_beside(&dir.path().join("pf.pagefault.svg"));
    // Constant power: joules per fault = watts x seconds per fault, per domain and
    // in total (package + dram), within 5 %.
    let channels = v["energy"]["channels"].as_array().unwrap();
    for s in ["odpa", "cow"] {
        let f = fit(fam, s);
        let wall = f["wall"]["slope"].as_f64().unwrap();
        assert!(wall > 0.0, "{s}: a fault costs no time? {wall}");
        for (i, c) in channels.iter().enumerate() {
            let w = match c["domain"].as_str().unwrap() {
                "package" => watts.package,
                "core" => watts.core,
                "uncore" => watts.uncore,
                "dram" => watts.dram,
                d => panic!("unexpected domain {d}"),
            };
            let e = f["energy"][i]["slope"].as_f64().unwrap();
            let rel = (e - w * wall).abs() / (w * wall);
            // Both slopes come from the same runs, so they agree up to how far the
            // energy reads sit from the wall-clock reads: 5 %, or, when the machine
            // is loaded enough to shift reads, within the two fits' own errors.
            let se = f["energy"][i]["slope_se"].as_f64().unwrap()
                + w * f["wall"]["slope_se"].as_f64().unwrap();
            assert!(
                rel < 0.05 || (e - w * wall).abs() <= 4.0 * se,
                "{s} {}: {e} J/fault vs {w} W x {wall} s ({rel}; standard errors {se})",
                c["domain"]
            );
        }
        let total = f["total_energy"]["slope"].as_f64().unwrap();
        let w = watts.package + watts.dram;
        let se = f["total_energy"]["slope_se"].as_f64().unwrap()
            + w * f["wall"]["slope_se"].as_f64().unwrap();
        assert!(
            (total - w * wall).abs() / (w * wall) < 0.05 || (total - w * wall).abs() <= 4.0 * se,
            "{s}: total {total} vs {w} W x {wall} (standard errors {se})"
        );
    }
    // A cost per scenario, less the NPF baseline, with an interval around it.
    for c in fam["costs"].as_array().unwrap() {
        assert_eq!(c["baseline"], "npf");
        let (t, lo, hi) = (
            c["seconds_per_event"].as_f64().unwrap(),
            c["seconds_ci"][0].as_f64().unwrap(),
            c["seconds_ci"][1].as_f64().unwrap(),
        );
        assert!(lo <= t && t <= hi && t > 0.0, "{c}");
    }
    // The TLB dimension says whether it could be counted, never invents one.
    let tlb = &v["tlb"];
    if tlb["available"] == false {
        assert!(
            tlb["note"].as_str().unwrap().starts_with("not available"),
            "{tlb}"
        );
    }
}

#[test]
fn ctxswitch_ping_pong_switches_as_claimed() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cs.json");
    let v = model(
        m.root(),
        &[
            "ctxswitch",
            "--counts",
            "1000,2000,4000",
            "--rounds",
            "2",
            "--batch",
            "2",
        ],
        &out,
    );
    let fam = &v["families"][0];
    let per = fit(fam, "pingpong")["events_per_count"].as_f64().unwrap();
    assert!(
        (0.95..=1.1).contains(&per),
        "{per} switches per intended switch"
    );
    let base = fit(fam, "pipes")["events_per_count"].as_f64().unwrap();
    assert!(base < 0.05, "the baseline switched: {base}");
    assert_eq!(fam["costs"][0]["baseline"], "pipes");
}

#[test]
fn run_with_a_model_reports_labelled_estimates() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    model(
        m.root(),
        &[
            "pagefault",
            "--counts",
            "256,512,1024",
            "--rounds",
            "1",
            "--batch",
            "2",
        ],
        &out,
    );
    let file = out.to_str().unwrap();
    // A command that faults: dd's 8 MiB block is a fresh buffer.
    let cmd = [
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=8M",
        "count=2",
        "status=none",
    ];
    let mut args = vec!["run", "--json", "--model", file, "--"];
    args.extend_from_slice(&cmd);
    let o = quietwatt(m.root(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let est = &v["model_estimate"];
    assert_eq!(est["label"], "model estimate");
    let faults = est["estimates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "minor-faults")
        .unwrap_or_else(|| panic!("no minor-faults estimate: {est}"));
    // 8 MiB touched: at least 2048 first-touch faults.
    assert!(faults["count"].as_u64().unwrap() >= 2048, "{faults}");
    let expect = faults["count"].as_f64().unwrap() * faults["seconds_per_event"].as_f64().unwrap();
    assert!((faults["seconds"].as_f64().unwrap() - expect).abs() <= 1e-12 * expect.max(1.0));
    // Each figure carries the model's interval, scaled by the (exact) count.
    let n = faults["count"].as_f64().unwrap();
    for k in 0..2 {
        let per = faults["seconds_per_event_ci"][k].as_f64().unwrap();
        let tot = faults["seconds_ci"][k].as_f64().unwrap();
        assert!(
            (tot - n * per).abs() <= 1e-9 * tot.abs().max(1e-12),
            "{faults}"
        );
    }
    let (slo, shi) = (
        est["total_seconds_ci"][0].as_f64().unwrap(),
        est["total_seconds_ci"][1].as_f64().unwrap(),
    );
    let total = est["total_seconds"].as_f64().unwrap();
    assert!(slo <= total && total <= shi, "{est}");
    // The energy is priced unless the model's own interval for it spans zero (this
    // 3-point, 1-round sweep is noisy): then it is left out, and a note says why.
    let model: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let cost = model["families"][0]["costs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["scenario"] == "odpa")
        .expect("an odpa cost in the model")
        .clone();
    let ci = &cost["total_joules_ci"];
    let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
    assert_eq!(
        faults["significant"].as_bool(),
        Some(lo > 0.0 || hi < 0.0),
        "{faults}"
    );
    if lo <= 0.0 && hi >= 0.0 {
        assert!(faults["joules"].is_null(), "{faults}");
        assert!(
            est["notes"]
                .to_string()
                .contains("indistinguishable from zero"),
            "{est}"
        );
    } else {
        let per = cost["total_joules_per_event"].as_f64().unwrap();
        let j = faults["joules"].as_f64().unwrap();
        assert!(j > 0.0 && (j - per * faults["count"].as_f64().unwrap()).abs() <= 1e-9 * j);
    }
    // The table says so too.
    let mut args = vec!["run", "--model", file, "--"];
    args.extend_from_slice(&cmd);
    let o = quietwatt(m.root(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("MODEL ESTIMATE"), "{}", stderr(&o));
    assert!(stderr(&o).contains("[model estimate]"), "{}", stderr(&o));
    // With each cost's interval, and the emulator's truth: constant power.
    let text = stderr(&o);
    let line = text
        .lines()
        .find(|l| l.contains("minor-faults") && l.contains("x "))
        .unwrap_or_else(|| panic!("no minor-faults line: {text}"));
    assert!(line.contains("] us (") && line.contains("] s"), "{line}");
    assert!(text.contains("true energy of its own is 0 J"), "{text}");
    // `model validate` on the same model: three variants, ODPA and COW faulting
    // once per output page and NPF not at all, and its plot beside the model file.
    let o = quietwatt(
        m.root(),
        &[
            "model", "validate", "--model", file, "--reps", "2", "--size", "512", "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_str(stdout(&o).trim()).expect("validation JSON");
    let variants = r["variants"].as_array().unwrap();
    let names: Vec<&str> = variants
        .iter()
        .map(|v| v["variant"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["npf", "odpa", "cow"]);
    let pages = (512.0 * 512.0 / 4096.0_f64).ceil();
    assert!(variants[0]["faults"].as_f64().unwrap() < 8.0, "{r}");
    for v in &variants[1..] {
        let f = v["faults"].as_f64().unwrap();
        assert!(f >= pages && f <= pages * 1.1 + 8.0, "{v}");
        assert_eq!(v["run_seconds"].as_array().unwrap().len(), 2, "{v}");
    }
    let plot = out.with_extension("validation.svg");
    let svg = std::fs::read_to_string(&plot).expect("the validation plot");
    assert_eq!(svg.matches("<g class=\"series\"").count(), 3);
    assert_png_beside(&plot);
    // A file that is not a model is refused as bad input.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    let o = quietwatt(
        m.root(),
        &["run", "--model", bad.to_str().unwrap(), "--", "true"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not a quietwatt model"),
        "{}",
        stderr(&o)
    );
}
