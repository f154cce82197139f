//! The embedding API (`quietwatt::Session`, `quietwatt::measure`) against the
//! emulator: figures checked against what the emulator served, by conservation and
//! by containment, never by timing (the machine is loaded).
//!
//! They live in the CLI's tests because the emulator depends on the library: as a
//! dev-dependency of the library itself it would link a second copy of it.

use crate::common;

use crate::common::{mount, quietwatt, stdout, Mounted};
use quietwatt::{
    Domain, Error, Hertz, Measurement, Mechanism, SampleRow, Selection, Session, SessionConfig,
    SourceError, SysRoot,
};
use quietwatt_emulator::{EmulatorConfig, Mechanism as Served};
use std::thread::sleep;
use std::time::Duration;

fn config(m: &Mounted) -> SessionConfig {
    SessionConfig::default().root(SysRoot::new(m.root()))
}

fn hz(f: f64) -> Hertz {
    Hertz::new(f).unwrap()
}

/// Energy per channel of `rows`, added up.
fn sum(rows: &[SampleRow], channels: usize) -> Vec<f64> {
    let mut s = vec![0.0; channels];
    for r in rows {
        for (a, e) in s.iter_mut().zip(&r.energy_j) {
            *a += e.0;
        }
    }
    s
}

fn energies(r: &Measurement) -> Vec<f64> {
    r.energy.domains.iter().map(|d| d.energy_j.0).collect()
}

/// Floating sums of integer steps: equal to within rounding.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn start_stop_reads_what_the_emulator_served_within_the_uncertainty() {
    let m = mount(EmulatorConfig::default());
    let s = Session::start(config(&m).mechanism(Mechanism::Powercap)).unwrap();
    assert_eq!(s.rate(), None);
    sleep(Duration::from_millis(200));
    let r = s.stop().unwrap();
    assert_eq!(r.mechanism, Mechanism::Powercap);
    assert!(r.overhead.is_none() && r.samples.is_none());
    assert!(r.duration() > Duration::ZERO);
    for (id, d) in r.domains() {
        let served = m.served(Served::Powercap, id.socket.0, id.domain);
        assert!(
            (d.energy_j.0 - served).abs() <= d.uncertainty_j.0,
            "{id}: measured {} ± {} J, the emulator served {served} J",
            d.energy_j.0,
            d.uncertainty_j.0
        );
        assert!(d.energy_j.0 > 0.0, "{id}: {d:?}");
    }
    let pkg = m.served(Served::Powercap, 0, Domain::Package);
    let dram = m.served(Served::Powercap, 0, Domain::Dram);
    let (t, u) = (r.total().unwrap().0, r.total_uncertainty().unwrap().0);
    assert_eq!(r.energy.total_rule, "package + dram");
    assert!((t - (pkg + dram)).abs() <= u, "{t} ± {u} vs {}", pkg + dram);
}

#[test]
fn a_session_without_a_rate_is_exact_over_many_wraps() {
    // 8 J counters (19 bits of 2^-16 J) under a 20 W package: three wraps in 1.2 s.
    // Read only at its two ends, a session once lost every whole turn between them
    // (5 J for a 1 s region at 20 W); its guard now reads once per safe period.
    let m = mount(EmulatorConfig::default().with_counter_bits(19).with_esu(16));
    let s = Session::start(
        config(&m)
            .mechanism(Mechanism::Powercap)
            .domains(Selection::only(vec![Domain::Package])),
    )
    .unwrap();
    assert_eq!(s.rate(), None);
    sleep(Duration::from_millis(1200));
    let r = s.stop().unwrap();
    let (id, d) = r.domains().next().unwrap();
    let served = m.served(Served::Powercap, id.socket.0, id.domain);
    assert!(
        served > 16.0,
        "the emulator served {served} J: not two turns"
    );
    assert!(
        (d.energy_j.0 - served).abs() <= d.uncertainty_j.0,
        "{id}: measured {} ± {} J, the emulator served {served} J",
        d.energy_j.0,
        d.uncertainty_j.0
    );
    assert!(d.wraps >= 2, "{d:?}");
    assert!(r.energy.warnings.is_empty(), "{:?}", r.energy.warnings);
}

