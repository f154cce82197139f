//! Numbers that stay right at the edges, against the emulator's ground truth: a
//! counter that restarts from 0, steps back or jumps; psys served by one package
//! only, or disabled; totals of a selection; a domain exceeding its package.
//! Each case checks the figure against what the emulator served (within the
//! uncertainty quietwatt states) and the warning a user needs.

use crate::common::*;
use quietwatt::Domain;
use quietwatt_emulator::{EmulatorConfig, Fault, FaultKind, Mechanism as Served};
use serde_json::Value;
use std::time::Duration;

/// Counters well inside their range, as real ones are (not at 0 after a fresh mount):
/// 2000 s of emulated time at 20 W is 40 kJ of a 65.5 kJ range, so a step back lands
/// far above anything a restart from 0 could read.
fn running_for_a_while(c: EmulatorConfig) -> EmulatorConfig {
    EmulatorConfig {
        start_offset: Duration::from_secs(2000),
        ..c
    }
}

fn run_json(m: &Mounted, args: &[&str]) -> Value {
    let out = quietwatt(m.root(), args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)))
}

fn domain<'a>(v: &'a Value, socket: u64, name: &str) -> &'a Value {
    v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["socket"] == socket && d["domain"] == name)
        .unwrap_or_else(|| panic!("no {socket}/{name} in {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn warnings(v: &Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

/// A reset, step back or jump of package 0 at 300 ms, read through `mech`: the
/// energy lies in the range a correct reader can report (what was served, less at
/// most the interval around the event), within the stated uncertainty of what was
/// served, and the event is reported with its kind and time.
fn check_step(kind: FaultKind, mech: Served) {
    let fault = Fault::new(kind, 0, Domain::Package).at(Duration::from_millis(300));
    let m = mount(running_for_a_while(EmulatorConfig::default()).with_fault(fault));
    let name = match mech {
        Served::Powercap => "powercap",
        Served::Msr => "msr",
    };
    let v = run_json(
        &m,
        &[
            "run", "--json", "-m", name, "--freq", "100", "--", "sleep", "1",
        ],
    );
    let served = m.served_record(mech, 0, Domain::Package);
    assert_eq!(
        served.steps, 1,
        "the step fell between two reads: {served:?}"
    );
    // The MSR mechanism reads each register once while opening and counts from its
    // next read (on a loaded host that can be tens of ms later): compare from there.
    let (lo, hi) = match mech {
        Served::Powercap => served.correct_range(),
        Served::Msr => {
            let hi = served.energy_after_probe();
            (quietwatt::Joules(hi.0 - served.step_span_j.0), hi)
        }
    };
    let pkg = domain(&v, 0, "package");
    let got = f(&pkg["energy_j"]);
    let u = f(&pkg["uncertainty_j"]);
    // Before: a step back of 0.5 J read as a wrap added 65.5 kJ; a jump added 10 kJ.
    // Slack: one RAPL update at 20 W at each end of the lost interval (a reading lags
    // by up to one update) and the counter's quantum.
    let slack = 2.0 * 20.0 * 0.001 + 1e-4;
    assert!(
        got >= lo.0 - slack && got <= hi.0 + slack,
        "{kind:?} via {name}: {got} J outside [{}, {}] J",
        lo.0,
        hi.0
    );
    assert!(
        // Plus 30 ms of 20 W: a loaded host can serve a read that late after the
        // timestamp the lost interval is measured with.
        (got - hi.0).abs() <= u + 20.0 * 0.03,
        "{kind:?} via {name}: {got} ± {u} J does not hold the {} J served",
        hi.0
    );
    let events = v["counter_events"].as_array().unwrap();
    let want = match kind {
        FaultKind::Reset => "reset",
        FaultKind::Backstep => "backstep",
        _ => "jump",
    };
    assert_eq!(events.len(), 1, "{v}");
    assert_eq!(events[0]["kind"], want, "{v}");
    assert_eq!(events[0]["domain"], "0/package", "{v}");
    let t = f(&events[0]["t_s"]);
    assert!(t > 0.0 && t < f(&v["duration_s"]), "{v}");
    assert!(
        warnings(&v)
            .iter()
            .any(|w| w.starts_with("0/package") && w.contains("rebased")),
        "{v}"
    );
    // The other domains are untouched.
    assert!(f(&domain(&v, 0, "dram")["energy_j"]) > 0.0);
    assert_eq!(f(&domain(&v, 0, "dram")["anomalies"]), 0.0);
}

#[test]
fn a_counter_restarting_from_zero_counts_the_energy_since_the_restart_powercap() {
    check_step(FaultKind::Reset, Served::Powercap);
}

#[test]
fn a_counter_restarting_from_zero_counts_the_energy_since_the_restart_msr() {
    check_step(FaultKind::Reset, Served::Msr);
}

#[test]
fn a_half_joule_step_back_is_no_wrap_powercap() {
    check_step(FaultKind::Backstep, Served::Powercap);
}

#[test]
fn a_half_joule_step_back_is_no_wrap_msr() {
    check_step(FaultKind::Backstep, Served::Msr);
}

#[test]
fn an_implausible_jump_adds_nothing_powercap() {
    check_step(FaultKind::Jump, Served::Powercap);
}

#[test]
fn an_implausible_jump_adds_nothing_msr() {
    check_step(FaultKind::Jump, Served::Msr);
}

/// A 3 J core jump at 100 Hz is 300 W over the interval: under core's own bound
/// (twice its stated limit, or 450 W where none is stated) but far above its package's
/// advance. Before the package check it was counted (core 39.02 J against 36.04 J
/// served, no event); now the excess is dropped and reported.
#[test]
fn a_core_jump_under_its_own_bound_but_above_its_package_is_dropped() {
    let fault = Fault::new(FaultKind::Jump, 0, Domain::Core)
        .at(Duration::from_millis(300))
        .amount(quietwatt_emulator::Microjoules(3_000_000));
    let m = mount(running_for_a_while(EmulatorConfig::default()).with_fault(fault));
    let v = run_json(
        &m,
        &[
            "run", "--json", "-m", "powercap", "--freq", "100", "--", "sleep", "1",
        ],
    );
    let served = m.served_record(Served::Powercap, 0, Domain::Core);
    assert_eq!(served.steps, 1, "{served:?}");
    let (lo, hi) = served.correct_range();
    let core = domain(&v, 0, "core");
    let (got, u) = (f(&core["energy_j"]), f(&core["uncertainty_j"]));
    assert!(
        got >= lo.0 - 0.05 && got <= hi.0 + u,
        "core {got} ± {u} J outside [{}, {}] J served (+3 J before)",
        lo.0,
        hi.0
    );
    assert!(
        got < hi.0 + 1.0,
        "the jump was counted: {got} J, {} J served",
        hi.0
    );
    let events = v["counter_events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "above_package" && e["domain"] == "0/core"),
        "{v}"
    );
    assert!(
        warnings(&v)
            .iter()
            .any(|w| w.starts_with("0/core") && w.contains("more than its package")),
        "{v}"
    );
    // The package itself is untouched.
    assert_eq!(f(&domain(&v, 0, "package")["anomalies"]), 0.0, "{v}");
}

/// An 8 J dram jump at 100 Hz through MSR: under dram's 150 W default bound over
/// the interval and its slack (9 J), so it doubled dram before; `MSR_DRAM_POWER_INFO`
/// now states the emulated dram's power, and the jump is dropped and reported.
#[test]
fn a_dram_jump_under_the_default_bound_is_caught_by_the_power_msr_states() {
    let fault = Fault::new(FaultKind::Jump, 0, Domain::Dram)
        .at(Duration::from_millis(300))
        .amount(quietwatt_emulator::Microjoules(8_000_000));
    let m = mount(running_for_a_while(EmulatorConfig::default()).with_fault(fault));
    let v = run_json(
        &m,
        &[
            "run", "--json", "-m", "msr", "--freq", "100", "--", "sleep", "1",
        ],
    );
    let served = m.served_record(Served::Msr, 0, Domain::Dram);
    assert_eq!(served.steps, 1, "{served:?}");
    let hi = served.energy_after_probe();
    let dram = domain(&v, 0, "dram");
    let (got, u) = (f(&dram["energy_j"]), f(&dram["uncertainty_j"]));
    assert!(
        (got - hi.0).abs() <= u + 4.0 * 0.03,
        "dram {got} ± {u} J against {} J served (the jump counted: +8 J)",
        hi.0
    );
    let events = v["counter_events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "jump" && e["domain"] == "0/dram"),
        "{v}"
    );
}

/// A recording marks the row whose energy is not fully known, and its file total is
/// the run's.
#[test]
fn a_recording_marks_the_row_of_a_reset() {
    let fault = Fault::new(FaultKind::Reset, 0, Domain::Package).at(Duration::from_millis(300));
    let m = mount(running_for_a_while(EmulatorConfig::default()).with_fault(fault));
    let out_dir = tempfile::tempdir().unwrap();
    let csv = out_dir.path().join("r.csv");
    let out = quietwatt(
        m.root(),
        &[
            "record",
            "-o",
            csv.to_str().unwrap(),
            "--freq",
            "100",
            "--duration",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("restarted from 0"),
        "{}",
        stderr(&out)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| {
        header
            .iter()
            .position(|h| *h == n)
            .unwrap_or_else(|| panic!("no {n} in {header:?}"))
    };
    let (dom, ev, e) = (col("domain"), col("counter"), col("energy_j"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let marked: Vec<&Vec<&str>> = rows.iter().filter(|r| !r[ev].is_empty()).collect();
    assert_eq!(marked.len(), 1, "one marked row: {marked:?}");
    assert_eq!((marked[0][dom], marked[0][ev]), ("package", "reset"));
    // The marked row counts the energy since the restart: no more than plausible.
    let e_reset: f64 = marked[0][e].parse().unwrap();
    assert!((0.0..5.0).contains(&e_reset), "{e_reset}");
}

/// `-m msr` on two Sapphire Rapids sockets whose master package is 1: psys is read
/// once, on socket 1. Before, the emulator served psys on every socket and quietwatt
/// summed both (108 J for 54 J). The MSR mechanism leaves out a register that reads 0,
/// as the kernel does (`perf_msr_probe`, `rapl_check_domain`), so socket 0's psys is
/// not a channel at all.
#[test]
fn psys_on_the_master_package_only_is_counted_once_and_found_on_socket_1() {
    let c = running_for_a_while(EmulatorConfig::intel(0x8F).with_sockets(2)).with_psys_master(1);
    let m = mount(c);
    let out = quietwatt(
        m.root(),
        &[
            "run", "--json", "-m", "msr", "--freq", "50", "--", "sleep", "1",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["total_rule"], "psys (covers the platform)", "{v}");
    let psys: Vec<&Value> = v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["domain"] == "psys")
        .collect();
    assert_eq!(psys.len(), 1, "{v}");
    assert_eq!(psys[0]["socket"], 1, "{v}");
    let served = m.served_after_probe(Served::Msr, 1, Domain::Psys);
    let total = f(&v["total_energy_j"]);
    let u = f(&v["total_uncertainty_j"]);
    assert!(
        (total - served).abs() <= u,
        "total {total} ± {u} J vs psys served {served} J"
    );
    assert!(
        stderr(&out).contains("0/psys: register 0x64d reads 0"),
        "{}",
        stderr(&out)
    );
}

/// psys disabled by the firmware reads 0: the total is packages + dram. Before, with
/// the perf mechanisms (which list psys even when it reads 0 on these parts), the
/// total was 0 J, "psys (covers the platform)"; the meter's unit tests cover a psys
/// channel that never moves.
#[test]
fn a_disabled_psys_leaves_the_total_to_packages_and_dram() {
    let c = running_for_a_while(EmulatorConfig::intel(0x8F).with_sockets(2)).with_psys_disabled();
    let m = mount(c);
    let v = run_json(
        &m,
        &[
            "run", "--json", "-m", "msr", "--freq", "50", "--", "sleep", "0.5",
        ],
    );
    assert_eq!(v["total_rule"], "package + dram", "{v}");
    let expect: f64 = [(0, "package"), (0, "dram"), (1, "package"), (1, "dram")]
        .iter()
        .map(|&(s, d)| f(&domain(&v, s, d)["energy_j"]))
        .sum();
    assert!((f(&v["total_energy_j"]) - expect).abs() < 1e-9, "{v}");
    assert!(expect > 1.0, "{v}");
}

/// A short run on Sapphire Rapids: psys counts whole joules, so its total carries a
/// ± of about 1 J and the finer packages + dram figure is given beside it.
#[test]
fn a_coarse_psys_total_comes_with_the_finer_packages_plus_dram() {
    let c = running_for_a_while(EmulatorConfig::intel(0x8F));
    let m = mount(c.with_psys());
    let v = run_json(
        &m,
        &[
            "run", "--json", "-m", "msr", "--freq", "100", "--", "sleep", "0.1",
        ],
    );
    assert_eq!(v["total_rule"], "psys (covers the platform)", "{v}");
    assert!(f(&v["total_uncertainty_j"]) >= 1.0, "{v}");
    let finer = &v["finer_total"];
    assert_eq!(finer["rule"], "package + dram", "{v}");
    assert!(f(&finer["uncertainty_j"]) < 0.2, "{v}");
    let served = m.served_after_probe(Served::Msr, 0, Domain::Package)
        + m.served_after_probe(Served::Msr, 0, Domain::Dram);
    assert!(
        (f(&finer["energy_j"]) - served).abs() <= f(&finer["uncertainty_j"]),
        "{finer} vs {served}"
    );
    assert!(warnings(&v).iter().any(|w| w.contains("coarse")), "{v}");
}

/// The total of a selection is the sum of what was selected, and says so. Before,
/// `-d core` printed `total 0.000000 = package`.
#[test]
fn the_total_of_a_selection_adds_what_was_selected() {
    let m = mount(EmulatorConfig::default().with_sockets(2));
    for (sel, rule, members) in [
        ("core", "core", &["core"][..]),
        ("dram", "dram", &["dram"][..]),
        ("core,uncore", "core + uncore", &["core", "uncore"][..]),
        ("package,core", "package", &["package"][..]),
    ] {
        let v = run_json(
            &m,
            &[
                "run", "--json", "-d", sel, "--freq", "50", "--", "sleep", "0.2",
            ],
        );
        assert_eq!(v["total_rule"], rule, "-d {sel}: {v}");
        let sum: f64 = v["domains"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| members.contains(&d["domain"].as_str().unwrap()))
            .map(|d| f(&d["energy_j"]))
            .sum();
        assert!(sum > 0.0, "-d {sel}: {v}");
        assert!(
            (f(&v["total_energy_j"]) - sum).abs() < 1e-9,
            "-d {sel}: {v}"
        );
        let u: f64 = v["domains"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| members.contains(&d["domain"].as_str().unwrap()))
            .map(|d| f(&d["uncertainty_j"]))
            .sum();
        assert!(
            (f(&v["total_uncertainty_j"]) - u).abs() < 1e-9,
            "-d {sel}: {v}"
        );
    }
    // The table says it too.
    let out = quietwatt(m.root(), &["run", "-d", "core", "--", "sleep", "0.1"]);
    let text = stderr(&out);
    let total = text
        .lines()
        .find(|l| l.contains(" total "))
        .unwrap_or_default();
    assert!(total.ends_with("= core"), "{text}");
}

/// A frozen package counter under a core that keeps counting: the run names both.
#[test]
fn core_exceeding_its_package_is_a_warning_naming_both() {
    let fault = Fault::new(FaultKind::Freeze, 0, Domain::Package);
    let m = mount(EmulatorConfig::default().with_fault(fault));
    let v = run_json(&m, &["run", "--json", "--freq", "50", "--", "sleep", "0.5"]);
    assert!(
        warnings(&v)
            .iter()
            .any(|w| w.contains("0/core") && w.contains("exceeds 0/package")),
        "{v}"
    );
}

/// Every figure carries its ±, and a run shorter than the counters' resolution says
/// its figures are dominated by it; its self-cost is not extrapolated into rates.
#[test]
fn a_very_short_run_states_its_resolution_and_no_self_cost_rate() {
    let m = mount(EmulatorConfig::default());
    let v = run_json(&m, &["run", "--json", "--", "true"]);
    let total = f(&v["total_energy_j"]);
    let u = f(&v["total_uncertainty_j"]);
    let dur = f(&v["duration_s"]);
    // The emulator draws 24 W (package 20 + dram 4): the truth lies within ±.
    let truth = 24.0 * dur;
    assert!(
        (total - truth).abs() <= u + 24.0 * 0.001,
        "{total} ± {u} J vs {truth} J"
    );
    assert!(f(&v["total_power_uncertainty_w"]) > 0.0, "{v}");
    if u > 0.05 * total {
        assert!(
            warnings(&v)
                .iter()
                .any(|w| w.contains("resolution dominates")),
            "{v}"
        );
    }
    assert_eq!(v["overhead"]["rates_meaningful"], false, "{v}");
    let out = quietwatt(m.root(), &["run", "--", "true"]);
    let text = stderr(&out);
    assert!(text.contains("±"), "{text}");
    assert!(text.contains("too short a run"), "{text}");
    assert!(!text.contains("% of one CPU"), "{text}");
}

/// A restart of a counter whose whole range is within what the domain may draw
/// between two reads (18-bit counters at 2^-16 J: 4 J against a 75 W bound over
/// 5 ms plus 50 ms of slack): a wrap and a restart look alike but for the advance,
/// which the last interval's power does not predict. It once read +13 % as a silent wrap;
/// now it is reported `ambiguous`, with the energy range a restart would leave,
/// and the served energy lies within the stated uncertainty.
#[test]
fn a_reset_of_a_tiny_counter_is_reported_ambiguous_not_a_silent_wrap() {
    let fault = Fault::new(FaultKind::Reset, 0, Domain::Package).at(Duration::from_millis(300));
    let config = running_for_a_while(EmulatorConfig::default())
        .with_counter_bits(18)
        .with_esu(16)
        .with_fault(fault);
    let m = mount(config);
    let v = run_json(
        &m,
        &[
            "run", "--json", "-m", "powercap", "-d", "package", "--freq", "200", "--", "sleep", "1",
        ],
    );
    let events = v["counter_events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["kind"] == "ambiguous"),
        "the restart is not said to be ambiguous: {v}"
    );
    assert!(
        warnings(&v)
            .iter()
            .any(|w| w.contains("a wrap or a restart from 0")),
        "{v}"
    );
    let served = m.served_record(Served::Powercap, 0, Domain::Package);
    let (_, hi) = served.correct_range();
    let pkg = domain(&v, 0, "package");
    let (got, u) = (f(&pkg["energy_j"]), f(&pkg["uncertainty_j"]));
    assert!(
        (got - hi.0).abs() <= u + 20.0 * 0.03,
        "{got} ± {u} J does not hold the {} J served",
        hi.0
    );
}
