//! The sampler's hot path allocates nothing: a counting allocator counts per thread,
//! and the source (which runs on the sampler thread) reads its own thread's count
//! between its 20th read and its last, across full-ring merges and adaptive-rate
//! load probes; and likewise a background session's sampler, across the folds it
//! makes itself when nobody reads the session. (Its own binary: the global
//! allocator is per test binary.)

use quietwatt::counter::Wrap;
use quietwatt::domain::{Domain, DomainId};
use quietwatt::record::{record, EngineConfig};
use quietwatt::sink::{Metadata, Sample, Sink};
use quietwatt::source::Channel;
use quietwatt::{
    EnergyUnit, Hertz, Mechanism, Meter, Rate, Session, SessionConfig, Source, SysRoot,
};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod support;

use support::allocations;

/// Counts reads; at read 20 notes the thread's allocations, at every later read
/// publishes how many happened since.
struct Spy {
    channels: Vec<Channel>,
    reads: u64,
    base: u64,
    since: Arc<AtomicU64>,
    reads_seen: Arc<AtomicU64>,
}

impl Source for Spy {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Powercap
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn read(&mut self, out: &mut [u64]) -> quietwatt::error::SourceResult<()> {
        self.reads += 1;
        let now = allocations();
        if self.reads == 20 {
            self.base = now;
        } else if self.reads > 20 {
            self.since.store(now - self.base, Ordering::Relaxed);
        }
        self.reads_seen.store(self.reads, Ordering::Relaxed);
        out.iter_mut().for_each(|o| *o = self.reads * 10);
        Ok(())
    }
}

/// Blocks the writer for a while so that the ring fills and records merge.
struct Slow(Arc<AtomicBool>);

impl Sink for Slow {
    fn begin(&mut self, _: &Metadata, _: &[Channel]) -> io::Result<()> {
        Ok(())
    }
    fn sample(&mut self, _: &Sample<'_>) -> io::Result<()> {
        while !self.0.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A spy on three package counters, publishing into `since` and `reads`.
fn spy(since: &Arc<AtomicU64>, reads: &Arc<AtomicU64>) -> Spy {
    Spy {
        channels: (0..3)
            .map(|i| Channel {
                id: DomainId::new(i, Domain::Package),
                unit: EnergyUnit::Microjoule,
                wrap: Wrap::PERF,
                origin: PathBuf::from("/spy"),
                limit: None,
            })
            .collect(),
        reads: 0,
        base: 0,
        since: since.clone(),
        reads_seen: reads.clone(),
    }
}

#[test]
fn the_sampler_loop_allocates_nothing() {
    let since = Arc::new(AtomicU64::new(u64::MAX));
    let reads = Arc::new(AtomicU64::new(0));
    let mut m = Meter::new(Box::new(spy(&since, &reads)));
    // Adaptive (reads /proc/stat in the loop), a ring of 4 behind a slow writer.
    let mut c = EngineConfig::new(Rate::Auto {
        min: Hertz::new(500.0).unwrap(),
        max: Hertz::new(1000.0).unwrap(),
    });
    c.duration = Some(Duration::from_millis(400));
    c.ring_capacity = Some(4);
    c.probe_every = Duration::from_millis(5);
    c.hold = Duration::from_millis(50);
    let gate = Arc::new(AtomicBool::new(false));
    let g2 = gate.clone();
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        g2.store(true, Ordering::Release);
    });
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    let rec = record(
        &mut m,
        &mut Slow(gate),
        Path::new("mem"),
        &meta,
        &c,
        &AtomicBool::new(false),
    )
    .unwrap();
    opener.join().unwrap();
    assert!(reads.load(Ordering::Relaxed) > 100);
    assert!(
        rec.measurement.overhead.as_ref().unwrap().ring_full > 10,
        "{:?}",
        rec.measurement.overhead.as_ref().unwrap()
    );
    assert_eq!(
        since.load(Ordering::Relaxed),
        0,
        "allocations on the sampler thread during the loop"
    );
}

/// A background session's tick: the read, the record pushed into the ring, and,
/// since nobody reads the session here, the folds the sampler makes itself into
/// the session's meter, an open window and a sample buffer small enough to drop
/// rows. Nothing allocates on the sampler thread.
#[test]
fn a_background_sessions_tick_allocates_nothing() {
    let since = Arc::new(AtomicU64::new(u64::MAX));
    let reads = Arc::new(AtomicU64::new(0));
    let rate = Hertz::new(1000.0).unwrap();
    let session = Session::start_on(
        Box::new(spy(&since, &reads)),
        SessionConfig::default().rate(rate).samples_kept(100),
    )
    .unwrap();
    session.begin_window("w").unwrap();
    // Three seconds' worth of readings, however long they take: the ring holds
    // one second, so the sampler folded it itself several times.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while reads.load(Ordering::Relaxed) < 3000 {
        assert!(std::time::Instant::now() < deadline, "the sampler stopped");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (report, rows) = session.stop_with_samples().unwrap();
    let stats = report.samples.unwrap();
    assert!(stats.dropped > 2500, "{stats:?}");
    assert_eq!((rows.len(), stats.merged), (100, 0), "{stats:?}");
    assert_eq!(
        since.load(Ordering::Relaxed),
        0,
        "allocations on the session's sampler thread during its loop"
    );
}
