//! The recording builder against the RAPL emulator: a duration recording to CSV
//! checked against the emulator's truth, a recording with events, and invalid
//! combinations giving their typed errors. Needs root and /dev/fuse (the emulator
//! is a FUSE filesystem): without them these tests fail loudly.

use quietwatt::source::choose::ChooseError;
use quietwatt::{Domain, Format, Hertz, Mechanism, Rate, Selection, SysRoot};
use quietwatt_emulator::{Emulator, EmulatorConfig};
use quietwatt_recording::{
    EventsOptions, MechanismRequest, Output, RecordingBuilder, RecordingError,
};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The emulator and its directory (the emulator first: unmounted before removal).
struct Mounted {
    emulator: Emulator,
    dir: tempfile::TempDir,
}

fn mount() -> Mounted {
    let dir = tempfile::tempdir().expect("tempdir");
    let emulator = Emulator::mount(dir.path(), EmulatorConfig::default()).unwrap_or_else(|e| {
        panic!(
            "cannot mount the RAPL emulator ({e}). These tests need FUSE: run them as root \
             on a machine with /dev/fuse."
        )
    });
    Mounted { emulator, dir }
}

impl Mounted {
    fn builder(&self) -> RecordingBuilder {
        RecordingBuilder::new()
            .root(SysRoot::new(self.dir.path()))
            .emulated(true)
            .rate(Rate::Fixed(Hertz::clamped(100.0)))
    }
}

fn never() -> AtomicBool {
    AtomicBool::new(false)
}

#[test]
fn a_duration_recording_to_csv_holds_the_emulators_energy() {
    let m = mount();
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("energy.csv");
    let before = m.emulator.truth(0, Domain::Package).0;
    let done = m
        .builder()
        .mechanism(MechanismRequest::Named(Mechanism::Powercap))
        .output(Output::File(path.clone()), Format::Csv)
        .duration(Duration::from_millis(500))
        .run(&never(), &mut ())
        .expect("the recording");
    let after = m.emulator.truth(0, Domain::Package).0;
    assert!(done.error.is_none(), "{:?}", done.error);
    assert!(done.events.is_none() && done.attribution.is_none());
    let rec = &done.recording;
    assert!(rec.samples > 0, "no sample written");
    let package = rec
        .measurement
        .domain(0, Domain::Package)
        .expect("a package domain");
    // The recording lies inside the window the truth was read around, so it
    // cannot hold more than the truth added there (one counter step of slack).
    assert!(package.energy_j.0 > 0.0);
    assert!(
        package.energy_j.0 <= after - before + 0.01,
        "recorded {} J, the emulator drew {} J around it",
        package.energy_j.0,
        after - before
    );
    // The emulator draws a constant power: the recording's mean power is it.
    let watts = EmulatorConfig::default()
        .watts(0, Domain::Package)
        .expect("package watts");
    let mean = package.energy_j.0 / rec.measurement.energy.duration_s;
    assert!(
        (mean - watts).abs() < 0.05 * watts,
        "mean {mean} W, the emulator draws {watts} W"
    );
    // The file holds the same energy, row by row, with its metadata.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.lines().any(|l| l == "# emulated: true"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("# root: ")));
    let header = text.lines().find(|l| !l.starts_with('#')).unwrap();
    let cols: Vec<&str> = header.split(',').collect();
    let (di, ei) = (
        cols.iter().position(|c| *c == "domain").unwrap(),
        cols.iter().position(|c| *c == "energy_j").unwrap(),
    );
    let in_file: f64 = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[di] == "package")
        .map(|r| r[ei].parse::<f64>().unwrap())
        .sum();
    assert!(
        (in_file - package.energy_j.0).abs() < 1e-3,
        "file {in_file} J, report {} J",
        package.energy_j.0
    );
}