#[test]
fn measure_runs_the_closure_and_reports_in_the_shape_of_run_json() {
    let m = mount(EmulatorConfig::default());
    let (value, r) = quietwatt::measure(config(&m), || 6 * 7).unwrap();
    assert_eq!(value, 42);
    let ours = serde_json::to_value(&r).unwrap();
    let out = quietwatt(m.root(), &["run", "--json", "--", "true"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let cli: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    for key in [
        "duration_s",
        "total_energy_j",
        "total_uncertainty_j",
        "total_rule",
    ] {
        assert!(
            ours[key].is_number() || ours[key].is_string(),
            "{key}: {ours}"
        );
        assert_eq!(
            std::mem::discriminant(&ours[key]),
            std::mem::discriminant(&cli[key]),
            "{key}: {ours} vs {cli}"
        );
    }
    assert_eq!(ours["mechanism"], cli["mechanism"]);
    assert_eq!(ours["mechanism"], r.mechanism.name());
    let domains = ours["domains"].as_array().unwrap();
    assert_eq!(domains.len(), cli["domains"].as_array().unwrap().len());
    for (d, c) in domains.iter().zip(cli["domains"].as_array().unwrap()) {
        assert_eq!((&d["socket"], &d["domain"]), (&c["socket"], &c["domain"]));
        assert!(d["energy_j"].is_number() && d["uncertainty_j"].is_number());
    }
}

#[test]
fn a_background_session_is_monotonic_and_its_samples_add_up_to_its_report() {
    let m = mount(EmulatorConfig::default());
    // Named: choosing one would read the counters before the session's first reading.
    let s = Session::start(config(&m).mechanism(Mechanism::Powercap).rate(hz(200.0))).unwrap();
    let n = s.channels().len();
    let mut before = s.snapshot().unwrap();
    let mut drained: Vec<SampleRow> = Vec::new();
    // Six snapshots, and on until the sampler has taken a reading (a loaded
    // machine may hold it back; nothing here depends on when it runs).
    for k in 0.. {
        if k >= 6 && !drained.is_empty() {
            break;
        }
        sleep(Duration::from_millis(40));
        let now = s.snapshot().unwrap();
        for (b, a) in energies(&before).iter().zip(energies(&now)) {
            assert!(a >= *b, "a later snapshot has less: {b} then {a}");
        }
        assert!(now.total().unwrap().0 >= before.total().unwrap().0);
        assert!(now.energy.duration_s >= before.energy.duration_s);
        drained.extend(s.drain_samples());
        before = now;
    }
    assert!(drained.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
    let (r, rest) = s.stop_with_samples().unwrap();
    drained.extend(rest);
    let stats = r.samples.as_ref().unwrap();
    assert_eq!(stats.dropped, 0);
    let sums = sum(&drained, n);
    for (i, (got, want)) in sums.iter().zip(energies(&r)).enumerate() {
        assert!(
            close(*got, want),
            "channel {i}: rows add to {got} J, report {want} J"
        );
    }
    // The rows' intervals cover the report's duration exactly.
    let covered: u64 = drained.iter().map(|r| r.interval_ns).sum();
    assert!(
        (covered as f64 / 1e9 - r.energy.duration_s).abs() < 1e-6,
        "{covered} ns vs {} s",
        r.energy.duration_s
    );
    let o = r.overhead.as_ref().expect("the sampler's cost");
    assert_eq!(o.samples as usize, drained.len());
    // Ground truth over the whole session, as for start/stop.
    for (id, d) in r.domains() {
        let served = m.served(Served::Powercap, id.socket.0, id.domain);
        assert!(
            (d.energy_j.0 - served).abs() <= d.uncertainty_j.0,
            "{id}: {} ± {} J vs {served} J served",
            d.energy_j.0,
            d.uncertainty_j.0
        );
    }
}

#[test]
fn a_bounded_buffer_drops_the_oldest_rows_and_keeps_their_energy() {
    let m = mount(EmulatorConfig::default());
    let s = Session::start(config(&m).rate(hz(200.0)).samples_kept(4)).unwrap();
    let n = s.channels().len();
    // Until more rows were taken than the buffer holds (no timing assumed).
    while s.sample_stats().unwrap().dropped == 0 {
        sleep(Duration::from_millis(10));
    }
    assert_eq!(s.samples().len(), 4);
    let (r, rows) = s.stop_with_samples().unwrap();
    let stats = r.samples.clone().unwrap();
    assert_eq!((stats.capacity, stats.kept, rows.len()), (4, 4, 4));
    assert!(stats.dropped > 0);
    let kept = sum(&rows, n);
    for (i, want) in energies(&r).iter().enumerate() {
        let got = kept[i] + stats.dropped_energy_j[i].0;
        assert!(close(got, *want), "channel {i}: {got} vs {want}");
    }
}

#[test]
fn windows_nest_and_overlap_as_their_readings_do() {
    let m = mount(EmulatorConfig::default());
    let s = Session::start(config(&m).rate(hz(200.0))).unwrap();
    let step = || sleep(Duration::from_millis(30));
    // all:     [-------------------------------]
    // outer:      [-------------------]
    // inner:          [-------]
    // both:               [-------------]    (covers outer ∩ overlap)
    // overlap:              [-----------------]
    s.begin_window("all").unwrap();
    step();
    s.begin_window("outer").unwrap();
    step();
    s.begin_window("inner").unwrap();
    step();
    s.begin_window("both").unwrap();
    s.begin_window("overlap").unwrap();
    step();
    let inner = s.end_window("inner").unwrap();
    step();
    let outer = s.end_window("outer").unwrap();
    let both = s.end_window("both").unwrap();
    step();
    let overlap = s.end_window("overlap").unwrap();
    let all = s.end_window("all").unwrap();
    let total = s.stop().unwrap();
    assert_eq!(outer.window.as_deref(), Some("outer"));
    for i in 0..total.energy.domains.len() {
        let e = |r: &Measurement| r.energy.domains[i].energy_j.0;
        let slack = 1e-9 * e(&total).max(1.0);
        assert!(e(&inner) <= e(&outer) + slack, "inner inside outer");
        assert!(e(&outer) <= e(&all) + slack, "outer inside all");
        assert!(e(&overlap) <= e(&all) + slack, "overlap inside all");
        assert!(e(&all) <= e(&total) + slack, "all inside the session");
        // Two overlapping windows: their union (inside `all`) is their sum less
        // their intersection (inside `both`), and each holds the intersection.
        assert!(
            e(&outer) + e(&overlap) - e(&both) <= e(&all) + slack,
            "union"
        );
        assert!(e(&overlap) <= e(&both) + e(&all) - e(&outer) + slack);
    }
    assert!(inner.total().unwrap().0 <= outer.total().unwrap().0 + 1e-9);
    assert!(inner.duration() <= outer.duration() && outer.duration() <= all.duration());
    // A window's uncertainty is its own, not the session's.
    assert!(all.total_uncertainty().is_some());
}

#[test]
fn windows_without_a_rate_read_at_their_ends_and_a_name_can_be_reused() {
    let m = mount(EmulatorConfig::default());
    let s = Session::start(config(&m)).unwrap();
    s.begin_window("w").unwrap();
    s.begin_window("w").unwrap(); // nested, same name: a stack
    sleep(Duration::from_millis(20));
    let later = s.end_window("w").unwrap();
    sleep(Duration::from_millis(20));
    let earlier = s.end_window("w").unwrap();
    assert!(later.total().unwrap().0 <= earlier.total().unwrap().0);
    assert!(later.total().unwrap().0 > 0.0);
    match s.end_window("w") {
        Err(Error::UnknownWindow { name, .. }) => assert_eq!(name, "w"),
        other => panic!("expected UnknownWindow, got {other:?}"),
    }
    let r = s.stop().unwrap();
    assert!(earlier.total().unwrap().0 <= r.total().unwrap().0);
}

#[test]
fn dropping_a_running_session_joins_its_sampler() {
    let m = mount(EmulatorConfig::default());
    let s = Session::start(config(&m).rate(hz(200.0))).unwrap();
    while s.samples().len() < 3 {
        sleep(Duration::from_millis(5));
    }
    drop(s);
    // Joined: nothing reads the counters any more.
    let reads = m.served_record(Served::Powercap, 0, Domain::Package).reads;
    sleep(Duration::from_millis(100));
    assert_eq!(
        m.served_record(Served::Powercap, 0, Domain::Package).reads,
        reads
    );
    // A panicking region drops its session the same way.
    let cfg = config(&m).rate(hz(200.0));
    let r = std::panic::catch_unwind(move || quietwatt::measure(cfg, || panic!("in the region")));
    assert!(r.is_err());
}

#[test]
fn a_domain_the_machine_lacks_is_the_typed_unknown_domain_error() {
    let m = mount(EmulatorConfig::default());
    let err = Session::start(config(&m).domains(Selection::only(vec![Domain::Psys]))).unwrap_err();
    match err {
        Error::Source(SourceError::UnknownDomain { asked, available }) => {
            assert_eq!(asked, "psys");
            assert!(available.contains("package"), "{available}");
        }
        other => panic!("expected UnknownDomain, got {other:?}"),
    }
    // A selection the machine has is measured alone.
    let s = Session::start(config(&m).domains(Selection::only(vec![Domain::Dram]))).unwrap();
    assert!(s.channels().iter().all(|c| c.domain == Domain::Dram));
    let r = s.stop().unwrap();
    assert_eq!(r.channels.len(), r.energy.domains.len());
    assert!(r.domain(0, Domain::Dram).is_some() && r.domain(0, Domain::Package).is_none());
}

/// The in-kernel mechanisms need a rate (the thread that drains them), and on the
/// emulator they cannot open: its PMU is a description, and perf_event_open
/// reaches the real kernel. Both are typed errors that say why. (A session over
/// them for real, on software events standing in: `quietwatt/tests/session_inkernel.rs`.)
#[test]
fn the_in_kernel_mechanisms_need_a_rate_and_real_perf_events() {
    let m = mount(EmulatorConfig::default());
    for mech in [Mechanism::Ebpf, Mechanism::PerfRing] {
        match Session::start(config(&m).mechanism(mech)) {
            Err(e @ Error::NeedsRate { .. }) => {
                assert!(e.to_string().contains(mech.name()), "{e}");
                assert_eq!(e.kind(), quietwatt::ErrorKind::Usage);
            }
            other => panic!("{mech}: expected NeedsRate, got {other:?}"),
        }
        match Session::start(config(&m).mechanism(mech).rate(hz(100.0))) {
            Err(Error::Source(SourceError::MechanismUnavailable { mechanism, why })) => {
                assert_eq!(mechanism, mech.name());
                assert!(why.contains("emulated"), "{why}");
            }
            other => panic!("{mech}: expected MechanismUnavailable, got {other:?}"),
        }
    }
}

#[test]
fn no_rapl_is_an_error_naming_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let err = Session::start(SessionConfig::default().root(SysRoot::new(dir.path()))).unwrap_err();
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
}
