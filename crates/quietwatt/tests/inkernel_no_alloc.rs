//! The in-kernel engine's per-sample path allocates nothing: from the kernel ring
//! through the Meter, the record ring and the writer conversion into the sink. A
//! counting allocator counts per thread; the sink (which runs on the drain thread)
//! notes the thread's count at every sample. (Its own binary: the global allocator
//! is per test binary.) Needs root, like every in-kernel test.

use quietwatt::inkernel::{open_specs, stand_in_specs, KernelSide, KernelSource, Opened};
use quietwatt::record::{record, EngineConfig};
use quietwatt::sink::{Metadata, NullSink};
use quietwatt::source::{Channel, Mode, Reading, Source};
use quietwatt::{Hertz, Mechanism, Meter, Rate, Session, SessionConfig, SysRoot};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

mod support;

use support::allocations;

/// The in-kernel source, noting the sampler thread's allocation count at each
/// reading it hands over (on that thread, inside the drain), into room reserved up
/// front.
struct Spy {
    inner: KernelSource,
    seen: Arc<Mutex<Vec<u64>>>,
}

impl Source for Spy {
    fn mechanism(&self) -> Mechanism {
        self.inner.mechanism()
    }
    fn channels(&self) -> &[Channel] {
        self.inner.channels()
    }
    fn read(&mut self, out: &mut [u64]) -> quietwatt::error::SourceResult<()> {
        self.inner.read(out)
    }
    fn mode(&self) -> Mode {
        self.inner.mode()
    }
    fn start(&mut self) -> quietwatt::error::SourceResult<()> {
        self.inner.start()
    }
    fn drain(
        &mut self,
        last: bool,
        f: &mut dyn FnMut(&Reading<'_>),
    ) -> quietwatt::error::SourceResult<()> {
        // Uncontended (the test reads it after the recording): no allocation.
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        self.inner.drain(last, &mut |r| {
            if seen.len() < seen.capacity() {
                seen.push(allocations());
            }
            f(r);
        })
    }
    fn kernel_side(&self) -> Option<KernelSide> {
        self.inner.kernel_side()
    }
}

/// One test at a time: each samples CPU 0 at 1 kHz, and two at once on a 2-vCPU
/// machine steal ticks from each other.
static SERIAL: Mutex<()> = Mutex::new(());

/// Keeps CPU 0 busy until the flag is raised, so that its tick runs and perf never
/// throttles the clock (an idle CPU stops its tick; see
/// docs/in-kernel-sampling.md): enough samples come.
fn busy_cpu0(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // SAFETY: a zeroed set with CPU 0 added, read for this thread only.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
        }
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    })
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

/// A background session over each in-kernel mechanism: every reading of its
/// drains, pushed into the session's ring (and folded there by the sampler
/// itself, since nobody reads the session), allocates nothing.
#[test]
fn a_buffered_sessions_drains_allocate_nothing() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let hz = |f| Hertz::new(f).expect("valid");
    let stop = Arc::new(AtomicBool::new(false));
    let busy = busy_cpu0(stop.clone());
    for &m in mechanisms() {
        let inner = match open_specs(m, stand_in_specs(0), hz(1000.0), hz(2.0)) {
            Ok(Opened::InKernel(s)) => s,
            Ok(Opened::Fallback { reason, .. }) => panic!("{m}: {reason}"),
            Err(e) => panic!("{m} needs root (or CAP_BPF and CAP_PERFMON) here: {e}"),
        };
        let seen = Arc::new(Mutex::new(Vec::with_capacity(100_000)));
        let spy = Spy {
            inner,
            seen: seen.clone(),
        };
        let session = Session::start_on(Box::new(spy), SessionConfig::default()).unwrap();
        assert!(matches!(session.mode(), Mode::Buffered { .. }));
        session.begin_window("w").unwrap();
        // Six drains' worth, however long they take to come.
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while seen.lock().unwrap_or_else(PoisonError::into_inner).len() < 3000 {
            assert!(std::time::Instant::now() < deadline, "{m}: too few samples");
            std::thread::sleep(Duration::from_millis(100));
        }
        let report = session.stop().unwrap();
        let k = report.kernel.as_ref().expect("the kernel side's figures");
        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
        let n = seen.len();
        assert!(n > 3000 && k.drains >= 4, "{m}: {n} samples, {k:?}");
        let (first, last) = (seen[10], seen[n - 2]);
        assert_eq!(
            first,
            last,
            "{m}: {} allocations on the session's drain path",
            last - first
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = busy.join();
}

#[test]
fn draining_allocates_nothing_per_sample() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let hz = |f| Hertz::new(f).expect("valid");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let busy = busy_cpu0(stop.clone());
    for &m in mechanisms() {
        let inner = match open_specs(m, stand_in_specs(0), hz(1000.0), hz(2.0)) {
            Ok(Opened::InKernel(s)) => s,
            Ok(Opened::Fallback { reason, .. }) => panic!("{m}: {reason}"),
            Err(e) => panic!("{m} needs root (or CAP_BPF and CAP_PERFMON) here: {e}"),
        };
        let seen = Arc::new(Mutex::new(Vec::with_capacity(100_000)));
        let spy = Spy {
            inner,
            seen: seen.clone(),
        };
        let meta = Metadata::new(m.name(), &Rate::Fixed(hz(1000.0)), &SysRoot::default());
        // The same engine as polling, draining twice a second.
        let mut meter = Meter::new(Box::new(spy));
        let mut config = EngineConfig::new(Rate::Fixed(hz(1000.0)));
        config.duration = Some(Duration::from_millis(2600));
        let rec = record(
            &mut meter,
            &mut NullSink,
            Path::new("spy"),
            &meta,
            &config,
            &AtomicBool::new(false),
        )
        .unwrap_or_else(|s| panic!("{m}: the recording failed: {s}"));
        // The thread that waits for the end sleeps until the drain thread ends: it
        // does not poll the stop flag four times a second (about ten wake-ups in
        // 2.6 s), which would undo the one wake-up a drain the buffered path keeps.
        let waiter = rec
            .measurement
            .overhead
            .as_ref()
            .unwrap()
            .waiter
            .voluntary_switches;
        assert!(waiter <= 3, "{m}: the waiter woke {waiter} times");
        let k = rec
            .measurement
            .kernel
            .as_ref()
            .expect("a buffered source's kernel figures");
        // Several drains' worth of samples; the last record follows the final
        // reading's set-up and is left out.
        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
        let n = seen.len();
        assert!(n > 2000 && k.drains >= 4, "{m}: {n} samples, {k:?}");
        let (first, last) = (seen[10], seen[n - 2]);
        assert_eq!(
            first,
            last,
            "{m}: {} allocations on the drain path",
            last - first
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = busy.join();
}
