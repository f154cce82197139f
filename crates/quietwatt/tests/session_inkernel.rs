//! A background [`Session`] over the in-kernel mechanisms (ebpf, perf-ring) for
//! real, on this machine's kernel, with software counters standing in for the RAPL
//! events (`cpu-clock` of CPU 0 as the package: one "joule" a second). Needs root
//! (or CAP_BPF and CAP_PERFMON) and fails, never skips, without it. Nothing here
//! assumes how fast the loaded machine runs: the figures are checked by
//! conservation (rows against the report), against the stand-in's known truth
//! (its energy is the duration), and the wake-ups against a bound far below what
//! polling at the same rate costs.

use quietwatt::inkernel::{open_specs, stand_in_specs, KernelSource, Opened};
use quietwatt::source::Mode;
use quietwatt::{Hertz, Mechanism, SampleRow, Session, SessionConfig};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One test at a time: they sample CPU 0 at 1 kHz, and two at once on a 2-vCPU
/// machine steal ticks from each other.
static SERIAL: Mutex<()> = Mutex::new(());

#[path = "support/busy.rs"]
mod busy;
use busy::busy_cpu0;

fn hz(f: f64) -> Hertz {
    Hertz::new(f).expect("a valid test frequency")
}

/// The stand-ins through `m`, sampled at 1 kHz in the kernel and drained at 1 Hz.
fn open(m: Mechanism) -> KernelSource {
    match open_specs(m, stand_in_specs(0), hz(1000.0), hz(1.0)) {
        Ok(Opened::InKernel(s)) => s,
        Ok(Opened::Fallback { reason, .. }) => {
            panic!("{m}: the kernel refused the software group: {reason}")
        }
        Err(e) => panic!(
            "{m} could not open on this machine (these tests need root, or CAP_BPF and CAP_PERFMON): {e}"
        ),
    }
}

/// The mechanisms this build has: ebpf needs the `bpf` feature (off by default:
/// `--features bpf`, or the workspace's tests, where the CLI asks for it).
fn mechanisms() -> &'static [Mechanism] {
    if cfg!(feature = "bpf") {
        &[Mechanism::Ebpf, Mechanism::PerfRing]
    } else {
        &[Mechanism::PerfRing]
    }
}

/// A session over each mechanism, read the way an exporter reads one (snapshots
/// and drained rows), with a window: snapshots never go back, the rows drained
/// and the last ones add up to the report, the package's energy is the duration,
/// and the sampler woke about once a second where polling at 1 kHz wakes a
/// thousand times.
#[test]
fn a_background_session_drains_the_kernel_about_once_a_second_and_covers_it_exactly() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let _tick = busy_cpu0();
    for &m in mechanisms() {
        let s = Session::start_on(Box::new(open(m)), SessionConfig::default()).unwrap();
        assert_eq!(s.mechanism(), m);
        assert_eq!(s.rate(), Some(hz(1000.0)));
        assert!(
            matches!(s.mode(), Mode::Buffered { drain, .. } if drain == hz(1.0)),
            "{m}: {:?}",
            s.mode()
        );
        let n = s.channels().len();
        s.begin_window("w").unwrap();
        let mut drained: Vec<SampleRow> = Vec::new();
        let mut last = s.snapshot().unwrap();
        // About three seconds of readings, however long the loaded machine takes
        // to deliver them (a minute is only a guard against a stuck sampler).
        let deadline = Instant::now() + Duration::from_secs(60);
        while last.energy.duration_s < 2.5 {
            assert!(Instant::now() < deadline, "{m}: no drain came: {last:?}");
            std::thread::sleep(Duration::from_millis(200));
            let now = s.snapshot().unwrap();
            for (b, a) in last.energy.domains.iter().zip(&now.energy.domains) {
                assert!(a.energy_j.0 >= b.energy_j.0, "{m}: a snapshot went back");
            }
            assert!(now.energy.duration_s >= last.energy.duration_s);
            drained.extend(s.drain_samples());
            last = now;
        }
        let window = s.end_window("w").unwrap();
        let (r, rest) = s.stop_with_samples().unwrap();
        drained.extend(rest);

        // The readings are software events: the report says so.
        assert_eq!(r.energy.mechanism, quietwatt::source::STAND_IN_LABEL);
        assert_eq!(r.mechanism, m);
        let stats = r.samples.as_ref().unwrap();
        assert_eq!((stats.dropped, stats.merged), (0, 0), "{m}: {stats:?}");
        for i in 0..n {
            let rows: f64 = drained.iter().map(|row| row.energy_j[i].0).sum();
            let e = r.energy.domains[i].energy_j.0;
            assert!(
                (rows - e).abs() <= 1e-9 * e.max(1.0),
                "{m}: channel {i}: rows {rows}, report {e}"
            );
        }
        let covered: u64 = drained.iter().map(|row| row.interval_ns).sum();
        assert!(
            (covered as f64 / 1e9 - r.energy.duration_s).abs() < 1e-6,
            "{m}: the rows cover {covered} ns of {} s",
            r.energy.duration_s
        );
        // cpu-clock counts every nanosecond of CPU 0 between the first and the last
        // user-space reading: its "energy" is the session's duration.
        let pkg = r.energy.domains[0].energy_j.0;
        let dur = r.energy.duration_s;
        assert!(
            (pkg - dur).abs() < 0.01 * dur,
            "{m}: cpu-clock counted {pkg} s over a {dur} s session"
        );
        let w = window.energy.domains[0].energy_j.0;
        assert!(w > 0.0 && w <= pkg, "{m}: window {w} of {pkg}");

        // Readings at the kernel's 1 kHz, collected a drain at a time.
        let o = r.overhead.as_ref().expect("the sampler's cost");
        let k = r.kernel.as_ref().expect("the kernel side's figures");
        assert!(o.samples as f64 > 500.0 * dur, "{m}: {o:?}");
        assert_eq!(o.samples as usize, drained.len(), "{m}");
        assert!(k.drains <= dur as u64 + 3, "{m}: {k:?}");
        assert!(
            o.wakeups_per_s < 5.0 && k.wakeups_per_s < 5.0,
            "{m}: the sampler woke {} times a second: {o:?} {k:?}",
            o.wakeups_per_s
        );
        eprintln!("{m}: {dur:.3} s, {} readings\n{o}\n{k}", o.samples);
    }
}