#[test]
fn a_recording_with_events_writes_the_events_file_and_its_summary() {
    let m = mount();
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("energy.csv");
    let trace = out.path().join("trace.json");
    let mut events = EventsOptions::counting("faults".parse().expect("a group"));
    events.trace = Some(trace.clone());
    let mut said = Said::default();
    let done = m
        .builder()
        .output(Output::File(path.clone()), Format::Csv)
        .events(events)
        .duration(Duration::from_millis(300))
        .run(&never(), &mut said)
        .expect("the recording");
    assert!(said.events_started, "the events thread was not reported");
    assert!(said.starting, "the start was not reported");
    let ev = done.events.expect("the events side");
    assert!(ev.error().is_none(), "{:?}", ev.error());
    let events_file = ev.path.expect("an events file");
    assert!(events_file.exists());
    let summary = ev.summary.expect("a summary");
    assert!(summary.notes.iter().any(|n| n.contains("EMULATED")));
    assert_eq!(ev.trace.as_deref(), Some(trace.as_path()));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(json["traceEvents"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
}

#[derive(Default)]
struct Said {
    events_started: bool,
    starting: bool,
}

impl quietwatt_recording::Progress for Said {
    fn events_started(&mut self, _: quietwatt_recording::EventsStarted<'_>) {
        self.events_started = true;
    }
    fn starting(&mut self, _: &quietwatt::Meter, _: &Rate) {
        self.starting = true;
    }
}

#[test]
fn invalid_combinations_are_typed_errors_before_anything_is_written() {
    let out = tempfile::tempdir().unwrap();
    let file = |name: &str| Output::File(out.path().join(name));
    let b = || RecordingBuilder::new().root(SysRoot::new(out.path()));
    let attribution = quietwatt_attribution::Options::new(
        quietwatt_attribution::By::Process,
        quietwatt_attribution::IdlePower::None,
    );
    let err = |b: RecordingBuilder| b.run(&never(), &mut ()).expect_err("an error");
    assert!(matches!(
        err(b().output(Output::Stdout, Format::Parquet)),
        RecordingError::NotStreamable { .. }
    ));
    assert!(matches!(
        err(b()
            .output(file("a.csv"), Format::Csv)
            .attribution(attribution)
            .events(EventsOptions::counting("faults".parse().unwrap()))),
        RecordingError::EventsWithAttribution
    ));
    assert!(matches!(
        err(b()
            .output(file("a.parquet"), Format::Parquet)
            .attribution(attribution)),
        RecordingError::AttributionFormat { .. }
    ));
    assert!(matches!(
        err(b()
            .mechanism(MechanismRequest::Named(Mechanism::PerfRing))
            .output(file("a.csv"), Format::Csv)
            .command(std::process::Command::new("true"))),
        RecordingError::CommandInKernel { .. }
    ));
    // Nothing was created by the refusals above.
    assert!(!out.path().join("a.csv").exists());
}

#[test]
fn a_bad_mechanism_rate_or_domain_is_a_typed_error() {
    let m = mount();
    let out = tempfile::tempdir().unwrap();
    let file = Output::File(out.path().join("e.csv"));
    let err = |b: RecordingBuilder| b.run(&never(), &mut ()).expect_err("an error");
    // In the kernel the rate is fixed: an adaptive one is refused.
    let e = err(m
        .builder()
        .mechanism(MechanismRequest::Named(Mechanism::Ebpf))
        .rate(Rate::Auto {
            min: Hertz::clamped(5.0),
            max: Hertz::clamped(1000.0),
        })
        .output(file.clone(), Format::Csv));
    assert!(
        matches!(
            e,
            RecordingError::Mechanism(ChooseError::NeedsFixedRate {
                mechanism: Mechanism::Ebpf
            })
        ),
        "{e:?}"
    );
    // A drain rate out of range.
    let e = err(m
        .builder()
        .mechanism(MechanismRequest::Named(Mechanism::PerfRing))
        .drain_hz(-1.0)
        .output(file.clone(), Format::Csv));
    assert!(
        matches!(e, RecordingError::DrainRate { hz } if hz == -1.0),
        "{e:?}"
    );
    // Stand-in events are perf's.
    let e = err(m
        .builder()
        .mechanism(MechanismRequest::Named(Mechanism::Powercap))
        .stand_in_events(true)
        .output(file.clone(), Format::Csv));
    assert!(
        matches!(
            e,
            RecordingError::Mechanism(
                ChooseError::StandInNeedsPerf | ChooseError::StandInUnavailable
            )
        ),
        "{e:?}"
    );
    // A domain the machine does not have (the emulator has no psys by default).
    let e = err(m
        .builder()
        .domains(Selection::only(vec![Domain::Psys]))
        .output(file, Format::Csv));
    assert!(
        matches!(
            e,
            RecordingError::Mechanism(ChooseError::Source(
                quietwatt::SourceError::UnknownDomain { .. }
            ))
        ),
        "{e:?}"
    );
}

#[test]
fn attribution_opens_or_says_why_with_a_typed_error() {
    let m = mount();
    let out = tempfile::tempdir().unwrap();
    let options = quietwatt_attribution::Options::new(
        quietwatt_attribution::By::Process,
        quietwatt_attribution::IdlePower::None,
    );
    let r = m
        .builder()
        .output(Output::File(out.path().join("split.csv")), Format::Csv)
        .attribution(options)
        .duration(Duration::from_millis(200))
        .run(&never(), &mut ());
    match r {
        // A build or kernel without BPF support: the attribution's own error.
        Err(e) => assert!(matches!(e, RecordingError::Attribution(_)), "{e:?}"),
        Ok(done) => assert!(done.attribution.is_some(), "no totals for the split"),
    }
}
