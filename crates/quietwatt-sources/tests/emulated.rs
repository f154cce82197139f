//! The mechanisms read against quietwatt's emulator, from this crate alone: powercap
//! and msr give the energy the emulator served between the reads, to the counter's
//! quantum; perf discovers the emulated PMU's events, units and CPUs, and says why
//! it cannot open them where the real kernel has no such PMU; a wrong root and a
//! missing domain are typed errors. Needs FUSE (root and /dev/fuse), as the CLI's
//! tests do.

use quietwatt_core::counter::Counter;
use quietwatt_core::domain::Domain;
use quietwatt_emulator::{Emulator, EmulatorConfig, Mechanism as Served};
use quietwatt_sources::{open, perf, Error, ErrorKind, Mechanism, Selection, Source, SysRoot};
use std::time::{Duration, Instant};

/// A mounted emulator and its directory (dropped in this order: unmount, then remove).
struct Mounted {
    emulator: Emulator,
    dir: tempfile::TempDir,
}

impl Mounted {
    fn root(&self) -> SysRoot {
        SysRoot::new(self.dir.path())
    }
}

fn mount(config: EmulatorConfig) -> Mounted {
    let dir = tempfile::tempdir().expect("tempdir");
    let emulator = Emulator::mount(dir.path(), config).unwrap_or_else(|e| {
        panic!(
            "cannot mount the RAPL emulator ({e}). These tests need FUSE: run them as root \
             on a machine with /dev/fuse (or install fuse3 for fusermount3)."
        )
    });
    Mounted { emulator, dir }
}

/// Two sockets, package, core, uncore and dram on each.
fn two_sockets() -> EmulatorConfig {
    EmulatorConfig {
        sockets: 2,
        ..EmulatorConfig::default()
    }
}

/// Reads `source` `reads` times, `gap` apart, through a counter per channel (wraps
/// counted); the energy of each channel between the first and the last read.
fn energy_between_reads(source: &mut dyn Source, reads: usize, gap: Duration) -> Vec<f64> {
    let start = Instant::now();
    let mut counters: Vec<Counter> = source
        .channels()
        .iter()
        .map(quietwatt_sources::Channel::counter)
        .collect();
    let mut raw = vec![0u64; counters.len()];
    for i in 0..reads {
        if i > 0 {
            std::thread::sleep(gap);
        }
        source.read(&mut raw).expect("a reading");
        let t = start.elapsed().as_nanos() as u64;
        for (c, &r) in counters.iter_mut().zip(&raw) {
            c.update(r, t).expect("a reading in the counter's range");
        }
    }
    counters.iter().map(|c| c.total().0).collect()
}

/// Each channel's energy against what the emulator served between the same reads
/// (`after_probe`: from the second read on, for a mechanism that reads each counter
/// once while opening).
fn check_against_truth(m: &Mounted, mechanism: Mechanism, served: Served, after_probe: bool) {
    let mut source = open(&m.root(), Some(mechanism), &Selection::all())
        .unwrap_or_else(|e| panic!("{mechanism} on the emulator: {e}"));
    let ids: Vec<_> = source.channels().iter().map(|c| c.id).collect();
    let quanta: Vec<f64> = source
        .channels()
        .iter()
        .map(|c| c.unit.joules_per_step())
        .collect();
    // 2 sockets x package, core, uncore, dram.
    assert_eq!(ids.len(), 8, "{mechanism}: {ids:?}");
    let got = energy_between_reads(source.as_mut(), 4, Duration::from_millis(30));
    for ((id, got), quantum) in ids.iter().zip(&got).zip(&quanta) {
        let truth = m
            .emulator
            .served(served, id.socket.0, id.domain)
            .unwrap_or_else(|| panic!("the emulator served no {served:?} read of {id}"));
        let want = if after_probe {
            truth.energy_after_probe().0
        } else {
            truth.energy().0
        };
        assert!(want > 0.0, "{mechanism} {id}: nothing served");
        // Both ends are truncated to the counter's step.
        assert!(
            (got - want).abs() <= 2.0 * quantum + 1e-12,
            "{mechanism} {id}: read {got} J, the emulator served {want} J"
        );
    }
}

#[test]
fn powercap_reads_what_the_emulator_served() {
    let m = mount(two_sockets());
    check_against_truth(&m, Mechanism::Powercap, Served::Powercap, false);
}

#[test]
fn msr_reads_what_the_emulator_served() {
    let m = mount(two_sockets());
    check_against_truth(&m, Mechanism::Msr, Served::Msr, true);
}

#[test]
fn perf_discovers_the_emulated_pmu_and_says_why_it_cannot_open_it() {
    let m = mount(two_sockets());
    let (specs, _notes) = perf::discover(&m.root()).expect("the emulated power PMU");
    let mut found: Vec<(u32, Domain)> =
        specs.iter().map(|s| (s.id.socket.0, s.id.domain)).collect();
    found.sort();
    let mut want: Vec<(u32, Domain)> = (0..2)
        .flat_map(|s| [Domain::Package, Domain::Core, Domain::Uncore, Domain::Dram].map(|d| (s, d)))
        .collect();
    want.sort();
    assert_eq!(found, want);
    for s in &specs {
        // Opened on the first CPU of its package (4 CPUs a socket), in perf's
        // fixed unit of 2^-32 J.
        assert_eq!(s.cpu, s.id.socket.0 * 4, "{s:?}");
        assert_eq!(s.unit.joules_per_step(), 2f64.powi(-32), "{s:?}");
    }
    // perf_event_open reaches the real kernel: the emulated PMU opens only where the
    // real one has the same type; otherwise the error says so, typed.
    match open(&m.root(), Some(Mechanism::Perf), &Selection::all()) {
        Ok(s) => assert_eq!(s.channels().len(), 8),
        Err(e) => {
            assert!(
                matches!(e, Error::MechanismUnavailable { .. }),
                "perf on the emulator: {e:?}"
            );
            assert_eq!(e.kind(), ErrorKind::Unavailable);
            assert!(e.to_string().contains("emulated"), "{e}");
        }
    }
}

#[test]
fn a_root_without_rapl_is_a_typed_error_for_every_mechanism() {
    let empty = tempfile::tempdir().unwrap();
    let root = SysRoot::new(empty.path());
    for m in [Mechanism::Powercap, Mechanism::Msr, Mechanism::Perf] {
        let e = match open(&root, Some(m), &Selection::all()) {
            Ok(_) => panic!("{m} opened on an empty root"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{m}: {e:?}");
    }
    // Without a mechanism named: the same, after trying each.
    let e = open(&root, None, &Selection::all())
        .err()
        .expect("an error");
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e:?}");
}

#[test]
fn a_domain_the_machine_lacks_is_a_usage_error_naming_what_exists() {
    // AMD: package and core only.
    let m = mount(EmulatorConfig::amd());
    for mech in [Mechanism::Powercap, Mechanism::Msr] {
        let e = match open(&m.root(), Some(mech), &Selection::only(vec![Domain::Dram])) {
            Ok(_) => panic!("{mech} opened dram on an AMD machine"),
            Err(e) => e,
        };
        match &e {
            Error::UnknownDomain { asked, available } => {
                assert!(asked.contains("dram"), "{e}");
                assert!(available.contains("package"), "{e}");
            }
            other => panic!("{mech}: {other:?}"),
        }
        assert_eq!(e.kind(), ErrorKind::Usage);
    }
}
